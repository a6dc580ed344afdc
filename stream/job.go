package stream

import "io"

// Job is a job that gflink's command line can run by name: `gflink run
// [OPTIONS] <Name> [ARGS]`. Register jobs with cli.Main to build a gflink
// binary that has them.
type Job struct {
	// Name is what `run` takes (lower case, no spaces: "totals").
	Name string
	// DisplayName is the name the job runs under, shown by `list` and the
	// REST API ("Totals"); `run` accepts it too. Name if empty.
	DisplayName string
	// Description is one line, shown by `gflink run --help`.
	Description string
	// Build adds the job's sources, operators and sinks to env; args are
	// the arguments after the job's name. Return a *UsageError for wrong
	// arguments: gflink prints it with the job's usage and exits 2.
	Build func(env *Environment, args []string) error
	// Usage prints the job's arguments (for `run <Name> --help`).
	Usage func(w io.Writer)
}

// UsageError is a mistake in a job's arguments.
type UsageError struct {
	Msg string
	// Help: the arguments asked for the job's usage (-h, --help), which
	// is no mistake: gflink prints the usage and exits 0.
	Help bool
}

func (e *UsageError) Error() string { return e.Msg }

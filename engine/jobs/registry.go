// Package jobs is the registry of named jobs that `gflink run <job>` can
// start, and gflink's built-in jobs. Go cannot load a jar, so a job is Go
// code compiled into the binary; a program that embeds gflink as a library
// registers its own jobs next to the built-in ones.
package jobs

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/internal/apibridge"
	"github.com/gflink/gflink/stream"
)

// Job is a named job: a function that builds a pipeline from its
// arguments, like the main method of a Flink jar.
type Job struct {
	Name string
	// DisplayName is the name the job runs under, which `list` shows (e.g.
	// WordCount); `run` accepts it too.
	DisplayName string
	Description string
	// Build adds the job's sources, operators and sinks to env. args are
	// the arguments after the job's name on the command line. An error of
	// type *UsageError means the arguments were wrong.
	Build func(env *engine.Environment, args []string) error
	// Usage prints the job's arguments.
	Usage func(w io.Writer)
}

// UsageError is a mistake in a job's arguments. It is the public API's
// type, so that a job written against package stream reports one that the
// command line recognizes.
type UsageError = stream.UsageError

// FromStream turns a job of the public API into one the command line runs.
func FromStream(j stream.Job) Job {
	display := j.DisplayName
	if display == "" {
		display = j.Name
	}
	usage := j.Usage
	if usage == nil {
		usage = func(w io.Writer) { fmt.Fprintf(w, "Usage: gflink run [OPTIONS] %s [ARGS]\n", j.Name) }
	}
	build := j.Build
	return Job{Name: j.Name, DisplayName: display, Description: j.Description, Usage: usage,
		Build: func(env *engine.Environment, args []string) error {
			if build == nil {
				return fmt.Errorf("job %q has no Build function", j.Name)
			}
			return build(apibridge.Wrap(env).(*stream.Environment), args)
		}}
}

// Registry holds jobs by name.
type Registry struct {
	jobs map[string]Job
}

// NewRegistry makes a registry of the given jobs.
func NewRegistry(jobs ...Job) *Registry {
	r := &Registry{jobs: map[string]Job{}}
	for _, j := range jobs {
		r.jobs[j.Name] = j
	}
	return r
}

// Builtin returns gflink's built-in jobs.
func Builtin() *Registry { return NewRegistry(WordCount(), WindowWordCount(), Sessionize()) }

// With returns a registry with more jobs.
func (r *Registry) With(jobs ...Job) *Registry {
	out := NewRegistry()
	for _, j := range r.jobs {
		out.jobs[j.Name] = j
	}
	for _, j := range jobs {
		out.jobs[j.Name] = j
	}
	return out
}

// Lookup finds a job by its name or display name, ignoring case: a user
// who copies "WordCount" from `list` means the wordcount job. An exact
// name wins over a case-insensitive match.
func (r *Registry) Lookup(name string) (Job, bool) {
	if j, ok := r.jobs[name]; ok {
		return j, true
	}
	for _, n := range r.Names() {
		j := r.jobs[n]
		if strings.EqualFold(j.Name, name) || j.DisplayName != "" && strings.EqualFold(j.DisplayName, name) {
			return j, true
		}
	}
	return Job{}, false
}

// Names lists the jobs, sorted.
func (r *Registry) Names() []string {
	var out []string
	for n := range r.jobs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

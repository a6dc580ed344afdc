// Package cli builds a gflink binary with jobs of your own. A main of a
// few lines is enough:
//
//	package main
//
//	import (
//		"github.com/gflink/gflink/cli"
//		"github.com/gflink/gflink/stream"
//	)
//
//	func main() { cli.Main(myJob()) }
//
//	func myJob() stream.Job { return stream.Job{Name: "myjob", Build: build} }
//
// The binary is gflink — every verb (run, list, savepoint, stop, cancel,
// checkpoint, checkpoints, inspect), flag, message, exit code, REST
// endpoint and configuration key — with these jobs next to the built-in
// wordcount: `./mygflink run -d myjob --its-args`.
package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/gflink/gflink/cmd"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/stream"
)

// Main runs gflink's command line on os.Args with the built-in jobs and
// the given ones, and exits with its exit code. A job may not take the
// name of another (wordcount is taken).
func Main(js ...stream.Job) {
	os.Exit(Run(os.Args[1:], js...))
}

// Run is Main without the exit: it runs the command line on args (without
// the program's name) and returns the exit code.
func Run(args []string, js ...stream.Job) int {
	reg := jobs.Builtin()
	for _, j := range js {
		if err := checkName(reg, j); err != nil {
			// A mistake in the program, not in its arguments: no verb runs.
			fmt.Fprintln(os.Stderr, "gflink:", err)
			return 1
		}
		reg = reg.With(jobs.FromStream(j))
	}
	return cmd.MainWith(reg, args)
}

func checkName(reg *jobs.Registry, j stream.Job) error {
	if j.Name == "" || strings.ContainsFunc(j.Name, func(r rune) bool { return r <= ' ' || r == '/' }) {
		return fmt.Errorf("job name %q: a job needs a name without spaces or slashes, which `run` takes", j.Name)
	}
	if j.Build == nil {
		return fmt.Errorf("job %q has no Build function", j.Name)
	}
	for _, n := range []string{j.Name, j.DisplayName} {
		if n == "" {
			continue
		}
		if other, ok := reg.Lookup(n); ok {
			return fmt.Errorf("job %q: the name %q is taken by job %q", j.Name, n, other.Name)
		}
	}
	return nil
}

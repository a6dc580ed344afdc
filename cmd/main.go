// Package cmd is gflink's command line: Flink's verbs, flags, messages and
// exit codes over the engine. Each verb is one file; options go into a
// struct and then into one function that does the work, so that flag
// parsing and behaviour can be tested apart: a verb's constructor takes a
// runF that, when not nil, gets the options instead (as in cli/cli).
package cmd

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/savepoint/vfs"
)

// Factory holds what commands need from the outside world; tests replace
// parts of it.
type Factory struct {
	IO            *IOStreams
	Registry      *jobs.Registry
	Getenv        func(string) string
	WorkingDir    string
	ExecutableDir string
	FS            vfs.FS
	// Context is cancelled on Ctrl-C.
	Context context.Context
	// Args is the command line being run (without the program name).
	Args []string
	// Executable is the path of the gflink binary, to start detached jobs.
	Executable string
}

// Main runs gflink with the built-in jobs and returns the exit code.
func Main() int {
	return MainWith(jobs.Builtin(), os.Args[1:])
}

// MainWith runs gflink with the given jobs — the entry point for programs
// that compile their own jobs into a gflink binary.
func MainWith(reg *jobs.Registry, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	wd, _ := os.Getwd()
	exe, exeDir := "", ""
	if e, err := os.Executable(); err == nil {
		exe, exeDir = e, filepath.Dir(e)
	}
	f := &Factory{IO: System(), Registry: reg, Getenv: os.Getenv, WorkingDir: wd, ExecutableDir: exeDir,
		FS: vfs.Default, Context: ctx, Executable: exe}
	return Run(f, args)
}

// Package cmd is gflink's command line: Flink's verbs, flags, messages and
// exit codes over the engine. Each verb is one file; options go into a
// struct and then into one function that does the work, so that flag
// parsing and behaviour can be tested apart: a verb's constructor takes a
// runF that, when not nil, gets the options instead (as in cli/cli).
package cmd

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

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
	// A reader that goes away (gflink run … | head) would otherwise kill
	// the process at the next write to stdout, mid-job: no end state, its
	// registry entry left behind. With SIGPIPE ignored the write fails
	// instead, and stdoutPipe ends the job as Ctrl-C does.
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	grace := signalGrace
	if len(args) > 0 && args[0] == "run" {
		grace = 0 // a job ends in order, however long that takes
	}
	go watchSignals(sigs, cancel, done, grace, os.Exit)
	streams := System()
	streams.Out = &stdoutPipe{w: streams.Out, closed: func() { cancel(errStdoutClosed) }}
	wd, _ := os.Getwd()
	exe, exeDir := "", ""
	if e, err := os.Executable(); err == nil {
		exe, exeDir = e, filepath.Dir(e)
	}
	f := &Factory{IO: streams, Registry: reg, Getenv: os.Getenv, WorkingDir: wd, ExecutableDir: exeDir,
		FS: vfs.Default, Context: ctx, Executable: exe}
	return Run(f, args)
}

// signalGrace is how long a command other than run has, after SIGINT or
// SIGTERM cancelled it, to return before the process exits anyway: one
// stuck in I/O that cannot see the cancellation must not outlive the
// signal.
const signalGrace = 3 * time.Second

// watchSignals cancels the command at the first SIGINT or SIGTERM, and
// ends the process (exit) at a second one, or once grace (if not 0) has
// passed since the first, with the code of a cancelled command.
func watchSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, done <-chan struct{}, grace time.Duration, exit func(int)) {
	select {
	case <-sigs:
		cancel(context.Canceled)
	case <-done:
		return
	}
	var expired <-chan time.Time
	if grace > 0 {
		expired = time.After(grace)
	}
	select {
	case <-sigs:
	case <-expired:
	case <-done:
		return
	}
	exit(ExitCanceled)
}

// errStdoutClosed is the cause of the context's cancellation when stdout's
// reader went away.
var errStdoutClosed = errors.New("its output (stdout) was closed by the reader")

// stdoutPipe is stdout that, once its reader has gone away (EPIPE), calls
// closed (once) and discards what follows: no one reads it, and a print
// sink that failed on it would only make the job restart and fail again.
type stdoutPipe struct {
	w      io.Writer
	once   sync.Once
	closed func()
}

func (p *stdoutPipe) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.once.Do(p.closed)
		return len(b), nil
	}
	return n, err
}

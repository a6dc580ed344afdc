package cmd

import (
	"context"
	"errors"
	"fmt"
)

// Exit codes. They are stable: scripts depend on them.
const (
	ExitOK       = 0
	ExitFailure  = 1 // the command was understood and failed
	ExitUsage    = 2 // the command line was wrong
	ExitCanceled = 130
	// ExitBrokenPipe: an attached job was cancelled because stdout's
	// reader went away, the code a shell reports for a program SIGPIPE
	// ended (128 + 13).
	ExitBrokenPipe = 141
)

// UsageError is a mistake on the command line: it is printed to stdout
// with Flink's hint about -h, and exits 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usageErrorf(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// SilentError means the command has already said everything; it only
// carries the exit code.
type SilentError struct{ Code int }

func (e *SilentError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// exitCode decides a command's exit code from its error, in one place.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var s *SilentError
	if errors.As(err, &s) {
		return s.Code
	}
	var u *UsageError
	if errors.As(err, &u) {
		return ExitUsage
	}
	return ExitFailure
}

// canceled is the exit of a command whose context was cancelled: 141 when
// stdout's reader went away (see stdoutPipe), else 130 (Ctrl-C, SIGTERM).
func canceled(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), errStdoutClosed) {
		return &SilentError{Code: ExitBrokenPipe}
	}
	return &SilentError{Code: ExitCanceled}
}

package cmd

import (
	"bytes"
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// IOStreams is where a command reads and writes. Data and Flink's
// messages go to Out; logs and diagnostics to ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY reports whether Out is a terminal (tables and colour),
	// ErrTTY whether ErrOut is (a run's live status line).
	OutTTY, ErrTTY bool
	// NoColor is set when NO_COLOR is set or Out is not a terminal.
	NoColor bool
}

// System returns the process's streams.
func System() *IOStreams {
	tty := isatty.IsTerminal(os.Stdout.Fd()) || isatty.IsCygwinTerminal(os.Stdout.Fd())
	_, noColor := os.LookupEnv("NO_COLOR")
	errTTY := isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd())
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, OutTTY: tty, ErrTTY: errTTY, NoColor: noColor || !tty}
}

// TestStreams returns streams backed by buffers.
func TestStreams() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut, NoColor: true}, &out, &errOut
}

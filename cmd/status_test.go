package cmd

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/savepoint/vfs"
)

// runOnTerminal runs a paced, checkpointed word count attached, with
// stderr a terminal, and returns what it wrote there.
func runOnTerminal(t *testing.T, extra ...string) string {
	t.Helper()
	home := t.TempDir()
	io, out, errOut := TestStreams()
	io.ErrTTY = true
	f := &Factory{IO: io, Registry: jobs.Builtin(), FS: vfs.Default, Context: context.Background(), Getenv: func(k string) string {
		if k == "GFLINK_HOME" {
			return home
		}
		return ""
	}}
	args := append([]string{"run", "-Dexecution.checkpointing.interval=100ms", "-Dexecution.checkpointing.dir=" + filepath.Join(home, "ck"),
		"-Drest.bind-port=0"}, extra...)
	args = append(args, "wordcount", "--generate", "24000", "--rate", "12000", "--discard")
	if code := Run(f, args); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	return errOut.String()
}

// TestStatusLineOnATerminal: an attached run on a terminal redraws one
// status line — throughput, the last checkpoint, back pressure — where it
// would log a line per checkpoint, and clears it before the job's result;
// --verbose logs the checkpoints instead.
func TestStatusLineOnATerminal(t *testing.T) {
	if testutil.RaceEnabled() {
		t.Skip("a 2 s paced run; the status line's logic runs in the plain test run")
	}
	got := runOnTerminal(t)
	if !strings.Contains(got, "| RUNNING") || !strings.Contains(got, "/s | out ") || !strings.Contains(got, "| checkpoint ") || !strings.Contains(got, "| backpressure ok") {
		t.Errorf("no status line with throughput, checkpoint and back pressure:\n%q", got)
	}
	// The generated input is bounded: a progress bar with the time left
	// leads the line, and it advances.
	if !strings.Contains(got, clearLine+noWrap+"[") || !strings.Contains(got, "% ETA ") || !regexp.MustCompile(`\] +(5\d|[6-9]\d|100)% ETA`).MatchString(got) {
		t.Errorf("no progress bar reaching half way:\n%q", got)
	}
	if strings.Contains(got, "Completed checkpoint") {
		t.Errorf("checkpoints were logged under the status line:\n%q", got)
	}
	if !strings.HasSuffix(got, clearLine) {
		t.Errorf("the status line was not cleared at the end:\n%q", got[max(0, len(got)-200):])
	}
	verbose := runOnTerminal(t, "--verbose")
	if strings.Contains(verbose, clearLine) || !strings.Contains(verbose, "Completed checkpoint") {
		t.Errorf("--verbose: want the checkpoints logged and no status line:\n%q", verbose)
	}
}

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/gflink/gflink/cmd"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/savepoint/vfs"
)

// TestTotals runs the job through gflink's command line, as the binary does,
// and checks its final totals.
func TestTotals(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	streams, out, errOut := cmd.TestStreams()
	f := &cmd.Factory{
		IO:       streams,
		Registry: jobs.Builtin().With(Totals()),
		Getenv: func(k string) string {
			if k == "GFLINK_HOME" {
				return home
			}
			return ""
		},
		WorkingDir: dir, ExecutableDir: dir, FS: vfs.Default, Context: context.Background(),
	}
	code := cmd.Run(f, []string{"run", "-Drest.bind-port=0", "totals"})
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"(alice,7)", "(bob,3)", "(carol,1)", "Program execution finished"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

func TestUsage(t *testing.T) {
	streams, out, _ := cmd.TestStreams()
	f := &cmd.Factory{IO: streams, Registry: jobs.Builtin().With(Totals()),
		Getenv: func(string) string { return "" }, FS: vfs.Default, Context: context.Background()}
	if code := cmd.Run(f, []string{"run", "totals", "--bogus"}); code != 2 {
		t.Fatalf("exit %d, want 2 (a usage error):\n%s", code, out)
	}
	if !strings.Contains(out.String(), "Usage: gflink run [OPTIONS] totals") {
		t.Errorf("no usage printed:\n%s", out)
	}
}

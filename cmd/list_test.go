package cmd

import (
	"context"
	"strings"
	"testing"

	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/jobs"
)

// TestListOnATerminal: on a terminal, list prints one table with the
// states in colour; piped, Flink's plain layout (the scripts cover that).
func TestListOnATerminal(t *testing.T) {
	home := t.TempDir()
	reg := jobregistry.NewRegistry(home)
	reg.Put(jobregistry.Entry{JobID: "0123456789abcdef0123456789abcdef", Name: "WordCount", State: "FINISHED", StartTime: 1, Address: "http://127.0.0.1:8081"})
	io, out, _ := TestStreams()
	io.OutTTY, io.NoColor = true, false
	f := &Factory{IO: io, Registry: jobs.Builtin(), Getenv: func(k string) string {
		if k == "GFLINK_HOME" {
			return home
		}
		return ""
	}, Context: context.Background()}
	if code := Run(f, []string{"list", "-a"}); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	s := out.String()
	for _, want := range []string{"START TIME", "JOB ID", "0123456789abcdef0123456789abcdef", "WordCount", "FINISHED"} {
		if !strings.Contains(strings.ToUpper(s), strings.ToUpper(want)) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "Terminated Jobs") {
		t.Errorf("on a terminal list prints a table, not Flink's sections:\n%s", s)
	}
}

package cli

import (
	"strings"
	"testing"

	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/stream"
)

func noop(*stream.Environment, []string) error { return nil }

// TestCheckName: a job must have a name run can take, a Build function,
// and names (its own and its display name) no other job has.
func TestCheckName(t *testing.T) {
	reg := jobs.Builtin()
	for _, tc := range []struct {
		job  stream.Job
		want string // "" for accepted
	}{
		{stream.Job{Name: "totals", Build: noop}, ""},
		{stream.Job{Name: "totals", DisplayName: "Totals", Build: noop}, ""},
		{stream.Job{Name: "", Build: noop}, "needs a name"},
		{stream.Job{Name: "my job", Build: noop}, "needs a name without spaces"},
		{stream.Job{Name: "a/b", Build: noop}, "needs a name without spaces or slashes"},
		{stream.Job{Name: "totals"}, "has no Build function"},
		{stream.Job{Name: "wordcount", Build: noop}, `the name "wordcount" is taken by job "wordcount"`},
		{stream.Job{Name: "wc", DisplayName: "WordCount", Build: noop}, `the name "WordCount" is taken`},
	} {
		err := checkName(reg, tc.job)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: error %v, want %q", tc.job, err, tc.want)
		}
	}
}

// TestRunRefusesATakenName: the command line does not start at all.
func TestRunRefusesATakenName(t *testing.T) {
	if code := Run([]string{"list"}, stream.Job{Name: "wordcount", Build: noop}); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
}

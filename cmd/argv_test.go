package cmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNormalizeArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"run", "-fromSavepoint", "/x", "wordcount"}, []string{"run", "--fromSavepoint", "/x", "wordcount"}},
		{[]string{"run", "-cm", "claim", "-rm", "legacy", "-sae", "wordcount"}, []string{"run", "--claimMode", "claim", "--restoreMode", "legacy", "--shutdownOnAttachedExit", "wordcount"}},
		{[]string{"run", "--fromSav", "/x", "wordcount"}, []string{"run", "--fromSavepoint", "/x", "wordcount"}},
		{[]string{"run", "-allowNonRestoredState", "wordcount"}, []string{"run", "--allowNonRestoredState", "wordcount"}},
		// -D values and flag values are copied as they are.
		{[]string{"run", "-D", "k=v", "-p", "4", "-Dflag", "wordcount"}, []string{"run", "-D", "k=v", "-p", "4", "-Dflag", "wordcount"}},
		{[]string{"run", "-Dexecution.checkpointing.interval=10s", "wordcount"}, []string{"run", "-Dexecution.checkpointing.interval=10s", "wordcount"}},
		// Everything after the job name is the job's.
		{[]string{"run", "wordcount", "-fromSavepoint", "x", "--input", "a"}, []string{"run", "wordcount", "-fromSavepoint", "x", "--input", "a"}},
		{[]string{"run", "--claimMode=claim", "wordcount"}, []string{"run", "--claimMode=claim", "wordcount"}},
		// An ambiguous prefix is left for cobra to reject.
		{[]string{"list", "--r"}, []string{"list", "--running"}},
		{[]string{"savepoint", "--d", "x"}, []string{"savepoint", "--d", "x"}},
		{[]string{"stop", "-p", "/sp", "abc"}, []string{"stop", "--savepointPath=/sp", "abc"}},
		{[]string{"stop", "-p", "-d", "abc"}, []string{"stop", "--savepointPath=", "-d", "abc"}},
		{[]string{"savepoint", "abc", "/dir", "-detached"}, []string{"savepoint", "abc", "/dir", "--detached"}},
		{[]string{"savepoint", "-type", "native", "abc"}, []string{"savepoint", "--type", "native", "abc"}},
	} {
		if got := normalizeArgs(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("normalizeArgs(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestCauseChain(t *testing.T) {
	inner := errors.New("injected failure")
	err := fmt.Errorf("Job failed (JobID: x): %w", fmt.Errorf("Recovery is suppressed by NoRestartBackoffTimeStrategy: %w", fmt.Errorf("task failed: %w", inner)))
	want := []string{"Job failed (JobID: x)", "Recovery is suppressed by NoRestartBackoffTimeStrategy", "task failed", "injected failure"}
	if got := causeChain(err); !slices.Equal(got, want) {
		t.Errorf("causeChain = %q; want %q", got, want)
	}
	// A path error is one cause: its path and its reason together.
	_, perr := os.Open(filepath.Join(t.TempDir(), "nope"))
	err = fmt.Errorf("task failed: %w", fmt.Errorf("open input: %w", perr))
	got := causeChain(err)
	if len(got) != 3 || !strings.HasPrefix(got[2], "open /") || !strings.HasSuffix(got[2], "nope: no such file or directory") {
		t.Errorf("causeChain = %q; want the path error as one last line", got)
	}
}

func TestFlinkFlagErrors(t *testing.T) {
	for in, want := range map[string]string{
		"unknown flag: --nope":                    "Unrecognized option: --nope",
		"unknown shorthand flag: 'x' in -x":       "Unrecognized option: -x",
		"flag needs an argument: 's' in -s":       "Missing argument for option: s",
		"flag needs an argument: --fromSavepoint": "Missing argument for option: fromSavepoint",
	} {
		if got := flinkFlagError(errors.New(in)).Error(); got != want {
			t.Errorf("flinkFlagError(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestShortOnlyOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  bool
	}{
		{[]string{"savepoint", "-detached", "x"}, false},
		{[]string{"stop", "x", "-detached"}, false},
		{[]string{"stop", "--detached", "x"}, true},
		{[]string{"savepoint", "x", "--det"}, true},
		{[]string{"savepoint", "--detached=true", "x"}, true},
		{[]string{"stop", "--drain", "x"}, false},
		{[]string{"run", "--detached", "wordcount"}, false}, // run -d has a long name
		{[]string{"stop", "--", "--detached"}, false},
	} {
		err := checkShortOnly(tc.args)
		if (err != nil) != tc.bad {
			t.Errorf("checkShortOnly(%q) = %v; want error: %v", tc.args, err, tc.bad)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "Unrecognized option: --") {
			t.Errorf("checkShortOnly(%q) = %q", tc.args, err)
		}
	}
	for args, want := range map[string]bool{"stop -o json x": true, "stop --output=json x": true, "stop -ojson": true,
		"stop -o": false, "stop json": false, "list --output json": true} {
		if got := asksForJSON(strings.Fields(args)); got != want {
			t.Errorf("asksForJSON(%q) = %v", args, got)
		}
	}
}

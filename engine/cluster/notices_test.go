package cluster

import (
	"slices"
	"testing"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

// TestRestoreNotices: the lines run prints before the job starts, decided
// from the resolved snapshot and the configuration alone.
func TestRestoreNotices(t *testing.T) {
	conf := config.New()
	conf.SetString("execution.checkpointing.num-retained", "2", "-D")
	const dir = "/ck/0123456789abcdef0123456789abcdef/chk-7"
	noClaim := "Restoring from file:" + dir + " in NO_CLAIM mode: gflink never modifies or deletes it, and new checkpoints use none of its files; it may be deleted once the job's first checkpoint has completed."
	for _, tc := range []struct {
		name string
		src  engine.RestoreSource
		want []string
	}{
		{"a snapshot directory", engine.RestoreSource{Resolved: &restore.Resolved{Dir: dir}, ClaimMode: engine.ClaimModeNoClaim},
			[]string{noClaim}},
		{"a job's checkpoint directory", engine.RestoreSource{Resolved: &restore.Resolved{Dir: dir, JobDir: "/ck/0123456789abcdef0123456789abcdef"}, ClaimMode: engine.ClaimModeNoClaim},
			[]string{"Restoring from the newest complete checkpoint in /ck/0123456789abcdef0123456789abcdef: file:" + dir, noClaim}},
		{"claim", engine.RestoreSource{Resolved: &restore.Resolved{Dir: dir}, ClaimMode: engine.ClaimModeClaim},
			[]string{"Restoring from file:" + dir + " in CLAIM mode: the job owns it now and deletes it once 2 newer checkpoint(s) complete (execution.checkpointing.num-retained), or when the job ends as NO_EXTERNALIZED_CHECKPOINTS says; nothing else beside it is touched."}},
		{"legacy", engine.RestoreSource{Resolved: &restore.Resolved{Dir: dir}, ClaimMode: engine.ClaimModeLegacy},
			[]string{"Warning: The LEGACY restore mode is deprecated, please use CLAIM or NO_CLAIM mode instead.",
				"Restoring from file:" + dir + " in LEGACY mode: gflink never deletes it."}},
	} {
		if got := RestoreNotices(&tc.src, conf); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestDroppedNotices(t *testing.T) {
	if got := DroppedNotices(nil); got != nil {
		t.Errorf("no plan: %q", got)
	}
	meta := &savepoint.Metadata{Operators: []savepoint.OperatorState{
		{UID: "old", States: []savepoint.StateDescriptor{{Name: "counts", Kind: "value", Entries: 3}}},
		{UID: "empty"},
	}}
	got := DroppedNotices(&restore.Plan{Meta: meta, Dropped: []string{"old", "empty"}})
	want := []string{
		"Dropping the state of operator old, which this job does not have (--allowNonRestoredState): counts (value, 3 entries)",
		"Dropping the state of operator empty, which this job does not have (--allowNonRestoredState): no named state",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

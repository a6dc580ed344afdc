package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// TestStorageCreatesOwnerOnlyFiles: checkpoint directories and state files
// are 0700/0600, so other local users cannot read a job's state.
func TestStorageCreatesOwnerOnlyFiles(t *testing.T) {
	base := filepath.Join(t.TempDir(), "ck")
	s := &Storage{FS: vfs.Default, JobDir: savepoint.JobCheckpointDir(base, "job"), JobID: "job"}
	if err := s.Init(); err != nil {
		t.Fatal(err)
	}
	loc, err := s.Location(1, SnapshotType{Kind: savepoint.KindCheckpoint, Format: savepoint.FormatNative}, "")
	if err != nil {
		t.Fatal(err)
	}
	handles, err := s.WriteSubtask(loc, []OperatorSnapshot{{UID: "op", OperatorState: make([]byte, 64)}})
	if err != nil {
		t.Fatal(err)
	}
	file := handles["op"].Operator.Path
	if file == "" {
		t.Fatal("the state was inlined; want a state file")
	}
	if err := s.Finalize(loc, &savepoint.Metadata{JobID: "job", CheckpointID: 1}); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{base: 0o700, s.JobDir: 0o700, filepath.Join(s.JobDir, savepoint.SharedDirName): 0o700,
		loc.Dir: 0o700, filepath.Join(loc.Dir, file): 0o600, filepath.Join(loc.Dir, savepoint.MetadataFileName): 0o600}
	for p, mode := range want {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != mode {
			t.Errorf("%s has mode %v; want %v", p, got, mode)
		}
	}
}

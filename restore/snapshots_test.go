package restore_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// writeFound writes a complete snapshot of the given kind, completed at
// completed, and returns what FindSnapshots should say of it.
func writeFound(t *testing.T, dir string, id int64, kind savepoint.Kind, completed int64) restore.Snapshot {
	t.Helper()
	m := writeSnapshot(t, dir, id, keyedOp("counter", 128, 0, 3))
	m.Kind, m.CompletionTimestamp = kind, completed
	if kind == savepoint.KindSavepoint {
		m.Format = savepoint.FormatCanonical
	}
	if err := savepoint.WriteMetadata(vfs.Default, dir, m); err != nil {
		t.Fatal(err)
	}
	s := restore.Snapshot{ID: id, Kind: restore.KindOf(kind), Type: "full", Format: m.Format, Completed: completed,
		Size: m.StateSize(), Added: m.StateSize(), Path: savepoint.URI(dir), JobID: jobID}
	if kind == savepoint.KindSavepoint {
		s.Owner = restore.OwnerUser
	}
	return s
}

func TestFindSnapshots(t *testing.T) {
	base := t.TempDir()
	jobDir := filepath.Join(base, jobID)
	chk1 := writeFound(t, savepoint.CheckpointDir(jobDir, 1), 1, savepoint.KindCheckpoint, 1000)
	// Completed before chk-1 although its id is higher: the order is by
	// completion time first.
	chk2 := writeFound(t, savepoint.CheckpointDir(jobDir, 2), 2, savepoint.KindCheckpoint, 900)
	chk3 := writeFound(t, savepoint.CheckpointDir(jobDir, 3), 3, savepoint.KindCheckpoint, 1000)
	spDir := filepath.Join(base, "savepoint-cca7bc-0123456789ab")
	sp := writeFound(t, spDir, 4, savepoint.KindSavepoint, 2000)

	// Not snapshots, or not complete ones: left out, the incomplete and
	// damaged ones with a note.
	os.MkdirAll(savepoint.CheckpointDir(jobDir, 5), 0o755) // never completed
	damaged := savepoint.CheckpointDir(jobDir, 6)
	writeFound(t, damaged, 6, savepoint.KindCheckpoint, 3000)
	os.WriteFile(filepath.Join(damaged, stateFileName("counter", 0)), []byte("garbage"), 0o644)
	os.MkdirAll(filepath.Join(jobDir, "shared"), 0o755)
	// Only job directories are walked into.
	os.MkdirAll(filepath.Join(base, "unrelated", "chk-1"), 0o755)
	os.MkdirAll(filepath.Join(base, "logs", "old"), 0o755)

	for _, tc := range []struct {
		name, dir string
		want      []restore.Snapshot
		notes     []string // a substring of each note, in order
	}{
		{"base directory", base, []restore.Snapshot{chk2, chk1, chk3, sp},
			[]string{"chk-5: it has no _metadata (the checkpoint never completed).", "chk-6: "}},
		{"job directory", jobDir, []restore.Snapshot{chk2, chk1, chk3},
			[]string{"chk-5: it has no _metadata", "chk-6: "}},
		{"snapshot directory", savepoint.CheckpointDir(jobDir, 3), []restore.Snapshot{chk3}, nil},
		{"_metadata file", filepath.Join(spDir, savepoint.MetadataFileName), []restore.Snapshot{sp}, nil},
		{"damaged snapshot", damaged, nil, []string{"Skipping " + damaged + ": "}},
		{"directory with nothing", filepath.Join(base, "logs"), nil, nil},
		{"directory with an incomplete chk-N", filepath.Join(base, "unrelated"), nil, []string{"chk-1: it has no _metadata"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, notes, err := restore.FindSnapshots(vfs.Default, tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("found\n %+v\nwant\n %+v", got, tc.want)
			}
			if len(notes) != len(tc.notes) {
				t.Fatalf("notes %q; want %d like %q", notes, len(tc.notes), tc.notes)
			}
			for i, n := range notes {
				if !strings.Contains(n, tc.notes[i]) {
					t.Errorf("note %q does not contain %q", n, tc.notes[i])
				}
			}
		})
	}
}

func TestFindSnapshotsErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope")
	_, _, err := restore.FindSnapshots(vfs.Default, missing)
	mustErrExactly(t, err, "Cannot find checkpoint or savepoint directory '"+missing+"'.")
	// It takes paths: the caller turns a file: URI into one.
	_, _, err = restore.FindSnapshots(vfs.Default, "file:"+dir)
	mustErrExactly(t, err, "Cannot find checkpoint or savepoint directory 'file:"+dir+"'.")

	file := filepath.Join(dir, "notes.txt")
	os.WriteFile(file, []byte("x"), 0o644)
	_, _, err = restore.FindSnapshots(vfs.Default, file)
	mustErrExactly(t, err, "'"+file+"' is a file: give a checkpoint or savepoint directory, a directory holding them, or a _metadata file.")
}

func TestSortSnapshots(t *testing.T) {
	s := []restore.Snapshot{
		{ID: 3, Completed: 20, Path: "a"},
		{ID: 1, Completed: 30},
		{ID: 2, Completed: 20},
		{ID: 3, Completed: 20, Path: "b"}, // equal to the first: stays after it
		{ID: 9, Completed: 10},
	}
	restore.SortSnapshots(s)
	var got []string
	for _, x := range s {
		got = append(got, x.Path+string(rune('0'+x.ID)))
	}
	if want := []string{"9", "2", "a3", "b3", "1"}; !slices.Equal(got, want) {
		t.Errorf("sorted %q; want %q", got, want)
	}
}

// A job directory's shared files that no complete checkpoint refers to are
// named in a note; those a checkpoint refers to are not.
func TestFindSnapshotsNamesOrphanedSharedFiles(t *testing.T) {
	job := filepath.Join(t.TempDir(), "0123456789abcdef0123456789abcdef")
	shared := filepath.Join(job, savepoint.SharedDirName)
	chk := savepoint.CheckpointDir(job, 3)
	for _, d := range []string{shared, chk} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"s1-000004.sst", "s1-000009.sst"} {
		if err := os.WriteFile(filepath.Join(shared, f), []byte("sst"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	md := &savepoint.Metadata{JobID: filepath.Base(job), CheckpointID: 3, Kind: savepoint.KindCheckpoint, Format: savepoint.FormatNative,
		Operators: []savepoint.OperatorState{{UID: "counter", Parallelism: 1, MaxParallelism: 128, Subtasks: []savepoint.SubtaskState{{
			Keyed: &savepoint.KeyedStateHandle{Start: 0, End: 127, Native: &savepoint.NativeStateHandle{BackendID: "s1",
				Files: []savepoint.NativeFile{{Name: "000004.sst", Path: "../shared/s1-000004.sst", Size: 3}}}}, Bytes: 3}}}}}
	if err := savepoint.WriteMetadata(vfs.Default, chk, md); err != nil {
		t.Fatal(err)
	}
	found, notes, err := restore.FindSnapshots(vfs.Default, job)
	if err != nil || len(found) != 1 || found[0].Type != "incremental" {
		t.Fatalf("found %+v, %v", found, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "s1-000009.sst") || strings.Contains(notes[0], "s1-000004.sst") {
		t.Fatalf("notes %q; want one naming s1-000009.sst only", notes)
	}
}

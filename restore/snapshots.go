package restore

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// Snapshot is one complete checkpoint or savepoint, as `gflink checkpoints`
// lists it: found on disk, or reported by a running job.
type Snapshot struct {
	ID        int64
	Kind      string           // KindCheckpoint or KindSavepoint
	Type      string           // "full" or "incremental"
	Format    savepoint.Format // FormatNative or FormatCanonical
	Completed int64            // Unix milliseconds
	Size      int64            // bytes of state, as a running job reports it
	// Added is what this snapshot wrote itself (Flink's checkpointed
	// size): Size minus the shared files earlier checkpoints uploaded.
	Added int64
	Path  string // file: URI of its directory; "" when kept in memory
	JobID string
	// Owner is OwnerJob (a running job owns it and may delete it),
	// OwnerUser (no job ever touches it), or "" when no job is running.
	Owner string
	// Restored: the running job was restored from it.
	Restored bool
	// Changelog sums up a changelog checkpoint, nil otherwise.
	Changelog *savepoint.ChangelogSummary
}

// TypeOf is "changelog" for a checkpoint of the changelog state backend,
// "incremental" for a snapshot that refers to shared files (unless taken
// as a full checkpoint, whose shared files are its own), else "full".
func TypeOf(m *savepoint.Metadata) string {
	if m.Changelog() != nil {
		return "changelog"
	}
	if len(m.SharedFiles()) > 0 && !m.Full {
		return "incremental"
	}
	return "full"
}

// Snapshot kinds and owners, as `gflink checkpoints` prints them.
const (
	KindCheckpoint = "checkpoint"
	KindSavepoint  = "savepoint"
	OwnerJob       = "job"
	OwnerUser      = "user"
)

// KindOf names a snapshot kind of _metadata (savepoint.KindCheckpoint,
// savepoint.KindSavepoint) as Snapshot.Kind does.
func KindOf(metadataKind savepoint.Kind) string {
	if metadataKind == savepoint.KindCheckpoint {
		return KindCheckpoint
	}
	return KindSavepoint
}

// SortSnapshots orders snapshots oldest first: by completion time, then
// by id. The sort is stable, so that equal ones keep the order they were
// found in.
func SortSnapshots(s []Snapshot) {
	slices.SortStableFunc(s, func(a, b Snapshot) int {
		return cmp.Or(cmp.Compare(a.Completed, b.Completed), cmp.Compare(a.ID, b.ID))
	})
}

// FindSnapshots finds the complete snapshots under dir, oldest first: dir
// itself (or the snapshot of a _metadata file), the chk-N of a job
// directory, and the job directories and savepoint directories of a base
// directory. Incomplete or damaged ones are left out, each with a note
// saying why. The snapshots it finds have no owner but savepoints, which
// no job ever deletes: whether a running job owns a checkpoint is for the
// caller, who knows the running jobs, to say.
func FindSnapshots(fsys vfs.FS, dir string) ([]Snapshot, []string, error) {
	st, err := fsys.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("Cannot find checkpoint or savepoint directory '%s'.", dir)
		}
		return nil, nil, err
	}
	if !st.IsDir() {
		if filepath.Base(dir) != savepoint.MetadataFileName {
			return nil, nil, fmt.Errorf("'%s' is a file: give a checkpoint or savepoint directory, a directory holding them, or a %s file.", dir, savepoint.MetadataFileName)
		}
		dir = filepath.Dir(dir)
	}
	var found []Snapshot
	var notes []string
	referenced := map[string]bool{} // shared files complete checkpoints refer to
	add := func(d string) {
		m, note := readComplete(fsys, d)
		if m == nil {
			if note != "" {
				notes = append(notes, note)
			}
			return
		}
		for _, f := range m.SharedFiles() {
			if filepath.IsAbs(f) {
				referenced[f] = true // a changelog file, under its base path
				continue
			}
			referenced[filepath.Clean(filepath.Join(d, f))] = true
		}
		s := Snapshot{ID: m.CheckpointID, Kind: KindOf(m.Kind), Type: TypeOf(m), Format: m.Format,
			Completed: m.CompletionTimestamp, Size: m.StateSize(), Added: m.CheckpointedSize(), Path: savepoint.URI(d), JobID: m.JobID,
			Changelog: m.Changelog()}
		if s.Kind == KindSavepoint {
			s.Owner = OwnerUser // no job ever deletes a savepoint
		}
		found = append(found, s)
	}
	var jobDirs []string
	var walk func(d string, depth int)
	walk = func(d string, depth int) {
		if _, err := fsys.Stat(filepath.Join(d, savepoint.MetadataFileName)); err == nil {
			add(d)
			return
		}
		entries, err := fsys.ReadDir(d)
		if err != nil || depth > 1 {
			return
		}
		if _, err := fsys.Stat(filepath.Join(d, savepoint.SharedDirName)); err == nil {
			jobDirs = append(jobDirs, d)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			name := e.Name()
			sub := filepath.Join(d, name)
			switch {
			case strings.HasPrefix(name, savepoint.CheckpointDirPrefix):
				if _, ok := savepoint.ParseCheckpointDirName(name); ok {
					add(sub)
				}
			case savepoint.IsSavepointDirName(name):
				add(sub)
			case isJobID(name):
				walk(sub, depth+1)
			}
		}
	}
	walk(dir, 0)
	// Shared files no complete checkpoint refers to: left by checkpoints
	// that failed, or by a process killed while it wrote one.
	for _, jd := range jobDirs {
		entries, _ := fsys.ReadDir(filepath.Join(jd, savepoint.SharedDirName))
		var orphans []string
		for _, e := range entries {
			if p := filepath.Join(jd, savepoint.SharedDirName, e.Name()); !referenced[p] {
				orphans = append(orphans, e.Name())
			}
		}
		if len(orphans) > 0 {
			notes = append(notes, fmt.Sprintf("%d file(s) in %s are referred to by no complete checkpoint (left by a failed or killed checkpoint) and may be deleted once no job writes checkpoints there: %s",
				len(orphans), filepath.Join(jd, savepoint.SharedDirName), strings.Join(orphans, ", ")))
		}
	}
	SortSnapshots(found)
	return found, notes, nil
}

// readComplete reads the _metadata of the snapshot in d and checks its
// state files. It returns the metadata of a complete, intact snapshot;
// otherwise nil and a note saying why d is skipped (none for a directory
// that is no chk-N and has no _metadata: it is no snapshot).
func readComplete(fsys vfs.FS, d string) (*savepoint.Metadata, string) {
	m, err := savepoint.ReadMetadata(fsys, filepath.Join(d, savepoint.MetadataFileName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, ok := savepoint.ParseCheckpointDirName(filepath.Base(d)); ok {
				return nil, fmt.Sprintf("Skipping %s: it has no %s (the checkpoint never completed).", d, savepoint.MetadataFileName)
			}
			return nil, ""
		}
		return nil, fmt.Sprintf("Skipping %s: %v", d, err)
	}
	if err := VerifyStateFiles(fsys, d, m); err != nil {
		return nil, fmt.Sprintf("Skipping %s: %v", d, err)
	}
	return m, ""
}

// isJobID reports whether name is a job id (32 hex digits), as the
// directories of a checkpoint base directory are named.
func isJobID(name string) bool {
	if len(name) != 32 {
		return false
	}
	for _, c := range name {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

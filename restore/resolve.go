// Package restore turns a snapshot and a new job into a restore plan: it
// resolves the path given to -s, matches operator state to the new job's
// operators by uid, and divides keyed state by key group and operator state
// by Flink's split or union rules among the new subtasks. It reads the
// snapshot and nothing else; it does not know the engine.
package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/changelog"
	"github.com/gflink/gflink/savepoint/vfs"
)

// Resolved is a snapshot located from a user's pointer.
type Resolved struct {
	// Pointer is what the user wrote.
	Pointer string
	// Dir is the snapshot directory (chk-N or savepoint-…), MetadataFile
	// its _metadata.
	Dir          string
	MetadataFile string
	Metadata     *savepoint.Metadata
	// Notes say which checkpoints of a job directory were skipped and why.
	Notes []string
	// JobDir is set when the pointer named a job's checkpoint directory and
	// the newest complete checkpoint in it was picked.
	JobDir string
}

// Resolve finds the snapshot a pointer names: a snapshot directory holding
// _metadata, the _metadata file itself (any file is taken as the metadata
// file, as in Flink), or — beyond Flink — a job's checkpoint directory
// <dir>/<jobId>, from which the newest complete chk-N is taken, skipping
// ones without _metadata or failing their checks. When every chk-N there is
// skipped, the error comes with a Resolved whose Notes say why.
func Resolve(fsys vfs.FS, ptr string) (*Resolved, error) {
	path, err := savepoint.LocalPath(ptr)
	if err != nil {
		return nil, err
	}
	st, err := fsys.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("Cannot find checkpoint or savepoint file/directory '%s' on file system 'file'.", ptr)
		}
		return nil, fmt.Errorf("Cannot access file system for checkpoint/savepoint path '%s': %w", ptr, err)
	}
	r := &Resolved{Pointer: ptr}
	if !st.IsDir() {
		r.MetadataFile, r.Dir = path, filepath.Dir(path)
		return r, r.load(fsys)
	}
	meta := filepath.Join(path, savepoint.MetadataFileName)
	if _, err := fsys.Stat(meta); err == nil {
		r.MetadataFile, r.Dir = meta, path
		return r, r.load(fsys)
	}
	latest, notes, err := LatestCheckpoint(fsys, path)
	if err != nil {
		return nil, err
	}
	r.Notes = notes
	if latest == nil {
		if len(notes) > 0 {
			// r carries the notes saying why each checkpoint was skipped.
			return r, fmt.Errorf("No complete checkpoint found in job checkpoint directory '%s'.", path)
		}
		return nil, fmt.Errorf("Cannot find meta data file '%s' in directory '%s'. Please try to load the checkpoint/savepoint directly from the metadata file instead of the directory.", savepoint.MetadataFileName, path)
	}
	r.Dir, r.MetadataFile, r.Metadata = latest.Dir, filepath.Join(latest.Dir, savepoint.MetadataFileName), latest.Metadata
	r.JobDir = path
	return r, nil
}

func (r *Resolved) load(fsys vfs.FS) error {
	m, err := savepoint.ReadMetadata(fsys, r.MetadataFile)
	if err != nil {
		return fmt.Errorf("Failed to read checkpoint/savepoint '%s': %w", r.Pointer, err)
	}
	r.Metadata = m
	return nil
}

// Found is one complete snapshot found on disk.
type Found struct {
	Dir      string
	Metadata *savepoint.Metadata
}

// LatestCheckpoint looks through the chk-N directories of a job checkpoint
// directory, newest first, and returns the first whose _metadata reads and
// checks out. Each one skipped gets a note saying why. It returns nil (and
// no error) when the directory holds no chk-N at all.
func LatestCheckpoint(fsys vfs.FS, jobDir string) (*Found, []string, error) {
	ids, err := CheckpointIDs(fsys, jobDir)
	if err != nil {
		return nil, nil, err
	}
	var notes []string
	for _, id := range slices.Backward(ids) {
		dir := savepoint.CheckpointDir(jobDir, id)
		m, note := readComplete(fsys, dir)
		if m == nil {
			notes = append(notes, note)
			continue
		}
		return &Found{Dir: dir, Metadata: m}, notes, nil
	}
	return nil, notes, nil
}

// CheckpointIDs lists the ids of the chk-N directories in jobDir, ascending.
func CheckpointIDs(fsys vfs.FS, jobDir string) ([]int64, error) {
	entries, err := fsys.ReadDir(jobDir)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint directory: %w", err)
	}
	var ids []int64
	for _, e := range entries {
		if id, ok := savepoint.ParseCheckpointDirName(e.Name()); ok && e.IsDir() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// VerifyStateFiles checks a snapshot before anything is restored from it:
// that its _metadata describes state gflink could have written (Validate),
// and that every file it references is there and intact — every block of
// its state files read and checked, native files and changelog files
// checked against the size and checksum _metadata records (files recorded
// without a checksum, by a build before checksums, by size, and changelog
// files by their chunks' checksums too), and each subtask's size against
// its state file's. A damaged or swapped file is refused naming it. It is
// the one check run -s, run --check, inspect, HA recovery and the choice
// of the newest complete chk-N all use.
func VerifyStateFiles(fsys vfs.FS, dir string, m *savepoint.Metadata) error {
	if err := Validate(m); err != nil {
		return errInconsistent(filepath.Join(dir, savepoint.MetadataFileName), err)
	}
	br := &savepoint.BlockReader{FS: fsys, Dir: dir}
	defer br.Close()
	logs := map[string]bool{}
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			if st.Keyed != nil && st.Keyed.Native != nil {
				for _, f := range st.Keyed.Native.Files {
					if err := savepoint.VerifyNativeFile(fsys, dir, f); err != nil {
						return err
					}
				}
			}
			if st.Keyed != nil {
				for _, kg := range st.Keyed.KeyGroups {
					if _, err := br.Read(st.Keyed.Stream, kg.Offset, kg.Length); err != nil {
						return err
					}
				}
				if c := st.Keyed.Changelog; c != nil {
					if s := st.Keyed.Stream; s != nil && s.Path != "" && len(st.Keyed.KeyGroups) > 0 {
						// A canonical materialization: one file of its own.
						size, err := br.FileSize(s.Path)
						if err != nil {
							return err
						}
						if size != c.MaterializedSize {
							return fmt.Errorf("materialization %s has %d bytes, _metadata records %d (operator %s, subtask %d): %w",
								filepath.Join(dir, s.Path), size, c.MaterializedSize, op.UID, st.Index, savepoint.ErrCorrupt)
						}
					}
					for _, f := range c.Log {
						if logs[f.Path] {
							continue
						}
						logs[f.Path] = true
						if err := verifyLogFile(fsys, f); err != nil {
							return err
						}
					}
				}
			}
			if st.Operator != nil {
				if _, err := br.Read(st.Operator, st.Operator.Offset, st.Operator.Length); err != nil {
					return err
				}
			}
			for _, hs := range [][]savepoint.ChannelStateHandle{st.InputChannels, st.OutputChannels} {
				for _, h := range hs {
					if _, err := br.Read(&h.Stream, h.Stream.Offset, h.Stream.Length); err != nil {
						return err
					}
				}
			}
			if path, sized, ok := OwnStream(&st); ok {
				size, err := br.FileSize(path)
				if err != nil {
					return err
				}
				if st.Bytes != sized+size {
					return fmt.Errorf("state file %s has %d bytes, but _metadata records %d for operator %s, subtask %d (of which %d in native, materialized or log files): %w",
						filepath.Join(dir, path), size, st.Bytes-sized, op.UID, st.Index, sized, savepoint.ErrCorrupt)
				}
			}
		}
	}
	return nil
}

// verifyLogFile reads a state changelog file as far as its checkpoint
// recorded and checks it: its checksum, when recorded, then every chunk
// and record.
func verifyLogFile(fsys vfs.FS, f savepoint.ChangelogFile) error {
	data, err := changelog.ReadFile(fsys, nil, f.Path)
	if err != nil {
		return err
	}
	sum, has, err := savepoint.ParseCRC32C(f.CRC32C)
	if err != nil {
		return fmt.Errorf("changelog file %s: %w: %w", f.Path, err, savepoint.ErrCorrupt)
	}
	if has {
		if err := changelog.CheckCRC(data, f.Size, f.Path, sum); err != nil {
			return fmt.Errorf("%w: %w", err, savepoint.ErrCorrupt)
		}
	}
	if err := changelog.Parse(data, f.Size, f.Path, func(changelog.Record) error { return nil }); err != nil {
		return fmt.Errorf("%w: %w", err, savepoint.ErrCorrupt)
	}
	return nil
}

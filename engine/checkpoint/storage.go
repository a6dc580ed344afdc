package checkpoint

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// KeyGroupData is one key group's encoded block.
type KeyGroupData struct {
	KeyGroup int
	Data     []byte
}

// OperatorSnapshot is one operator subtask's encoded state, ready to write.
type OperatorSnapshot struct {
	UID       string
	Subtask   int
	Keyed     bool
	Start     int // key group range, for keyed operators
	End       int
	KeyGroups []KeyGroupData
	// OperatorState is the encoded operator state block, nil if none.
	OperatorState []byte
	States        []savepoint.StateDescriptor
}

// Location is where one checkpoint or savepoint is written.
type Location struct {
	ID   int64
	Type SnapshotType
	// Dir is the chk-N or savepoint directory; "" for checkpoints kept in
	// memory (jobmanager storage).
	Dir string
}

// Storage writes checkpoints and savepoints: Flink's CheckpointStorage.
// Checkpoints go to <dir>/<jobId>/chk-N (filesystem) or stay in memory
// (jobmanager, state inlined into the metadata); savepoints always go to a
// savepoint-<jobId[:6]>-<12 hex> directory.
type Storage struct {
	FS vfs.FS
	// JobDir is <execution.checkpointing.dir>/<jobId>, or "" for memory.
	JobDir          string
	JobID           string
	InlineThreshold int64
}

// Init creates the job's checkpoint directory with shared/ and taskowned/,
// as Flink does when a job starts; owner-only (vfs.PrivateDirMode), as every
// snapshot directory.
func (s *Storage) Init() error {
	if s.JobDir == "" {
		return nil
	}
	for _, d := range []string{s.JobDir, filepath.Join(s.JobDir, savepoint.SharedDirName), filepath.Join(s.JobDir, savepoint.TaskOwnedDirName)} {
		if err := s.FS.MkdirAll(d, vfs.PrivateDirMode); err != nil {
			return fmt.Errorf("create checkpoint directory: %w", err)
		}
	}
	return nil
}

// Location prepares where checkpoint id is written. target is the
// savepoint base directory, for savepoints.
func (s *Storage) Location(id int64, typ SnapshotType, target string) (*Location, error) {
	loc := &Location{ID: id, Type: typ}
	if typ.IsSavepoint() {
		dir, err := savepoint.NewSavepointDir(s.FS, target, s.JobID)
		if err != nil {
			return nil, err
		}
		loc.Dir = dir
		return loc, nil
	}
	if s.JobDir == "" {
		return loc, nil
	}
	loc.Dir = savepoint.CheckpointDir(s.JobDir, id)
	if err := s.FS.MkdirAll(loc.Dir, vfs.PrivateDirMode); err != nil {
		return nil, fmt.Errorf("create %s: %w", loc.Dir, err)
	}
	return loc, nil
}

// WriteSubtask writes the state of a task's operators into loc and returns
// each operator's handle. State below the inline threshold (and all state in
// memory locations) is inlined into the metadata instead.
func (s *Storage) WriteSubtask(loc *Location, snaps []OperatorSnapshot) (map[string]savepoint.SubtaskState, error) {
	out := make(map[string]savepoint.SubtaskState, len(snaps))
	for _, snap := range snaps {
		b := savepoint.NewStateFileBuilder()
		st := savepoint.SubtaskState{Index: snap.Subtask}
		stream := &savepoint.StreamStateHandle{}
		if snap.Keyed {
			kh := &savepoint.KeyedStateHandle{Start: snap.Start, End: snap.End, Stream: stream}
			for _, kg := range snap.KeyGroups {
				off, n := b.AddBlock(kg.Data)
				kh.KeyGroups = append(kh.KeyGroups, savepoint.KeyGroupOffset{KeyGroup: kg.KeyGroup, Offset: off, Length: n})
			}
			st.Keyed = kh
		}
		if snap.OperatorState != nil {
			off, n := b.AddBlock(snap.OperatorState)
			st.Operator = &savepoint.StreamStateHandle{Offset: off, Length: n}
		}
		if b.Empty() {
			st.Keyed, st.Operator = nil, nil
			out[snap.UID] = st
			continue
		}
		st.Bytes = b.Size()
		if loc.Dir == "" || b.Size() < s.InlineThreshold {
			stream.Inline = b.Bytes()
		} else {
			name := newFileName()
			if err := vfs.WriteFileSynced(s.FS, filepath.Join(loc.Dir, name), b.Bytes()); err != nil {
				return nil, fmt.Errorf("write state of operator %s subtask %d: %w", snap.UID, snap.Subtask, err)
			}
			stream.Path = name
		}
		if st.Operator != nil {
			st.Operator.Path, st.Operator.Inline = stream.Path, stream.Inline
		}
		out[snap.UID] = st
	}
	return out, nil
}

func newFileName() string {
	b := make([]byte, 16)
	rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Finalize writes the metadata, last and atomically: from then on the
// directory is a complete snapshot.
func (s *Storage) Finalize(loc *Location, md *savepoint.Metadata) error {
	if loc.Dir == "" {
		return nil
	}
	return savepoint.WriteMetadata(s.FS, loc.Dir, md)
}

// Discard deletes a checkpoint: a complete one through its metadata, an
// incomplete one (md nil) with everything in its directory.
func (s *Storage) Discard(loc *Location, md *savepoint.Metadata) error {
	if loc == nil || loc.Dir == "" {
		return nil
	}
	if md == nil {
		return s.FS.RemoveAll(loc.Dir)
	}
	return savepoint.Discard(s.FS, loc.Dir, md)
}

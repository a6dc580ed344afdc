package checkpoint

import (
	"bufio"
	"bytes"
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
	// Encoder, when set, encodes the key groups Start..End on demand
	// (streamed into the file) instead of KeyGroups.
	Encoder KeyGroupEncoder
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

// KeyGroupEncoder encodes one key group's block on demand (a keyed state
// snapshot), so that WriteSubtask streams state into its file instead of
// holding it all in memory first. A key group without state encodes as the
// single byte 0 and is left out.
type KeyGroupEncoder interface {
	EncodeKeyGroup(dst []byte, kg int) []byte
}

// WriteSubtask writes the state of a task's operators into loc and returns
// each operator's handle. State below the inline threshold (and all state in
// memory locations) is inlined into the metadata instead. An operator's key
// groups come from its Encoder when it has one (streamed, one key group at
// a time), else from KeyGroups.
func (s *Storage) WriteSubtask(loc *Location, snaps []OperatorSnapshot) (map[string]savepoint.SubtaskState, error) {
	out := make(map[string]savepoint.SubtaskState, len(snaps))
	var scratch []byte // one key group's encoding, reused
	for _, snap := range snaps {
		f := &spillFile{fs: s.FS, dir: loc.Dir, threshold: s.InlineThreshold}
		var w *savepoint.StateFileWriter
		add := func(payload []byte) (int64, int64, error) {
			if w == nil { // the file starts with its first block
				w = savepoint.NewStateFileWriter(f)
			}
			return w.AddBlock(payload)
		}
		st := savepoint.SubtaskState{Index: snap.Subtask}
		stream := &savepoint.StreamStateHandle{}
		err := func() error {
			defer func() {
				// An encoder that panics leaves no open or partial file.
				if r := recover(); r != nil {
					f.abort()
					panic(r)
				}
			}()
			if snap.Keyed {
				kh := &savepoint.KeyedStateHandle{Start: snap.Start, End: snap.End, Stream: stream}
				addKG := func(kg int, data []byte) error {
					off, n, err := add(data)
					kh.KeyGroups = append(kh.KeyGroups, savepoint.KeyGroupOffset{KeyGroup: kg, Offset: off, Length: n})
					return err
				}
				if snap.Encoder != nil {
					for kg := snap.Start; kg <= snap.End; kg++ {
						scratch = snap.Encoder.EncodeKeyGroup(scratch[:0], kg)
						if len(scratch) == 1 && scratch[0] == 0 {
							continue // no state in this key group
						}
						if err := addKG(kg, scratch); err != nil {
							return err
						}
					}
				}
				for _, kg := range snap.KeyGroups {
					if err := addKG(kg.KeyGroup, kg.Data); err != nil {
						return err
					}
				}
				st.Keyed = kh
			}
			if snap.OperatorState != nil {
				off, n, err := add(snap.OperatorState)
				if err != nil {
					return err
				}
				st.Operator = &savepoint.StreamStateHandle{Offset: off, Length: n}
			}
			return nil
		}()
		if err == nil {
			stream.Inline, stream.Path, err = f.finish()
		}
		if err != nil {
			f.abort()
			return nil, fmt.Errorf("write state of operator %s subtask %d: %w", snap.UID, snap.Subtask, err)
		}
		if w == nil {
			st.Keyed, st.Operator = nil, nil
			out[snap.UID] = st
			continue
		}
		st.Bytes = w.Size()
		if st.Operator != nil {
			st.Operator.Path, st.Operator.Inline = stream.Path, stream.Inline
		}
		out[snap.UID] = st
	}
	return out, nil
}

// spillFile is where one subtask's state file goes: memory while it is
// below the inline threshold (it may end up inlined into _metadata), a file
// in the checkpoint directory, written through a buffer, from the moment
// it reaches it. With no directory (jobmanager storage) it stays in memory.
type spillFile struct {
	fs        vfs.FS
	dir       string
	threshold int64
	mem       bytes.Buffer
	f         vfs.File
	bw        *bufio.Writer
	name      string
}

func (s *spillFile) Write(p []byte) (int, error) {
	if s.bw != nil {
		return s.bw.Write(p)
	}
	s.mem.Write(p)
	if s.dir != "" && int64(s.mem.Len()) >= s.threshold {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (s *spillFile) spill() error {
	s.name = newFileName()
	f, err := s.fs.CreatePerm(filepath.Join(s.dir, s.name), vfs.PrivateFileMode)
	if err != nil {
		return err
	}
	s.f, s.bw = f, bufio.NewWriterSize(f, 1<<20)
	_, err = s.bw.Write(s.mem.Bytes())
	s.mem = bytes.Buffer{}
	return err
}

// finish returns the bytes to inline, or the name of the file written,
// flushed and fsynced.
func (s *spillFile) finish() (inline []byte, path string, err error) {
	if s.f == nil {
		if s.mem.Len() == 0 {
			return nil, "", nil
		}
		return s.mem.Bytes(), "", nil
	}
	if err := s.bw.Flush(); err != nil {
		return nil, "", err
	}
	if err := s.f.Sync(); err != nil {
		return nil, "", err
	}
	err = s.f.Close()
	s.f = nil
	if err != nil {
		s.fs.Remove(filepath.Join(s.dir, s.name))
		return nil, "", err
	}
	return nil, s.name, nil
}

// abort removes a file that could not be written whole.
func (s *spillFile) abort() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if s.name != "" {
		s.fs.Remove(filepath.Join(s.dir, s.name))
	}
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

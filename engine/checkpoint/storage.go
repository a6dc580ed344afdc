package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/changelog"
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
	// Native, when set, is keyed state as an LSM's files (the rocksdb
	// backend's native snapshots), uploaded instead of encoded.
	Native *NativeFiles
	// Changelog, when set, is keyed state as a changelog checkpoint: it
	// waits for the log's tail and returns the materialization (blocks in
	// shared/, nil if none yet), the log, and the state's size.
	Changelog func() (materialized *savepoint.KeyedStateHandle, log *savepoint.ChangelogStateHandle, size int64, err error)
	// OperatorState is the encoded operator state block, nil if none.
	OperatorState []byte
	States        []savepoint.StateDescriptor
	// InputChannels and OutputChannels are an unaligned checkpoint's
	// records in flight (savepoint.SubtaskState's).
	InputChannels, OutputChannels []ChannelState
}

// ChannelState is one channel's records in flight, encoded.
type ChannelState struct {
	Peer    string
	Channel int
	Keyed   bool
	Stamped bool // the records carry their timestamps
	Records int64
	Data    []byte
}

// NativeFiles is a keyed snapshot made of an LSM's files in a local
// directory.
type NativeFiles struct {
	// Wait waits until the files are written.
	Wait func() error
	Dir  string
	// BackendID names the LSM instance; shared files are named after it.
	BackendID string
	// Incremental: SST files go to the job's shared/ directory, and those
	// that Shared says are there already are referred to, not uploaded.
	Incremental bool
	// Shared says where an SST file is shared already, with the checksum
	// recorded when it was uploaded (Path and CRC32C are set).
	Shared func(name string) (savepoint.NativeFile, bool)
	// Uploaded is told, after the upload, where each SST file is shared
	// and its checksum.
	Uploaded func(shared map[string]savepoint.NativeFile)
}

// shareable: SST (and blob) files are immutable and may be shared by
// checkpoints; the manifest and options are per checkpoint.
func shareable(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
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
//
// It has two sides. The job master's (Storage: locations, finalizing,
// the registry of shared files, disposal) runs on the job master's
// goroutine only. The tasks' (StorageWorker, which Worker returns: a
// subtask's snapshot files, a changelog's materializations) runs on task
// and snapshot goroutines, and reads only settings fixed when the job
// starts — so nothing a task does can race with the job master's registry.
type Storage struct {
	StorageWorker
	// Shared counts the references of retained checkpoints to the files
	// of <JobDir>/shared/ and to state changelog files.
	Shared SharedRegistry
	// ChangelogDir is where the job's state changelog files go
	// (<state.changelog.dstl.dfs.base-path>/<jobId>/dstl), "" without one.
	ChangelogDir string
	// ChangelogMemory holds the job's changelog files of memory storage.
	ChangelogMemory *changelog.MemoryStorage
}

// StorageWorker is the tasks' side of checkpoint storage (Flink's
// CheckpointStorageWorkerView): it writes the files of one subtask's
// snapshot and of changelog materializations. Its fields never change once
// the job has started.
type StorageWorker struct {
	FS vfs.FS
	// JobDir is <execution.checkpointing.dir>/<jobId>, or "" for memory.
	JobDir          string
	JobID           string
	InlineThreshold int64
}

// Writer is what a task may do with checkpoint storage.
type Writer interface {
	WriteSubtask(loc *Location, snaps []OperatorSnapshot) (map[string]savepoint.SubtaskState, error)
	WriteMaterialized(start, end int, enc KeyGroupEncoder) (*savepoint.KeyedStateHandle, int64, error)
	UploadMaterialized(id int64, n *NativeFiles) (*savepoint.KeyedStateHandle, int64, error)
}

// Worker returns the tasks' side: a copy of the fixed settings, which
// cannot reach the job master's registry of shared files.
func (s *Storage) Worker() Writer {
	w := s.StorageWorker
	return &w
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
	EncodeKeyGroup(dst []byte, kg int) ([]byte, error)
}

// WriteSubtask writes the state of a task's operators into loc and returns
// each operator's handle. State below the inline threshold (and all state in
// memory locations) is inlined into the metadata instead. An operator's key
// groups come from its Encoder when it has one (streamed, one key group at
// a time), else from KeyGroups.
func (s *StorageWorker) WriteSubtask(loc *Location, snaps []OperatorSnapshot) (map[string]savepoint.SubtaskState, error) {
	out := make(map[string]savepoint.SubtaskState, len(snaps))
	var scratch []byte // one key group's encoding, reused
	for _, snap := range snaps {
		sf := &subtaskFile{f: &spillFile{fs: s.FS, dir: loc.Dir, threshold: s.InlineThreshold},
			stream: &savepoint.StreamStateHandle{}, scratch: scratch}
		st, err := sf.write(s, loc, snap)
		if err != nil {
			return nil, fmt.Errorf("write state of operator %s subtask %d: %w", snap.UID, snap.Subtask, err)
		}
		scratch = sf.scratch
		out[snap.UID] = st
	}
	return out, nil
}

// subtaskFile is the state file of one operator subtask. It starts with
// its first block, so an operator with nothing to write has none, and it is
// inlined into the metadata when it stays below the threshold.
type subtaskFile struct {
	f *spillFile
	w *savepoint.StateFileWriter // nil until the first block
	// stream is where the blocks are, filled in once the file is
	// finished; the handles written before that point to it.
	stream  *savepoint.StreamStateHandle
	scratch []byte
}

func (sf *subtaskFile) add(payload []byte) (int64, int64, error) {
	if sf.w == nil {
		sf.w = savepoint.NewStateFileWriter(sf.f)
	}
	return sf.w.AddBlock(payload)
}

// write writes one operator's state and returns its handle.
func (sf *subtaskFile) write(s *StorageWorker, loc *Location, snap OperatorSnapshot) (savepoint.SubtaskState, error) {
	st := savepoint.SubtaskState{Index: snap.Subtask}
	err := func() error {
		defer func() {
			// An encoder that panics (a bug: a key group encoded twice)
			// leaves no open or partial file.
			if r := recover(); r != nil {
				sf.f.abort()
				panic(r)
			}
		}()
		if err := sf.writeKeyed(s, loc, snap, &st); err != nil {
			return err
		}
		return sf.writeOperatorAndChannels(snap, &st)
	}()
	if err == nil {
		sf.stream.Inline, sf.stream.Path, err = sf.f.finish()
	}
	if err != nil {
		sf.f.abort()
		return st, err
	}
	if sf.w == nil {
		if snap.Native == nil && snap.Changelog == nil {
			st.Keyed = nil
		}
		st.Operator = nil
		return st, nil
	}
	st.Bytes += sf.w.Size()
	if st.Operator != nil {
		st.Operator.Path, st.Operator.Inline = sf.stream.Path, sf.stream.Inline
	}
	for _, hs := range [][]savepoint.ChannelStateHandle{st.InputChannels, st.OutputChannels} {
		for i := range hs {
			hs[i].Stream.Path, hs[i].Stream.Inline = sf.stream.Path, sf.stream.Inline
		}
	}
	return st, nil
}

// writeKeyed writes an operator's keyed state: native files uploaded, a
// changelog's handles, or canonical key-group blocks into the file.
func (sf *subtaskFile) writeKeyed(s *StorageWorker, loc *Location, snap OperatorSnapshot, st *savepoint.SubtaskState) error {
	switch {
	case snap.Native != nil:
		kh, n, err := s.uploadNative(loc, snap.Native)
		if err != nil {
			return err
		}
		st.Keyed, st.Bytes = kh, n
		kh.Start, kh.End = snap.Start, snap.End
	case snap.Changelog != nil:
		mat, log, n, err := snap.Changelog()
		if err != nil {
			return err
		}
		kh := &savepoint.KeyedStateHandle{Start: snap.Start, End: snap.End, Changelog: log}
		if mat != nil {
			kh.KeyGroups, kh.Stream, kh.Native = mat.KeyGroups, mat.Stream, mat.Native
		}
		st.Keyed, st.Bytes = kh, n
	case snap.Keyed:
		kh := &savepoint.KeyedStateHandle{Start: snap.Start, End: snap.End, Stream: sf.stream}
		addKG := func(kg int, data []byte) error {
			off, n, err := sf.add(data)
			kh.KeyGroups = append(kh.KeyGroups, savepoint.KeyGroupOffset{KeyGroup: kg, Offset: off, Length: n})
			return err
		}
		for kg := snap.Start; snap.Encoder != nil && kg <= snap.End; kg++ {
			var err error
			if sf.scratch, err = snap.Encoder.EncodeKeyGroup(sf.scratch[:0], kg); err != nil {
				return fmt.Errorf("key group %d: %w", kg, err)
			}
			if len(sf.scratch) == 1 && sf.scratch[0] == 0 {
				continue // no state in this key group
			}
			if err := addKG(kg, sf.scratch); err != nil {
				return err
			}
		}
		for _, kg := range snap.KeyGroups {
			if err := addKG(kg.KeyGroup, kg.Data); err != nil {
				return err
			}
		}
		st.Keyed = kh
	}
	return nil
}

// writeOperatorAndChannels writes an operator's operator state and the
// in-flight records of its input and output channels into the file.
func (sf *subtaskFile) writeOperatorAndChannels(snap OperatorSnapshot, st *savepoint.SubtaskState) error {
	if snap.OperatorState != nil {
		off, n, err := sf.add(snap.OperatorState)
		if err != nil {
			return err
		}
		st.Operator = &savepoint.StreamStateHandle{Offset: off, Length: n}
	}
	for _, c := range []struct {
		from []ChannelState
		to   *[]savepoint.ChannelStateHandle
	}{{snap.InputChannels, &st.InputChannels}, {snap.OutputChannels, &st.OutputChannels}} {
		for _, cs := range c.from {
			off, n, err := sf.add(cs.Data)
			if err != nil {
				return err
			}
			*c.to = append(*c.to, savepoint.ChannelStateHandle{Peer: cs.Peer, Channel: cs.Channel,
				Keyed: cs.Keyed, Stamped: cs.Stamped, Records: cs.Records, Stream: savepoint.StreamStateHandle{Offset: off, Length: n}})
		}
	}
	return nil
}

// WriteMaterialized writes a changelog backend's materialization — the
// canonical blocks of key groups start..end — into the job's shared/
// directory, where every checkpoint that refers to it finds it as
// ../shared/<file> and the shared-state registry deletes it once none
// does. It returns the blocks' handle and the file's size.
func (s *StorageWorker) WriteMaterialized(start, end int, enc KeyGroupEncoder) (*savepoint.KeyedStateHandle, int64, error) {
	if s.JobDir == "" {
		return nil, 0, errors.New("the changelog state backend materializes into checkpoint storage: set execution.checkpointing.dir")
	}
	// Synced as it goes: a materialization is written beside the job's
	// checkpoints, whose fsyncs would otherwise wait behind one large one.
	f := &spillFile{fs: s.FS, dir: filepath.Join(s.JobDir, savepoint.SharedDirName), syncEvery: 2 << 20}
	w := savepoint.NewStateFileWriter(f)
	kh := &savepoint.KeyedStateHandle{Start: start, End: end}
	var scratch []byte
	err := func() (err error) {
		for kg := start; kg <= end; kg++ {
			if scratch, err = enc.EncodeKeyGroup(scratch[:0], kg); err != nil {
				return fmt.Errorf("key group %d: %w", kg, err)
			}
			if len(scratch) == 1 && scratch[0] == 0 {
				continue
			}
			off, n, err := w.AddBlock(scratch)
			if err != nil {
				return err
			}
			kh.KeyGroups = append(kh.KeyGroups, savepoint.KeyGroupOffset{KeyGroup: kg, Offset: off, Length: n})
		}
		if len(kh.KeyGroups) == 0 {
			return nil
		}
		if f.f == nil {
			err = f.spill() // below any threshold: still a file of its own
		}
		return err
	}()
	var name string
	if err == nil && len(kh.KeyGroups) > 0 {
		_, name, err = f.finish()
	}
	if err != nil {
		f.abort()
		return nil, 0, fmt.Errorf("write materialization: %w", err)
	}
	if len(kh.KeyGroups) == 0 {
		f.abort()
		return nil, 0, nil // no state
	}
	kh.Stream = &savepoint.StreamStateHandle{Path: filepath.Join("..", savepoint.SharedDirName, name)}
	return kh, w.Size(), nil
}

// UploadMaterialized uploads a changelog materialization of the LSM: every
// file into the job's shared/ directory — SST files as
// <store>-<file>.sst, referred to instead of uploaded when the previous
// materialization did (Shared), the others under the materialization's
// number — so that checkpoints, in whatever chk-N, find them as
// ../shared/<file>. It returns the handle and the state's full size.
func (s *StorageWorker) UploadMaterialized(id int64, n *NativeFiles) (*savepoint.KeyedStateHandle, int64, error) {
	if s.JobDir == "" {
		return nil, 0, errors.New("the changelog state backend materializes into checkpoint storage: set execution.checkpointing.dir")
	}
	if err := n.Wait(); err != nil {
		return nil, 0, err
	}
	ents, err := os.ReadDir(n.Dir)
	if err != nil {
		return nil, 0, err
	}
	dir := filepath.Join(s.JobDir, savepoint.SharedDirName)
	h := &savepoint.NativeStateHandle{BackendID: n.BackendID}
	shared := map[string]savepoint.NativeFile{}
	var size int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			return nil, 0, err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		name := e.Name()
		src := filepath.Join(n.Dir, name)
		f := savepoint.NativeFile{Name: name, Size: info.Size()}
		size += f.Size
		if sf, ok := n.Shared(name); ok && shareable(name) {
			f.Path, f.CRC32C = sf.Path, sf.CRC32C
			if err := checksumMissing(&f, src); err != nil {
				return nil, 0, err
			}
		} else {
			file := fmt.Sprintf("%s-m%d-%s", n.BackendID, id, name)
			if shareable(name) {
				file = n.BackendID + "-" + name
			}
			f.Path, f.Added = filepath.Join("..", savepoint.SharedDirName, file), true
			if f.CRC32C, err = s.copyIn(src, dir, file); err != nil {
				return nil, 0, err
			}
		}
		if shareable(name) {
			shared[name] = f
		}
		h.Files = append(h.Files, f)
	}
	if n.Uploaded != nil {
		n.Uploaded(shared)
	}
	return &savepoint.KeyedStateHandle{Native: h}, size, nil
}

// uploadNative writes an LSM's files into loc: SST files of an incremental
// checkpoint into the job's shared/ directory (unless an earlier
// checkpoint did), everything else into the checkpoint's own directory.
// It returns the handle and the state's full size.
func (s *StorageWorker) uploadNative(loc *Location, n *NativeFiles) (*savepoint.KeyedStateHandle, int64, error) {
	if loc.Dir == "" {
		return nil, 0, errors.New("native snapshots need a checkpoint directory (execution.checkpointing.dir)")
	}
	if err := n.Wait(); err != nil {
		return nil, 0, err
	}
	ents, err := os.ReadDir(n.Dir)
	if err != nil {
		return nil, 0, err
	}
	incremental := n.Incremental && s.JobDir != "" && loc.Type.Kind == savepoint.KindCheckpoint
	h := &savepoint.NativeStateHandle{BackendID: n.BackendID}
	shared := map[string]savepoint.NativeFile{}
	var size int64
	for _, e := range ents {
		name := e.Name()
		info, err := e.Info()
		if err != nil {
			return nil, 0, err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		f := savepoint.NativeFile{Name: name, Size: info.Size()}
		size += f.Size
		src := filepath.Join(n.Dir, name)
		switch {
		case incremental && shareable(name):
			if sf, ok := n.Shared(name); ok {
				f.Path, f.CRC32C = sf.Path, sf.CRC32C
				if err := checksumMissing(&f, src); err != nil {
					return nil, 0, err
				}
			} else {
				file := n.BackendID + "-" + name
				f.Path, f.Added = filepath.Join("..", savepoint.SharedDirName, file), true
				if f.CRC32C, err = s.copyIn(src, filepath.Join(s.JobDir, savepoint.SharedDirName), file); err != nil {
					return nil, 0, err
				}
			}
			shared[name] = f
		default:
			f.Path, f.Added = n.BackendID+"-"+name, true
			if f.CRC32C, err = s.copyIn(src, loc.Dir, f.Path); err != nil {
				return nil, 0, err
			}
		}
		h.Files = append(h.Files, f)
	}
	// Every checkpoint says what it shares, a full one nothing: the next
	// incremental checkpoint refers only to the last completed one's files
	// (an older one's may be deleted once the last one subsumes it).
	// Savepoints say nothing: they subsume no checkpoint.
	if loc.Type.Kind == savepoint.KindCheckpoint && n.Uploaded != nil {
		n.Uploaded(shared)
	}
	return &savepoint.KeyedStateHandle{Native: h}, size, nil
}

// copyIn copies a local file into dir as name: written under a temporary
// name, fsynced, then renamed, so that a file under its name is whole. It
// returns the checksum of what it wrote (savepoint.FormatCRC32C), computed
// as it copies.
func (s *StorageWorker) copyIn(src, dir, name string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	tmp := filepath.Join(dir, "."+name+".inprogress")
	out, err := s.FS.CreatePerm(tmp, vfs.PrivateFileMode)
	if err != nil {
		return "", err
	}
	sum := savepoint.NewCRC32C()
	_, err = io.Copy(io.MultiWriter(out, sum), in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.FS.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		s.FS.Remove(tmp)
		return "", fmt.Errorf("upload %s: %w", name, err)
	}
	return savepoint.FormatCRC32C(sum.Sum32()), nil
}

// checksumMissing gives a shared file that was recorded without a
// checksum (by a snapshot written before files had checksums, restored in
// CLAIM mode) the checksum of src, the local copy of the same immutable
// file: a snapshot this build writes records one for every file.
func checksumMissing(f *savepoint.NativeFile, src string) error {
	if f.CRC32C != "" {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	sum := savepoint.NewCRC32C()
	if _, err := io.Copy(sum, in); err != nil {
		return fmt.Errorf("checksum %s: %w", src, err)
	}
	f.CRC32C = savepoint.FormatCRC32C(sum.Sum32())
	return nil
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
	// syncEvery, when set, fsyncs the file after so many bytes.
	syncEvery int64
	unsynced  int64
	// Without syncEvery, the kernel is asked to start writing each
	// writebackEvery bytes to disk as they are written (without waiting),
	// so that the fsync at the end waits for the tail only, not for the
	// whole file (6 MB at 1 M keys: the snapshot is encoded meanwhile).
	written, startedTo int64
}

const writebackEvery = 1 << 20

func (s *spillFile) Write(p []byte) (int, error) {
	if s.bw != nil {
		n, err := s.bw.Write(p)
		s.written += int64(n)
		if s.unsynced += int64(n); err == nil && s.syncEvery > 0 && s.unsynced >= s.syncEvery {
			if err = s.bw.Flush(); err == nil {
				err = s.f.Sync()
			}
			s.unsynced = 0
		} else if err == nil && s.syncEvery == 0 && s.written-int64(s.bw.Buffered())-s.startedTo >= writebackEvery {
			to := s.written - int64(s.bw.Buffered())
			vfs.StartWriteback(s.f, s.startedTo, to-s.startedTo)
			s.startedTo = to
		}
		return n, err
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
	s.written = int64(s.mem.Len())
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

// Register records the shared files a completed checkpoint refers to: one
// of the job's own, or the checkpoint a CLAIM restore made the job's (whose
// files may lie in the old job's shared/ directory beside this one's).
func (s *Storage) Register(id int64, loc *Location, md *savepoint.Metadata) {
	if s.JobDir == "" || loc.Dir == "" {
		return
	}
	var files []string
	for _, f := range md.SharedFiles() {
		if changelog.IsLogPath(f) {
			files = append(files, f) // absolute, under the changelog's base path
			continue
		}
		rel, err := filepath.Rel(s.JobDir, filepath.Join(loc.Dir, f)) // relative to the job directory
		if err != nil {
			continue
		}
		files = append(files, rel)
	}
	s.Shared.Register(id, files)
}

// Release forgets a checkpoint the job no longer retains and deletes the
// shared files no retained checkpoint refers to any more.
func (s *Storage) Release(id int64) error {
	var errs []error
	for _, f := range s.Shared.Unregister(id) {
		if changelog.IsLogPath(f) {
			errs = append(errs, changelog.Remove(s.FS, s.ChangelogMemory, f))
			continue
		}
		errs = append(errs, savepoint.RemoveSharedFile(s.FS, filepath.Join(s.JobDir, f)))
	}
	return errors.Join(errs...)
}

// SweepShared deletes the files of the job's shared/ directory that no
// retained checkpoint refers to: left by checkpoints that failed after
// their upload. Call it only when no checkpoint is being written.
func (s *Storage) SweepShared() error {
	var errs []error
	if s.ChangelogDir != "" {
		errs = append(errs, changelog.Sweep(s.FS, s.ChangelogDir, s.Shared.Referenced))
	}
	if s.JobDir == "" {
		return errors.Join(errs...)
	}
	dir := filepath.Join(s.JobDir, savepoint.SharedDirName)
	ents, err := s.FS.ReadDir(dir)
	if err != nil {
		return errors.Join(errs...) // no shared/ directory: nothing to sweep
	}
	for _, e := range ents {
		if !s.Shared.Referenced(filepath.Join(savepoint.SharedDirName, e.Name())) {
			errs = append(errs, savepoint.RemoveSharedFile(s.FS, filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
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

// KeepOnEnd says whether a job's own retained checkpoints outlive it
// (execution.checkpointing.externalized-checkpoint-retention): kept when
// it failed, unless never externalized; when cancelled, only with
// RETAIN_ON_CANCELLATION; never when it finished.
func KeepOnEnd(failed, canceled bool, r ExternalizedCheckpointRetention) bool {
	switch {
	case failed:
		return r != NoExternalized
	case canceled:
		return r == RetainOnCancellation
	}
	return false
}

// CleanUp tidies the job's checkpoint directory once the job has ended and
// no checkpoint is being written: shared files no retained checkpoint
// refers to (uploads of checkpoints that failed) and chk-N directories
// without _metadata (checkpoints that never completed) go, but not those
// in keep; then the job directory itself, if nothing else is left in it.
func (s *Storage) CleanUp(keep map[string]bool) error {
	if s.JobDir == "" {
		return nil
	}
	err := s.SweepShared()
	ents, rerr := s.FS.ReadDir(s.JobDir)
	if rerr != nil {
		return err
	}
	for _, e := range ents {
		if _, ok := savepoint.ParseCheckpointDirName(e.Name()); !ok {
			continue
		}
		dir := filepath.Join(s.JobDir, e.Name())
		if keep[dir] {
			continue
		}
		if _, serr := s.FS.Stat(filepath.Join(dir, savepoint.MetadataFileName)); errors.Is(serr, fs.ErrNotExist) {
			s.FS.RemoveAll(dir)
		}
	}
	// The job directory goes when nothing is left in it but the empty
	// shared/ and taskowned/ directories.
	for _, sub := range []string{savepoint.SharedDirName, savepoint.TaskOwnedDirName} {
		s.FS.Remove(filepath.Join(s.JobDir, sub)) // fails, harmlessly, if not empty
	}
	s.FS.Remove(s.JobDir)
	if _, serr := s.FS.Stat(s.JobDir); serr == nil {
		for _, sub := range []string{savepoint.SharedDirName, savepoint.TaskOwnedDirName} {
			s.FS.MkdirAll(filepath.Join(s.JobDir, sub), vfs.PrivateDirMode)
		}
	}
	return err
}

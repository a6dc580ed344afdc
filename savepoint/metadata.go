// Package savepoint is gflink's on-disk snapshot format: the _metadata file,
// state files made of checksummed blocks, the operator-state codec, the
// directory layout of checkpoints and savepoints, and disposal. The format
// is documented in FORMAT.md; it is not the runtime: its bytes change only
// with a version bump, and every version ever written stays readable or is
// refused with a clear message.
package savepoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
)

// MetadataFileName is the name of the file that makes a directory a
// snapshot. It is written last, atomically.
const MetadataFileName = "_metadata"

// MetadataVersion is the version of the _metadata format this build writes.
// Readable versions are MinMetadataVersion through MetadataVersion.
// Version 2 added channel state (unaligned checkpoints); a snapshot without
// any is still written as version 1, which older builds read.
const (
	MetadataVersion    = 2
	MinMetadataVersion = 1
)

var (
	metadataMagic = [8]byte{'G', 'F', 'L', 'K', 'M', 'E', 'T', 'A'}
	// flinkMagic starts a JVM Flink _metadata file (0x4960672d).
	flinkMagic = []byte{0x49, 0x60, 0x67, 0x2d}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// Kind is what a snapshot is: a checkpoint or a savepoint, named as in
// Flink's REST API (checkpoint_type).
type Kind string

// Snapshot kinds.
const (
	KindCheckpoint    Kind = "CHECKPOINT"
	KindSavepoint     Kind = "SAVEPOINT"
	KindSyncSavepoint Kind = "SYNC_SAVEPOINT" // taken by stop-with-savepoint
)

// Format is how a snapshot's state is written (Flink's
// SavepointFormatType): CANONICAL, which any backend restores, or NATIVE,
// the backend's own. Checkpoints are NATIVE.
type Format string

// Snapshot formats.
const (
	FormatCanonical Format = "CANONICAL"
	FormatNative    Format = "NATIVE"
)

// Metadata describes one completed checkpoint or savepoint.
type Metadata struct {
	Version      int    `json:"version"`
	JobID        string `json:"jobId"`
	JobName      string `json:"jobName,omitempty"`
	CheckpointID int64  `json:"checkpointId"`
	Kind         Kind   `json:"kind"`
	// Full marks a checkpoint triggered as a full one (checkpoint --full):
	// it refers to no file of an earlier checkpoint, though with an
	// incremental backend its SST files are in the job's shared/ directory
	// for the checkpoints after it to refer to.
	Full   bool   `json:"full,omitempty"`
	Format Format `json:"format"`
	// Backend is the state backend that wrote the state ("hashmap"). A
	// NATIVE snapshot can only be restored into the same backend.
	Backend string `json:"stateBackend"`
	// TriggerTimestamp and CompletionTimestamp are Unix milliseconds.
	TriggerTimestamp    int64           `json:"triggerTimestamp"`
	CompletionTimestamp int64           `json:"completionTimestamp"`
	Operators           []OperatorState `json:"operators"`
}

// OperatorState is the state of one operator (all its subtasks).
type OperatorState struct {
	// UID is the operator's uid, set with .UID(...) or derived from the job
	// graph; OperatorID is the 32-hex id derived from it (as in Flink).
	UID            string `json:"uid"`
	OperatorID     string `json:"operatorId"`
	Name           string `json:"name,omitempty"`
	Parallelism    int    `json:"parallelism"`
	MaxParallelism int    `json:"maxParallelism"`
	// Finished is set when every subtask had reached the end of its input
	// (FLIP-147): a restored finished operator gets no new input.
	Finished bool              `json:"finished,omitempty"`
	States   []StateDescriptor `json:"states,omitempty"`
	Subtasks []SubtaskState    `json:"subtasks"`
}

// StateDescriptor summarises one named state of an operator.
type StateDescriptor struct {
	Name string `json:"name"`
	// Kind is value, list, map, processing-time-timers, event-time-timers,
	// operator-list, operator-union-list or broadcast.
	Kind    string `json:"kind"`
	Type    string `json:"type,omitempty"`
	Entries int64  `json:"entries"`
}

// SubtaskState is what one subtask of an operator snapshotted.
type SubtaskState struct {
	Index    int                `json:"index"`
	Keyed    *KeyedStateHandle  `json:"keyed,omitempty"`
	Operator *StreamStateHandle `json:"operator,omitempty"`
	// InputChannels and OutputChannels are the records in flight of an
	// unaligned checkpoint (version 2): those that had reached this
	// subtask's input (of the head operator of its chain) but were not
	// processed, and those its output (the chain's tail) had not sent.
	InputChannels  []ChannelStateHandle `json:"inputChannelState,omitempty"`
	OutputChannels []ChannelStateHandle `json:"resultSubpartitionState,omitempty"`
	// Bytes is the size of this subtask's state (files and inlined bytes).
	Bytes int64 `json:"bytes"`
}

// ChannelStateHandle is the records in flight on one channel between two
// subtasks, one block of the subtask's state file: each record encoded by
// the built-in serializer of its type, preceded in a keyed exchange by its
// key group and key hash (uvarint, key group in the low 16 bits), by which
// restore routes it, and then, where records carry their event time
// (Stamped), by its timestamp (zigzag varint).
type ChannelStateHandle struct {
	// Peer is the uid of the operator at the channel's other end: the
	// sender for an input channel, the receiver for an output channel.
	Peer string `json:"peer"`
	// Channel is the other end's subtask index; -1 for an input channel's
	// records that were restored from an earlier checkpoint and not yet
	// processed (they are before all other channels' records).
	Channel int               `json:"channel"`
	Keyed   bool              `json:"keyed,omitempty"`
	Stamped bool              `json:"timestamped,omitempty"`
	Records int64             `json:"records"`
	Stream  StreamStateHandle `json:"stream"`
}

// HasChannelState reports whether the snapshot holds records in flight
// (it is an unaligned checkpoint that caught some).
func (m *Metadata) HasChannelState() bool {
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			if len(st.InputChannels) > 0 || len(st.OutputChannels) > 0 {
				return true
			}
		}
	}
	return false
}

// ChannelStateSize is the bytes of records in flight the snapshot holds
// (Flink's persisted_data).
func (m *Metadata) ChannelStateSize() int64 {
	var n int64
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			n += st.ChannelStateSize()
		}
	}
	return n
}

// ChannelStateSize is the bytes of the subtask's records in flight.
func (st *SubtaskState) ChannelStateSize() int64 {
	var n int64
	for _, h := range st.InputChannels {
		n += h.Stream.Length
	}
	for _, h := range st.OutputChannels {
		n += h.Stream.Length
	}
	return n
}

// KeyedStateHandle locates the key groups of one subtask's keyed state:
// canonical blocks in a stream, or (Native) the files of the rocksdb
// backend's LSM.
type KeyedStateHandle struct {
	Start     int                `json:"startKeyGroup"`
	End       int                `json:"endKeyGroup"`
	KeyGroups []KeyGroupOffset   `json:"keyGroups,omitempty"`
	Stream    *StreamStateHandle `json:"stream,omitempty"`
	Native    *NativeStateHandle `json:"native,omitempty"`
	// Changelog is set for a checkpoint of the changelog state backend:
	// KeyGroups and Stream (or Native) are then its latest
	// materialization, in the job's shared/ directory, and Changelog the
	// log written since, replayed on top of it.
	Changelog *ChangelogStateHandle `json:"changelog,omitempty"`
}

// ChangelogStateHandle is the changelog part of one subtask's keyed state.
type ChangelogStateHandle struct {
	// MaterializationID numbers the subtask's materializations; 0: none
	// yet, all the state is in the log.
	MaterializationID int64 `json:"materializationId"`
	MaterializedSize  int64 `json:"materializedSize,omitempty"`
	// MaterializedAdded: this checkpoint is the first to refer to the
	// materialization.
	MaterializedAdded bool            `json:"materializedAdded,omitempty"`
	Log               []ChangelogFile `json:"log,omitempty"`
}

// ChangelogFile is one file of the state changelog, replayed in order:
// an absolute path under state.changelog.dstl.dfs.base-path, or
// memory:<name> (state.changelog.storage: memory, gone with the process).
type ChangelogFile struct {
	Path string `json:"path"`
	// Size is what the checkpoint covers; bytes beyond it are not read.
	Size int64 `json:"size"`
	// Added: written since the previous checkpoint.
	Added bool `json:"added,omitempty"`
	// CRC32C is the checksum of the file's first Size bytes (FormatCRC32C),
	// recorded as it was written; "" in snapshots written before files
	// had checksums, which are checked by size and chunk checksums only.
	CRC32C string `json:"crc32c,omitempty"`
}

// NativeStateHandle lists the files of one subtask's LSM (Pebble)
// checkpoint: opened together, they are the subtask's keyed state.
type NativeStateHandle struct {
	// BackendID names the LSM instance that wrote the files; a file's
	// name is unique within an instance only.
	BackendID string       `json:"backendId"`
	Files     []NativeFile `json:"files"`
}

// NativeFile is one file of an LSM checkpoint, by its name in the LSM's
// directory. Path is relative to the snapshot's directory: the file itself
// in it, or "../shared/<file>" for an SST file of an incremental checkpoint,
// which the job's checkpoints share and the job's shared-state registry
// deletes once no retained checkpoint refers to it.
type NativeFile struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Added is set when this checkpoint wrote the file; unset, it was
	// written by an earlier checkpoint (incremental: "checkpointed size"
	// counts only the added files).
	Added bool `json:"added,omitempty"`
	// CRC32C is the file's checksum (FormatCRC32C), computed as it was
	// uploaded (for a shared file an earlier checkpoint uploaded, the
	// checksum recorded then); "" in snapshots written before files had
	// checksums, which are checked by size only.
	CRC32C string `json:"crc32c,omitempty"`
}

// KeyGroupOffset is one key group's block inside a stream: only key groups
// with state are listed.
type KeyGroupOffset struct {
	KeyGroup int   `json:"keyGroup"`
	Offset   int64 `json:"offset"`
	Length   int64 `json:"length"`
}

// StreamStateHandle is a byte range in a state file, or bytes inlined in
// _metadata (state below execution.checkpointing.data-inline-threshold).
type StreamStateHandle struct {
	// Path is relative to the directory holding _metadata (so savepoints and
	// checkpoints can be moved), e.g. "op-3f2a….state".
	Path   string `json:"path,omitempty"`
	Inline []byte `json:"inline,omitempty"`
	// Offset and Length delimit one block, for operator state; for keyed
	// state the key-group offsets do.
	Offset int64 `json:"offset,omitempty"`
	Length int64 `json:"length,omitempty"`
}

// StateSize is the number of bytes a snapshot's state takes (files plus
// inlined bytes), excluding _metadata itself.
func (m *Metadata) StateSize() int64 {
	var n int64
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			n += st.Bytes
		}
	}
	return n
}

// Operator returns the state of the operator with the given uid.
func (m *Metadata) Operator(uid string) *OperatorState {
	for i := range m.Operators {
		if m.Operators[i].UID == uid {
			return &m.Operators[i]
		}
	}
	return nil
}

// Files returns the state files the snapshot references, relative to its
// directory, without duplicates.
func (m *Metadata) Files() []string {
	seen := map[string]bool{}
	var out []string
	add := func(h *StreamStateHandle) {
		if h != nil && h.Path != "" && !seen[h.Path] {
			seen[h.Path] = true
			out = append(out, h.Path)
		}
	}
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			if st.Keyed != nil {
				add(st.Keyed.Stream)
				if st.Keyed.Native != nil {
					for _, f := range st.Keyed.Native.Files {
						add(&StreamStateHandle{Path: f.Path})
					}
				}
			}
			add(st.Operator)
			for i := range st.InputChannels {
				add(&st.InputChannels[i].Stream)
			}
			for i := range st.OutputChannels {
				add(&st.OutputChannels[i].Stream)
			}
		}
	}
	return out
}

// SharedFiles returns the files in the job's shared/ directory the
// snapshot refers to ("../shared/<file>"), without duplicates.
func (m *Metadata) SharedFiles() []string {
	var out []string
	for _, f := range m.Files() {
		if isSharedRef(f) {
			out = append(out, f)
		}
	}
	return append(out, m.ChangelogFiles()...)
}

// ChangelogFiles returns the state changelog files the snapshot refers to
// (absolute paths, or memory:<name>), without duplicates. Like shared
// files, they are the job's, not the snapshot's.
func (m *Metadata) ChangelogFiles() []string {
	seen := map[string]bool{}
	var out []string
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			if st.Keyed == nil || st.Keyed.Changelog == nil {
				continue
			}
			for _, f := range st.Keyed.Changelog.Log {
				if !seen[f.Path] {
					seen[f.Path] = true
					out = append(out, f.Path)
				}
			}
		}
	}
	return out
}

// CheckpointedSize is what this snapshot wrote itself (Flink's
// checkpointed_size): its state size minus the shared files it took over
// from earlier checkpoints.
func (m *Metadata) CheckpointedSize() int64 {
	n := m.StateSize()
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			if st.Keyed != nil && st.Keyed.Native != nil && st.Keyed.Changelog == nil {
				for _, f := range st.Keyed.Native.Files {
					if !f.Added {
						n -= f.Size
					}
				}
			}
			// A changelog checkpoint's materialization counts whole, once:
			// in the first checkpoint that refers to it.
			if c := changelogOf(st); c != nil {
				if !c.MaterializedAdded {
					n -= c.MaterializedSize
				}
				for _, f := range c.Log {
					if !f.Added {
						n -= f.Size
					}
				}
			}
		}
	}
	return n
}

// EncodeMetadata frames m:
//
//	8 bytes  magic "GFLKMETA"
//	4 bytes  version, big endian
//	8 bytes  payload length, big endian
//	payload  JSON
//	4 bytes  CRC-32C of everything before it, big endian
func EncodeMetadata(m *Metadata) ([]byte, error) {
	if m.Version == 0 {
		// The oldest version that holds what m has, so that older builds
		// read every snapshot they could understand.
		m.Version = 1
		if m.HasChannelState() {
			m.Version = 2
		}
	}
	payload, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	buf := make([]byte, 0, 24+len(payload))
	buf = append(buf, metadataMagic[:]...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(m.Version))
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(payload)))
	buf = append(buf, payload...)
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
	return buf, nil
}

// ErrCorrupt marks a snapshot file that fails its checks.
var ErrCorrupt = errors.New("corrupt snapshot")

// versionError refuses a file of a format version this build cannot read.
// It matches ErrCorrupt (the file cannot be used, like any file failing its
// checks) without appending "corrupt snapshot" to a message that is about a
// version, not damage.
type versionError struct{ msg string }

func (e *versionError) Error() string { return e.msg }
func (e *versionError) Unwrap() error { return ErrCorrupt }

// DecodeMetadata parses a _metadata file; name is used in messages.
func DecodeMetadata(data []byte, name string) (*Metadata, error) {
	if len(data) >= 4 && bytes.Equal(data[:4], flinkMagic) {
		return nil, fmt.Errorf("'%s' is a snapshot written by Apache Flink (JVM); gflink cannot read Flink's binary state: %w", name, ErrCorrupt)
	}
	if len(data) < 24 {
		if bytes.HasPrefix(data, metadataMagic[:min(len(data), len(metadataMagic))]) {
			return nil, fmt.Errorf("snapshot metadata '%s' is truncated (%d bytes, the header alone takes 24): %w", name, len(data), ErrCorrupt)
		}
		return nil, fmt.Errorf("'%s' is not a gflink snapshot metadata file (bad magic number): %w", name, ErrCorrupt)
	}
	if !bytes.Equal(data[:8], metadataMagic[:]) {
		return nil, fmt.Errorf("'%s' is not a gflink snapshot metadata file (bad magic number): %w", name, ErrCorrupt)
	}
	version := int(binary.BigEndian.Uint32(data[8:12]))
	if version < MinMetadataVersion || version > MetadataVersion {
		return nil, &versionError{fmt.Sprintf("snapshot metadata '%s' has format version %d; this gflink reads versions %d to %d", name, version, MinMetadataVersion, MetadataVersion)}
	}
	n := binary.BigEndian.Uint64(data[12:20])
	if uint64(len(data)) != 20+n+4 {
		return nil, fmt.Errorf("snapshot metadata '%s' is truncated or has trailing bytes (%d bytes, expected %d): %w", name, len(data), 20+n+4, ErrCorrupt)
	}
	body := data[:20+n]
	stored := binary.BigEndian.Uint32(data[20+n:])
	if got := crc32.Checksum(body, castagnoli); got != stored {
		return nil, fmt.Errorf("snapshot metadata '%s' failed its checksum (stored %08x, computed %08x): %w", name, stored, got, ErrCorrupt)
	}
	var m Metadata
	if err := json.Unmarshal(data[20:20+n], &m); err != nil {
		return nil, fmt.Errorf("snapshot metadata '%s': %v: %w", name, err, ErrCorrupt)
	}
	if m.Version != version {
		return nil, fmt.Errorf("snapshot metadata '%s': header says version %d, body says %d: %w", name, version, m.Version, ErrCorrupt)
	}
	return &m, nil
}

// ChangelogSummary sums up a checkpoint of the changelog state backend:
// the materializations its subtasks refer to (each subtask numbers its
// own) and the log written since them.
type ChangelogSummary struct {
	MinMaterialization int64 `json:"minMaterializationId"`
	MaxMaterialization int64 `json:"maxMaterializationId"`
	MaterializedBytes  int64 `json:"materializedBytes"`
	LogFiles           int   `json:"logFiles"`
	LogBytes           int64 `json:"logBytes"`
}

// Changelog sums up the changelog part of a checkpoint; nil for a
// snapshot without one.
func (m *Metadata) Changelog() *ChangelogSummary {
	var s *ChangelogSummary
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			c := changelogOf(st)
			if c == nil {
				continue
			}
			if s == nil {
				s = &ChangelogSummary{MinMaterialization: c.MaterializationID, MaxMaterialization: c.MaterializationID}
			}
			s.MinMaterialization = min(s.MinMaterialization, c.MaterializationID)
			s.MaxMaterialization = max(s.MaxMaterialization, c.MaterializationID)
			s.MaterializedBytes += c.MaterializedSize
			s.LogFiles += len(c.Log)
			for _, f := range c.Log {
				s.LogBytes += f.Size
			}
		}
	}
	return s
}

func changelogOf(st SubtaskState) *ChangelogStateHandle {
	if st.Keyed == nil {
		return nil
	}
	return st.Keyed.Changelog
}

package restore

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/changelog"
)

// MaxParallelismBound is the most key groups an operator may have
// (Flink's UPPER_BOUND_MAX_PARALLELISM, 2^15).
const MaxParallelismBound = 1 << 15

// Validate checks that a decoded _metadata describes state gflink could
// have written. Its checksum proves only that the file is the one that was
// written: a _metadata edited or assembled by hand, its checksum
// recomputed, can still describe a snapshot that would restore wrong
// without any error — an operator whose state lists no subtask (it
// restores empty while its sources resume), key groups held twice or by
// no one, a changelog without the log it was written with, a negative
// parallelism. Validate reads nothing but m; VerifyStateFiles, which calls
// it, checks the files. The error names the operator, the subtask and the
// field, and matches savepoint.ErrCorrupt.
func Validate(m *savepoint.Metadata) error {
	if m == nil {
		return fmt.Errorf("no metadata: %w", savepoint.ErrCorrupt)
	}
	if len(m.Operators) == 0 {
		return fmt.Errorf(`"operators" is empty or null, but every snapshot holds the state of the job's sources at least: %w`, savepoint.ErrCorrupt)
	}
	if m.CheckpointID < 0 {
		return fmt.Errorf(`"checkpointId" is %d; checkpoint ids are not negative: %w`, m.CheckpointID, savepoint.ErrCorrupt)
	}
	uids := make(map[string]bool, len(m.Operators))
	for i := range m.Operators {
		op := &m.Operators[i]
		if op.UID == "" {
			return fmt.Errorf("operators[%d] has no uid: %w", i, savepoint.ErrCorrupt)
		}
		if uids[op.UID] {
			return fmt.Errorf("operator %s is listed twice: %w", op.UID, savepoint.ErrCorrupt)
		}
		uids[op.UID] = true
		if err := validateOperator(op); err != nil {
			return err
		}
	}
	return nil
}

// keyedKinds and operatorKinds are the state descriptors' kinds kept in
// keyed handles and in operator state blocks.
var (
	keyedKinds    = map[string]bool{"value": true, "list": true, "map": true, "processing-time-timers": true, "event-time-timers": true}
	operatorKinds = map[string]bool{savepoint.SplitDistribute.String(): true, savepoint.Union.String(): true, savepoint.Broadcast.String(): true}
)

func validateOperator(op *savepoint.OperatorState) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("operator %s: %s: %w", op.UID, fmt.Sprintf(format, args...), savepoint.ErrCorrupt)
	}
	if op.MaxParallelism < 1 || op.MaxParallelism > MaxParallelismBound {
		return fail(`"maxParallelism" is %d; it must be in [1, %d]`, op.MaxParallelism, MaxParallelismBound)
	}
	if op.Parallelism < 1 || op.Parallelism > op.MaxParallelism {
		return fail(`"parallelism" is %d; it must be in [1, %d] (the max parallelism)`, op.Parallelism, op.MaxParallelism)
	}
	var keyedEntries, opEntries int64
	names := map[string]bool{}
	for _, d := range op.States {
		if d.Name == "" {
			return fail("a state has no name")
		}
		if names[d.Name] {
			return fail("state %q is listed twice", d.Name)
		}
		names[d.Name] = true
		if d.Entries < 0 {
			return fail("state %q has %d entries", d.Name, d.Entries)
		}
		if keyedKinds[d.Kind] {
			keyedEntries += d.Entries
		}
		if operatorKinds[d.Kind] {
			opEntries += d.Entries
		}
	}
	if len(op.States) > 0 && len(op.Subtasks) == 0 {
		return fail(`it has states (%s) but "subtasks" is empty: their state would restore empty`, stateNames(op.States))
	}
	indexes := map[int]bool{}
	logs := map[string]int{} // changelog file -> subtask index
	var keyedData, opData bool
	for _, st := range op.Subtasks {
		if st.Index < 0 || st.Index >= op.Parallelism {
			return fail("subtask %d is outside [0, %d) (the parallelism)", st.Index, op.Parallelism)
		}
		if indexes[st.Index] {
			return fail("subtask %d is listed twice", st.Index)
		}
		indexes[st.Index] = true
		if err := validateSubtask(&st, logs); err != nil {
			return fmt.Errorf("operator %s, subtask %d: %w", op.UID, st.Index, err)
		}
		keyedData = keyedData || hasKeyedData(st.Keyed)
		opData = opData || st.Operator != nil
	}
	if keyedEntries > 0 && !keyedData {
		return fail("its keyed states hold %d entries, but no subtask has keyed state: they would restore empty", keyedEntries)
	}
	if opEntries > 0 && !opData {
		return fail("its operator states hold %d entries, but no subtask has operator state: they would restore empty", opEntries)
	}
	return CheckKeyGroups(op)
}

func stateNames(ds []savepoint.StateDescriptor) string {
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += d.Name
	}
	return s
}

// hasKeyedData: the handle refers to keyed state (blocks, files, a
// materialization or a log).
func hasKeyedData(kh *savepoint.KeyedStateHandle) bool {
	return kh != nil && (len(kh.KeyGroups) > 0 || kh.Native != nil || kh.Changelog != nil && len(kh.Changelog.Log) > 0)
}

// validateSubtask checks one subtask's handles, and that its size adds up
// to what they hold: the writer records the sizes of its native files and
// of its materialization and log, plus its own state file's — so a handle
// or a log file dropped from _metadata shows. The own state file's size is
// known only from the file when it is not inlined; VerifyStateFiles checks
// it (see OwnStream). logs gathers the operator's changelog files.
func validateSubtask(st *savepoint.SubtaskState, logs map[string]int) error {
	if st.Bytes < 0 {
		return fmt.Errorf(`"bytes" is %d: %w`, st.Bytes, savepoint.ErrCorrupt)
	}
	var sized int64 // bytes of native files, materialization and log
	if kh := st.Keyed; kh != nil {
		n, err := validateKeyed(kh, st.Index, logs)
		if err != nil {
			return err
		}
		sized += n
	}
	own, err := ownStream(st)
	if err != nil {
		return err
	}
	if st.Operator != nil {
		if err := validateBlock("operator", st.Operator, st.Operator.Offset, st.Operator.Length); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		field string
		hs    []savepoint.ChannelStateHandle
	}{{"inputChannelState", st.InputChannels}, {"resultSubpartitionState", st.OutputChannels}} {
		for i, h := range c.hs {
			field := fmt.Sprintf("%s[%d]", c.field, i)
			if h.Peer == "" {
				return fmt.Errorf("%s has no peer: %w", field, savepoint.ErrCorrupt)
			}
			if h.Channel < -1 {
				return fmt.Errorf("%s: channel %d: %w", field, h.Channel, savepoint.ErrCorrupt)
			}
			if h.Records < 0 {
				return fmt.Errorf("%s has %d records: %w", field, h.Records, savepoint.ErrCorrupt)
			}
			if err := validateBlock(field, &h.Stream, h.Stream.Offset, h.Stream.Length); err != nil {
				return err
			}
		}
	}
	switch {
	case own == nil && st.Bytes != sized:
		return fmt.Errorf(`"bytes" is %d, but its handles hold %d: a handle or file is missing from _metadata: %w`, st.Bytes, sized, savepoint.ErrCorrupt)
	case own != nil && own.Path == "" && st.Bytes != sized+int64(len(own.Inline)):
		return fmt.Errorf(`"bytes" is %d, but its handles hold %d: a handle or file is missing from _metadata: %w`, st.Bytes, sized+int64(len(own.Inline)), savepoint.ErrCorrupt)
	case st.Bytes < sized:
		return fmt.Errorf(`"bytes" is %d, but its handles hold %d: %w`, st.Bytes, sized, savepoint.ErrCorrupt)
	}
	return nil
}

// ownStream returns the subtask's own state file (a path, or inlined
// bytes), which holds its canonical keyed blocks (but for a changelog's:
// those are the materialization's, in shared/), its operator state block
// and its channel state; nil when it has none. Every handle of it must
// name the same file.
func ownStream(st *savepoint.SubtaskState) (*savepoint.StreamStateHandle, error) {
	var own *savepoint.StreamStateHandle
	var ownField string
	add := func(field string, h *savepoint.StreamStateHandle) error {
		if h == nil {
			return nil
		}
		if h.Path == "" && len(h.Inline) == 0 {
			return fmt.Errorf("%s has neither a path nor inline bytes: %w", field, savepoint.ErrCorrupt)
		}
		if own == nil {
			own, ownField = h, field
			return nil
		}
		if h.Path != own.Path || h.Path == "" && string(h.Inline) != string(own.Inline) {
			return fmt.Errorf("%s and %s are in different state files, but a subtask writes one: %w", ownField, field, savepoint.ErrCorrupt)
		}
		return nil
	}
	if kh := st.Keyed; kh != nil && kh.Changelog == nil && len(kh.KeyGroups) > 0 {
		if kh.Stream == nil {
			return nil, fmt.Errorf(`keyed lists %d key groups but has no "stream": %w`, len(kh.KeyGroups), savepoint.ErrCorrupt)
		}
		if err := add("keyed.stream", kh.Stream); err != nil {
			return nil, err
		}
	}
	if err := add("operator", st.Operator); err != nil {
		return nil, err
	}
	for i := range st.InputChannels {
		if err := add(fmt.Sprintf("inputChannelState[%d].stream", i), &st.InputChannels[i].Stream); err != nil {
			return nil, err
		}
	}
	for i := range st.OutputChannels {
		if err := add(fmt.Sprintf("resultSubpartitionState[%d].stream", i), &st.OutputChannels[i].Stream); err != nil {
			return nil, err
		}
	}
	return own, nil
}

// OwnStream is the subtask's own state file (see ownStream) and the bytes
// its native files, materialization and log take: its "bytes" must be
// their sum plus the own file's size. ok is false when the own file is
// inlined or absent (Validate has checked the sum).
func OwnStream(st *savepoint.SubtaskState) (path string, sized int64, ok bool) {
	own, err := ownStream(st)
	if err != nil || own == nil || own.Path == "" {
		return "", 0, false
	}
	if kh := st.Keyed; kh != nil {
		sized, _ = keyedSize(kh)
	}
	return own.Path, sized, true
}

// keyedSize is what the writer counts of a keyed handle in a subtask's
// bytes: its native files, or its materialization and log.
func keyedSize(kh *savepoint.KeyedStateHandle) (int64, bool) {
	var n int64
	if c := kh.Changelog; c != nil {
		n = c.MaterializedSize
		for _, f := range c.Log {
			n += f.Size
		}
		return n, true
	}
	if kh.Native != nil {
		for _, f := range kh.Native.Files {
			n += f.Size
		}
		return n, true
	}
	return 0, false
}

// validateKeyed checks a keyed handle and returns the bytes the writer
// counts of it (keyedSize).
func validateKeyed(kh *savepoint.KeyedStateHandle, index int, logs map[string]int) (int64, error) {
	fail := func(format string, args ...any) (int64, error) {
		return 0, fmt.Errorf("keyed: %s: %w", fmt.Sprintf(format, args...), savepoint.ErrCorrupt)
	}
	if len(kh.KeyGroups) > 0 && kh.Native != nil {
		return fail("it has both key-group blocks and native files")
	}
	if len(kh.KeyGroups) > 0 && kh.Stream == nil {
		return fail(`it lists %d key groups but has no "stream"`, len(kh.KeyGroups))
	}
	for i, kg := range kh.KeyGroups {
		if err := validateBlock(fmt.Sprintf("keyed.keyGroups[%d]", i), kh.Stream, kg.Offset, kg.Length); err != nil {
			return 0, err
		}
	}
	var nativeSize int64
	if n := kh.Native; n != nil {
		if len(n.Files) == 0 {
			return fail(`"native" lists no files`)
		}
		names := map[string]bool{}
		for i, f := range n.Files {
			if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." {
				return fail("native.files[%d]: name %q is not a plain file name", i, f.Name)
			}
			if names[f.Name] {
				return fail("native file %s is listed twice", f.Name)
			}
			names[f.Name] = true
			if _, err := savepoint.NativeFilePath(".", f); err != nil {
				return fail("native file %s: %v", f.Name, err)
			}
			if f.Size < 0 {
				return fail("native file %s has size %d", f.Name, f.Size)
			}
			if _, _, err := savepoint.ParseCRC32C(f.CRC32C); err != nil {
				return fail("native file %s: %v", f.Name, err)
			}
			nativeSize += f.Size
		}
	}
	c := kh.Changelog
	if c == nil {
		size, _ := keyedSize(kh)
		return size, nil
	}
	materialized := len(kh.KeyGroups) > 0 || kh.Native != nil
	switch {
	case c.MaterializationID < 0:
		return fail("changelog.materializationId is %d", c.MaterializationID)
	case c.MaterializedSize < 0:
		return fail("changelog.materializedSize is %d", c.MaterializedSize)
	case c.MaterializationID == 0 && (materialized || c.MaterializedSize > 0):
		return fail("changelog.materializationId is 0 (nothing materialized yet), but it refers to materialized state")
	case c.MaterializationID > 0 && !materialized && c.MaterializedSize > 0:
		return fail("changelog.materializedSize is %d, but it refers to no materialized state", c.MaterializedSize)
	case kh.Native != nil && c.MaterializedSize != nativeSize:
		return fail("changelog.materializedSize is %d, but its native files hold %d", c.MaterializedSize, nativeSize)
	}
	for i, f := range c.Log {
		field := fmt.Sprintf("changelog.log[%d]", i)
		if !changelog.IsLogPath(f.Path) {
			return fail("%s: %q is not a state changelog file (an absolute path in a %s/ directory, or %s<name>)", field, f.Path, changelog.DirName, changelog.MemoryPrefix)
		}
		if f.Size < changelog.HeaderLen {
			return fail("%s: %s: size %d is below a log file's %d-byte header", field, f.Path, f.Size, changelog.HeaderLen)
		}
		if _, _, err := savepoint.ParseCRC32C(f.CRC32C); err != nil {
			return fail("%s: %s: %v", field, f.Path, err)
		}
		if other, dup := logs[f.Path]; dup {
			if other == index {
				return fail("%s: %s is listed twice: its changes would be replayed twice", field, f.Path)
			}
			return fail("%s: %s is also subtask %d's: its changes would be replayed twice", field, f.Path, other)
		}
		logs[f.Path] = index
	}
	size, _ := keyedSize(kh)
	return size, nil
}

// validateBlock checks the bounds of one block of a stream handle: a
// block is its payload and a 4-byte checksum.
func validateBlock(field string, h *savepoint.StreamStateHandle, offset, length int64) error {
	if h == nil {
		return fmt.Errorf("%s has no stream: %w", field, savepoint.ErrCorrupt)
	}
	if offset < 0 || length < 4 {
		return fmt.Errorf("%s: a block at offset %d of %d bytes is impossible (a block is at least its 4-byte checksum): %w", field, offset, length, savepoint.ErrCorrupt)
	}
	if h.Path == "" && len(h.Inline) == 0 {
		return fmt.Errorf("%s has neither a path nor inline bytes: %w", field, savepoint.ErrCorrupt)
	}
	if h.Path != "" {
		if _, err := savepoint.NativeFilePath(".", savepoint.NativeFile{Path: h.Path}); err != nil {
			return fmt.Errorf("%s: state file path '%s' points outside the snapshot: %w", field, h.Path, savepoint.ErrCorrupt)
		}
	}
	if h.Path == "" && (offset > int64(len(h.Inline)) || length > int64(len(h.Inline))-offset) {
		return fmt.Errorf("%s: the block [%d, +%d) is outside its %d inline bytes: %w", field, offset, length, len(h.Inline), savepoint.ErrCorrupt)
	}
	return nil
}

// errInconsistent wraps what Validate found for the callers that name the
// file.
func errInconsistent(file string, err error) error {
	if errors.Is(err, savepoint.ErrCorrupt) {
		return fmt.Errorf("snapshot metadata '%s' describes state that cannot be restored: %w", file, err)
	}
	return err
}

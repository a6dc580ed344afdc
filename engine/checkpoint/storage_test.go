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

// fakeEncoder encodes key group kg as kg copies of byte kg (key group 0
// and every third one have no state: the single byte 0).
type fakeEncoder struct{ calls int }

func (e *fakeEncoder) EncodeKeyGroup(dst []byte, kg int) []byte {
	e.calls++
	if kg%3 == 0 {
		return append(dst, 0)
	}
	for range kg * 100 {
		dst = append(dst, byte(kg))
	}
	return dst
}

// TestWriteSubtaskStreamsKeyGroups: state streamed from an encoder, one key
// group at a time, gives the same handles and file bytes as the same key
// groups handed over whole; below the inline threshold it is inlined, and a
// write that fails midway leaves no file behind.
func TestWriteSubtaskStreamsKeyGroups(t *testing.T) {
	enc := &fakeEncoder{}
	var whole []KeyGroupData
	for kg := 0; kg <= 9; kg++ {
		if b := enc.EncodeKeyGroup(nil, kg); !(len(b) == 1 && b[0] == 0) {
			whole = append(whole, KeyGroupData{KeyGroup: kg, Data: b})
		}
	}
	for _, threshold := range []int64{0, 1 << 20} {
		dir := t.TempDir()
		s := &Storage{FS: vfs.Default, InlineThreshold: threshold}
		loc := &Location{ID: 1, Dir: dir}
		streamed, err := s.WriteSubtask(loc, []OperatorSnapshot{{UID: "op", Keyed: true, Start: 0, End: 9, Encoder: &fakeEncoder{}, OperatorState: []byte("ops")}})
		if err != nil {
			t.Fatal(err)
		}
		materialized, err := s.WriteSubtask(loc, []OperatorSnapshot{{UID: "op", Keyed: true, Start: 0, End: 9, KeyGroups: whole, OperatorState: []byte("ops")}})
		if err != nil {
			t.Fatal(err)
		}
		a, b := streamed["op"], materialized["op"]
		read := func(h *savepoint.StreamStateHandle) []byte {
			if h.Path == "" {
				return h.Inline
			}
			data, err := os.ReadFile(filepath.Join(dir, h.Path))
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		if (a.Keyed.Stream.Path == "") != (threshold > 0) {
			t.Errorf("threshold %d: path %q", threshold, a.Keyed.Stream.Path)
		}
		if string(read(a.Keyed.Stream)) != string(read(b.Keyed.Stream)) || a.Bytes != b.Bytes ||
			len(a.Keyed.KeyGroups) != len(whole) || a.Operator.Offset != b.Operator.Offset {
			t.Errorf("threshold %d: streamed %+v differs from materialized %+v", threshold, a, b)
		}
		for i, kg := range a.Keyed.KeyGroups {
			if kg != b.Keyed.KeyGroups[i] {
				t.Errorf("key group %d: %+v vs %+v", i, kg, b.Keyed.KeyGroups[i])
			}
		}
	}

	// The state file cannot be fsynced: an error, and no file left.
	dir := t.TempDir()
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(1, func(op vfs.Op, _ string) bool { return op == vfs.OpSync })}
	s := &Storage{FS: efs}
	if _, err := s.WriteSubtask(&Location{ID: 1, Dir: dir}, []OperatorSnapshot{{UID: "op", Keyed: true, Start: 0, End: 9, Encoder: &fakeEncoder{}}}); err == nil {
		t.Fatal("a failed fsync must fail the write")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

type panicEncoder struct{}

func (panicEncoder) EncodeKeyGroup(dst []byte, kg int) []byte {
	if kg == 2 {
		panic("a serializer failed")
	}
	for range 100 {
		dst = append(dst, 1)
	}
	return dst
}

// TestWriteSubtaskEncoderPanicLeavesNoFile: an encoder that panics midway
// (a user serializer) leaves neither an open nor a partial state file; the
// panic goes on to the task, which declines the checkpoint.
func TestWriteSubtaskEncoderPanicLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	s := &Storage{FS: vfs.Default}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("the encoder's panic was swallowed")
			}
		}()
		s.WriteSubtask(&Location{ID: 1, Dir: dir}, []OperatorSnapshot{{UID: "op", Keyed: true, Start: 0, End: 3, Encoder: panicEncoder{}}})
	}()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

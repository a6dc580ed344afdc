package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// TestStorageCreatesOwnerOnlyFiles: checkpoint directories and state files
// are 0700/0600, so other local users cannot read a job's state.
func TestStorageCreatesOwnerOnlyFiles(t *testing.T) {
	base := filepath.Join(t.TempDir(), "ck")
	s := &Storage{StorageWorker: StorageWorker{FS: vfs.Default, JobDir: savepoint.JobCheckpointDir(base, "job"), JobID: "job"}}
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

func (e *fakeEncoder) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	e.calls++
	if kg%3 == 0 {
		return append(dst, 0), nil
	}
	for range kg * 100 {
		dst = append(dst, byte(kg))
	}
	return dst, nil
}

// TestWriteSubtaskStreamsKeyGroups: state streamed from an encoder, one key
// group at a time, gives the same handles and file bytes as the same key
// groups handed over whole; below the inline threshold it is inlined, and a
// write that fails midway leaves no file behind.
func TestWriteSubtaskStreamsKeyGroups(t *testing.T) {
	enc := &fakeEncoder{}
	var whole []KeyGroupData
	for kg := 0; kg <= 9; kg++ {
		if b, _ := enc.EncodeKeyGroup(nil, kg); !(len(b) == 1 && b[0] == 0) {
			whole = append(whole, KeyGroupData{KeyGroup: kg, Data: b})
		}
	}
	for _, threshold := range []int64{0, 1 << 20} {
		dir := t.TempDir()
		s := &Storage{StorageWorker: StorageWorker{FS: vfs.Default, InlineThreshold: threshold}}
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
	s := &Storage{StorageWorker: StorageWorker{FS: efs}}
	if _, err := s.WriteSubtask(&Location{ID: 1, Dir: dir}, []OperatorSnapshot{{UID: "op", Keyed: true, Start: 0, End: 9, Encoder: &fakeEncoder{}}}); err == nil {
		t.Fatal("a failed fsync must fail the write")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

type panicEncoder struct{}

func (panicEncoder) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	if kg == 2 {
		panic("a serializer failed")
	}
	for range 100 {
		dst = append(dst, 1)
	}
	return dst, nil
}

// failingEncoder's store fails at key group 2 (a corrupt SST file under an
// LSM snapshot).
type failingEncoder struct{}

func (failingEncoder) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	if kg == 2 {
		return dst, errors.New("pebble: corrupt block in 000012.sst")
	}
	for range 100 {
		dst = append(dst, 1)
	}
	return dst, nil
}

// TestWriteSubtaskEncoderErrorLeavesNoFile: an encoder whose store fails
// midway fails the write with an error naming the operator, the subtask,
// the key group and the store's message, and leaves no file.
func TestWriteSubtaskEncoderErrorLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	s := &Storage{StorageWorker: StorageWorker{FS: vfs.Default}}
	_, err := s.WriteSubtask(&Location{ID: 1, Dir: dir}, []OperatorSnapshot{{UID: "op", Subtask: 1, Keyed: true, Start: 0, End: 3, Encoder: failingEncoder{}}})
	const want = "write state of operator op subtask 1: key group 2: pebble: corrupt block in 000012.sst"
	if err == nil || err.Error() != want {
		t.Errorf("WriteSubtask: %v; want %q", err, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestWriteSubtaskEncoderPanicLeavesNoFile: an encoder that panics midway
// (a user serializer) leaves neither an open nor a partial state file; the
// panic goes on to the task, which declines the checkpoint.
func TestWriteSubtaskEncoderPanicLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	s := &Storage{StorageWorker: StorageWorker{FS: vfs.Default}}
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

// TestUploadNative: an incremental checkpoint uploads SST files to
// shared/ unless an earlier checkpoint did, everything else into its own
// directory; every checkpoint — a full one too, with nothing — says what it
// shares (so that the next incremental one refers only to its files), and
// a savepoint says nothing and shares nothing. Every file is recorded with
// its checksum: computed as it is uploaded, or, for a file an earlier
// checkpoint uploaded, the one recorded then.
func TestUploadNative(t *testing.T) {
	base := filepath.Join(t.TempDir(), "ck")
	s := &Storage{StorageWorker: StorageWorker{FS: vfs.Default, JobDir: savepoint.JobCheckpointDir(base, "job"), JobID: "job"}}
	if err := s.Init(); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	for name, body := range map[string]string{"000004.sst": "old sst", "000009.sst": "new sst", "MANIFEST-000001": "manifest"} {
		if err := os.WriteFile(filepath.Join(local, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write := func(id int64, kind savepoint.Kind, incremental bool) (savepoint.SubtaskState, map[string]savepoint.NativeFile, bool) {
		t.Helper()
		loc, err := s.Location(id, SnapshotType{Kind: kind, Format: savepoint.FormatNative}, filepath.Join(base, "sp"))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]savepoint.NativeFile
		called := false
		n := &NativeFiles{Wait: func() error { return nil }, Dir: local, BackendID: "b1", Incremental: incremental,
			Shared: func(name string) (savepoint.NativeFile, bool) {
				return savepoint.NativeFile{Path: "../shared/b0-000004.sst", CRC32C: "0badf00d"}, name == "000004.sst"
			},
			Uploaded: func(m map[string]savepoint.NativeFile) { got, called = m, true }}
		h, err := s.WriteSubtask(loc, []OperatorSnapshot{{UID: "counter", Keyed: true, Start: 0, End: 127, Native: n}})
		if err != nil {
			t.Fatal(err)
		}
		return h["counter"], got, called
	}
	st, shared, called := write(1, savepoint.KindCheckpoint, true)
	files := map[string]savepoint.NativeFile{}
	for _, f := range st.Keyed.Native.Files {
		files[f.Name] = f
	}
	if f := files["000004.sst"]; f.Path != "../shared/b0-000004.sst" || f.Added || f.CRC32C != "0badf00d" {
		t.Errorf("an SST an earlier checkpoint uploaded: %+v; want referred to, not added, with the checksum recorded at its upload", f)
	}
	if f := files["000009.sst"]; f.Path != "../shared/b1-000009.sst" || !f.Added || f.CRC32C != crcOf("new sst") {
		t.Errorf("a new SST: %+v; want uploaded to shared/ with its checksum %s", f, crcOf("new sst"))
	}
	if shared["000004.sst"].CRC32C != "0badf00d" || shared["000009.sst"].CRC32C != crcOf("new sst") {
		t.Errorf("uploaded %+v; want each shared file with its checksum", shared)
	}
	if _, err := os.Stat(filepath.Join(s.JobDir, "shared", "b1-000009.sst")); err != nil {
		t.Errorf("the new SST is not in shared/: %v", err)
	}
	if f := files["MANIFEST-000001"]; f.Path != "b1-MANIFEST-000001" || !f.Added || f.CRC32C != crcOf("manifest") {
		t.Errorf("the manifest: %+v; want in the checkpoint's own directory, with its checksum", f)
	}
	if !called || len(shared) != 2 {
		t.Errorf("uploaded %v (called %v); want both SSTs", shared, called)
	}
	if st.Bytes != int64(len("old sst")+len("new sst")+len("manifest")) {
		t.Errorf("state size %d; want every file's", st.Bytes)
	}
	// A shared file recorded without a checksum (claimed from a snapshot
	// written before checksums) gets its local copy's: every file of a
	// snapshot this build writes has one.
	loc, err := s.Location(4, SnapshotType{Kind: savepoint.KindCheckpoint, Format: savepoint.FormatNative}, "")
	if err != nil {
		t.Fatal(err)
	}
	n := &NativeFiles{Wait: func() error { return nil }, Dir: local, BackendID: "b1", Incremental: true,
		Shared: func(name string) (savepoint.NativeFile, bool) {
			return savepoint.NativeFile{Path: "../shared/b0-" + name}, true
		},
		Uploaded: func(map[string]savepoint.NativeFile) {}}
	h, err := s.WriteSubtask(loc, []OperatorSnapshot{{UID: "counter", Keyed: true, Start: 0, End: 127, Native: n}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range h["counter"].Keyed.Native.Files {
		body, _ := os.ReadFile(filepath.Join(local, f.Name))
		if f.CRC32C != crcOf(string(body)) {
			t.Errorf("%+v: want the checksum %s of the local copy", f, crcOf(string(body)))
		}
	}
	// A full checkpoint shares nothing, and says so.
	st, shared, called = write(2, savepoint.KindCheckpoint, false)
	if !called || len(shared) != 0 {
		t.Errorf("a full checkpoint told uploaded %v (called %v); want an empty map", shared, called)
	}
	for _, f := range st.Keyed.Native.Files {
		if strings.HasPrefix(f.Path, "..") || !f.Added {
			t.Errorf("a full checkpoint's file %+v is not its own", f)
		}
		if f.CRC32C == "" {
			t.Errorf("a full checkpoint's file %+v has no checksum", f)
		}
	}
	// A savepoint is self-contained and tells nothing.
	st, _, called = write(3, savepoint.KindSavepoint, true)
	if called {
		t.Error("a savepoint told what it shares")
	}
	for _, f := range st.Keyed.Native.Files {
		if strings.HasPrefix(f.Path, "..") {
			t.Errorf("a savepoint refers to %s", f.Path)
		}
	}
}

// crcOf is the checksum _metadata records of a file holding body.
func crcOf(body string) string {
	h := savepoint.NewCRC32C()
	h.Write([]byte(body))
	return savepoint.FormatCRC32C(h.Sum32())
}

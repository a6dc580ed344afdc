package savepoint_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// ---------------------------------------------------------------------------
// helpers

func sampleMetadata() *savepoint.Metadata {
	return &savepoint.Metadata{
		Version:             savepoint.MetadataVersion,
		JobID:               "cca7bc1e257f0dab0123456789abcdef",
		JobName:             "WordCount",
		CheckpointID:        42,
		Kind:                savepoint.KindSavepoint,
		Format:              savepoint.FormatCanonical,
		Backend:             "hashmap",
		TriggerTimestamp:    1700000000000,
		CompletionTimestamp: 1700000000123,
		Operators: []savepoint.OperatorState{
			{
				UID: "source", OperatorID: "0123456789abcdef0123456789abcdef", Name: "Source: numbers",
				Parallelism: 2, MaxParallelism: 128, Finished: true,
				States: []savepoint.StateDescriptor{{Name: "splits", Kind: "operator-list", Entries: 3}},
				Subtasks: []savepoint.SubtaskState{
					{Index: 0, Operator: &savepoint.StreamStateHandle{Path: "a.state", Offset: 12, Length: 9}, Bytes: 21},
					{Index: 1, Operator: &savepoint.StreamStateHandle{Inline: []byte{1, 2, 3, 4, 5}, Length: 5}, Bytes: 5},
				},
			},
			{
				UID: "counter", OperatorID: "fedcba9876543210fedcba9876543210",
				Parallelism: 1, MaxParallelism: 128,
				States: []savepoint.StateDescriptor{{Name: "count", Kind: "value", Type: "int64", Entries: 7}},
				Subtasks: []savepoint.SubtaskState{{
					Index: 0,
					Keyed: &savepoint.KeyedStateHandle{Start: 0, End: 127,
						KeyGroups: []savepoint.KeyGroupOffset{{KeyGroup: 3, Offset: 12, Length: 10}, {KeyGroup: 90, Offset: 22, Length: 8}},
						Stream:    &savepoint.StreamStateHandle{Path: "b.state"}},
					Operator: &savepoint.StreamStateHandle{Path: "b.state", Offset: 30, Length: 6},
					Bytes:    36,
				}},
			},
		},
	}
}

func encodeSample(t *testing.T) []byte {
	t.Helper()
	data, err := savepoint.EncodeMetadata(sampleMetadata())
	if err != nil {
		t.Fatalf("EncodeMetadata: %v", err)
	}
	return data
}

func mustErr(t *testing.T, err error, wantSub ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error containing %q, got nil", wantSub)
	}
	for _, s := range wantSub {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not contain %q", err, s)
		}
	}
}

func mustCorrupt(t *testing.T, err error, wantSub ...string) {
	t.Helper()
	mustErr(t, err, wantSub...)
	if !errors.Is(err, savepoint.ErrCorrupt) {
		t.Fatalf("error %q does not wrap ErrCorrupt", err)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ---------------------------------------------------------------------------
// _metadata framing

func TestMetadataRoundTrip(t *testing.T) {
	want := sampleMetadata()
	data := encodeSample(t)
	if !bytes.HasPrefix(data, []byte("GFLKMETA")) {
		t.Fatalf("encoded metadata does not start with the magic: %q", data[:8])
	}
	if v := binary.BigEndian.Uint32(data[8:12]); v != savepoint.MetadataVersion {
		t.Fatalf("header version %d, want %d", v, savepoint.MetadataVersion)
	}
	if n := binary.BigEndian.Uint64(data[12:20]); n != uint64(len(data)-24) {
		t.Fatalf("header length %d, want %d", n, len(data)-24)
	}
	got, err := savepoint.DecodeMetadata(data, "_metadata")
	if err != nil {
		t.Fatalf("DecodeMetadata: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip mismatch:\n got %+v\nwant %+v", got, want)
	}
	if got.StateSize() != 21+5+36 {
		t.Errorf("StateSize = %d, want 62", got.StateSize())
	}
	if op := got.Operator("counter"); op == nil || op.OperatorID != "fedcba9876543210fedcba9876543210" {
		t.Errorf("Operator(counter) = %+v", op)
	}
	if op := got.Operator("nope"); op != nil {
		t.Errorf("Operator(nope) = %+v, want nil", op)
	}
	if files := got.Files(); !slices.Equal(files, []string{"a.state", "b.state"}) {
		t.Errorf("Files = %q, want [a.state b.state]", files)
	}
}

func TestEncodeMetadataDefaultsVersion(t *testing.T) {
	m := &savepoint.Metadata{JobID: "j", CheckpointID: 1}
	data, err := savepoint.EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := savepoint.DecodeMetadata(data, "x")
	if err != nil {
		t.Fatalf("DecodeMetadata: %v", err)
	}
	if got.Version != 1 {
		t.Fatalf("version %d, want 1: a snapshot without channel state is written as version 1, which older builds read", got.Version)
	}
	m = &savepoint.Metadata{JobID: "j", CheckpointID: 2, Operators: []savepoint.OperatorState{{UID: "u",
		Subtasks: []savepoint.SubtaskState{{InputChannels: []savepoint.ChannelStateHandle{{Peer: "v", Records: 1}}}}}}}
	if data, err = savepoint.EncodeMetadata(m); err != nil {
		t.Fatal(err)
	}
	if got, err = savepoint.DecodeMetadata(data, "x"); err != nil || got.Version != 2 {
		t.Fatalf("with channel state: version %v, %v; want 2", got, err)
	}
}

func TestDecodeMetadataFlippedPayloadByteFailsChecksum(t *testing.T) {
	data := encodeSample(t)
	// Every byte after the 20-byte header: JSON payload and the CRC itself.
	for i := 20; i < len(data); i++ {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(data)
			bad[i] ^= mask
			_, err := savepoint.DecodeMetadata(bad, "/snap/_metadata")
			mustCorrupt(t, err, "'/snap/_metadata'", "failed its checksum")
		}
	}
}

func TestDecodeMetadataFlippedByteAnywhereIsRefused(t *testing.T) {
	data := encodeSample(t)
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x10
		_, err := savepoint.DecodeMetadata(bad, "m")
		if err == nil {
			t.Fatalf("flipping byte %d was not detected", i)
		}
		if !errors.Is(err, savepoint.ErrCorrupt) {
			t.Fatalf("flipping byte %d: error %q does not wrap ErrCorrupt", i, err)
		}
		var want string
		switch {
		case i < 8:
			want = "bad magic number"
		case i < 12:
			want = "format version"
		case i < 20:
			want = "truncated or has trailing bytes"
		default:
			want = "failed its checksum"
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("flipping byte %d: error %q, want it to mention %q", i, err, want)
		}
	}
}

func TestDecodeMetadataTruncated(t *testing.T) {
	data := encodeSample(t)
	for _, n := range []int{0, 1, 4, 7, 8, 11, 12, 19, 20, 23, 24, 25, len(data) / 2, len(data) - 5, len(data) - 4, len(data) - 1} {
		_, err := savepoint.DecodeMetadata(data[:n], "m")
		mustCorrupt(t, err, "truncated")
	}
}

func TestDecodeMetadataTrailingBytes(t *testing.T) {
	data := encodeSample(t)
	for _, extra := range [][]byte{{0}, []byte("garbage"), make([]byte, 4096)} {
		_, err := savepoint.DecodeMetadata(append(bytes.Clone(data), extra...), "m")
		mustCorrupt(t, err, "trailing bytes")
	}
}

func TestDecodeMetadataBadMagic(t *testing.T) {
	data := encodeSample(t)
	cases := map[string][]byte{
		"json":          []byte(`{"version":1,"jobId":"x","checkpointId":1,"operators":[]}`),
		"first byte":    append([]byte{'X'}, data[1:]...),
		"lower case":    append([]byte("gflkmeta"), data[8:]...),
		"state file":    savepoint.NewStateFileBuilder().Bytes(),
		"short garbage": []byte("hello"),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := savepoint.DecodeMetadata(in, "/x/_metadata")
			mustCorrupt(t, err, "'/x/_metadata' is not a gflink snapshot metadata file (bad magic number)")
		})
	}
}

func TestDecodeMetadataFlinkMagic(t *testing.T) {
	for _, in := range [][]byte{
		{0x49, 0x60, 0x67, 0x2d},
		{0x49, 0x60, 0x67, 0x2d, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
	} {
		_, err := savepoint.DecodeMetadata(in, "/sp/_metadata")
		mustCorrupt(t, err, "'/sp/_metadata' is a snapshot written by Apache Flink")
	}
}

func TestDecodeMetadataUnsupportedVersion(t *testing.T) {
	data := encodeSample(t)
	for _, v := range []uint32{0, 3, 5, math.MaxUint32} {
		bad := bytes.Clone(data)
		// Only the header changes: the CRC no longer matches, so a
		// checksum-first reader would complain about the checksum. The
		// version is checked first.
		binary.BigEndian.PutUint32(bad[8:12], v)
		_, err := savepoint.DecodeMetadata(bad, "/sp/_metadata")
		mustCorrupt(t, err, "snapshot metadata '/sp/_metadata' has format version", "this gflink reads versions 1 to 2")
		if strings.Contains(err.Error(), "checksum") || strings.Contains(err.Error(), "corrupt snapshot") {
			t.Fatalf("version error %q talks about damage", err)
		}
	}
}

// frame builds a well-formed _metadata frame around an arbitrary payload.
func frame(version uint32, payload []byte) []byte {
	buf := []byte("GFLKMETA")
	buf = binary.BigEndian.AppendUint32(buf, version)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(payload)))
	buf = append(buf, payload...)
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, crc32.MakeTable(crc32.Castagnoli)))
}

func TestDecodeMetadataBadPayloadWithValidChecksum(t *testing.T) {
	if _, err := savepoint.DecodeMetadata(frame(1, []byte(`{"version":1,"jobId":"j"}`)), "m"); err != nil {
		t.Fatalf("valid hand-built frame refused: %v", err)
	}
	cases := map[string]struct {
		payload string
		want    string
	}{
		"not json":         {"not json", "snapshot metadata 'm'"},
		"empty":            {"", "snapshot metadata 'm'"},
		"wrong type":       {`{"version":"one"}`, "snapshot metadata 'm'"},
		"version mismatch": {`{"version":2,"jobId":"j"}`, "header says version 1, body says 2"},
		"null":             {`null`, "header says version 1, body says 0"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := savepoint.DecodeMetadata(frame(1, []byte(c.payload)), "m")
			mustCorrupt(t, err, c.want)
		})
	}
}

func TestDecodeMetadataRandomDamageNeverPanics(t *testing.T) {
	data := encodeSample(t)
	rapid.Check(t, func(t *rapid.T) {
		bad := bytes.Clone(data)
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			i := rapid.IntRange(0, len(bad)-1).Draw(t, "i")
			bad[i] ^= rapid.ByteRange(1, 255).Draw(t, "mask")
		case 1:
			bad = bad[:rapid.IntRange(0, len(bad)-1).Draw(t, "n")]
		case 2:
			bad = rapid.SliceOf(rapid.Byte()).Draw(t, "random")
		}
		if _, err := savepoint.DecodeMetadata(bad, "m"); err == nil {
			t.Fatalf("damaged metadata accepted")
		} else if !errors.Is(err, savepoint.ErrCorrupt) {
			t.Fatalf("error %q does not wrap ErrCorrupt", err)
		}
	})
}

// ---------------------------------------------------------------------------
// state files

func buildStateFile(payloads ...[]byte) (*savepoint.StateFileBuilder, [][2]int64) {
	b := savepoint.NewStateFileBuilder()
	var locs [][2]int64
	for _, p := range payloads {
		off, n := b.AddBlock(p)
		locs = append(locs, [2]int64{off, n})
	}
	return b, locs
}

var blockPayloads = [][]byte{[]byte("first block"), {}, bytes.Repeat([]byte("x"), 1000), []byte("last")}

func TestStateFileBuilder(t *testing.T) {
	b := savepoint.NewStateFileBuilder()
	if !b.Empty() || b.Size() != 12 {
		t.Fatalf("new builder: Empty=%v Size=%d, want true 12", b.Empty(), b.Size())
	}
	if !bytes.HasPrefix(b.Bytes(), []byte("GFLKSTAT")) {
		t.Fatalf("state file does not start with its magic: %q", b.Bytes())
	}
	off, n := b.AddBlock([]byte("abc"))
	if off != 12 || n != 3+4 {
		t.Fatalf("AddBlock = (%d,%d), want (12,7)", off, n)
	}
	off, n = b.AddBlock(nil)
	if off != 19 || n != 4 {
		t.Fatalf("AddBlock(nil) = (%d,%d), want (19,4)", off, n)
	}
	if b.Empty() || b.Size() != 23 || int64(len(b.Bytes())) != b.Size() {
		t.Fatalf("after two blocks: Empty=%v Size=%d len=%d", b.Empty(), b.Size(), len(b.Bytes()))
	}
}

func writeStateFile(t *testing.T, dir, name string, payloads ...[]byte) [][2]int64 {
	t.Helper()
	b, locs := buildStateFile(payloads...)
	if err := vfs.WriteFileSynced(vfs.Default, filepath.Join(dir, name), b.Bytes()); err != nil {
		t.Fatal(err)
	}
	return locs
}

func TestBlockReaderFile(t *testing.T) {
	dir := t.TempDir()
	locs := writeStateFile(t, dir, "s.state", blockPayloads...)
	br := &savepoint.BlockReader{FS: vfs.Default, Dir: dir}
	defer br.Close()
	h := &savepoint.StreamStateHandle{Path: "s.state"}
	// Read out of order and twice, through the cached file.
	for _, i := range []int{3, 0, 2, 1, 0} {
		got, err := br.Read(h, locs[i][0], locs[i][1])
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if !bytes.Equal(got, blockPayloads[i]) {
			t.Fatalf("block %d = %q, want %q", i, got, blockPayloads[i])
		}
	}
}

func TestBlockReaderFlippedByteFailsOnlyThatBlock(t *testing.T) {
	dir := t.TempDir()
	locs := writeStateFile(t, dir, "s.state", blockPayloads...)
	path := filepath.Join(dir, "s.state")
	orig, _ := os.ReadFile(path)
	for damaged := range blockPayloads {
		// Flip the first and the last byte of the block (payload and CRC).
		for _, pos := range []int64{locs[damaged][0], locs[damaged][0] + locs[damaged][1] - 1} {
			bad := bytes.Clone(orig)
			bad[pos] ^= 0x04
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			br := &savepoint.BlockReader{FS: vfs.Default, Dir: dir}
			for i := range blockPayloads {
				got, err := br.Read(&savepoint.StreamStateHandle{Path: "s.state"}, locs[i][0], locs[i][1])
				if i == damaged {
					mustCorrupt(t, err, path, "failed its checksum")
					continue
				}
				if err != nil || !bytes.Equal(got, blockPayloads[i]) {
					t.Fatalf("damage in block %d broke block %d: %q, %v", damaged, i, got, err)
				}
			}
			br.Close()
		}
	}
}

func TestBlockReaderTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	locs := writeStateFile(t, dir, "s.state", blockPayloads...)
	path := filepath.Join(dir, "s.state")
	last := len(locs) - 1
	cut := locs[last][0] + 2 // in the middle of the last block
	if err := os.Truncate(path, cut); err != nil {
		t.Fatal(err)
	}
	br := &savepoint.BlockReader{FS: vfs.Default, Dir: dir}
	defer br.Close()
	h := &savepoint.StreamStateHandle{Path: "s.state"}
	_, err := br.Read(h, locs[last][0], locs[last][1])
	mustCorrupt(t, err, "state file '"+path+"' is truncated")
	if got, err := br.Read(h, locs[0][0], locs[0][1]); err != nil || !bytes.Equal(got, blockPayloads[0]) {
		t.Fatalf("intact block after truncation: %q, %v", got, err)
	}
	// Lengths and offsets far beyond the file are refused without
	// allocating them.
	for _, c := range [][2]int64{{12, math.MaxInt64}, {math.MaxInt64, 8}, {math.MaxInt64 - 2, 8}, {cut, 4}} {
		_, err := br.Read(h, c[0], c[1])
		mustCorrupt(t, err, "truncated")
	}
	_, err = br.Read(h, -1, 8)
	mustCorrupt(t, err, "negative offset")
	_, err = br.Read(h, 12, 3)
	mustCorrupt(t, err, "too short")
}

func TestBlockReaderNotAStateFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "short"), []byte("GFLK"), 0o644)
	os.WriteFile(filepath.Join(dir, "other"), []byte("this is not a state file at all"), 0o644)
	hdr := savepoint.NewStateFileBuilder().Bytes()
	os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644)
	v2 := bytes.Clone(hdr)
	binary.BigEndian.PutUint32(v2[8:], 2)
	os.WriteFile(filepath.Join(dir, "v2"), append(v2, 1, 2, 3, 4, 5, 6, 7, 8), 0o644)
	br := &savepoint.BlockReader{FS: vfs.Default, Dir: dir}
	defer br.Close()
	for _, name := range []string{"short", "other", "empty"} {
		_, err := br.Read(&savepoint.StreamStateHandle{Path: name}, 12, 4)
		mustCorrupt(t, err, "'"+filepath.Join(dir, name)+"' is not a gflink state file")
	}
	_, err := br.Read(&savepoint.StreamStateHandle{Path: "v2"}, 12, 4)
	mustErr(t, err, "has format version 2; this gflink reads version 1")
	_, err = br.Read(&savepoint.StreamStateHandle{Path: "missing"}, 12, 4)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing state file: %v, want ErrNotExist", err)
	}
	_, err = br.Read(nil, 12, 4)
	mustCorrupt(t, err, "no stream handle")
}

func TestBlockReaderInline(t *testing.T) {
	b, locs := buildStateFile(blockPayloads...)
	h := &savepoint.StreamStateHandle{Inline: b.Bytes()}
	br := &savepoint.BlockReader{FS: vfs.Default, Dir: "/nonexistent"}
	defer br.Close()
	for i, loc := range locs {
		got, err := br.Read(h, loc[0], loc[1])
		if err != nil || !bytes.Equal(got, blockPayloads[i]) {
			t.Fatalf("inline block %d = %q, %v", i, got, err)
		}
	}
	bad := &savepoint.StreamStateHandle{Inline: bytes.Clone(b.Bytes())}
	bad.Inline[locs[2][0]+5] ^= 1
	_, err := br.Read(bad, locs[2][0], locs[2][1])
	mustCorrupt(t, err, "inline state", "failed its checksum")
	if _, err := br.Read(bad, locs[0][0], locs[0][1]); err != nil {
		t.Fatalf("intact inline block: %v", err)
	}
	n := int64(len(h.Inline))
	for _, c := range [][2]int64{{n - 3, 4}, {n, 4}, {0, n + 1}, {math.MaxInt64, 4}, {math.MaxInt64 - 1, 4}, {4, math.MaxInt64}} {
		_, err := br.Read(h, c[0], c[1])
		mustCorrupt(t, err, "is outside")
	}
	_, err = br.Read(h, -4, 8)
	mustCorrupt(t, err, "negative offset")
}

func TestBlockReaderPathsOutsideSnapshot(t *testing.T) {
	root := t.TempDir()
	job := filepath.Join(root, "job")
	chk := filepath.Join(job, "chk-1")
	for _, d := range []string{chk, filepath.Join(job, "shared"), filepath.Join(job, "other"), filepath.Join(chk, "sub")} {
		os.MkdirAll(d, 0o755)
	}
	// Real state files everywhere, so only the path check can refuse.
	for _, d := range []string{root, job, filepath.Join(job, "shared"), filepath.Join(job, "other"), filepath.Join(chk, "sub")} {
		writeStateFile(t, d, "x.state", []byte("payload"))
	}
	br := &savepoint.BlockReader{FS: vfs.Default, Dir: chk}
	defer br.Close()
	for _, rel := range []string{
		"../../etc/passwd",
		"/etc/passwd",
		filepath.Join(job, "shared", "x.state"), // absolute, even into shared
		"../x.state",
		"../../x.state",
		"../other/x.state",
		"../shared/../../x.state",
		"../shared/../other/x.state",
		"../shared",
		"..",
	} {
		_, err := br.Read(&savepoint.StreamStateHandle{Path: rel}, 12, 11)
		mustCorrupt(t, err, "state file path '"+rel+"' points outside the snapshot")
	}
	for _, rel := range []string{"../shared/x.state", "./../shared/x.state", "sub/x.state", "./sub/x.state"} {
		got, err := br.Read(&savepoint.StreamStateHandle{Path: rel}, 12, 11)
		if err != nil || string(got) != "payload" {
			t.Fatalf("%s: %q, %v", rel, got, err)
		}
	}
}

// ---------------------------------------------------------------------------
// operator state codec

func equalStates(a, b []savepoint.OperatorListState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Mode != b[i].Mode || len(a[i].Items) != len(b[i].Items) {
			return false
		}
		for j := range a[i].Items {
			if !bytes.Equal(a[i].Items[j], b[i].Items[j]) {
				return false
			}
		}
	}
	return true
}

func TestOperatorStateRoundTrip(t *testing.T) {
	cases := map[string][]savepoint.OperatorListState{
		"nil":         nil,
		"empty list":  {{Name: "splits", Mode: savepoint.SplitDistribute}},
		"empty items": {{Name: "u", Mode: savepoint.Union, Items: [][]byte{{}, nil, {}}}},
		"empty name":  {{Name: "", Mode: savepoint.Union, Items: [][]byte{[]byte("x")}}},
		"several": {
			{Name: "splits", Mode: savepoint.SplitDistribute, Items: [][]byte{[]byte("p0@17"), []byte("p1@3")}},
			{Name: "committables", Mode: savepoint.Union, Items: [][]byte{bytes.Repeat([]byte{0xff}, 300), {0}}},
			{Name: "splits2", Mode: savepoint.SplitDistribute},
		},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			data := savepoint.EncodeOperatorState(in)
			got, err := savepoint.DecodeOperatorState(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !equalStates(got, in) {
				t.Fatalf("round trip: got %+v, want %+v", got, in)
			}
		})
	}
}

func TestOperatorStateDecodeCopiesItems(t *testing.T) {
	data := savepoint.EncodeOperatorState([]savepoint.OperatorListState{{Name: "s", Mode: savepoint.Union, Items: [][]byte{[]byte("abc")}}})
	got, err := savepoint.DecodeOperatorState(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 0
	}
	if string(got[0].Items[0]) != "abc" {
		t.Fatalf("decoded item aliases the input: %q", got[0].Items[0])
	}
}

func TestOperatorStateCorrupt(t *testing.T) {
	good := savepoint.EncodeOperatorState([]savepoint.OperatorListState{
		{Name: "splits", Mode: savepoint.SplitDistribute, Items: [][]byte{[]byte("a"), []byte("bc")}},
		{Name: "u", Mode: savepoint.Union, Items: [][]byte{[]byte("d")}},
	})
	// Every strict prefix is incomplete.
	for n := 0; n < len(good); n++ {
		_, err := savepoint.DecodeOperatorState(good[:n])
		mustCorrupt(t, err, "operator state")
	}
	_, err := savepoint.DecodeOperatorState(append(bytes.Clone(good), 0))
	mustCorrupt(t, err, "1 trailing bytes")

	huge := binary.AppendUvarint(nil, 1<<62)
	cases := map[string][]byte{
		"mode 0":           {1, 1, 'n', 0, 0},
		"mode 4":           {1, 1, 'n', 4, 0},
		"huge state count": huge,
		"huge count, data": append(bytes.Clone(huge), 1, 'n', 1, 0),
		"huge item count":  append([]byte{1, 1, 'n', 1}, binary.AppendUvarint(nil, math.MaxUint64)...),
		"huge item length": append([]byte{1, 1, 'n', 1, 1}, binary.AppendUvarint(nil, math.MaxUint64)...),
		"huge name length": binary.AppendUvarint([]byte{1}, 1<<40),
		"varint overflow":  {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := savepoint.DecodeOperatorState(in)
			mustCorrupt(t, err)
		})
	}
}

func TestRedistributionString(t *testing.T) {
	for m, want := range map[savepoint.Redistribution]string{
		savepoint.SplitDistribute: "operator-list", savepoint.Union: "operator-union-list", 7: "redistribution(7)",
	} {
		if got := m.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", byte(m), got, want)
		}
	}
}

func genStates() *rapid.Generator[[]savepoint.OperatorListState] {
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) savepoint.OperatorListState {
		return savepoint.OperatorListState{
			Name:  rapid.String().Draw(t, "name"),
			Mode:  rapid.SampledFrom([]savepoint.Redistribution{savepoint.SplitDistribute, savepoint.Union}).Draw(t, "mode"),
			Items: rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 200), 0, 20).Draw(t, "items"),
		}
	}), 0, 6)
}

func TestOperatorStateRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genStates().Draw(t, "states")
		got, err := savepoint.DecodeOperatorState(savepoint.EncodeOperatorState(in))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !equalStates(got, in) {
			t.Fatalf("round trip: got %+v, want %+v", got, in)
		}
	})
}

func TestOperatorStateMutationsNeverPanic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data := savepoint.EncodeOperatorState(genStates().Draw(t, "states"))
		for k := rapid.IntRange(1, 4).Draw(t, "mutations"); k > 0; k-- {
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0: // flip
				if len(data) > 0 {
					data[rapid.IntRange(0, len(data)-1).Draw(t, "i")] ^= rapid.ByteRange(1, 255).Draw(t, "mask")
				}
			case 1: // truncate
				data = data[:rapid.IntRange(0, len(data)).Draw(t, "n")]
			case 2: // insert
				i := rapid.IntRange(0, len(data)).Draw(t, "i")
				data = slices.Insert(data, i, rapid.Byte().Draw(t, "b"))
			case 3: // delete
				if len(data) > 0 {
					i := rapid.IntRange(0, len(data)-1).Draw(t, "i")
					data = slices.Delete(data, i, i+1)
				}
			}
		}
		got, err := savepoint.DecodeOperatorState(data)
		if err != nil {
			if !errors.Is(err, savepoint.ErrCorrupt) {
				t.Fatalf("error %q does not wrap ErrCorrupt", err)
			}
			return
		}
		// Whatever decodes must be valid state that survives a round trip.
		again, err := savepoint.DecodeOperatorState(savepoint.EncodeOperatorState(got))
		if err != nil || !equalStates(again, got) {
			t.Fatalf("decoded state does not round-trip: %v", err)
		}
	})
}

func TestOperatorStateRandomBytesNeverPanic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "data")
		if _, err := savepoint.DecodeOperatorState(data); err != nil && !errors.Is(err, savepoint.ErrCorrupt) {
			t.Fatalf("error %q does not wrap ErrCorrupt", err)
		}
	})
}

// ---------------------------------------------------------------------------
// layout

func TestLocalPath(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, want string }{
		{"/x", "/x"},
		{"/x/y/", "/x/y"},
		{"/x/../y", "/y"},
		{"file:/x", "/x"},
		{"file:/x/savepoint-abc", "/x/savepoint-abc"},
		{"file:///x", "/x"},
		{"file://localhost/x", "/x"},
		{"file://LOCALHOST/x", "/x"},
		{"FILE:/x", "/x"},
		{"file:/tmp/a%20b", "/tmp/a b"},
		{"file:/tmp/100%", "/tmp/100%"},
		{"file:/tmp/a#1", "/tmp/a#1"},
		{"file:///tmp/a?b", "/tmp/a?b"},
		{"/tmp/a:b", "/tmp/a:b"},
		{"rel", filepath.Join(cwd, "rel")},
		{"./a/b", filepath.Join(cwd, "a/b")},
		{"a/b:c", filepath.Join(cwd, "a/b:c")},
		{"file:rel", filepath.Join(cwd, "rel")},
	}
	for _, c := range cases {
		got, err := savepoint.LocalPath(c.in)
		if err != nil {
			t.Errorf("LocalPath(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("LocalPath(%q) = %q, want %q", c.in, got, c.want)
		}
		if !filepath.IsAbs(got) {
			t.Errorf("LocalPath(%q) = %q is not absolute", c.in, got)
		}
	}
}

func TestLocalPathRefused(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "empty checkpoint pointer"},
		{"hdfs://nn/x", "Cannot access file system for checkpoint/savepoint path 'hdfs://nn/x': gflink reads local paths and file: URIs, not the 'hdfs' scheme."},
		{"s3://bucket/sp", "not the 's3' scheme"},
		{"file://otherhost/x", "Checkpoint/savepoint path 'file://otherhost/x' is not a valid file URI: it names host 'otherhost'"},
		{"file:", "Checkpoint/savepoint path 'file:' is not a valid file URI. Either the pointer path is invalid, or the checkpoint was created by a different state backend."},
		{"file://", "is not a valid file URI."},
		{"file://localhost", "is not a valid file URI."},
		{"my dir:x", "Checkpoint/savepoint path 'my dir:x' is not a valid file URI."},
	}
	for _, c := range cases {
		got, err := savepoint.LocalPath(c.in)
		if err == nil {
			t.Errorf("LocalPath(%q) = %q, want an error", c.in, got)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("LocalPath(%q) error %q, want %q", c.in, err, c.want)
		}
	}
	if _, err := savepoint.LocalPath(""); err.Error() != "empty checkpoint pointer" {
		t.Errorf("empty pointer: %q", err)
	}
}

func TestURI(t *testing.T) {
	cwd, _ := os.Getwd()
	cases := []struct{ in, want string }{
		{"/x/savepoint-abc", "file:/x/savepoint-abc"},
		{"/", "file:/"},
		{"/a/b/../c/", "file:/a/c"},
		{"rel/dir", "file:" + filepath.ToSlash(filepath.Join(cwd, "rel/dir"))},
		{"/tmp/a b#c?d", "file:/tmp/a b#c?d"},
		{"/tmp/100%", "file:/tmp/100%"},
		{"/tmp/a%41", "file:/tmp/a%2541"},
	}
	for _, c := range cases {
		got := savepoint.URI(c.in)
		if got != c.want {
			t.Errorf("URI(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.HasPrefix(got, "file://") {
			t.Errorf("URI(%q) = %q has more than one slash", c.in, got)
		}
	}
}

func TestURIRoundTripsThroughLocalPath(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		segs := rapid.SliceOfN(rapid.StringOfN(rapid.SampledFrom([]rune("ab%4F1 #?:-.é")), 1, 8, -1), 1, 5).Draw(t, "segments")
		p := filepath.Clean("/" + strings.Join(segs, "/"))
		got, err := savepoint.LocalPath(savepoint.URI(p))
		if err != nil {
			t.Fatalf("LocalPath(URI(%q)): %v", p, err)
		}
		if got != p {
			t.Fatalf("LocalPath(URI(%q)) = %q (URI %q)", p, got, savepoint.URI(p))
		}
	})
}

func TestParseCheckpointDirName(t *testing.T) {
	ok := map[string]int64{"chk-1": 1, "chk-12": 12, "chk-9223372036854775807": math.MaxInt64}
	for name, want := range ok {
		if n, good := savepoint.ParseCheckpointDirName(name); !good || n != want {
			t.Errorf("ParseCheckpointDirName(%q) = %d, %v; want %d, true", name, n, good, want)
		}
	}
	for _, name := range []string{"chk-", "chk-0", "chk-01", "chk-x", "chk--1", "chk-+1", "chk-1x", "chk-1 ", "chk-9223372036854775808", "chk1", "CHK-1", "savepoint-1", "shared", ""} {
		if n, good := savepoint.ParseCheckpointDirName(name); good {
			t.Errorf("ParseCheckpointDirName(%q) = %d, true; want refusal", name, n)
		}
	}
	if got := savepoint.CheckpointDir("/c/job", 7); got != "/c/job/chk-7" {
		t.Errorf("CheckpointDir = %q", got)
	}
	if got := savepoint.JobCheckpointDir("/c", "abc"); got != "/c/abc" {
		t.Errorf("JobCheckpointDir = %q", got)
	}
}

func TestIsSavepointDirName(t *testing.T) {
	for name, want := range map[string]bool{
		"savepoint-cca7bc-bb1e257f0dab":  true,
		"savepoint-000000-000000000000":  true,
		"savepoint-abc-bb1e257f0dab":     true,
		"savepoint-cca7bc-bb1e257f0da":   false,
		"savepoint-cca7bc-bb1e257f0dabc": false,
		"savepoint-cca7bc-BB1E257F0DAB":  false,
		"savepoint-cca7bcd-bb1e257f0dab": false,
		"savepoint-cca7bc":               false,
		"savepoint-xyzxyz-bb1e257f0dab":  false,
		"chk-1":                          false,
		"sp-cca7bc-bb1e257f0dab":         false,
	} {
		if got := savepoint.IsSavepointDirName(name); got != want {
			t.Errorf("IsSavepointDirName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestNewSavepointDir(t *testing.T) {
	target := filepath.Join(t.TempDir(), "savepoints", "nested")
	re := regexp.MustCompile(`^savepoint-cca7bc-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		dir, err := savepoint.NewSavepointDir(vfs.Default, target, "cca7bc1e257f0dab0123456789abcdef")
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(dir) != target {
			t.Fatalf("savepoint dir %q is not in %q", dir, target)
		}
		base := filepath.Base(dir)
		if !re.MatchString(base) || !savepoint.IsSavepointDirName(base) {
			t.Fatalf("savepoint dir name %q", base)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			t.Fatalf("savepoint dir %q was not created: %v", dir, err)
		}
		if seen[base] {
			t.Fatalf("name %q handed out twice", base)
		}
		seen[base] = true
	}
	dir, err := savepoint.NewSavepointDir(vfs.Default, target, "ab1")
	if err != nil || !regexp.MustCompile(`^savepoint-ab1-[0-9a-f]{12}$`).MatchString(filepath.Base(dir)) {
		t.Fatalf("short job id: %q, %v", dir, err)
	}
}

func TestNewSavepointDirFailures(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	_, err := savepoint.NewSavepointDir(vfs.Default, file, "abcdef12")
	mustErr(t, err, "Failed to create savepoint directory at "+file)

	// Every attempt to create the savepoint directory itself fails: ten
	// attempts, then Flink's message.
	var attempts int
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpMkdirAll && path != root {
			attempts++
			return vfs.ErrInjected
		}
		return nil
	})}
	_, err = savepoint.NewSavepointDir(efs, root, "abcdef12")
	if err == nil || err.Error() != "Failed to create savepoint directory at "+root {
		t.Fatalf("error %v", err)
	}
	if attempts != 10 {
		t.Fatalf("%d attempts, want 10", attempts)
	}
	if names := listDir(t, root); !slices.Equal(names, []string{"file"}) {
		t.Fatalf("left behind: %q", names)
	}
}

// ---------------------------------------------------------------------------
// WriteMetadata / ReadMetadata / Discard

func TestWriteMetadataAtomicSequence(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "snap")
	os.Mkdir(dir, 0o755)
	lfs := &vfs.LogFS{FS: vfs.Default, Trim: root + "/"}
	m := sampleMetadata()
	if err := savepoint.WriteMetadata(lfs, dir, m); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create snap/._metadata.inprogress",
		"write snap/._metadata.inprogress",
		"sync snap/._metadata.inprogress",
		"close snap/._metadata.inprogress",
		"rename snap/._metadata.inprogress snap/_metadata",
		"sync snap",
		"close snap",
	}
	if got := lfs.Log(); !slices.Equal(got, want) {
		t.Fatalf("operations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if names := listDir(t, dir); !slices.Equal(names, []string{"_metadata"}) {
		t.Fatalf("directory holds %q", names)
	}
	got, err := savepoint.ReadMetadata(vfs.Default, filepath.Join(dir, "_metadata"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sampleMetadata()) {
		t.Fatalf("read back %+v", got)
	}
}

func TestWriteMetadataFailures(t *testing.T) {
	root := t.TempDir()
	tmpName := "._metadata.inprogress"
	steps := []struct {
		name string
		op   vfs.Op
		path string // relative to the snapshot dir; "." is the dir
	}{
		{"create", vfs.OpCreate, tmpName},
		{"write", vfs.OpWrite, tmpName},
		{"sync", vfs.OpSync, tmpName},
		{"close", vfs.OpClose, tmpName},
		{"rename", vfs.OpRename, tmpName},
		{"open dir", vfs.OpOpenDir, "."},
		{"sync dir", vfs.OpSync, "."},
		{"close dir", vfs.OpClose, "."},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			dir := filepath.Join(root, "snap", string(rune('a'+i)))
			os.MkdirAll(dir, 0o755)
			writeStateFile(t, dir, "state", []byte("x"))
			target := filepath.Join(dir, s.path)
			var hits int
			efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(1, func(op vfs.Op, path string) bool {
				if op == s.op && path == target {
					hits++
					return true
				}
				return false
			})}
			err := savepoint.WriteMetadata(efs, dir, sampleMetadata())
			if !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("WriteMetadata = %v, want the injected error", err)
			}
			if hits == 0 {
				t.Fatalf("operation %s %s never happened", s.op, s.path)
			}
			mustErr(t, err, "write _metadata")
			if names := listDir(t, dir); !slices.Equal(names, []string{"state"}) {
				t.Fatalf("after a failed %s the directory holds %q", s.name, names)
			}
		})
	}
}

func TestWriteMetadataFailEveryOperation(t *testing.T) {
	root := t.TempDir()
	// Record the operations of a successful write.
	var ops []vfs.Op
	rec := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.InjectorFunc(func(op vfs.Op, path string) error {
		ops = append(ops, op)
		return nil
	})}
	dir0 := filepath.Join(root, "ok")
	os.MkdirAll(dir0, 0o755)
	if err := savepoint.WriteMetadata(rec, dir0, sampleMetadata()); err != nil {
		t.Fatal(err)
	}
	if len(ops) < 8 {
		t.Fatalf("only %d operations: %q", len(ops), ops)
	}
	for n := int64(1); n <= int64(len(ops)); n++ {
		dir := filepath.Join(root, fmt.Sprint(n))
		os.MkdirAll(dir, 0o755)
		efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(n, nil)}
		err := savepoint.WriteMetadata(efs, dir, sampleMetadata())
		names := listDir(t, dir)
		op := ops[n-1]
		if op == vfs.OpStat || op == vfs.OpRemove {
			// Looking before writing, or cleaning up, may fail harmlessly.
			if err != nil || !slices.Equal(names, []string{"_metadata"}) {
				t.Fatalf("failing %s (#%d): %v, directory holds %q", op, n, err, names)
			}
			continue
		}
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("failing %s (#%d): WriteMetadata = %v", op, n, err)
		}
		if len(names) != 0 {
			t.Fatalf("failing %s (#%d): directory holds %q", op, n, names)
		}
	}
}

func TestReadMetadata(t *testing.T) {
	dir := t.TempDir()
	_, err := savepoint.ReadMetadata(vfs.Default, filepath.Join(dir, "_metadata"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	data := encodeSample(t)
	data[30] ^= 1
	os.WriteFile(filepath.Join(dir, "_metadata"), data, 0o644)
	_, err = savepoint.ReadMetadata(vfs.Default, filepath.Join(dir, "_metadata"))
	mustCorrupt(t, err, filepath.Join(dir, "_metadata"), "checksum")
}

// writeSnapshotForDiscard writes a snapshot with two state files, an inlined
// handle and a reference into ../shared.
func writeSnapshotForDiscard(t *testing.T, dir string) *savepoint.Metadata {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	os.MkdirAll(filepath.Join(filepath.Dir(dir), "shared"), 0o755)
	l1 := writeStateFile(t, dir, "one.state", []byte("1"))
	l2 := writeStateFile(t, dir, "two.state", []byte("2"), []byte("22"))
	ls := writeStateFile(t, filepath.Join(filepath.Dir(dir), "shared"), "s.state", []byte("s"))
	b, li := buildStateFile([]byte("inline"))
	m := &savepoint.Metadata{JobID: "j", CheckpointID: 1, Kind: savepoint.KindCheckpoint, Operators: []savepoint.OperatorState{
		{UID: "a", Parallelism: 2, MaxParallelism: 8, Subtasks: []savepoint.SubtaskState{
			{Index: 0, Operator: &savepoint.StreamStateHandle{Path: "one.state", Offset: l1[0][0], Length: l1[0][1]}},
			{Index: 1, Operator: &savepoint.StreamStateHandle{Inline: b.Bytes(), Offset: li[0][0], Length: li[0][1]}},
		}},
		{UID: "b", Parallelism: 1, MaxParallelism: 8, Subtasks: []savepoint.SubtaskState{
			{Index: 0,
				Keyed: &savepoint.KeyedStateHandle{Start: 0, End: 7, Stream: &savepoint.StreamStateHandle{Path: "../shared/s.state"},
					KeyGroups: []savepoint.KeyGroupOffset{{KeyGroup: 1, Offset: ls[0][0], Length: ls[0][1]}}},
				Operator: &savepoint.StreamStateHandle{Path: "two.state", Offset: l2[1][0], Length: l2[1][1]}},
		}},
	}}
	if err := savepoint.WriteMetadata(vfs.Default, dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDiscard(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "job", "chk-1")
	m := writeSnapshotForDiscard(t, dir)
	lfs := &vfs.LogFS{FS: vfs.Default, Trim: root + "/job/"}
	if err := savepoint.Discard(lfs, dir, m); err != nil {
		t.Fatal(err)
	}
	want := []string{"remove chk-1/_metadata", "remove chk-1/one.state", "remove chk-1/two.state", "remove chk-1"}
	if got := lfs.Log(); !slices.Equal(got, want) {
		t.Fatalf("operations %q, want %q", got, want)
	}
	if exists(dir) {
		t.Fatal("snapshot directory still exists")
	}
	if !exists(filepath.Join(root, "job", "shared", "s.state")) {
		t.Fatal("Discard deleted a file in shared/")
	}
	// Discarding again is a no-op.
	if err := savepoint.Discard(vfs.Default, dir, m); err != nil {
		t.Fatalf("second Discard: %v", err)
	}
}

func TestDiscardLeavesUnknownFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "job", "chk-1")
	m := writeSnapshotForDiscard(t, dir)
	os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes"), []byte("mine"), 0o644)
	lfs := &vfs.LogFS{FS: vfs.Default, Trim: root + "/job/"}
	err := savepoint.Discard(lfs, dir, m)
	mustErr(t, err, "directory "+dir+" still holds files gflink did not write (notes, stray.txt), so it was left in place")
	if got := lfs.Log(); len(got) == 0 || got[0] != "remove chk-1/_metadata" {
		t.Fatalf("_metadata was not removed first: %q", got)
	}
	if names := listDir(t, dir); !slices.Equal(names, []string{"notes", "stray.txt"}) {
		t.Fatalf("directory holds %q", names)
	}
	if !exists(filepath.Join(root, "job", "shared", "s.state")) {
		t.Fatal("Discard deleted a file in shared/")
	}
}

func TestDiscardNeverTouchesFilesOutside(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(root, "precious")
	writeStateFile(t, root, "precious", []byte("p"))
	for _, rel := range []string{"../precious", outside, "sub/../../precious"} {
		dir := filepath.Join(root, "sp")
		os.MkdirAll(dir, 0o755)
		writeStateFile(t, dir, "mine.state", []byte("m"))
		m := &savepoint.Metadata{JobID: "j", CheckpointID: 1, Operators: []savepoint.OperatorState{{UID: "a", Subtasks: []savepoint.SubtaskState{
			{Index: 0, Operator: &savepoint.StreamStateHandle{Path: "mine.state"}},
			{Index: 1, Operator: &savepoint.StreamStateHandle{Path: rel}},
		}}}}
		if err := savepoint.WriteMetadata(vfs.Default, dir, m); err != nil {
			t.Fatal(err)
		}
		err := savepoint.Discard(vfs.Default, dir, m)
		mustErr(t, err, "refusing to discard "+dir+": its _metadata names the state file '"+rel+"', which points outside the snapshot directory; nothing was deleted")
		if !exists(outside) {
			t.Fatalf("%s: Discard deleted a file outside the snapshot", rel)
		}
		if names := listDir(t, dir); !slices.Equal(names, []string{"_metadata", "mine.state"}) {
			t.Fatalf("%s: a refused disposal deleted something: directory holds %q", rel, names)
		}
		os.RemoveAll(dir)
	}
}

// TestDiscardRefusesSymlinks: a crafted _metadata whose relative paths
// cross a symbolic link must not delete what the link points at (it once
// deleted a file in another user's 0700 directory).
func TestDiscardRefusesSymlinks(t *testing.T) {
	root := t.TempDir()
	victim := filepath.Join(root, "victim")
	os.MkdirAll(victim, 0o700)
	writeStateFile(t, victim, "secret", []byte("s"))
	for _, tc := range []struct {
		name, rel, why string
		link, target   string
	}{
		{"symlinked directory", "link/secret", "goes through the symbolic link", "link", victim},
		{"symlinked file", "evil.state", "goes through the symbolic link", "evil.state", filepath.Join(victim, "secret")},
		{"directory named as a file", "sub", "is not a regular file", "", ""},
	} {
		dir := filepath.Join(root, "sp")
		os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		writeStateFile(t, dir, "mine.state", []byte("m"))
		if tc.link != "" {
			if err := os.Symlink(tc.target, filepath.Join(dir, tc.link)); err != nil {
				t.Fatal(err)
			}
		}
		m := &savepoint.Metadata{JobID: "j", CheckpointID: 1, Operators: []savepoint.OperatorState{{UID: "a", Subtasks: []savepoint.SubtaskState{
			{Index: 0, Operator: &savepoint.StreamStateHandle{Path: "mine.state"}},
			{Index: 1, Operator: &savepoint.StreamStateHandle{Path: tc.rel}},
		}}}}
		if err := savepoint.WriteMetadata(vfs.Default, dir, m); err != nil {
			t.Fatal(err)
		}
		err := savepoint.Discard(vfs.Default, dir, m)
		mustErr(t, err, "refusing to discard "+dir+": its _metadata names the state file '"+tc.rel+"', which "+tc.why, "nothing was deleted")
		if !exists(filepath.Join(victim, "secret")) {
			t.Fatalf("%s: Discard deleted a file through a symbolic link", tc.name)
		}
		if !exists(filepath.Join(dir, "_metadata")) || !exists(filepath.Join(dir, "mine.state")) {
			t.Fatalf("%s: a refused disposal deleted something", tc.name)
		}
		os.RemoveAll(dir)
	}
	// The snapshot directory itself may not be a link either.
	real := filepath.Join(root, "real")
	m := writeSnapshotForDiscard(t, filepath.Join(real, "chk-1"))
	link := filepath.Join(root, "chk-link")
	os.Symlink(filepath.Join(real, "chk-1"), link)
	mustErr(t, savepoint.Discard(vfs.Default, link, m), "discard "+link+": it is a symbolic link")
	if !exists(filepath.Join(real, "chk-1", "one.state")) {
		t.Fatal("Discard deleted through a symlinked snapshot directory")
	}
}

// TestRemoveBeneathRefusesEscapes: the removal itself cannot be redirected
// out of the snapshot directory, whatever was checked before it.
func TestRemoveBeneathRefusesEscapes(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sp")
	os.MkdirAll(dir, 0o755)
	writeStateFile(t, root, "outside", []byte("o"))
	os.Symlink(root, filepath.Join(dir, "up"))
	for _, rel := range []string{"../outside", "up/outside"} {
		if err := vfs.Default.RemoveBeneath(dir, rel); err == nil {
			t.Errorf("RemoveBeneath(%s) succeeded", rel)
		}
	}
	if !exists(filepath.Join(root, "outside")) {
		t.Fatal("RemoveBeneath deleted a file outside its directory")
	}
}

// TestSnapshotFilesAreOwnerOnly: savepoint directories, state files and
// _metadata are created 0700/0600, so other local users cannot read a
// job's state.
func TestSnapshotFilesAreOwnerOnly(t *testing.T) {
	target := filepath.Join(t.TempDir(), "savepoints")
	dir, err := savepoint.NewSavepointDir(vfs.Default, target, "0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileSynced(vfs.Default, filepath.Join(dir, "state"), []byte("s")); err != nil {
		t.Fatal(err)
	}
	if err := savepoint.WriteMetadata(vfs.Default, dir, &savepoint.Metadata{JobID: "j"}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{target: 0o700, dir: 0o700, filepath.Join(dir, "state"): 0o600, filepath.Join(dir, "_metadata"): 0o600} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s has mode %v; want %v", p, got, want)
		}
	}
}

func TestDiscardWithoutMetadata(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "chk-3")
	os.MkdirAll(dir, 0o755)
	if err := savepoint.WriteMetadata(vfs.Default, dir, &savepoint.Metadata{JobID: "j"}); err != nil {
		t.Fatal(err)
	}
	if err := savepoint.Discard(vfs.Default, dir, nil); err != nil {
		t.Fatal(err)
	}
	if exists(dir) {
		t.Fatal("directory still exists")
	}
}

func TestDiscardMetadataRemoveFails(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "job", "chk-1")
	m := writeSnapshotForDiscard(t, dir)
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(1, func(op vfs.Op, path string) bool { return op == vfs.OpRemove })}
	err := savepoint.Discard(efs, dir, m)
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Discard = %v", err)
	}
	// Nothing else may go while _metadata is still there.
	if names := listDir(t, dir); !slices.Equal(names, []string{"_metadata", "one.state", "two.state"}) {
		t.Fatalf("directory holds %q", names)
	}
}

func TestDiscardDirectoryRemoveFails(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "job", "chk-1")
	m := writeSnapshotForDiscard(t, dir)
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(1, func(op vfs.Op, path string) bool { return op == vfs.OpRemove && path == dir })}
	err := savepoint.Discard(efs, dir, m)
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Discard = %v, want the cause", err)
	}
	mustErr(t, err, "discard "+dir)
	if names := listDir(t, dir); len(names) != 0 {
		t.Fatalf("directory holds %q", names)
	}
}

package state

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// The committed snapshot under testdata/v1 was written by the format-v1
// encoder (savepoint/FORMAT.md, version 1) and is never rewritten by a
// normal test run: decoding it proves old snapshots still restore, and
// encoding the restored state again must give its blocks byte for byte, so
// that encoder and decoder cannot drift together unnoticed. Regenerate it
// only for a new format version, into a new directory:
//
//	go test ./engine/state -run TestFormatV1Snapshot -write-v1
var writeV1 = flag.Bool("write-v1", false, "write testdata/v1 from the current encoder")

const v1Dir = "testdata/v1/savepoint-000000-000000000001"

// v1State is what the committed snapshot holds: value, list and map state
// and processing-time timers over 40 string keys in 8 key groups.
func v1State(t *testing.T, b *KeyedBackend[string]) (ValueState[int64], ListState[string], MapState[string, int64], *Timers[string]) {
	t.Helper()
	count, err := GetValueState(b, "count", SerializerFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	seen, err := GetListState(b, "seen", SerializerFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := GetMapState[string, int64](b, "attrs", SerializerFor[string](), SerializerFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	timers, err := GetTimers(b, KindProcessingTime)
	if err != nil {
		t.Fatal(err)
	}
	return count, seen, attrs, timers
}

func v1Key(i int) string { return fmt.Sprintf("key-%02d-%s", i, string(rune('a'+i%26))) }

func fillV1(t *testing.T, b *KeyedBackend[string]) {
	count, seen, attrs, timers := v1State(t, b)
	for i := range 40 {
		b.SetCurrentKey(v1Key(i))
		count.Update(int64(i * i))
		for j := range i % 4 {
			seen.Add(fmt.Sprintf("s%d", j))
		}
		if i%3 == 0 {
			attrs.Put("len", int64(len(v1Key(i))))
			attrs.Put("i", int64(i))
		}
		if i%5 == 0 {
			timers.Register(int64(1000 + i))
		}
	}
}

func TestFormatV1Snapshot(t *testing.T) {
	const maxPar = 8
	kgr := KeyGroupRange{Start: 0, End: maxPar - 1}
	if *writeV1 {
		b := NewKeyedBackend(SerializerFor[string](), maxPar, kgr)
		fillV1(t, b)
		snap := b.Snapshot()
		fb := savepoint.NewStateFileBuilder()
		kh := &savepoint.KeyedStateHandle{Start: kgr.Start, End: kgr.End, Stream: &savepoint.StreamStateHandle{Path: "state"}}
		for kg := kgr.Start; kg <= kgr.End; kg++ {
			off, n := fb.AddBlock(encodeKG(snap, nil, kg))
			kh.KeyGroups = append(kh.KeyGroups, savepoint.KeyGroupOffset{KeyGroup: kg, Offset: off, Length: n})
		}
		snap.Release()
		if err := os.MkdirAll(v1Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(v1Dir, "state"), fb.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		md := &savepoint.Metadata{Version: savepoint.MetadataVersion, JobID: "00000000000000000000000000000000", JobName: "v1",
			CheckpointID: 1, Kind: savepoint.KindSavepoint, Format: savepoint.FormatCanonical, Backend: "hashmap",
			Operators: []savepoint.OperatorState{{UID: "counter", OperatorID: "0", Parallelism: 1, MaxParallelism: maxPar,
				Subtasks: []savepoint.SubtaskState{{Index: 0, Keyed: kh, Bytes: fb.Size()}}}}}
		if err := savepoint.WriteMetadata(vfs.Default, v1Dir, md); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", v1Dir)
	}

	md, err := savepoint.ReadMetadata(vfs.Default, filepath.Join(v1Dir, savepoint.MetadataFileName))
	if err != nil {
		t.Fatalf("the committed v1 snapshot no longer reads: %v", err)
	}
	if md.Version != 1 {
		t.Fatalf("metadata version %d; the committed snapshot is version 1", md.Version)
	}
	kh := md.Operators[0].Subtasks[0].Keyed
	br := &savepoint.BlockReader{FS: vfs.Default, Dir: v1Dir}
	defer br.Close()
	blocks := map[int][]byte{}
	b := NewKeyedBackend(SerializerFor[string](), maxPar, kgr)
	for _, kg := range kh.KeyGroups {
		block, err := br.Read(kh.Stream, kg.Offset, kg.Length)
		if err != nil {
			t.Fatal(err)
		}
		blocks[kg.KeyGroup] = slices.Clone(block)
		if err := b.RestoreKeyGroup(kg.KeyGroup, block); err != nil {
			t.Fatalf("key group %d of the v1 snapshot: %v", kg.KeyGroup, err)
		}
	}

	// Decoded: the state the snapshot was written from.
	count, seen, attrs, timers := v1State(t, b)
	for i := range 40 {
		b.SetCurrentKey(v1Key(i))
		if v, ok := count.Value(); !ok || v != int64(i*i) {
			t.Errorf("%s: count %d, %v; want %d", v1Key(i), v, ok, i*i)
		}
		if got := seen.Get(); len(got) != i%4 {
			t.Errorf("%s: seen %q", v1Key(i), got)
		}
		if v, ok := attrs.Get("i"); (i%3 == 0) != ok || ok && v != int64(i) {
			t.Errorf("%s: attrs[i] = %d, %v", v1Key(i), v, ok)
		}
	}
	if timers.Len() != 8 {
		t.Errorf("%d timers; want 8", timers.Len())
	}

	// Encoded again: the same bytes, key group by key group.
	snap := b.Snapshot()
	defer snap.Release()
	for kg := kgr.Start; kg <= kgr.End; kg++ {
		if got := encodeKG(snap, nil, kg); string(got) != string(blocks[kg]) {
			t.Errorf("key group %d encodes differently from the committed v1 snapshot:\n got %x\nwant %x", kg, got, blocks[kg])
		}
	}
}

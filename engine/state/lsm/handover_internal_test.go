package lsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSortedHandOverIsInKeyOrder: the hand-over's radix sort by prefix and
// tie-break by the rest of the key order entries as bytes.Compare orders
// their keys, for sizes on both sides of the radix sort's threshold, keys
// sharing long prefixes (one state, few key groups), and keys of 8 bytes
// or fewer that differ only in length.
func TestSortedHandOverIsInKeyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 255, 256, 5000, 70000} {
		var h []handOverEntry
		var data []byte
		var keys [][]byte
		for i := range n {
			var k []byte
			switch i % 3 {
			case 0:
				k = fmt.Appendf(nil, "\x00\x01%c%c%d", byte(rng.IntN(3)), byte(rng.IntN(256)), rng.IntN(1_000_000))
			case 1:
				k = []byte("ab\x00\x00\x00"[:1+rng.IntN(5)])
			default:
				k = make([]byte, rng.IntN(12))
				for j := range k {
					k[j] = byte(rng.IntN(4))
				}
			}
			keys = append(keys, k)
			h = append(h, handOverEntry{prefix: keyPrefix(k), off: uint32(len(data)), klen: uint32(len(k)), kind: opSet})
			data = append(data, k...)
		}
		h = sortHandOver(h, nil, data)
		if len(h) != n {
			t.Fatalf("n=%d: %d entries after sorting", n, len(h))
		}
		var got [][]byte
		for _, e := range h {
			got = append(got, data[e.off:e.off+e.klen])
		}
		slices.SortFunc(keys, bytes.Compare)
		for i := range keys {
			if !bytes.Equal(got[i], keys[i]) {
				t.Fatalf("n=%d: entry %d is %q; want %q", n, i, got[i], keys[i])
			}
		}
	}
}

// The batch a flush applies is allocated at its final length: grown by
// doubling, a million-row batch was copied over and over.
func TestBatchSizeIsTheBatchsLength(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var h []handOverEntry
	var data []byte
	for _, kv := range []struct {
		k, v string
		op   opKind
	}{
		{"a", "1", opSet}, {"b", "", opDelete}, {"c", "xyz", opMerge},
		{strings.Repeat("k", 200), strings.Repeat("v", 20000), opSet}, // two-byte and three-byte lengths
		{"", "", opSet}, {"d", strings.Repeat("w", 127), opMerge}, {"e", strings.Repeat("w", 128), opSet},
	} {
		h = append(h, handOverEntry{prefix: keyPrefix([]byte(kv.k)), off: uint32(len(data)), klen: uint32(len(kv.k)), vlen: uint32(len(kv.v)), kind: kv.op})
		data = append(append(data, kv.k...), kv.v...)
	}
	b, err := sortedBatch(db, h, nil, data)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, want := len(b.Repr()), batchSize(h); got != want {
		t.Errorf("the batch holds %d bytes; batchSize said %d", got, want)
	}
	if b.Count() != uint32(len(h)) {
		t.Errorf("the batch holds %d records, want %d", b.Count(), len(h))
	}
}

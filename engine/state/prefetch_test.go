package state

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPrefetch: Prefetch warms the tables of string-keyed value, list and
// map states and nothing else, takes key groups outside the backend's
// range (a keyed exchange may route to a subtask whose range changed)
// without effect, and follows a table that grew.
func TestPrefetch(t *testing.T) {
	b := NewKeyedBackend(SerializerFor[string](), 128, KeyGroupRange{Start: 32, End: 63})
	v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
	if _, err := GetListState[string](b, "l", SerializerFor[string]()); err != nil {
		t.Fatal(err)
	}
	if _, err := GetMapState[string, int](b, "m", SerializerFor[string](), SerializerFor[int]()); err != nil {
		t.Fatal(err)
	}
	if _, err := GetTimers(b, KindProcessingTime); err != nil {
		t.Fatal(err)
	}
	if len(b.prefetchers) != 3 {
		t.Fatalf("%d prefetchers, want 3 (value, list and map state; not timers)", len(b.prefetchers))
	}
	for _, kg := range []int{-1, 0, 31, 64, 127, 1 << 16} {
		b.Prefetch(kg, 12345) // outside the range: no effect, no panic
	}
	ks := SerializerFor[string]()
	for i := range 10_000 { // tables grow under the prefetches
		k := fmt.Sprint("k", i)
		h := ks.Hash(k)
		kg := KeyGroupForHash(h, 128)
		if kg < 32 || kg > 63 {
			continue
		}
		b.Prefetch(kg, uint32(h>>32))
		b.SetCurrentKeyHashed(k, kg, uint32(h>>32))
		v.Update(int64(i))
	}
	if n := b.states["v"].count(); n == 0 {
		t.Fatal("no key written")
	}

	ints := NewKeyedBackend(SerializerFor[int64](), 128, KeyGroupRange{Start: 0, End: 127})
	if _, err := GetValueState[int64](ints, "v", SerializerFor[int64]()); err != nil {
		t.Fatal(err)
	}
	if len(ints.prefetchers) != 0 {
		t.Fatal("a backend of int64 keys prefetches: its tables are Go maps, not indexed by the exchange's hash")
	}
	ints.Prefetch(3, 1)
}

// BenchmarkPrefetch: read-modify-writes of random keys of a 1 M-key value
// state, as a keyed input does them (the key's bytes in cache, its hash
// passed on), without and with Prefetch some records ahead.
func BenchmarkPrefetch(b *testing.B) {
	be, v, keys := benchBackend(b, benchKeys)
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	ks := make([]string, n)
	hs := make([]uint64, n)
	ends := make([]int, n)
	var buf []byte // the keys' bytes in the order they come, as in a batch
	for i := range ks {
		k := keys[r.IntN(len(keys))]
		hs[i] = stringSerializer{}.Hash(k)
		buf = append(buf, k...)
		ends[i] = len(buf)
	}
	for i := range ks {
		if i > 0 {
			ks[i] = string(buf[ends[i-1]:ends[i]])
		} else {
			ks[i] = string(buf[:ends[0]])
		}
	}
	buf = nil
	for _, ahead := range []int{0, 8} {
		b.Run(fmt.Sprint("ahead=", ahead), func(b *testing.B) {
			i := 0
			for b.Loop() {
				j := i & (n - 1)
				if ahead > 0 {
					h := hs[(j+ahead)&(n-1)]
					be.Prefetch(KeyGroupForHash(h, 128), uint32(h>>32))
				}
				h := hs[j]
				be.SetCurrentKeyHashed(ks[j], KeyGroupForHash(h, 128), uint32(h>>32))
				x, _ := v.Value()
				v.Update(x + 1)
				i++
			}
		})
	}
}

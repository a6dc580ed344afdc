package lsm_test

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/engine/state/lsm"
	"github.com/gflink/gflink/internal/testutil"
)

// readAll reads [nil, nil) of an iterator source into a map.
func readAll(t *rapid.T, newIter func(lower, upper []byte) (state.KVIter, error)) map[string]string {
	it, err := newIter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		got[string(it.Key())] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

func asStrings(m map[string][]byte) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// TestStoreMatchesAMap: whatever mix of sets, merges, deletes, range
// deletions, reads, iterators and snapshots, the store (its row cache a
// few dozen rows, its write buffer flushed every few dozen writes, so that rows are
// evicted, flushed with a flush in flight, and merges read through
// flushed operands) reads as a map that applies the same operations, and
// each snapshot as the map did when it was taken.
func TestStoreMatchesAMap(t *testing.T) {
	var keys []string
	for i := range 40 {
		keys = append(keys, fmt.Sprintf("k%02d", i), fmt.Sprintf("key-longer-than-a-slot-%02d", i))
	}
	value := func(t *rapid.T, label string) []byte {
		if rapid.IntRange(0, 3).Draw(t, label+".long") == 0 {
			return []byte(strings.Repeat(rapid.StringMatching(`[a-z]`).Draw(t, label), 5+rapid.IntRange(0, 30).Draw(t, label+".n")))
		}
		return []byte(rapid.StringMatching(`[a-z0-9]{0,6}`).Draw(t, label))
	}
	dir := t.TempDir()
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		st, err := lsm.Open(lsm.Options{Dir: filepath.Join(dir, fmt.Sprint(n)), BlockCacheSize: 1 << 20,
			WriteBufferSize: int64(rapid.IntRange(4<<10, 8<<10).Draw(t, "writeBuffer")),
			RowCacheSize:    int64(rapid.IntRange(-1, 4<<10).Draw(t, "rowCache"))})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		model := &memStore{m: map[string][]byte{}}
		type snap struct {
			s    state.KVSnapshot
			want map[string]string
		}
		var snaps []snap
		defer func() {
			for _, s := range snaps {
				s.s.Close()
			}
		}()
		for range rapid.IntRange(1, 400).Draw(t, "steps") {
			k := []byte(rapid.SampledFrom(keys).Draw(t, "key"))
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); op {
			case 0, 1:
				v := value(t, "set")
				model.Set(k, v)
				if err := st.Set(k, v); err != nil {
					t.Fatal(err)
				}
			case 2, 3:
				v := value(t, "merge")
				model.Merge(k, v)
				if err := st.Merge(k, v); err != nil {
					t.Fatal(err)
				}
			case 4:
				model.Delete(k)
				if err := st.Delete(k); err != nil {
					t.Fatal(err)
				}
			case 5:
				end := []byte(rapid.SampledFrom(keys).Draw(t, "end"))
				if bytes.Compare(k, end) > 0 {
					k, end = end, k
				}
				model.DeleteRange(k, end)
				if err := st.DeleteRange(k, end); err != nil {
					t.Fatal(err)
				}
			case 6:
				s, err := st.NewSnapshot()
				if err != nil {
					t.Fatal(err)
				}
				snaps = append(snaps, snap{s, asStrings(model.m)})
			case 7:
				if len(snaps) > 0 {
					s := snaps[rapid.IntRange(0, len(snaps)-1).Draw(t, "snap")]
					if got := readAll(t, s.s.NewIter); !maps.Equal(got, s.want) {
						t.Fatalf("snapshot reads %v; want %v", got, s.want)
					}
				}
			case 8:
				if got, want := readAll(t, st.NewIter), asStrings(model.m); !maps.Equal(got, want) {
					t.Fatalf("iterator reads %v; want %v", got, want)
				}
			}
			// Every key reads as in the map after every step.
			for _, k := range slices.Sorted(slices.Values(keys)) {
				got, ok, err := st.Get([]byte(k), nil)
				if err != nil {
					t.Fatal(err)
				}
				want, wok := model.m[k]
				if ok != wok || string(got) != string(want) {
					t.Fatalf("Get(%q) = %q, %v; want %q, %v", k, got, ok, want, wok)
				}
			}
		}
	})
}

// TestRowCacheIsBoundedAndKeepsWhatIsRead: reading more keys than the row
// cache holds keeps it within its budget, and a small set of keys read
// again and again between the others stays cached (the CLOCK hand spares
// rows read since it last passed), so that only the others go to Pebble.
func TestRowCacheIsBoundedAndKeepsWhatIsRead(t *testing.T) {
	st, err := lsm.Open(lsm.Options{Dir: filepath.Join(t.TempDir(), "db"), BlockCacheSize: 1 << 20, WriteBufferSize: 1 << 20, RowCacheSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 50000
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%06d", i) }
	for i := range n {
		if err := st.Set(key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	it, err := st.NewIter(nil, nil) // everything into Pebble, every row clean
	if err != nil {
		t.Fatal(err)
	}
	it.Close()
	hot := 100
	start := st.RowCache().Misses
	for i := range n {
		for _, k := range [][]byte{key(i), key(i % hot)} {
			if v, ok, err := st.Get(k, nil); err != nil || !ok || string(v) != "v" {
				t.Fatalf("Get(%s) = %q, %v, %v", k, v, ok, err)
			}
		}
		if rc := st.RowCache(); rc.Bytes > rc.Limit+200 {
			t.Fatalf("after %d reads the rows take %d bytes; the limit is %d", i, rc.Bytes, rc.Limit)
		}
	}
	rc := st.RowCache()
	if rc.Rows > rc.Limit/64+1 { // rowOverhead
		t.Errorf("%d rows cached within %d bytes", rc.Rows, rc.Limit)
	}
	// Each of the n keys misses once at most; the hot ones, once evicted,
	// come back rarely: at most one miss per pass of the hand over them.
	if misses := rc.Misses - start; misses > n+n/10 {
		t.Errorf("%d of %d reads missed; want about %d (the hot keys cached)", misses, 2*n, n)
	}
}

// TestRowCacheGivesItsRoomBack: with a shared block cache, rows that serve
// few reads (keys read uniformly from many more than they hold) shrink to
// the write buffer alone, and a hot set that fits grows them again.
func TestRowCacheGivesItsRoomBack(t *testing.T) {
	if testutil.RaceEnabled() {
		// One goroutine and 800 K reads: 44 s under the race detector.
		t.Skip("go test ./... runs it")
	}
	cache := lsm.NewCache(64<<20, 1<<20, 1)
	defer cache.Unref()
	st, err := lsm.Open(lsm.Options{Dir: filepath.Join(t.TempDir(), "db"), Cache: cache, WriteBufferSize: 1 << 20, RowCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	full := st.RowCache().Limit
	const n = 200_000
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%07d", i) }
	for i := range n {
		if err := st.Set(key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	it, err := st.NewIter(nil, nil) // as a checkpoint does: every row clean
	if err != nil {
		t.Fatal(err)
	}
	it.Close()
	read := func(i int) {
		if v, ok, err := st.Get(key(i), nil); err != nil || !ok || string(v) != "v" {
			t.Fatalf("Get(%s) = %q, %v, %v", key(i), v, ok, err)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2 * n {
		read(rng.IntN(n))
	}
	shrunk := st.RowCache().Limit
	if shrunk >= full {
		t.Fatalf("rows serving two fifths of the reads keep their room: limit %d of %d", shrunk, full)
	}
	for range 2 * n {
		read(rng.IntN(n / 10)) // 20 K keys: more than the write buffer's rows, fewer than the room's
	}
	if grown := st.RowCache().Limit; grown <= shrunk {
		t.Errorf("rows serving most reads do not take room back: limit %d after %d (full %d)", grown, shrunk, full)
	}
}

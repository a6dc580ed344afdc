package lsm

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gflink/gflink/internal/testutil"
)

// TestBlockCacheKeepsBlocksBesideMemtables: Pebble charges its memtables
// to the block cache, so a store's cache must be sized for both. With a
// cache sized for blocks alone, the memtables left the blocks a third of
// it at Flink's default write-buffer ratio, or nothing at all (a store of
// its own: two 64 MB memtables in an 8 MB cache), and a large state read
// every block from its file.
func TestBlockCacheKeepsBlocksBesideMemtables(t *testing.T) {
	if testutil.RaceEnabled() {
		// A matter of sizes, not of goroutines; smaller, Pebble's sharded
		// cache keeps nothing either way.
		t.Skip("13 s under the race detector; go test ./... runs it")
	}
	// ~3 MB of keys and values: three times the blocks' room.
	blocks, n := int64(1<<20), 50_000
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			o := Options{Dir: filepath.Join(t.TempDir(), "db"), BlockCacheSize: blocks, WriteBufferSize: 4 << 20, RowCacheSize: -1}
			if shared {
				o.Cache = NewCache(blocks, o.WriteBufferSize, 1)
				defer o.Cache.Unref()
			}
			st, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			key := func(i int) []byte { return fmt.Appendf(nil, "key-%08d", i) }
			for i := range n {
				if err := st.Set(key(i), fmt.Appendf(nil, "value-%040d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.wait(); err != nil {
				t.Fatal(err)
			}
			it, err := st.NewIter(nil, nil) // every row in Pebble
			if err != nil {
				t.Fatal(err)
			}
			it.Close()
			if err := st.db.Flush(); err != nil { // and in tables, the memtable empty again
				t.Fatal(err)
			}
			// Fill the memtables again, then read every key from the tables:
			// the blocks read stay cached up to the blocks' room.
			for i := range n / 2 {
				if err := st.Set(key(n+i), fmt.Appendf(nil, "value-%040d", i)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				if _, ok, err := st.Get(key(i), nil); err != nil || !ok {
					t.Fatalf("Get(%s): %v, %v", key(i), ok, err)
				}
			}
			if got := st.db.Metrics().BlockCache.Size; got < blocks*3/4 {
				t.Errorf("the block cache holds %d bytes of blocks after reading three times that; want at least %d of its %d", got, blocks*3/4, blocks)
			}
		})
	}
}

// TestDirtyRowsTakeHalfTheRowsBudget: dirty rows are flushed once they
// fill half of all the rows' budget, not the (smaller) write buffer, and
// no later.
func TestDirtyRowsTakeHalfTheRowsBudget(t *testing.T) {
	st, err := Open(Options{Dir: filepath.Join(t.TempDir(), "db"), WriteBufferSize: 1 << 20, RowCacheSize: 7 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	half := st.rowLimit / 2 // 4 MB
	i := 0
	for st.dirtyBytes < half-(64<<10) && st.gen == 0 {
		if err := st.Set(fmt.Appendf(nil, "key-%08d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
		i++
	}
	if st.gen != 0 {
		t.Fatalf("flushed with %d bytes of dirty rows, a write buffer of %d and %d for all rows", st.dirtyBytes, st.limit, st.rowLimit)
	}
	for range 2048 {
		if err := st.Set(fmt.Appendf(nil, "key-%08d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
		i++
	}
	if st.gen == 0 || st.dirtyBytes >= half {
		t.Fatalf("not flushed: %d bytes of dirty rows, half the rows' budget %d", st.dirtyBytes, half)
	}
}

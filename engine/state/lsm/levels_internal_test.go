package lsm

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestBaseLevelIsBounded: with a state larger than the base level's bound
// (state.backend.rocksdb.compaction.level.max-size-level-base), compactions
// out of L0 go into a level above the bottom one, so that they rewrite
// that level rather than the whole state; with a bound above the state's
// size, every compaction goes into the bottom level.
func TestBaseLevelIsBounded(t *testing.T) {
	for _, tc := range []struct {
		base  int64
		multi bool
	}{{64 << 10, true}, {64 << 20, false}} {
		t.Run(fmt.Sprint(tc.base), func(t *testing.T) {
			st, err := Open(Options{Dir: filepath.Join(t.TempDir(), "db"), WriteBufferSize: 4 << 20, LBaseMaxBytes: tc.base})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			const n = 100_000 // ~500 KB in tables
			for round := range 4 {
				for i := round; i < n; i += 1 + 10*round {
					if err := st.Set(fmt.Appendf(nil, "key-%08d", i*7919%n), fmt.Appendf(nil, "value-%d", round)); err != nil {
						t.Fatal(err)
					}
				}
				res, err := st.Checkpoint(filepath.Join(t.TempDir(), fmt.Sprint("chk-", round)))
				if err != nil {
					t.Fatal(err)
				}
				if err := <-res; err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(time.Minute)
			for idle := 0; idle < 20; idle++ { // no compaction seen in 20 polls
				if st.Compacting() {
					idle = 0
				}
				if time.Now().After(deadline) {
					t.Fatal("Pebble still compacting after a minute")
				}
				time.Sleep(5 * time.Millisecond)
			}
			m := st.db.Metrics()
			var levels []int
			for l := 1; l < len(m.Levels); l++ {
				if m.Levels[l].TableBytesCompacted+m.Levels[l].TableBytesMoved > 0 {
					levels = append(levels, l)
				}
			}
			if multi := len(levels) > 1; multi != tc.multi {
				t.Errorf("with a base level of at most %d bytes, compactions wrote into levels %v (want more than one: %v)", tc.base, levels, tc.multi)
			}
		})
	}
}

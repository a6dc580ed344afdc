package lsm_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/gflink/gflink/engine/state"
)

// TestSweepMapEntry sweeps one user key out of a map state on every
// backend, with the hashmap's tables in place and, with a snapshot open,
// through their layers: the callback sees each holder once with its value,
// the entry goes and nothing else does, and the open snapshot still reads
// the state from before.
func TestSweepMapEntry(t *testing.T) {
	r := state.KeyGroupRange{Start: 0, End: maxPar - 1}
	for _, be := range everyBackend() {
		for _, pinned := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/snapshot-open=%v", be.name, pinned), func(t *testing.T) {
				h := declare(t, be.open(t))
				b := h.b
				model := map[string]map[string]int64{}
				rnd := rand.New(rand.NewPCG(3, 4))
				for i := range 6000 {
					k := fmt.Sprint("key-", rnd.IntN(1500))
					if i%5 == 0 {
						k = fmt.Sprint("a-much-longer-key-than-a-slot-holds-", rnd.IntN(300))
					}
					b.SetCurrentKey(k)
					uk := fmt.Sprint(rnd.IntN(3))
					if rnd.IntN(6) == 0 {
						h.m.Remove(uk)
						if delete(model[k], uk); len(model[k]) == 0 {
							delete(model, k)
						}
						continue
					}
					h.m.Put(uk, int64(i))
					if model[k] == nil {
						model[k] = map[string]int64{}
					}
					model[k][uk] = int64(i)
				}
				var snap state.Snapshot
				pre := map[string]map[string]int64{}
				if pinned {
					var err error
					if snap, err = b.TakeSnapshot(state.SnapshotOptions{}); err != nil {
						t.Fatal(err)
					}
					defer snap.Release()
					for k, m := range model {
						pre[k] = maps.Clone(m)
					}
				}
				want := map[string]int64{}
				for k, m := range model {
					if v, ok := m["1"]; ok {
						want[k] = v
					}
				}
				got := map[string]int64{}
				err := state.SweepMapEntry(b, mapName, h.m, "1", func(k string, v int64) error {
					if _, dup := got[k]; dup {
						t.Fatalf("key %q swept twice", k)
					}
					got[k] = v
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(want) < 500 || !maps.Equal(got, want) {
					t.Fatalf("swept %d keys, %d hold the entry", len(got), len(want))
				}
				for k := range want {
					if delete(model[k], "1"); len(model[k]) == 0 {
						delete(model, k)
					}
				}
				keys, err := state.KeysOf(b, mapName)
				if err != nil {
					t.Fatal(err)
				}
				if len(keys) != len(model) {
					t.Errorf("%d keys have maps after the sweep, want %d", len(keys), len(model))
				}
				for k, m := range model {
					b.SetCurrentKey(k)
					if got := mapContents(t, h.m); !maps.Equal(got, m) {
						t.Fatalf("key %q after the sweep: %v, want %v", k, got, m)
					}
				}
				// An error stops the sweep where it is.
				stop := errors.New("stop")
				n := 0
				err = state.SweepMapEntry(b, mapName, h.m, "2", func(string, int64) error {
					if n++; n == 3 {
						return stop
					}
					return nil
				})
				if !errors.Is(err, stop) || n != 3 {
					t.Errorf("a failing callback: %v after %d calls", err, n)
				}
				if pinned {
					// The snapshot taken before reads the state as it was.
					other := declare(t, state.NewKeyedBackend(keySer, maxPar, r))
					if err := other.b.RestoreKeyGroups(encodeSnapshot(snap), 1); err != nil {
						t.Fatal(err)
					}
					for k, m := range pre {
						other.b.SetCurrentKey(k)
						if got := mapContents(t, other.m); !maps.Equal(got, m) {
							t.Fatalf("key %q in the snapshot taken before the sweep: %v, want %v", k, got, m)
						}
					}
				}
			})
		}
	}
}

package lsm_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gflink/gflink/engine/state"
)

// TestKeysOf: the keys state.KeysOf lists for a state are exactly those
// with an entry in it — a value, a non-empty list, a map with entries —
// on every backend, with a snapshot open while state changes (the hashmap
// keeps the changes in overlays then) and entries deleted since. The
// model is a Go map of what was written. Clearing every listed key's
// value, as applyToKeyedState does, leaves none.
func TestKeysOf(t *testing.T) {
	for _, be := range everyBackend() {
		t.Run(be.name, func(t *testing.T) {
			h := declare(t, be.open(t))
			b := h.b
			values, lists, mapsOf := map[string]bool{}, map[string]int{}, map[string]map[string]bool{}
			rnd := rand.New(rand.NewPCG(7, 8))
			var snap state.Snapshot
			for i := range 4000 {
				if i == 2000 {
					var err error
					if snap, err = b.TakeSnapshot(state.SnapshotOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				k := fmt.Sprint("key-", rnd.IntN(300))
				b.SetCurrentKey(k)
				switch rnd.IntN(8) {
				case 0, 1:
					h.v.Update(int64(i))
					values[k] = true
				case 2:
					h.v.Clear()
					delete(values, k)
				case 3:
					h.l.Add("x")
					lists[k]++
				case 4:
					h.l.Update(nil)
					delete(lists, k)
				case 5, 6:
					uk := fmt.Sprint(rnd.IntN(3))
					h.m.Put(uk, 1)
					if mapsOf[k] == nil {
						mapsOf[k] = map[string]bool{}
					}
					mapsOf[k][uk] = true
				case 7:
					uk := fmt.Sprint(rnd.IntN(3))
					h.m.Remove(uk)
					if delete(mapsOf[k], uk); len(mapsOf[k]) == 0 {
						delete(mapsOf, k)
					}
				}
			}
			for name, want := range map[string][]string{
				valueName: slices.Sorted(maps.Keys(values)),
				listName:  slices.Sorted(maps.Keys(lists)),
				mapName:   slices.Sorted(maps.Keys(mapsOf)),
			} {
				got, err := state.KeysOf(b, name)
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s: %d keys listed, %d have entries:\n got %.200v\nwant %.200v", name, len(got), len(want), got, want)
				}
			}
			snap.Release()
			keys, _ := state.KeysOf(b, valueName)
			for _, k := range keys {
				b.SetCurrentKey(k)
				h.v.Clear()
			}
			if left, _ := state.KeysOf(b, valueName); len(left) != 0 {
				t.Errorf("after clearing every listed key, %d keys still listed", len(left))
			}
			if _, err := state.KeysOf(b, "nowhere"); err == nil || !strings.Contains(err.Error(), `no keyed state "nowhere" is declared`) {
				t.Errorf("an undeclared state: %v", err)
			}
		})
	}
}

// namedBackend opens one kind of backend over every key group.
type namedBackend struct {
	name string
	open func(t *testing.T) state.Backend[string]
}

// everyBackend is hashmap, rocksdb and changelog over hashmap.
func everyBackend() []namedBackend {
	r := state.KeyGroupRange{Start: 0, End: maxPar - 1}
	return []namedBackend{
		{"hashmap", func(*testing.T) state.Backend[string] { return state.NewKeyedBackend(keySer, maxPar, r) }},
		{"rocksdb", func(t *testing.T) state.Backend[string] {
			b, st := openLSM(t, t.TempDir(), r)
			t.Cleanup(func() { st.Close() })
			return b
		}},
		{"changelog", func(*testing.T) state.Backend[string] {
			return state.NewChangelogBackend[string](state.NewKeyedBackend(keySer, maxPar, r), keySer, state.ChangelogOptions{})
		}},
	}
}

package state

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestPropertySlicedMapStateIsMapState: a sliced map state and a map
// state given the same writes read the same, sweep the same entries,
// write byte-identical snapshots (taken between writes and encoded after
// later ones), and each restores the other's snapshot to the state it was
// taken at; with string keys (string tables, reached by the exchange's
// hash or not, short and long keys) and integer keys (Go maps).
func TestPropertySlicedMapStateIsMapState(t *testing.T) {
	t.Run("string keys", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			checkSliced(t, func(i int) string {
				if i%3 == 0 {
					return fmt.Sprint("key-longer-than-a-slot-", i)
				}
				return fmt.Sprint(i)
			})
		})
	})
	t.Run("integer keys", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) { checkSliced(t, func(i int) int64 { return int64(i) * 7919 }) })
	})
}

func checkSliced[K comparable](t *rapid.T, keyOf func(int) K) {
	const maxP, nkeys = 8, 20
	keySer := SerializerFor[K]().(KeySerializer[K])
	newBackend := func() *KeyedBackend[K] { return NewKeyedBackend(keySer, maxP, KeyGroupRange{0, maxP - 1}) }
	declare := func(b *KeyedBackend[K], sliced bool) MapState[int64, int64] {
		get := GetMapState[int64, int64, K]
		if sliced {
			get = GetSlicedMapState[int64, int64, K]
		}
		m, err := get(b, "m", SerializerFor[int64](), SerializerFor[int64]())
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	plainB, slicedB := newBackend(), newBackend()
	plain, sliced := declare(plainB, false), declare(slicedB, true)
	type model map[K]map[int64]int64
	cur := model{}
	clone := func(x model) model {
		c := model{}
		for k, m := range x {
			c[k] = maps.Clone(m)
		}
		return c
	}
	setKey := func(b *KeyedBackend[K], k K, hashed bool) {
		if _, ok := any(k).(string); ok && hashed {
			h := keySer.Hash(k)
			b.SetCurrentKeyHashed(k, KeyGroupForHash(h, maxP), uint32(h>>32))
			return
		}
		b.SetCurrentKey(k)
	}
	contents := func(b *KeyedBackend[K], m MapState[int64, int64]) model {
		got := model{}
		for i := range nkeys {
			k := keyOf(i)
			b.SetCurrentKey(k)
			m.All(func(uk, uv int64) bool {
				if got[k] == nil {
					got[k] = map[int64]int64{}
				}
				got[k][uk] = uv
				return true
			})
			if n := m.Len(); n != len(got[k]) {
				t.Fatalf("key %v: Len %d, All yields %d", k, n, len(got[k]))
			}
		}
		return got
	}
	equal := func(a, b model) bool {
		return maps.EqualFunc(a, b, func(x, y map[int64]int64) bool { return maps.Equal(x, y) })
	}
	type taken struct {
		plain, sliced *KeyedSnapshot
		model         model
	}
	var pending []taken
	check := func(tk taken) {
		pb, sb := snapshotBytes(tk.plain), snapshotBytes(tk.sliced)
		for kg := range maxP {
			if !bytes.Equal(pb[kg], sb[kg]) {
				t.Fatalf("key group %d: the sliced state's snapshot is %x; map state's %x", kg, sb[kg], pb[kg])
			}
		}
		for _, restoreSliced := range []bool{false, true} {
			r := newBackend()
			rm := declare(r, restoreSliced)
			for kg, blk := range sb {
				if err := r.RestoreKeyGroup(kg, blk); err != nil {
					t.Fatal(err)
				}
			}
			if got := contents(r, rm); !equal(got, tk.model) {
				t.Fatalf("restored (sliced: %v): %v; want %v", restoreSliced, got, tk.model)
			}
		}
	}
	steps := rapid.IntRange(1, 150).Draw(t, "steps")
	for range steps {
		k := keyOf(rapid.IntRange(0, nkeys-1).Draw(t, "key"))
		hashed := rapid.Bool().Draw(t, "hashed")
		setKey(plainB, k, hashed)
		setKey(slicedB, k, hashed)
		uk := rapid.Int64Range(0, 4).Draw(t, "uk")
		switch rapid.IntRange(0, 8).Draw(t, "op") {
		case 0, 1:
			uv := rapid.Int64().Draw(t, "uv")
			if rapid.Bool().Draw(t, "read first") { // a window's read-modify-write
				sliced.Get(uk)
			}
			plain.Put(uk, uv)
			sliced.Put(uk, uv)
			if cur[k] == nil {
				cur[k] = map[int64]int64{}
			}
			cur[k][uk] = uv
		case 8:
			// The window operator's read-modify-write, in one lookup.
			add := rapid.Int64Range(1, 9).Draw(t, "add")
			pv, _ := plain.Get(uk)
			plain.Put(uk, pv+add)
			sliced.(interface {
				Upsert(int64, func(int64, bool) int64)
			}).Upsert(uk, func(v int64, ok bool) int64 {
				if want, wok := cur[k][uk]; ok != wok || ok && v != want {
					t.Fatalf("key %v Upsert(%d) handed %d %v; the model holds %v", k, uk, v, ok, cur[k])
				}
				return v + add
			})
			if cur[k] == nil {
				cur[k] = map[int64]int64{}
			}
			cur[k][uk] = pv + add
		case 2:
			pv, pok := plain.Get(uk)
			sv, sok := sliced.Get(uk)
			if pv != sv || pok != sok || sliced.Contains(uk) != sok {
				t.Fatalf("key %v Get(%d): sliced %d %v, map state %d %v", k, uk, sv, sok, pv, pok)
			}
		case 3:
			plain.Remove(uk)
			sliced.Remove(uk)
			delete(cur[k], uk)
		case 4:
			plain.Clear()
			sliced.Clear()
			delete(cur, k)
		case 5:
			swept := func(b *KeyedBackend[K], m MapState[int64, int64]) map[K]int64 {
				got := map[K]int64{}
				err := SweepMapEntry(b, "m", m, uk, func(k K, uv int64) error {
					if _, dup := got[k]; dup {
						return fmt.Errorf("key %v swept twice", k)
					}
					got[k] = uv
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			ps, ss := swept(plainB, plain), swept(slicedB, sliced)
			if !maps.Equal(ps, ss) {
				t.Fatalf("sweep of %d: sliced %v, map state %v", uk, ss, ps)
			}
			for k := range cur {
				delete(cur[k], uk)
			}
		case 6:
			pending = append(pending, taken{plainB.Snapshot(), slicedB.Snapshot(), clone(cur)})
		case 7:
			if len(pending) > 0 {
				check(pending[0])
				pending = pending[1:]
			}
		}
		for k, m := range cur {
			if len(m) == 0 {
				delete(cur, k)
			}
		}
	}
	if got, want := contents(slicedB, sliced), contents(plainB, plain); !equal(got, want) || !equal(got, cur) {
		t.Fatalf("sliced %v, map state %v, model %v", got, want, cur)
	}
	if got, want := slicedB.States()[0].Entries, len(cur); got != want {
		t.Fatalf("sliced state reports %d keys; want %d", got, want)
	}
	for _, tk := range pending {
		check(tk)
	}
}

// TestSlicedSweepStoppedByAnError: when the function a sweep hands the
// entries to fails, the entries it was handed are gone and the others
// stay, under an open snapshot too.
func TestSlicedSweepStoppedByAnError(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		b := backendFor(1)
		m, _ := GetSlicedMapState[int64, int64](b, "w", SerializerFor[int64](), SerializerFor[int64]())
		for i := range 100 {
			b.SetCurrentKey(fmt.Sprint(i))
			m.Put(7, int64(i))
		}
		if pinned {
			defer b.Snapshot().Release()
		}
		handed := map[string]bool{}
		stop := errors.New("stop")
		err := SweepMapEntry(b, "w", m, 7, func(k string, _ int64) error {
			if len(handed) == 40 {
				return stop
			}
			handed[k] = true
			return nil
		})
		if !errors.Is(err, stop) {
			t.Fatalf("sweep returned %v; want the function's error", err)
		}
		left := 0
		for i := range 100 {
			k := fmt.Sprint(i)
			b.SetCurrentKey(k)
			if _, ok := m.Get(7); ok == handed[k] {
				t.Fatalf("pinned %v: key %s handed %v, still there %v", pinned, k, handed[k], ok)
			} else if ok {
				left++
			}
		}
		if left != 60 {
			t.Fatalf("%d entries left; want 60", left)
		}
	}
}

// TestSlicedSnapshotOfManyWindows: a key group whose keys have entries in
// several tables is written as map state writes it, sorted by user key
// within a key, whatever the order the tables were made in.
func TestSlicedSnapshotOfManyWindows(t *testing.T) {
	b, s := backendFor(1), backendFor(1)
	m, _ := GetMapState[int64, string](b, "w", SerializerFor[int64](), SerializerFor[string]())
	sm, _ := GetSlicedMapState[int64, string](s, "w", SerializerFor[int64](), SerializerFor[string]())
	for _, uk := range []int64{900, -3, 5, 1 << 40, 0, 77} {
		for i := range 50 {
			if (i+int(uk))%3 == 0 {
				continue
			}
			k := fmt.Sprint("k", i)
			b.SetCurrentKey(k)
			s.SetCurrentKey(k)
			v := strings.Repeat("v", i%7)
			m.Put(uk, v)
			sm.Put(uk, v)
		}
	}
	pb, sb := snapshotBytes(b.Snapshot()), snapshotBytes(s.Snapshot())
	if !bytes.Equal(pb[0], sb[0]) {
		t.Fatalf("sliced snapshot %x\nmap state's     %x", sb[0], pb[0])
	}
}

// TestSlicedSweepWhileASnapshotEncodes: a snapshot encoded on another
// goroutine while the task sweeps a window out, opens a new one and
// writes an old one holds the state as it was taken (run with -race).
func TestSlicedSweepWhileASnapshotEncodes(t *testing.T) {
	const maxP, keys = 16, 2000
	b := backendFor(maxP)
	m, _ := GetSlicedMapState[int64, int64](b, "w", SerializerFor[int64](), SerializerFor[int64]())
	for w := range int64(3) {
		for i := range keys {
			b.SetCurrentKey(fmt.Sprint(i))
			m.Put(w, int64(i)+w)
		}
	}
	snap := b.Snapshot()
	done := make(chan map[int][]byte)
	go func() { done <- snapshotBytes(snap) }()
	if err := SweepMapEntry(b, "w", m, 0, func(string, int64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		b.SetCurrentKey(fmt.Sprint(i))
		m.Put(3, 1)
		m.Put(1, -1)
		m.Remove(2)
	}
	blocks := <-done
	r := backendFor(maxP)
	rm, _ := GetSlicedMapState[int64, int64](r, "w", SerializerFor[int64](), SerializerFor[int64]())
	restoreAll(t, r, blocks)
	for i := range keys {
		r.SetCurrentKey(fmt.Sprint(i))
		for w := range int64(4) {
			got, ok := rm.Get(w)
			if want := int64(i) + w; ok != (w < 3) || ok && got != want {
				t.Fatalf("key %d window %d: restored %d %v; want %d %v", i, w, got, ok, want, w < 3)
			}
		}
	}
}

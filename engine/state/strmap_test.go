package state

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// TestPropertyStrMap checks strMap against a Go map through random puts and
// deletes of short (inline) and long (arena) keys, through growth, the
// backward shift of deletion and arena compaction.
func TestPropertyStrMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nkeys := rapid.IntRange(1, 3000).Draw(t, "keys")
		key := func(i int) string {
			switch i % 4 {
			case 0:
				return "" + strings.Repeat("x", i%3) // "", "x", "xx"
			case 1:
				return fmt.Sprint(i) // inline
			case 2:
				return fmt.Sprintf("%011d", i) // exactly inlineKey bytes
			}
			return fmt.Sprintf("%d-%s", i, strings.Repeat("long", i%60)) // arena
		}
		m := newStrMap[int](rapid.IntRange(0, 100).Draw(t, "presize"))
		model := map[string]int{}
		// drain moves entries out, as a fold moves an overlay's into the
		// base, interleaved with writes: each entry comes out once (it
		// leaves the model), with its value at the time, and a drain that
		// returns budget left must leave the table empty.
		steps := rapid.IntRange(1, 5000).Draw(t, "steps")
		for range steps {
			k := key(rapid.IntRange(0, nkeys-1).Draw(t, "key"))
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				v := rapid.Int().Draw(t, "v")
				m.put(k, v)
				model[k] = v
			case 2:
				m.del(k)
				delete(model, k)
			case 3:
				budget := rapid.IntRange(1, 40).Draw(t, "budget")
				n := 0
				left := m.drain(budget, func(k string, v int) {
					w, ok := model[k]
					if !ok || w != v {
						t.Fatalf("drain yields %q=%d; the table has %d, %v", k, v, w, ok)
					}
					delete(model, k)
					n++
				})
				if n+left != budget || (left > 0 && m.n != 0) || m.n != len(model) {
					t.Fatalf("drain(%d) moved %d, returned %d, left %d entries (the model %d)", budget, n, left, m.n, len(model))
				}
			}
			// Read through each way in: get, and the exported table's Get
			// (which tries the slot found last first, possibly another
			// key's now, or one a deletion emptied or a growth moved) and
			// GetHashed; Prefetch must not disturb anything.
			sm := &StringMap[int]{m}
			var got int
			var ok bool
			switch rapid.IntRange(0, 2).Draw(t, "reader") {
			case 0:
				got, ok = m.get(k)
			case 1:
				got, ok = sm.Get([]byte(k))
			case 2:
				sm.Prefetch(HashKey([]byte(k)))
				got, ok = sm.GetHashed([]byte(k), HashKey([]byte(k)))
			}
			if ok != hasKey(model, k) || got != model[k] {
				w, in := model[k]
				t.Fatalf("get(%q) = %d, %v; want %d, %v", k, got, ok, w, in)
			}
		}
		if m.n != len(model) {
			t.Fatalf("n = %d, want %d", m.n, len(model))
		}
		seen := map[string]bool{}
		for k, v := range m.all {
			if seen[k] {
				t.Fatalf("all yields %q twice", k)
			}
			seen[k] = true
			if w, ok := model[k]; !ok || w != v {
				t.Fatalf("all yields %q=%d; the model has %d, %v", k, v, w, ok)
			}
		}
		if len(seen) != len(model) {
			t.Fatalf("all yields %d keys, want %d", len(seen), len(model))
		}
		for k, v := range model {
			if got, ok := m.get(k); !ok || got != v {
				t.Fatalf("get(%q) = %d, %v; want %d", k, got, ok, v)
			}
		}
		live := 0
		for k := range model {
			if len(k) > inlineKey {
				live += len(k)
			}
		}
		if len(m.arena)-m.dead != live {
			t.Fatalf("arena holds %d live bytes, want %d", len(m.arena)-m.dead, live)
		}
	})
}

func hasKey(m map[string]int, k string) bool { _, ok := m[k]; return ok }

// TestStrMapCompactsItsArena deletes most long keys: the arena must shrink
// to about the live keys' bytes, and the rest must still be found.
func TestStrMapCompactsItsArena(t *testing.T) {
	m := newStrMap[int](0)
	key := func(i int) string { return fmt.Sprintf("%04d%s", i, strings.Repeat("-", 96)) }
	for i := range 1000 {
		m.put(key(i), i)
	}
	for i := range 900 {
		m.del(key(i))
	}
	if max := 2 * 100 * 100; len(m.arena) > max {
		t.Fatalf("arena holds %d bytes for 100 live keys of 100 bytes, want ≤ %d", len(m.arena), max)
	}
	for i := range 1000 {
		if v, ok := m.get(key(i)); ok != (i >= 900) || (ok && v != i) {
			t.Fatalf("get(key %d) = %d, %v", i, v, ok)
		}
	}
}

// TestOrderedEncodeOfTwoSnapshotsAtOnce: two snapshots of the same tables
// (no write between them) encode every key group at the same time on two
// goroutines — both build or read the tables' kept order — and then once
// more after inserts, a delete and growth; every encoding must equal the
// one of a backend restored from it and encoded with its order rebuilt.
func TestOrderedEncodeOfTwoSnapshotsAtOnce(t *testing.T) {
	const maxP = 8
	b := backendFor(maxP)
	v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
	put := func(from, to int) {
		for i := from; i < to; i++ {
			b.SetCurrentKey(fmt.Sprint("key-", i*7919%1000))
			n, _ := v.Value()
			v.Update(n + int64(i))
		}
	}
	put(0, 600)
	for round := range 4 {
		snaps := [2]*KeyedSnapshot{b.Snapshot(), b.Snapshot()}
		var got [2][maxP][]byte
		var wg sync.WaitGroup
		for s := range snaps {
			wg.Go(func() {
				for kg := range maxP {
					got[s][kg] = encodeKG(snaps[s], nil, kg)
				}
				snaps[s].Release()
			})
		}
		wg.Wait()
		fresh := backendFor(maxP)
		GetValueState[int64](fresh, "v", SerializerFor[int64]())
		for kg := range maxP {
			if !bytes.Equal(got[0][kg], got[1][kg]) {
				t.Fatalf("round %d, key group %d: two snapshots of the same state differ", round, kg)
			}
			if err := fresh.RestoreKeyGroup(kg, got[0][kg]); err != nil {
				t.Fatal(err)
			}
		}
		want := fresh.Snapshot()
		for kg := range maxP {
			if w := encodeKG(want, nil, kg); !bytes.Equal(got[0][kg], w) {
				t.Fatalf("round %d, key group %d: encodes as\n%x\nwant\n%x", round, kg, got[0][kg], w)
			}
		}
		want.Release()
		switch round {
		case 0:
			put(600, 700) // a few new keys: merged into the kept order
		case 1:
			b.SetCurrentKey("key-1")
			v.Clear() // a delete: the order is rebuilt
		case 2:
			for i := range 3000 { // growth
				b.SetCurrentKey(fmt.Sprint("new-", i))
				v.Update(1)
			}
		}
	}
}

// TestStringMapShrinkGivesMemoryBack: a table that held many entries and
// now holds few shrinks to the size a table made for them has, arena and
// all, and still finds every entry, short keys and long; a table that is
// not four times too large stays as it is.
func TestStringMapShrinkGivesMemoryBack(t *testing.T) {
	m := NewStringMap[int](0)
	key := func(i int) []byte {
		if i%2 == 0 {
			return fmt.Appendf(nil, "k%d", i) // inline
		}
		return fmt.Appendf(nil, "a-long-key-in-the-arena-%d", i)
	}
	const n, kept = 100_000, 1000
	for i := range n {
		m.Put(key(i), i)
	}
	full := m.Bytes()
	m.Sweep(0, func(_ []byte, e *int) bool { return *e >= kept }, func() bool { return m.Len() == kept })
	m.Shrink()
	if got := m.Bytes(); got*16 > full {
		t.Fatalf("%d bytes after shrinking to %d entries, %d with %d", got, kept, full, n)
	}
	for i := range kept {
		if e, ok := m.Get(key(i)); !ok || e != i {
			t.Fatalf("entry %d after the shrink: %d, %v", i, e, ok)
		}
	}
	if _, ok := m.Get(key(kept)); ok {
		t.Fatal("a deleted entry is found after the shrink")
	}
	before := m.Bytes()
	m.Shrink()
	if m.Bytes() != before {
		t.Fatalf("a table of the right size changed on Shrink: %d -> %d bytes", before, m.Bytes())
	}
	for i := kept; i < 2*kept; i++ { // and it grows again as it should
		m.Put(key(i), i)
	}
	for i := range 2 * kept {
		if e, ok := m.Get(key(i)); !ok || e != i {
			t.Fatalf("entry %d after growing again: %d, %v", i, e, ok)
		}
	}
}

package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// refModel is the state the property test expects, kept in plain maps.
type refModel struct {
	v  map[string]int64
	l  map[string][]int
	m  map[string]map[int]int
	tm map[string]map[int64]bool
}

func newRefModel() refModel {
	return refModel{v: map[string]int64{}, l: map[string][]int{}, m: map[string]map[int]int{}, tm: map[string]map[int64]bool{}}
}

func (x refModel) clone() refModel {
	c := refModel{v: maps.Clone(x.v), l: map[string][]int{}, m: map[string]map[int]int{}, tm: map[string]map[int64]bool{}}
	for k, l := range x.l {
		c.l[k] = slices.Clone(l)
	}
	for k, m := range x.m {
		c.m[k] = maps.Clone(m)
	}
	for k, m := range x.tm {
		c.tm[k] = maps.Clone(m)
	}
	return c
}

// refEncode encodes one key group of the model straight from
// savepoint/FORMAT.md v1, with a comparison sort: an encoder independent of
// the backend's.
func refEncode(x refModel, kg, maxP int) []byte {
	ks, is := SerializerFor[string](), SerializerFor[int]()
	type entry struct{ key, rest []byte }
	mine := func(k string) bool { return KeyGroupForHash(ks.Hash(k), maxP) == kg }
	payload := func(es []entry) []byte {
		slices.SortFunc(es, func(a, b entry) int {
			if c := bytes.Compare(a.key, b.key); c != 0 {
				return c
			}
			ta, _ := binary.Varint(a.rest)
			tb, _ := binary.Varint(b.rest)
			return int(ta - tb)
		})
		p := binary.AppendUvarint(nil, uint64(len(es)))
		for _, e := range es {
			p = append(append(p, e.key...), e.rest...)
		}
		return p
	}
	type part struct {
		name string
		kind Kind
		typ  string
		es   []entry
	}
	var tms, ls, ms, vs []entry
	for k, set := range x.tm {
		if mine(k) {
			for ts := range set {
				tms = append(tms, entry{ks.Append(nil, k), binary.AppendVarint(nil, ts)})
			}
		}
	}
	for k, l := range x.l {
		if mine(k) {
			r := binary.AppendUvarint(nil, uint64(len(l)))
			for _, v := range l {
				r = is.Append(r, v)
			}
			ls = append(ls, entry{ks.Append(nil, k), r})
		}
	}
	for k, m := range x.m {
		if mine(k) {
			var inner []entry
			for uk, uv := range m {
				inner = append(inner, entry{is.Append(nil, uk), is.Append(nil, uv)})
			}
			ms = append(ms, entry{ks.Append(nil, k), payload(inner)})
		}
	}
	for k, v := range x.v {
		if mine(k) {
			vs = append(vs, entry{ks.Append(nil, k), SerializerFor[int64]().Append(nil, v)})
		}
	}
	parts := []part{
		{ProcessingTimersName, KindProcessingTime, "timer[string]", tms},
		{"l", KindList, "int", ls},
		{"m", KindMap, "map[int]int", ms},
		{"v", KindValue, "int64", vs},
	}
	var out []byte
	n := 0
	for _, p := range parts {
		if len(p.es) > 0 {
			n++
		}
	}
	out = binary.AppendUvarint(out, uint64(n))
	for _, p := range parts {
		if len(p.es) == 0 {
			continue
		}
		out = appendString(out, p.name)
		out = append(out, byte(p.kind))
		out = appendString(out, p.typ)
		out = appendBytes(out, payload(p.es))
	}
	return out
}

// TestPropertyLayeredSnapshots interleaves random writes to value, list and
// map state and timers with several open snapshots whose key groups are
// encoded (and so released) one at a time, out of order across snapshots,
// or abandoned: every key group of every snapshot must encode exactly as
// the model's state at its barrier does, and once every snapshot is
// released, folding leaves base maps only.
func TestPropertyLayeredSnapshots(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const maxP = 4
		b := backendFor(maxP)
		// A small budget makes folds stop half-way, and snapshots and
		// writes come in between.
		b.pins.foldBudget = rapid.SampledFrom([]int{1, 2, 3, 4096}).Draw(t, "fold budget")
		v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
		l, _ := GetListState[int](b, "l", SerializerFor[int]())
		m, _ := GetMapState[int, int](b, "m", SerializerFor[int](), SerializerFor[int]())
		tm, _ := GetTimers(b, KindProcessingTime)
		cur := newRefModel()
		type open struct {
			snap *KeyedSnapshot
			at   refModel
			left []int // key groups not encoded yet
		}
		var snaps []*open
		encodeOne := func(o *open, i int) {
			kg := o.left[i]
			o.left = slices.Delete(o.left, i, i+1)
			got := encodeKG(o.snap, nil, kg)
			if want := refEncode(o.at, kg, maxP); !bytes.Equal(got, want) {
				t.Fatalf("key group %d encodes as\n%x\nwant (state at the barrier)\n%x", kg, got, want)
			}
		}
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for range steps {
			k := fmt.Sprint("k", rapid.IntRange(0, 11).Draw(t, "key"))
			if len(k) == 3 {
				k += "-longer-than-a-slot" // a string key kept in the arena
			}
			b.SetCurrentKey(k)
			switch op := rapid.IntRange(0, 15).Draw(t, "op"); op {
			case 0, 1:
				n := rapid.Int64Range(-1000, 1000).Draw(t, "n")
				if rapid.Bool().Draw(t, "read first") {
					v.Value()
				}
				v.Update(n)
				cur.v[k] = n
			case 2:
				v.Clear()
				delete(cur.v, k)
			case 3:
				x := rapid.IntRange(-50, 50).Draw(t, "lv")
				l.Add(x)
				cur.l[k] = append(cur.l[k], x)
			case 4:
				xs := rapid.SliceOfN(rapid.IntRange(0, 9), 0, 3).Draw(t, "lvs")
				l.Update(xs)
				if len(xs) == 0 {
					delete(cur.l, k)
				} else {
					cur.l[k] = slices.Clone(xs)
				}
			case 5:
				l.Clear()
				delete(cur.l, k)
			case 6, 7:
				a, c := rapid.IntRange(-3, 3).Draw(t, "mk"), rapid.IntRange(-100, 100).Draw(t, "mv")
				m.Put(a, c)
				if cur.m[k] == nil {
					cur.m[k] = map[int]int{}
				}
				cur.m[k][a] = c
			case 8:
				a := rapid.IntRange(-3, 3).Draw(t, "mk")
				m.Remove(a)
				delete(cur.m[k], a)
				if len(cur.m[k]) == 0 {
					delete(cur.m, k)
				}
			case 9:
				m.Clear()
				delete(cur.m, k)
			case 10:
				ts := rapid.Int64Range(-5, 20).Draw(t, "ts")
				tm.Register(ts)
				if cur.tm[k] == nil {
					cur.tm[k] = map[int64]bool{}
				}
				cur.tm[k][ts] = true
			case 11:
				ts := rapid.Int64Range(-5, 20).Draw(t, "ts")
				tm.Delete(ts)
				delete(cur.tm[k], ts)
				if len(cur.tm[k]) == 0 {
					delete(cur.tm, k)
				}
			case 12:
				upTo := rapid.Int64Range(-5, 20).Draw(t, "upTo")
				tm.FireDue(upTo, func(int64) error { return nil })
				for k, set := range cur.tm {
					for ts := range set {
						if ts <= upTo {
							delete(set, ts)
						}
					}
					if len(set) == 0 {
						delete(cur.tm, k)
					}
				}
			case 13:
				if len(snaps) < 4 {
					snaps = append(snaps, &open{snap: b.Snapshot(), at: cur.clone(), left: []int{0, 1, 2, 3}})
				}
			case 14, 15:
				if len(snaps) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(snaps)-1).Draw(t, "snapshot")
				o := snaps[i]
				if op == 15 && rapid.IntRange(0, 3).Draw(t, "abandon") == 0 {
					o.left = nil
				} else {
					encodeOne(o, rapid.IntRange(0, len(o.left)-1).Draw(t, "key group"))
				}
				if len(o.left) == 0 {
					o.snap.Release()
					snaps = slices.Delete(snaps, i, i+1)
				}
			}
		}
		for len(snaps) > 0 {
			i := rapid.IntRange(0, len(snaps)-1).Draw(t, "final snapshot")
			o := snaps[i]
			for len(o.left) > 0 {
				encodeOne(o, rapid.IntRange(0, len(o.left)-1).Draw(t, "final key group"))
			}
			o.snap.Release()
			snaps = slices.Delete(snaps, i, i+1)
		}
		b.FoldLayers()
		if n := b.overlays(); n != 0 {
			t.Fatalf("%d overlays left after every snapshot was released", n)
		}
		last := b.Snapshot()
		for kg := range maxP {
			if got, want := encodeKG(last, nil, kg), refEncode(cur, kg, maxP); !bytes.Equal(got, want) {
				t.Fatalf("after folding, key group %d encodes as\n%x\nwant\n%x", kg, got, want)
			}
		}
		last.Release()
		b.SetCurrentKey("k0")
		if v.Value(); b.overlays() != 0 {
			t.Fatal("an access after the last release left overlays")
		}
	})
}

// TestEncodeOrderIsTheByteOrder checks the radix sort against a comparison
// sort on key groups large enough to use it, with keys that share long
// prefixes, keys of every length, negative integers and many timers per key;
// and then, after more such keys were inserted, the merge of the new keys
// into the order a string table kept from the first snapshot.
func TestEncodeOrderIsTheByteOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const maxP = 2
	b := backendFor(maxP)
	v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
	tm, _ := GetTimers(b, KindEventTime)
	m, _ := GetMapState[int64, string](b, "m", SerializerFor[int64](), SerializerFor[string]())
	want := map[string]int64{}
	prefixes := []string{"", "a", "user-000000-", "a-very-long-common-prefix-of-more-than-sixteen-bytes/", "abcdefg", "abcdefgh"}
	for i := range 10000 {
		if i == 5000 {
			checkSnapshotSorted(t, b, maxP, want)
		}
		k := prefixes[r.IntN(len(prefixes))] + fmt.Sprintf("%05d", r.IntN(100000))[:1+r.IntN(5)]
		if i%7 == 0 {
			k += string(rune(r.IntN(300)))
		}
		if i == 17 || i == 7001 {
			k = "" // the empty key, inserted before and after the first snapshot
		}
		b.SetCurrentKey(k)
		v.Update(int64(i) - 5000) // varints of both signs
		want[k] = int64(i) - 5000
		if i%3 == 0 {
			tm.Register(r.Int64N(2000) - 1000)
			tm.Register(r.Int64N(2000) - 1000)
		}
		if i%11 == 0 {
			for range 40 {
				m.Put(r.Int64N(200)-100, "x")
			}
		}
	}
	checkSnapshotSorted(t, b, maxP, want)
}

// checkSnapshotSorted checks that every payload of a snapshot of b is in
// strictly increasing order of encoded key, and that value state "v" holds
// exactly want.
func checkSnapshotSorted(t *testing.T, b *KeyedBackend[string], maxP int, want map[string]int64) {
	t.Helper()
	got := map[string]int64{}
	snap := b.Snapshot()
	defer snap.Release()
	for kg := range maxP {
		blk := encodeKG(snap, nil, kg)
		// Every payload's entries must be in strictly increasing order of
		// encoded key (timers: key, then timestamp).
		rest := blk
		n, k := binary.Uvarint(rest)
		rest = rest[k:]
		for range n {
			name, r, _ := readString(rest)
			_, r, _ = readString(r[1:])
			payload, r, _ := readBytes(r)
			rest = r
			checkSorted(t, name, payload, got)
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("value state holds %d keys; want %d (or a value differs)", len(got), len(want))
	}
}

// checkSorted checks one payload's order; value state "v"'s entries go into
// values.
func checkSorted(t *testing.T, name string, payload []byte, values map[string]int64) {
	t.Helper()
	ks, is := SerializerFor[string](), SerializerFor[int64]()
	n, k := binary.Uvarint(payload)
	p := payload[k:]
	var prevKey []byte
	var prevTS int64
	for i := range n {
		sk, r, err := ks.Decode(p)
		if err != nil {
			t.Fatal(err)
		}
		key := p[:len(p)-len(r)]
		switch name {
		case "v":
			var v int64
			v, r, _ = is.Decode(r)
			values[sk] = v
		case "m":
			cnt, k := binary.Uvarint(r)
			r = r[k:]
			var prevUK []byte
			for range cnt {
				_, rr, _ := is.Decode(r)
				uk := r[:len(r)-len(rr)]
				if prevUK != nil && bytes.Compare(prevUK, uk) >= 0 {
					t.Fatalf("map entry: user key %x after %x", uk, prevUK)
				}
				prevUK = uk
				_, r, _ = ks.Decode(rr)
			}
		default:
			ts, k := binary.Varint(r)
			r = r[k:]
			if i > 0 && bytes.Equal(prevKey, key) && ts <= prevTS {
				t.Fatalf("timers of %q: %d after %d", key, ts, prevTS)
			}
			prevTS = ts
		}
		if i > 0 {
			c := bytes.Compare(prevKey, key)
			if c > 0 || c == 0 && name != EventTimersName {
				t.Fatalf("%s: key %q after %q", name, key, prevKey)
			}
		}
		prevKey, p = key, r
	}
	if len(p) != 0 {
		t.Fatalf("%s: %d bytes left", name, len(p))
	}
}

// TestLayeredSnapshotsEncodeConcurrently: several snapshots open at once,
// encoded on other goroutines while the task writes every kind of state
// (run with -race).
func TestLayeredSnapshotsEncodeConcurrently(t *testing.T) {
	const maxP = 16
	b := backendFor(maxP)
	v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
	l, _ := GetListState[int](b, "l", SerializerFor[int]())
	m, _ := GetMapState[int, int](b, "m", SerializerFor[int](), SerializerFor[int]())
	tm, _ := GetTimers(b, KindProcessingTime)
	write := func(round, i int) {
		b.SetCurrentKey(fmt.Sprint(i))
		n, _ := v.Value()
		v.Update(n + 1)
		l.Add(round)
		m.Put(round%3, i)
		tm.Register(int64(round))
		if i%5 == 0 {
			m.Remove((round + 1) % 3)
		}
	}
	for i := range 1000 {
		write(0, i)
	}
	var wg sync.WaitGroup
	results := make([]map[int][]byte, 6)
	for round := range 6 {
		snap := b.Snapshot()
		wg.Go(func() {
			out := map[int][]byte{}
			for _, kg := range rand.Perm(maxP) {
				out[kg] = encodeKG(snap, nil, kg)
			}
			snap.Release()
			results[round] = out
		})
		for i := range 1000 {
			write(round+1, i)
		}
	}
	wg.Wait()
	for round, blocks := range results {
		r := backendFor(maxP)
		rv, _ := GetValueState[int64](r, "v", SerializerFor[int64]())
		rl, _ := GetListState[int](r, "l", SerializerFor[int]())
		for kg, blk := range blocks {
			if err := r.RestoreKeyGroup(kg, blk); err != nil {
				t.Fatal(err)
			}
		}
		r.SetCurrentKey("7")
		if got, _ := rv.Value(); got != int64(round+1) {
			t.Fatalf("snapshot %d saw count %d", round, got)
		}
		if got := rl.Get(); len(got) != round+1 {
			t.Fatalf("snapshot %d saw list %v", round, got)
		}
	}
	b.FoldLayers()
	if n := b.overlays(); n != 0 {
		t.Fatalf("%d overlays left", n)
	}
}

func TestRestoreKeyGroupsInParallel(t *testing.T) {
	const maxP = 32
	b := backendFor(maxP)
	v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
	tm, _ := GetTimers(b, KindEventTime)
	for i := range 3000 {
		b.SetCurrentKey(fmt.Sprint(i))
		v.Update(int64(i))
		tm.Register(int64(i % 10))
	}
	snap := b.Snapshot()
	var blocks []KeyGroupBlock
	for kg := range maxP {
		blocks = append(blocks, KeyGroupBlock{kg, encodeKG(snap, nil, kg)})
	}
	snap.Release()
	for _, workers := range []int{1, 4} {
		r := backendFor(maxP)
		rv, _ := GetValueState[int64](r, "v", SerializerFor[int64]())
		if err := r.RestoreKeyGroups(blocks, workers); err != nil {
			t.Fatal(err)
		}
		rt, _ := GetTimers(r, KindEventTime) // registered after: decoded from the raw state
		for i := range 3000 {
			r.SetCurrentKey(fmt.Sprint(i))
			if got, ok := rv.Value(); !ok || got != int64(i) {
				t.Fatalf("workers=%d key %d: %d %v", workers, i, got, ok)
			}
		}
		if rt.Len() != 3000 {
			t.Fatalf("workers=%d: %d timers", workers, rt.Len())
		}
		fired := 0
		rt.FireDue(4, func(int64) error { fired++; return nil })
		if fired != 1500 {
			t.Fatalf("workers=%d: fired %d timers; want 1500", workers, fired)
		}
		bad := slices.Clone(blocks)
		bad[3].Block = bad[3].Block[:len(bad[3].Block)-2]
		if err := backendFor(maxP).RestoreKeyGroups(bad, workers); err == nil {
			t.Fatalf("workers=%d: a truncated block must fail", workers)
		}
	}
}

func TestSetCurrentKeyAndGroup(t *testing.T) {
	b := NewKeyedBackend(SerializerFor[string](), 128, KeyGroupRange{Start: 32, End: 63})
	v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
	for i := range 200 {
		k := fmt.Sprint(i)
		kg := b.KeyGroupOf(k)
		if !b.KeyGroupRange().Contains(kg) {
			continue
		}
		b.SetCurrentKeyAndGroup(k, kg)
		v.Update(int64(i))
		b.SetCurrentKey(k)
		if got, _ := v.Value(); got != int64(i) {
			t.Fatalf("key %s: %d", k, got)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a key group outside the range must not be accepted")
		}
	}()
	b.SetCurrentKeyAndGroup("x", 64)
}

// A key serializer of its own hashes strings its own way: its hash must
// not be taken for the string tables' (SetCurrentKeyHashed), or keys
// written one way would not be found the other.
type reversedStringKeys struct{ stringSerializer }

func (reversedStringKeys) Hash(s string) uint64 { return ^stringSerializer{}.Hash(s) }

func TestSetCurrentKeyHashedWithAnyKeySerializer(t *testing.T) {
	for _, keySer := range []KeySerializer[string]{SerializerFor[string](), reversedStringKeys{}} {
		b := NewKeyedBackend(keySer, 8, KeyGroupRange{Start: 0, End: 7})
		v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
		for i := range 500 {
			k := fmt.Sprint("key-", i) // some inline, some in the arena
			if i%2 == 0 {
				k += "-longer-than-a-slot"
			}
			h := keySer.Hash(k)
			b.SetCurrentKeyHashed(k, KeyGroupForHash(h, 8), uint32(h>>32))
			v.Update(int64(i))
		}
		for i := range 500 {
			k := fmt.Sprint("key-", i)
			if i%2 == 0 {
				k += "-longer-than-a-slot"
			}
			h := keySer.Hash(k)
			b.SetCurrentKeyHashed(k, KeyGroupForHash(h, 8), uint32(h>>32))
			if got, ok := v.Value(); !ok || got != int64(i) {
				t.Fatalf("%T: key %s read back by its hash: %d, %v", keySer, k, got, ok)
			}
			b.SetCurrentKeyAndGroup(k, KeyGroupForHash(h, 8))
			if got, ok := v.Value(); !ok || got != int64(i) {
				t.Fatalf("%T: key %s read back without its hash: %d, %v", keySer, k, got, ok)
			}
		}
	}
}

func TestKeyGroupForHashWithoutDivision(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, maxP := range []int{1, 2, 7, 128, 1000, 1 << 15} {
		for range 1000 {
			h := r.Uint64()
			if got, want := KeyGroupForHash(h, maxP), int(h%uint64(maxP)); got != want {
				t.Fatalf("KeyGroupForHash(%d, %d) = %d; want %d", h, maxP, got, want)
			}
		}
	}
}

func TestSnapshotReleasesKeyGroupsOnce(t *testing.T) {
	b := backendFor(4)
	v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
	for i := range 50 {
		b.SetCurrentKey(fmt.Sprint(i))
		v.Update(int64(i))
	}
	s1, s2 := b.Snapshot(), b.Snapshot()
	for i := range 50 {
		b.SetCurrentKey(fmt.Sprint(i))
		v.Update(-1)
	}
	encodeKG(s1, nil, 2)
	s1.ReleaseKeyGroup(2) // again: harmless
	s1.ReleaseKeyGroup(99)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("encoding a released key group must panic")
			}
		}()
		encodeKG(s1, nil, 2)
	}()
	s1.Release()
	s1.Release()
	if b.FoldLayers(); b.overlays() == 0 {
		t.Fatal("s2 is open: its key groups must keep their overlays")
	}
	for kg := range 4 {
		encodeKG(s2, nil, kg)
	}
	b.FoldLayers()
	if n := b.overlays(); n != 0 {
		t.Fatalf("%d overlays left once both snapshots released every key group", n)
	}
	s2.Release()
}

package state

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDefaultMaxParallelism(t *testing.T) {
	for p, want := range map[int]int{1: 128, 4: 128, 85: 128, 86: 256, 100: 256, 1000: 2048, 30000: 32768} {
		if got := DefaultMaxParallelism(p); got != want {
			t.Errorf("DefaultMaxParallelism(%d) = %d; want %d", p, got, want)
		}
	}
}

func TestKeyGroupRanges(t *testing.T) {
	// Flink's KeyGroupRangeAssignment: ranges are contiguous, cover every
	// group once, differ in size by at most one, and agree with
	// SubtaskForKeyGroup.
	for _, maxP := range []int{1, 7, 128, 1000} {
		for p := 1; p <= min(maxP, 17); p++ {
			next := 0
			for i := 0; i < p; i++ {
				r := RangeForSubtask(maxP, p, i)
				if r.Start != next {
					t.Fatalf("maxP=%d p=%d subtask %d starts at %d; want %d", maxP, p, i, r.Start, next)
				}
				if n := r.Len(); n < maxP/p || n > maxP/p+1 {
					t.Fatalf("maxP=%d p=%d subtask %d has %d groups", maxP, p, i, n)
				}
				for kg := r.Start; kg <= r.End; kg++ {
					if got := SubtaskForKeyGroup(maxP, p, kg); got != i {
						t.Fatalf("maxP=%d p=%d: group %d in range of %d but assigned to %d", maxP, p, kg, i, got)
					}
				}
				next = r.End + 1
			}
			if next != maxP {
				t.Fatalf("maxP=%d p=%d: ranges end at %d", maxP, p, next)
			}
		}
	}
	if got := RangeForSubtask(128, 4, 1); got != (KeyGroupRange{32, 63}) {
		t.Errorf("RangeForSubtask(128, 4, 1) = %v", got)
	}
}

func TestKeyHashIsStable(t *testing.T) {
	// The key group of a key is part of the snapshot format: it must never
	// change between versions.
	ser := SerializerFor[string]()
	for key, want := range map[string]int{"hello": 35, "to": 8, "be": 108, "": 25} {
		if got := KeyGroupForHash(ser.Hash(key), 128); got != want {
			t.Errorf("key group of %q = %d; want %d (the hash changed: old snapshots would not restore)", key, got, want)
		}
	}
	if got := KeyGroupForHash(SerializerFor[int64]().Hash(42), 128); got != 83 {
		t.Errorf("key group of int64 42 = %d; want 83", got)
	}
}

func TestSerializersRoundTrip(t *testing.T) {
	type point struct{ X, Y int }
	check := func(name string, enc func() []byte, dec func([]byte) (any, []byte, error), want any) {
		t.Helper()
		got, rest, err := dec(enc())
		if err != nil || len(rest) != 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v (rest %d, err %v); want %v", name, got, len(rest), err, want)
		}
	}
	s := SerializerFor[string]()
	check("string", func() []byte { return s.Append(nil, "héllo") }, func(b []byte) (any, []byte, error) { return s.Decode(b) }, "héllo")
	i := SerializerFor[int64]()
	check("int64", func() []byte { return i.Append(nil, -12345678901) }, func(b []byte) (any, []byte, error) { return i.Decode(b) }, int64(-12345678901))
	f := SerializerFor[float64]()
	check("float64", func() []byte { return f.Append(nil, 3.25) }, func(b []byte) (any, []byte, error) { return f.Decode(b) }, 3.25)
	bo := SerializerFor[bool]()
	check("bool", func() []byte { return bo.Append(nil, true) }, func(b []byte) (any, []byte, error) { return bo.Decode(b) }, true)
	by := SerializerFor[[]byte]()
	check("bytes", func() []byte { return by.Append(nil, []byte{1, 2, 3}) }, func(b []byte) (any, []byte, error) { return by.Decode(b) }, []byte{1, 2, 3})
	js := SerializerFor[point]()
	check("json", func() []byte { return js.Append(nil, point{1, 2}) }, func(b []byte) (any, []byte, error) { return js.Decode(b) }, point{1, 2})
	if _, _, err := s.Decode([]byte{5, 'a'}); err == nil {
		t.Error("truncated string must fail")
	}
}

// backendFor returns a backend owning every key group of maxP.
func backendFor(maxP int) *KeyedBackend[string] {
	return NewKeyedBackend(SerializerFor[string](), maxP, KeyGroupRange{0, maxP - 1})
}

func TestValueListMapState(t *testing.T) {
	b := backendFor(8)
	v, err := GetValueState[int64](b, "v", SerializerFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	l, _ := GetListState[string](b, "l", SerializerFor[string]())
	m, _ := GetMapState[string, int](b, "m", SerializerFor[string](), SerializerFor[int]())
	b.SetCurrentKey("a")
	if _, ok := v.Value(); ok {
		t.Fatal("empty value state has a value")
	}
	v.Update(1)
	l.Add("x")
	l.Add("y")
	m.Put("k", 1)
	b.SetCurrentKey("b")
	v.Update(2)
	b.SetCurrentKey("a")
	if got, _ := v.Value(); got != 1 {
		t.Errorf("a = %d", got)
	}
	if got := l.Get(); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("list = %v", got)
	}
	if got, ok := m.Get("k"); !ok || got != 1 || m.Len() != 1 {
		t.Errorf("map = %v %v", got, ok)
	}
	m.Remove("k")
	if m.Contains("k") || m.Len() != 0 {
		t.Error("map entry not removed")
	}
	v.Clear()
	if _, ok := v.Value(); ok {
		t.Error("cleared value still there")
	}
	if _, err := GetListState[string](b, "v", SerializerFor[string]()); err == nil {
		t.Error("registering a name twice with another kind must fail")
	}
	// Registering the same state again returns the same one.
	v2, err := GetValueState[int64](b, "v", SerializerFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	b.SetCurrentKey("b")
	if got, _ := v2.Value(); got != 2 {
		t.Errorf("re-registered state lost its values: %d", got)
	}
}

func TestSetCurrentKeyOutsideRangePanics(t *testing.T) {
	b := NewKeyedBackend(SerializerFor[string](), 128, KeyGroupRange{0, 0})
	defer func() {
		if recover() == nil {
			t.Error("a key of another subtask's key group must not be accepted")
		}
	}()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		b.SetCurrentKey(k)
	}
}

// snapshotBytes encodes every key group of a snapshot.
func snapshotBytes(s *KeyedSnapshot) map[int][]byte {
	out := map[int][]byte{}
	r := s.KeyGroupRange()
	for kg := r.Start; kg <= r.End; kg++ {
		out[kg] = encodeKG(s, nil, kg)
	}
	s.Release()
	return out
}

func restoreAll(t *testing.T, b *KeyedBackend[string], blocks map[int][]byte) {
	t.Helper()
	for kg, blk := range blocks {
		if err := b.RestoreKeyGroup(kg, blk); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSnapshotIsACopyOnWriteView(t *testing.T) {
	b := backendFor(4)
	v, _ := GetValueState[int64](b, "count", SerializerFor[int64]())
	m, _ := GetMapState[string, int](b, "m", SerializerFor[string](), SerializerFor[int]())
	l, _ := GetListState[int](b, "l", SerializerFor[int]())
	for i := 0; i < 100; i++ {
		b.SetCurrentKey(fmt.Sprint(i))
		v.Update(int64(i))
		m.Put("a", i)
		l.Add(i)
	}
	snap := b.Snapshot()
	// Writes after the snapshot — updates, inserts, deletes, nested map
	// writes, list appends — must not show in it.
	for i := 0; i < 100; i++ {
		b.SetCurrentKey(fmt.Sprint(i))
		v.Update(int64(i + 1000))
		m.Put("a", -1)
		m.Put("b", -2)
		l.Add(-1)
		if i%2 == 0 {
			v.Clear()
		}
	}
	b.SetCurrentKey("new")
	v.Update(5)
	blocks := snapshotBytes(snap)

	r := backendFor(4)
	rv, _ := GetValueState[int64](r, "count", SerializerFor[int64]())
	rm, _ := GetMapState[string, int](r, "m", SerializerFor[string](), SerializerFor[int]())
	rl, _ := GetListState[int](r, "l", SerializerFor[int]())
	restoreAll(t, r, blocks)
	for i := 0; i < 100; i++ {
		r.SetCurrentKey(fmt.Sprint(i))
		if got, ok := rv.Value(); !ok || got != int64(i) {
			t.Fatalf("key %d: restored %d %v; want %d", i, got, ok, i)
		}
		if got, _ := rm.Get("a"); got != i || rm.Contains("b") {
			t.Fatalf("key %d: nested map changed after the snapshot", i)
		}
		if got := rl.Get(); !slices.Equal(got, []int{i}) {
			t.Fatalf("key %d: list %v", i, got)
		}
	}
	r.SetCurrentKey("new")
	if _, ok := rv.Value(); ok {
		t.Fatal("a key inserted after the snapshot is in it")
	}
}

func TestSnapshotEncodesConcurrentlyWithWrites(t *testing.T) {
	// Run with -race: the asynchronous encoding must not race the task.
	b := backendFor(16)
	v, _ := GetValueState[int64](b, "count", SerializerFor[int64]())
	for i := 0; i < 2000; i++ {
		b.SetCurrentKey(fmt.Sprint(i))
		v.Update(1)
	}
	for round := 0; round < 5; round++ {
		snap := b.Snapshot()
		var wg sync.WaitGroup
		var blocks map[int][]byte
		wg.Add(1)
		go func() {
			defer wg.Done()
			blocks = snapshotBytes(snap)
		}()
		for i := 0; i < 4000; i++ {
			b.SetCurrentKey(fmt.Sprint(i))
			n, _ := v.Value()
			v.Update(n + 1)
		}
		wg.Wait()
		r := backendFor(16)
		rv, _ := GetValueState[int64](r, "count", SerializerFor[int64]())
		restoreAll(t, r, blocks)
		r.SetCurrentKey("0")
		if got, _ := rv.Value(); got != int64(1+round) {
			t.Fatalf("round %d: snapshot saw %d", round, got)
		}
	}
}

func TestSnapshotIsDeterministic(t *testing.T) {
	build := func(order []int) map[int][]byte {
		b := backendFor(8)
		v, _ := GetValueState[int64](b, "count", SerializerFor[int64]())
		m, _ := GetMapState[int, string](b, "m", SerializerFor[int](), SerializerFor[string]())
		for _, i := range order {
			b.SetCurrentKey(fmt.Sprint(i))
			v.Update(int64(i))
			m.Put(i, "x")
			m.Put(-i, "y")
		}
		return snapshotBytes(b.Snapshot())
	}
	a := build([]int{1, 2, 3, 4, 5, 6, 7, 8, 9})
	c := build([]int{9, 8, 7, 6, 5, 4, 3, 2, 1})
	if !maps.EqualFunc(a, c, slices.Equal) {
		t.Error("the same state must encode to the same bytes whatever the insertion order")
	}
}

func TestUnregisteredStateSurvivesASnapshot(t *testing.T) {
	b := backendFor(4)
	v, _ := GetValueState[int64](b, "old", SerializerFor[int64]())
	b.SetCurrentKey("k")
	v.Update(7)
	blocks := snapshotBytes(b.Snapshot())

	// An attempt that does not register "old" keeps it and writes it back.
	mid := backendFor(4)
	restoreAll(t, mid, blocks)
	if st := mid.States(); len(st) != 1 || st[0].Name != "old" || st[0].Entries != 1 {
		t.Fatalf("States() = %+v", st)
	}
	blocks2 := snapshotBytes(mid.Snapshot())

	last := backendFor(4)
	lv, _ := GetValueState[int64](last, "old", SerializerFor[int64]())
	restoreAll(t, last, blocks2)
	last.SetCurrentKey("k")
	if got, _ := lv.Value(); got != 7 {
		t.Errorf("state lost through an attempt that did not register it: %d", got)
	}
	// Registering after restore decodes the pending state.
	late := backendFor(4)
	restoreAll(t, late, blocks2)
	lv2, err := GetValueState[int64](late, "old", SerializerFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	late.SetCurrentKey("k")
	if got, _ := lv2.Value(); got != 7 {
		t.Errorf("late registration: %d", got)
	}
	if _, err := GetListState[int64](backendWith(t, blocks2), "old", SerializerFor[int64]()); err == nil {
		t.Error("restoring value state as list state must fail")
	}
}

func backendWith(t *testing.T, blocks map[int][]byte) *KeyedBackend[string] {
	b := backendFor(4)
	restoreAll(t, b, blocks)
	return b
}

func TestRestoreWrongTypeFailsClearly(t *testing.T) {
	b := backendFor(4)
	v, _ := GetValueState[string](b, "s", SerializerFor[string]())
	b.SetCurrentKey("k")
	v.Update("not a number")
	blocks := snapshotBytes(b.Snapshot())
	r := backendFor(4)
	restoreAll(t, r, blocks)
	if _, err := GetValueState[float64](r, "s", SerializerFor[float64]()); err == nil {
		t.Error("decoding a string as float64 must fail")
	}
}

func TestTimers(t *testing.T) {
	b := backendFor(8)
	tm, _ := GetTimers(b, KindProcessingTime)
	b.SetCurrentKey("a")
	tm.Register(30)
	tm.Register(10)
	tm.Register(10) // the same timer once
	b.SetCurrentKey("b")
	tm.Register(20)
	tm.Register(40)
	tm.Delete(40)
	if tm.Len() != 3 {
		t.Fatalf("Len = %d", tm.Len())
	}
	if next, _ := tm.Next(); next != 10 {
		t.Fatalf("Next = %d", next)
	}
	blocks := snapshotBytes(b.Snapshot())
	var fired []string
	err := tm.FireDue(25, func(ts int64) error {
		fired = append(fired, fmt.Sprintf("%s@%d", b.CurrentKey(), ts))
		if ts == 10 {
			tm.Register(15) // set while firing, due: fires in the same call
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a@10", "a@15", "b@20"}; !slices.Equal(fired, want) {
		t.Errorf("fired %v; want %v", fired, want)
	}
	// The snapshot from before firing restores all three.
	r := backendFor(8)
	rt, _ := GetTimers(r, KindProcessingTime)
	restoreAll(t, r, blocks)
	if rt.Len() != 3 {
		t.Fatalf("restored %d timers", rt.Len())
	}
	fired = nil
	rt.FireDue(100, func(ts int64) error { fired = append(fired, fmt.Sprintf("%s@%d", r.CurrentKey(), ts)); return nil })
	if want := []string{"a@10", "b@20", "a@30"}; !slices.Equal(fired, want) {
		t.Errorf("restored timers fired %v; want %v", fired, want)
	}
}

// TestRescaleRestoresEachKeyOnce splits a snapshot of one subtask among
// three by key group, as the restore planner does.
func TestRescaleRestoresEachKeyOnce(t *testing.T) {
	const maxP = 16
	b := backendFor(maxP)
	v, _ := GetValueState[int64](b, "count", SerializerFor[int64]())
	for i := 0; i < 500; i++ {
		b.SetCurrentKey(fmt.Sprint(i))
		v.Update(int64(i))
	}
	blocks := snapshotBytes(b.Snapshot())
	seen := 0
	for sub := 0; sub < 3; sub++ {
		r := NewKeyedBackend(SerializerFor[string](), maxP, RangeForSubtask(maxP, 3, sub))
		rv, _ := GetValueState[int64](r, "count", SerializerFor[int64]())
		for kg, blk := range blocks {
			if SubtaskForKeyGroup(maxP, 3, kg) == sub {
				if err := r.RestoreKeyGroup(kg, blk); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := 0; i < 500; i++ {
			k := fmt.Sprint(i)
			if SubtaskForKeyGroup(maxP, 3, r.KeyGroupOf(k)) != sub {
				continue
			}
			r.SetCurrentKey(k)
			if got, ok := rv.Value(); !ok || got != int64(i) {
				t.Fatalf("subtask %d key %s: %d %v", sub, k, got, ok)
			}
			seen++
		}
	}
	if seen != 500 {
		t.Errorf("restored %d keys; want 500", seen)
	}
}

// TestPropertySnapshotRestore: random writes, interleaved with snapshots
// that are encoded late (after more writes); each snapshot restores to
// exactly the model's state at the time it was taken.
func TestPropertySnapshotRestore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := backendFor(8)
		v, _ := GetValueState[int64](b, "v", SerializerFor[int64]())
		m, _ := GetMapState[int, int](b, "m", SerializerFor[int](), SerializerFor[int]())
		l, _ := GetListState[int](b, "l", SerializerFor[int]())
		type model struct {
			v map[string]int64
			m map[string]map[int]int
			l map[string][]int
		}
		cur := model{v: map[string]int64{}, m: map[string]map[int]int{}, l: map[string][]int{}}
		clone := func(x model) model {
			c := model{v: maps.Clone(x.v), m: map[string]map[int]int{}, l: map[string][]int{}}
			for k, mm := range x.m {
				c.m[k] = maps.Clone(mm)
			}
			for k, ll := range x.l {
				c.l[k] = slices.Clone(ll)
			}
			return c
		}
		type taken struct {
			snap  *KeyedSnapshot
			model model
		}
		var pending []taken
		check := func(tk taken) {
			blocks := snapshotBytes(tk.snap)
			r := backendFor(8)
			rv, _ := GetValueState[int64](r, "v", SerializerFor[int64]())
			rm, _ := GetMapState[int, int](r, "m", SerializerFor[int](), SerializerFor[int]())
			rl, _ := GetListState[int](r, "l", SerializerFor[int]())
			for kg, blk := range blocks {
				if err := r.RestoreKeyGroup(kg, blk); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 20; i++ {
				k := fmt.Sprint(i)
				r.SetCurrentKey(k)
				got, ok := rv.Value()
				want, wok := tk.model.v[k]
				if ok != wok || got != want {
					t.Fatalf("key %s value: %d %v; want %d %v", k, got, ok, want, wok)
				}
				gm := map[int]int{}
				rm.All(func(a, c int) bool { gm[a] = c; return true })
				if !maps.Equal(gm, tk.model.m[k]) && !(len(gm) == 0 && len(tk.model.m[k]) == 0) {
					t.Fatalf("key %s map: %v; want %v", k, gm, tk.model.m[k])
				}
				if gl := rl.Get(); !slices.Equal(gl, tk.model.l[k]) {
					t.Fatalf("key %s list: %v; want %v", k, gl, tk.model.l[k])
				}
			}
		}
		steps := rapid.IntRange(1, 200).Draw(t, "steps")
		for s := 0; s < steps; s++ {
			k := fmt.Sprint(rapid.IntRange(0, 19).Draw(t, "key"))
			b.SetCurrentKey(k)
			switch rapid.IntRange(0, 7).Draw(t, "op") {
			case 0:
				n := rapid.Int64().Draw(t, "n")
				v.Update(n)
				cur.v[k] = n
			case 1:
				v.Clear()
				delete(cur.v, k)
			case 2:
				a, c := rapid.IntRange(0, 5).Draw(t, "mk"), rapid.Int().Draw(t, "mv")
				m.Put(a, c)
				if cur.m[k] == nil {
					cur.m[k] = map[int]int{}
				}
				cur.m[k][a] = c
			case 3:
				a := rapid.IntRange(0, 5).Draw(t, "mk")
				m.Remove(a)
				delete(cur.m[k], a)
				if len(cur.m[k]) == 0 {
					delete(cur.m, k)
				}
			case 4:
				x := rapid.Int().Draw(t, "lv")
				l.Add(x)
				cur.l[k] = append(cur.l[k], x)
			case 5:
				l.Clear()
				delete(cur.l, k)
			case 6:
				pending = append(pending, taken{b.Snapshot(), clone(cur)})
			case 7:
				if len(pending) > 0 {
					i := rapid.IntRange(0, len(pending)-1).Draw(t, "which")
					check(pending[i])
					pending = slices.Delete(pending, i, i+1)
				}
			}
		}
		for _, tk := range pending {
			check(tk)
		}
	})
}

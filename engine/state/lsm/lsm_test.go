package lsm_test

// These tests hold the LSM backend (state.LSMBackend over lsm.Store) to the
// hashmap backend (state.KeyedBackend), the reference: the same operations
// must read the same on both, and snapshots of both must encode to the same
// canonical key-group blocks (savepoint/FORMAT.md), byte for byte, so that
// a savepoint of one restores into the other.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/engine/state/lsm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const maxPar = 128

var (
	fullRange = state.KeyGroupRange{Start: 0, End: maxPar - 1}
	keySer    = state.SerializerFor[string]()
)

// tb is what *testing.T and *rapid.T have in common here.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func openLSM(t tb, dir string, r state.KeyGroupRange) (*state.LSMBackend[string], *lsm.Store) {
	t.Helper()
	// A small write buffer and row cache: the store flushes to Pebble
	// every few dozen writes and evicts rows as often, so that reads
	// through a flush in flight and from Pebble are tested too.
	st, err := lsm.Open(lsm.Options{Dir: dir, BlockCacheSize: 1 << 20, WriteBufferSize: 4 << 10, RowCacheSize: 4 << 10})
	if err != nil {
		t.Fatalf("lsm.Open(%s): %v", dir, err)
	}
	return state.NewLSMBackend(st, keySer, maxPar, r), st
}

// The states every test declares, under these names.
const (
	valueName = "count"
	listName  = "events"
	mapName   = "totals"
)

// handles are one backend's declared states.
type handles struct {
	b  state.Backend[string]
	v  state.ValueState[int64]
	l  state.ListState[string]
	m  state.MapState[string, int64]
	tq [2]state.TimerQueue // processing time, event time
}

var timerKinds = [2]state.Kind{state.KindProcessingTime, state.KindEventTime}

func declare(t tb, b state.Backend[string]) *handles {
	t.Helper()
	h := &handles{b: b}
	var err error
	if h.v, err = state.GetValueState[int64](b, valueName, state.SerializerFor[int64]()); err != nil {
		t.Fatalf("%T: value state: %v", b, err)
	}
	if h.l, err = state.GetListState[string](b, listName, state.SerializerFor[string]()); err != nil {
		t.Fatalf("%T: list state: %v", b, err)
	}
	if h.m, err = state.GetMapState[string, int64](b, mapName, state.SerializerFor[string](), state.SerializerFor[int64]()); err != nil {
		t.Fatalf("%T: map state: %v", b, err)
	}
	for i, k := range timerKinds {
		if h.tq[i], err = state.TimersFor(b, k); err != nil {
			t.Fatalf("%T: timers %s: %v", b, k, err)
		}
	}
	return h
}

// encodeSnapshot encodes every key group of a snapshot (which it does not
// release).
func encodeSnapshot(s state.Snapshot) []state.KeyGroupBlock {
	r := s.KeyGroupRange()
	out := make([]state.KeyGroupBlock, 0, r.Len())
	for kg := r.Start; kg <= r.End; kg++ {
		out = append(out, state.KeyGroupBlock{KeyGroup: kg, Block: encodeKG(s, nil, kg)})
	}
	return out
}

// takeBlocks snapshots b and encodes every key group of its range.
func takeBlocks(t tb, b state.Backend[string]) []state.KeyGroupBlock {
	t.Helper()
	s, err := b.TakeSnapshot(state.SnapshotOptions{})
	if err != nil {
		t.Fatalf("%T: TakeSnapshot: %v", b, err)
	}
	defer s.Release()
	return encodeSnapshot(s)
}

func sameBlocks(t tb, what string, got, want []state.KeyGroupBlock) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d blocks; want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].KeyGroup != want[i].KeyGroup {
			t.Fatalf("%s: block %d is of key group %d; want %d", what, i, got[i].KeyGroup, want[i].KeyGroup)
		}
		if !bytes.Equal(got[i].Block, want[i].Block) {
			t.Fatalf("%s: key group %d differs:\n got %q\nwant %q", what, got[i].KeyGroup, got[i].Block, want[i].Block)
		}
	}
}

// blockState is one state's part of a canonical key-group block.
type blockState struct {
	kind    state.Kind
	typ     string
	count   int64
	payload []byte
}

// parseBlock splits a canonical key-group block into its states.
func parseBlock(t tb, block []byte) map[string]blockState {
	t.Helper()
	readBytes := func(src []byte) ([]byte, []byte) {
		n, k := binary.Uvarint(src)
		if k <= 0 || uint64(len(src)-k) < n {
			t.Fatalf("truncated block %q", block)
		}
		return src[k : k+int(n)], src[k+int(n):]
	}
	n, k := binary.Uvarint(block)
	if k <= 0 {
		t.Fatalf("truncated block %q", block)
	}
	rest := block[k:]
	out := map[string]blockState{}
	prev := ""
	for i := uint64(0); i < n; i++ {
		name, r := readBytes(rest)
		if i > 0 && string(name) <= prev {
			t.Fatalf("states out of order in block %q: %q after %q", block, name, prev)
		}
		prev = string(name)
		if len(r) == 0 {
			t.Fatalf("truncated block %q", block)
		}
		kind := state.Kind(r[0])
		typ, r := readBytes(r[1:])
		payload, r := readBytes(r)
		cnt, w := binary.Uvarint(payload)
		if w <= 0 || cnt == 0 {
			t.Fatalf("state %q: bad payload count in block %q", name, block)
		}
		out[string(name)] = blockState{kind, string(typ), int64(cnt), payload}
		rest = r
	}
	if len(rest) != 0 {
		t.Fatalf("%d trailing bytes in block %q", len(rest), block)
	}
	return out
}

// entryCounts sums the entries of each state over blocks.
func entryCounts(t tb, blocks [][]byte) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, b := range blocks {
		for name, st := range parseBlock(t, b) {
			out[name] += st.count
		}
	}
	return out
}

// sameStates compares the names, kinds and types of the states two
// backends list (the LSM counts entries only when it encodes).
func sameStates(t tb, a, b state.Backend[string]) {
	t.Helper()
	strip := func(in []state.StateInfo) []state.StateInfo {
		out := slices.Clone(in)
		for i := range out {
			out[i].Entries = 0
		}
		return out
	}
	if x, y := strip(a.States()), strip(b.States()); !slices.Equal(x, y) {
		t.Fatalf("States differ:\n%T: %v\n%T: %v", a, x, b, y)
	}
}

// mapContents reads the current key's map with All.
func mapContents(t tb, m state.MapState[string, int64]) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m.All(func(k string, v int64) bool {
		if _, dup := out[k]; dup {
			t.Fatalf("All visits %q twice", k)
		}
		out[k] = v
		return true
	})
	return out
}

// fired is one timer firing as the callback saw it.
type fired struct {
	ts   int64
	key  string
	v    int64
	hasV bool
	kind int
}

// fireCallback records the firings, and like an operator reads and writes
// state and sets timers from them (at other times than the one firing, so
// that the firings do not depend on the order of timers of equal time).
func fireCallback(h *handles, kind int, out *[]fired) func(int64) error {
	return func(ts int64) error {
		v, ok := h.v.Value()
		*out = append(*out, fired{ts: ts, key: h.b.CurrentKey(), v: v, hasV: ok, kind: kind})
		if ts%5 == 0 {
			h.v.Update(ts)
		}
		if ts%3 == 0 {
			h.tq[kind].Register(ts + 7) // (ts+7)%3 != 0: no chain
		}
		return nil
	}
}

// sameFirings checks that both fired the same timers, each in time order.
// Timers of equal time may fire in another order (after a restore the
// backends rebuild their queues from different orders).
func sameFirings(t tb, a, b []fired) {
	t.Helper()
	for _, fs := range [][]fired{a, b} {
		for i := 1; i < len(fs); i++ {
			if fs[i].ts < fs[i-1].ts {
				t.Fatalf("timers fired out of time order: %+v", fs)
			}
		}
	}
	norm := func(fs []fired) []fired {
		out := slices.Clone(fs)
		slices.SortFunc(out, func(x, y fired) int {
			return cmp.Or(cmp.Compare(x.ts, y.ts), cmp.Compare(x.key, y.key))
		})
		return out
	}
	if x, y := norm(a), norm(b); !slices.Equal(x, y) {
		t.Fatalf("timers fired differently:\nhashmap: %+v\n    lsm: %+v", x, y)
	}
}

// compareReads reads every state of every key on both backends, and their
// timer queues.
func compareReads(t tb, a, b *handles, keys []string) {
	t.Helper()
	compareKeyedReads(t, a, b, keys)
	for i := range a.tq {
		if al, bl := a.tq[i].Len(), b.tq[i].Len(); al != bl {
			t.Fatalf("%s timers: Len %d vs %d", timerKinds[i], al, bl)
		}
		an, aok := a.tq[i].Next()
		bn, bok := b.tq[i].Next()
		if an != bn || aok != bok {
			t.Fatalf("%s timers: Next %d,%v vs %d,%v", timerKinds[i], an, aok, bn, bok)
		}
	}
}

// compareKeyedReads reads the value, list and map state of keys on both
// backends.
func compareKeyedReads(t tb, a, b *handles, keys []string) {
	t.Helper()
	for _, k := range keys {
		a.b.SetCurrentKey(k)
		b.b.SetCurrentKey(k)
		av, aok := a.v.Value()
		bv, bok := b.v.Value()
		if av != bv || aok != bok {
			t.Fatalf("key %q: value %d,%v vs %d,%v", k, av, aok, bv, bok)
		}
		if al, bl := a.l.Get(), b.l.Get(); !slices.Equal(al, bl) {
			t.Fatalf("key %q: list %q vs %q", k, al, bl)
		}
		if am, bm := mapContents(t, a.m), mapContents(t, b.m); !maps.Equal(am, bm) {
			t.Fatalf("key %q: map %v vs %v", k, am, bm)
		}
		if al, bl := a.m.Len(), b.m.Len(); al != bl {
			t.Fatalf("key %q: map Len %d vs %d", k, al, bl)
		}
	}
}

// ---- the property: the LSM backend behaves as the hashmap backend ----

// Small domains, so that operations collide; strings with 0xFF bytes and
// the empty string test the key layout's prefix bounds.
var (
	testKeys  = []string{"", "a", "b", "zz", "k\xff", "\xff\xff", "a-rather-longer-key"}
	userKeys  = []string{"", "x", "y", "\xff", "x\xff", "xy"}
	listElems = []string{"", "p", "q", "\xff", "a longer element"}
)

type snapPair struct {
	id      int
	h, l    state.Snapshot
	ref     map[int][]byte // the blocks of a hashmap snapshot encoded at once
	encoded map[int]bool
}

type machine struct {
	t       *rapid.T
	newDir  func() string
	h, l    *handles
	store   *lsm.Store
	key     string
	snaps   []*snapPair
	nsnaps  int
	retired []*snapPair // released, kept to check they stay released
}

func (m *machine) setKey(k string) {
	m.key = k
	// The hashmap takes the key with its hash, as a keyed exchange gives
	// it: its string tables' lookups by that hash are checked too.
	h := keySer.Hash(k)
	m.h.b.(*state.KeyedBackend[string]).SetCurrentKeyHashed(k, state.KeyGroupForHash(h, maxPar), uint32(h>>32))
	m.l.b.SetCurrentKey(k)
}

func (m *machine) close() {
	for _, s := range m.snaps {
		s.h.Release()
		s.l.Release()
	}
	m.snaps = nil
	if m.l != nil {
		if err := m.l.b.Dispose(); err != nil {
			m.t.Errorf("Dispose: %v", err)
		}
	}
}

// actions, some repeated for weight.
var actions = []string{
	"key", "key", "key",
	"value.update", "value.update", "value.clear", "value.get",
	"list.add", "list.add", "list.update", "list.clear", "list.get",
	"map.put", "map.put", "map.put", "map.remove", "map.get", "map.contains", "map.len", "map.all", "map.all.stop", "map.clear",
	"timer.register", "timer.register", "timer.register", "timer.delete", "timer.next", "timer.fire", "timer.len",
	"snapshot.take", "snapshot.take", "snapshot.encode", "snapshot.encode", "snapshot.release", "snapshot.release",
	"restart",
}

func (m *machine) step() {
	t := m.t
	h, l := m.h, m.l
	switch a := rapid.SampledFrom(actions).Draw(t, "action"); a {
	case "key":
		m.setKey(rapid.SampledFrom(testKeys).Draw(t, "key"))

	case "value.update":
		v := rapid.Int64Range(-1<<40, 1<<40).Draw(t, "v")
		h.v.Update(v)
		l.v.Update(v)
	case "value.clear":
		h.v.Clear()
		l.v.Clear()
	case "value.get":
		hv, hok := h.v.Value()
		lv, lok := l.v.Value()
		if hv != lv || hok != lok {
			t.Fatalf("key %q: Value() = %d,%v on hashmap, %d,%v on lsm", m.key, hv, hok, lv, lok)
		}

	case "list.add":
		e := rapid.SampledFrom(listElems).Draw(t, "elem")
		h.l.Add(e)
		l.l.Add(e)
	case "list.update":
		vs := rapid.SliceOfN(rapid.SampledFrom(listElems), 0, 4).Draw(t, "elems")
		h.l.Update(vs)
		l.l.Update(vs)
	case "list.clear":
		h.l.Clear()
		l.l.Clear()
	case "list.get":
		if hl, ll := h.l.Get(), l.l.Get(); !slices.Equal(hl, ll) {
			t.Fatalf("key %q: list Get() = %q on hashmap, %q on lsm", m.key, hl, ll)
		}

	case "map.put":
		uk := rapid.SampledFrom(userKeys).Draw(t, "uk")
		uv := rapid.Int64Range(-1000, 1000).Draw(t, "uv")
		h.m.Put(uk, uv)
		l.m.Put(uk, uv)
	case "map.remove":
		uk := rapid.SampledFrom(userKeys).Draw(t, "uk")
		h.m.Remove(uk)
		l.m.Remove(uk)
	case "map.get":
		uk := rapid.SampledFrom(userKeys).Draw(t, "uk")
		hv, hok := h.m.Get(uk)
		lv, lok := l.m.Get(uk)
		if hv != lv || hok != lok {
			t.Fatalf("key %q: map Get(%q) = %d,%v on hashmap, %d,%v on lsm", m.key, uk, hv, hok, lv, lok)
		}
	case "map.contains":
		uk := rapid.SampledFrom(userKeys).Draw(t, "uk")
		if hc, lc := h.m.Contains(uk), l.m.Contains(uk); hc != lc {
			t.Fatalf("key %q: map Contains(%q) = %v on hashmap, %v on lsm", m.key, uk, hc, lc)
		}
	case "map.len":
		if hn, ln := h.m.Len(), l.m.Len(); hn != ln {
			t.Fatalf("key %q: map Len() = %d on hashmap, %d on lsm", m.key, hn, ln)
		}
	case "map.all":
		if hm, lm := mapContents(t, h.m), mapContents(t, l.m); !maps.Equal(hm, lm) {
			t.Fatalf("key %q: map All = %v on hashmap, %v on lsm", m.key, hm, lm)
		}
	case "map.all.stop":
		stop := rapid.IntRange(1, 3).Draw(t, "stop")
		visit := func(ms state.MapState[string, int64]) int {
			n := 0
			ms.All(func(string, int64) bool { n++; return n < stop })
			return n
		}
		hn, ln := visit(h.m), visit(l.m)
		if want := min(stop, h.m.Len()); hn != want || ln != want {
			t.Fatalf("key %q: All stopping after %d visits %d on hashmap, %d on lsm; want %d", m.key, stop, hn, ln, want)
		}
	case "map.clear":
		h.m.Clear()
		l.m.Clear()

	case "timer.register", "timer.delete":
		kind := rapid.IntRange(0, 1).Draw(t, "kind")
		ts := m.drawTime("ts")
		if a == "timer.register" {
			h.tq[kind].Register(ts)
			l.tq[kind].Register(ts)
		} else {
			h.tq[kind].Delete(ts)
			l.tq[kind].Delete(ts)
		}
	case "timer.next":
		kind := rapid.IntRange(0, 1).Draw(t, "kind")
		hn, hok := h.tq[kind].Next()
		ln, lok := l.tq[kind].Next()
		if hn != ln || hok != lok {
			t.Fatalf("%s timers: Next() = %d,%v on hashmap, %d,%v on lsm", timerKinds[kind], hn, hok, ln, lok)
		}
	case "timer.len":
		for kind := range h.tq {
			if hn, ln := h.tq[kind].Len(), l.tq[kind].Len(); hn != ln {
				t.Fatalf("%s timers: Len() = %d on hashmap, %d on lsm", timerKinds[kind], hn, ln)
			}
		}
	case "timer.fire":
		kind := rapid.IntRange(0, 1).Draw(t, "kind")
		upTo := m.drawTime("upTo")
		var hf, lf []fired
		if err := h.tq[kind].FireDue(upTo, fireCallback(h, kind, &hf)); err != nil {
			t.Fatalf("hashmap FireDue: %v", err)
		}
		if err := l.tq[kind].FireDue(upTo, fireCallback(l, kind, &lf)); err != nil {
			t.Fatalf("lsm FireDue: %v", err)
		}
		sameFirings(t, hf, lf)
		m.setKey(m.key) // firing made the timers' keys current

	case "snapshot.take":
		if len(m.snaps) >= 4 {
			return
		}
		m.nsnaps++
		sp := &snapPair{id: m.nsnaps, ref: map[int][]byte{}, encoded: map[int]bool{}}
		for _, b := range takeBlocks(t, h.b) {
			sp.ref[b.KeyGroup] = b.Block
		}
		var err error
		if sp.h, err = h.b.TakeSnapshot(state.SnapshotOptions{}); err != nil {
			t.Fatalf("hashmap TakeSnapshot: %v", err)
		}
		if sp.l, err = l.b.TakeSnapshot(state.SnapshotOptions{}); err != nil {
			t.Fatalf("lsm TakeSnapshot: %v", err)
		}
		if r := sp.l.KeyGroupRange(); r != fullRange {
			t.Fatalf("lsm snapshot's range is %v", r)
		}
		m.snaps = append(m.snaps, sp)
	case "snapshot.encode":
		if len(m.snaps) == 0 {
			return
		}
		sp := m.snaps[rapid.IntRange(0, len(m.snaps)-1).Draw(t, "snap")]
		for range rapid.IntRange(1, 12).Draw(t, "groups") {
			m.encode(sp, rapid.IntRange(fullRange.Start, fullRange.End).Draw(t, "kg"))
		}
	case "snapshot.release":
		if len(m.snaps) == 0 {
			return
		}
		i := rapid.IntRange(0, len(m.snaps)-1).Draw(t, "snap")
		m.release(i, rapid.Bool().Draw(t, "finish"))

	case "restart":
		m.restart()

	default:
		panic(a)
	}
}

// drawTime draws a timer time: small ones cross the varint's byte
// boundaries (so the encoded order differs from byte order), large ones
// its sign and width.
func (m *machine) drawTime(label string) int64 {
	if rapid.IntRange(0, 9).Draw(m.t, label+".big") == 0 {
		return rapid.SampledFrom([]int64{-1 << 62, -1 << 40, 1 << 40, 1<<62 - 1}).Draw(m.t, label)
	}
	return rapid.Int64Range(-300, 300).Draw(m.t, label)
}

// encode encodes one key group of both snapshots (unless done already)
// behind a random prefix, and checks both against the reference.
func (m *machine) encode(sp *snapPair, kg int) {
	t := m.t
	if sp.encoded[kg] {
		return
	}
	sp.encoded[kg] = true
	prefix := []byte("xyz")[:rapid.IntRange(0, 3).Draw(t, "prefix")]
	hb := encodeKG(sp.h, slices.Clone(prefix), kg)
	lb := encodeKG(sp.l, slices.Clone(prefix), kg)
	if !bytes.HasPrefix(hb, prefix) || !bytes.HasPrefix(lb, prefix) {
		t.Fatalf("snapshot %d, key group %d: EncodeKeyGroup lost dst's prefix %q: %q, %q", sp.id, kg, prefix, hb, lb)
	}
	hb, lb = hb[len(prefix):], lb[len(prefix):]
	if !bytes.Equal(hb, sp.ref[kg]) {
		t.Fatalf("snapshot %d, key group %d: the hashmap encodes\n%q\nlater, but\n%q\nat TakeSnapshot", sp.id, kg, hb, sp.ref[kg])
	}
	if !bytes.Equal(lb, sp.ref[kg]) {
		t.Fatalf("snapshot %d, key group %d: the lsm encodes\n%q\nthe hashmap\n%q", sp.id, kg, lb, sp.ref[kg])
	}
}

// release releases snapshot i, after encoding the rest of its key groups
// (a completed checkpoint) or not (an aborted one).
func (m *machine) release(i int, finish bool) {
	t := m.t
	sp := m.snaps[i]
	m.snaps = slices.Delete(m.snaps, i, i+1)
	if finish {
		for kg := fullRange.Start; kg <= fullRange.End; kg++ {
			m.encode(sp, kg)
		}
		ec, ok := sp.l.(state.EntryCounter)
		if !ok {
			t.Fatalf("lsm snapshot %T is no EntryCounter", sp.l)
		}
		want := entryCounts(t, slices.Collect(maps.Values(sp.ref)))
		got := maps.Clone(ec.EntryCounts())
		maps.DeleteFunc(got, func(_ string, n int64) bool { return n == 0 })
		if !maps.Equal(got, want) {
			t.Fatalf("snapshot %d: EntryCounts = %v; the blocks have %v", sp.id, got, want)
		}
	}
	if rapid.Bool().Draw(t, "hashmap first") {
		sp.h.Release()
		sp.l.Release()
	} else {
		sp.l.Release()
		sp.h.Release()
	}
	sp.l.Release() // idempotent
}

// restart does what a failover does: the last snapshot of each backend is
// restored into a new backend of the other kind (the blocks being
// identical), and the states declared again.
func (m *machine) restart() {
	t := m.t
	hb := takeBlocks(t, m.h.b)
	lb := takeBlocks(t, m.l.b)
	sameBlocks(t, "restart: lsm vs hashmap", lb, hb)

	// The old LSM is disposed with snapshots still open (an aborted
	// checkpoint's encoder may still hold one): it closes with the last.
	oldDir := m.store.Dir()
	if err := m.l.b.Dispose(); err != nil {
		t.Fatalf("Dispose: %v", err)
	}
	for len(m.snaps) > 0 {
		if _, err := os.Stat(oldDir); err != nil {
			t.Fatalf("the store's directory went before its last snapshot was released: %v", err)
		}
		m.release(rapid.IntRange(0, len(m.snaps)-1).Draw(t, "snap"), rapid.Bool().Draw(t, "finish"))
	}
	if _, err := os.Stat(oldDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the store's directory %s is still there after Dispose (%v)", oldDir, err)
	}
	m.l = nil

	declareFirst := rapid.Bool().Draw(t, "declare before restore")
	hn := state.NewKeyedBackend(keySer, maxPar, fullRange)
	ln, store := openLSM(t, m.newDir(), fullRange)
	m.store = store
	var h, l *handles
	if declareFirst {
		h, l = declare(t, hn), declare(t, ln)
	}
	m.l = &handles{b: ln} // disposed by close, should the restore fail
	if err := hn.RestoreKeyGroups(lb, rapid.IntRange(1, 3).Draw(t, "workers")); err != nil {
		t.Fatalf("hashmap restore: %v", err)
	}
	if err := ln.RestoreKeyGroups(hb, 1); err != nil {
		t.Fatalf("lsm restore: %v", err)
	}
	if !declareFirst {
		sameStates(t, hn, ln) // restored, undeclared
		h, l = declare(t, hn), declare(t, ln)
	}
	m.h, m.l = h, l
	m.setKey(m.key)
}

func TestLSMMatchesHashmap(t *testing.T) {
	base := t.TempDir()
	n := 0
	newDir := func() string {
		n++
		return filepath.Join(base, fmt.Sprint("store-", n))
	}
	rapid.Check(t, func(rt *rapid.T) {
		lb, store := openLSM(rt, newDir(), fullRange)
		m := &machine{t: rt, newDir: newDir, store: store, l: &handles{b: lb}}
		defer m.close()
		m.l = declare(rt, lb)
		m.h = declare(rt, state.NewKeyedBackend(keySer, maxPar, fullRange))
		m.setKey(testKeys[0])
		for range rapid.IntRange(1, 150).Draw(rt, "steps") {
			m.step()
			if hk, lk := m.h.b.CurrentKey(), m.l.b.CurrentKey(); hk != lk || hk != m.key {
				rt.Fatalf("current key %q on hashmap, %q on lsm; want %q", hk, lk, m.key)
			}
			sameStates(rt, m.h.b, m.l.b)
		}
		// Every snapshot still open is completed, then one more is taken.
		for len(m.snaps) > 0 {
			m.release(0, true)
		}
		sameBlocks(rt, "final snapshot", takeBlocks(rt, m.l.b), takeBlocks(rt, m.h.b))
		compareReads(rt, m.h, m.l, testKeys)
	})
}

// ---- restore round trips and rescaling ----

// manyKeys are enough keys for most key groups to have entries.
func manyKeys() []string {
	keys := []string{"", "\xff", "\xff\xff\xff", "a\xff"}
	for i := range 400 {
		keys = append(keys, fmt.Sprintf("key-%d", i))
	}
	return keys
}

// populate writes every kind of state for keys, deterministically.
func populate(h *handles, keys []string) {
	for i, k := range keys {
		h.b.SetCurrentKey(k)
		if i%4 != 3 {
			h.v.Update(int64(i*7919) - 1000)
		}
		for j := range i % 5 {
			h.l.Add(fmt.Sprintf("e%d-%d", i, j))
		}
		for j := range i % 6 {
			h.m.Put(userKeys[(i+j)%len(userKeys)], int64(i-j))
		}
		if i%3 == 0 {
			h.tq[0].Register(int64(i%200) - 60)
			h.tq[0].Register(int64(i % 130))
		}
		if i%7 == 0 {
			h.tq[1].Register(int64(i) * 1000)
			h.tq[1].Register(-int64(i))
		}
	}
}

// inRange returns the keys whose groups are in r.
func inRange(keys []string, r state.KeyGroupRange) []string {
	var out []string
	for _, k := range keys {
		if r.Contains(state.KeyGroupForHash(keySer.Hash(k), maxPar)) {
			out = append(out, k)
		}
	}
	return out
}

func restoreInto(t *testing.T, b state.Backend[string], blocks []state.KeyGroupBlock, workers int, declareFirst bool) *handles {
	t.Helper()
	var h *handles
	if declareFirst {
		h = declare(t, b)
	}
	if err := b.RestoreKeyGroups(blocks, workers); err != nil {
		t.Fatalf("%T: RestoreKeyGroups: %v", b, err)
	}
	if !declareFirst {
		// Restored, undeclared state is listed as such.
		names := map[string]bool{}
		for _, s := range b.States() {
			names[s.Name] = true
		}
		for _, n := range []string{valueName, listName, mapName, state.ProcessingTimersName, state.EventTimersName} {
			if !names[n] {
				t.Fatalf("%T: restored state %q is not listed: %v", b, n, b.States())
			}
		}
		h = declare(t, b)
	}
	return h
}

// fireAll fires every timer of both and compares the firings.
func fireAll(t *testing.T, a, b *handles) {
	t.Helper()
	for kind := range a.tq {
		var af, bf []fired
		if err := a.tq[kind].FireDue(1<<62, fireCallback(a, kind, &af)); err != nil {
			t.Fatal(err)
		}
		if err := b.tq[kind].FireDue(1<<62, fireCallback(b, kind, &bf)); err != nil {
			t.Fatal(err)
		}
		if len(af) == 0 {
			t.Fatalf("%s timers: none fired", timerKinds[kind])
		}
		sameFirings(t, af, bf)
		if a.tq[kind].Len() != 0 || b.tq[kind].Len() != 0 {
			t.Fatalf("%s timers left after firing all: %d, %d", timerKinds[kind], a.tq[kind].Len(), b.tq[kind].Len())
		}
	}
}

func TestRestoreRoundTrip(t *testing.T) {
	keys := manyKeys()
	src := declare(t, state.NewKeyedBackend(keySer, maxPar, fullRange))
	populate(src, keys)
	want := takeBlocks(t, src.b)
	nonEmpty := 0
	for _, b := range want {
		if len(b.Block) > 1 {
			nonEmpty++
		}
	}
	if nonEmpty < fullRange.Len()*3/4 {
		t.Fatalf("only %d key groups have state", nonEmpty)
	}

	for _, declareFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("declareFirst=%v", declareFirst), func(t *testing.T) {
			// hashmap -> LSM
			lb, _ := openLSM(t, filepath.Join(t.TempDir(), "db"), fullRange)
			defer lb.Dispose()
			l := restoreInto(t, lb, want, 1, declareFirst)
			fromLSM := takeBlocks(t, lb)
			sameBlocks(t, "hashmap -> lsm", fromLSM, want)

			// LSM -> hashmap
			h := restoreInto(t, state.NewKeyedBackend(keySer, maxPar, fullRange), fromLSM, 3, declareFirst)
			sameBlocks(t, "lsm -> hashmap", takeBlocks(t, h.b), want)

			compareReads(t, src, l, keys)
			compareReads(t, h, l, keys)

			// Restored timers fire (their queue is rebuilt from the store).
			fireAll(t, h, l)
			sameBlocks(t, "after firing every timer", takeBlocks(t, l.b), takeBlocks(t, h.b))
		})
	}
}

func TestRestoreSubRange(t *testing.T) {
	keys := manyKeys()
	src := declare(t, state.NewKeyedBackend(keySer, maxPar, fullRange))
	populate(src, keys)
	want := takeBlocks(t, src.b)

	for _, p := range []int{2, 3, 5} {
		for i := range p {
			r := state.RangeForSubtask(maxPar, p, i)
			t.Run(fmt.Sprintf("p=%d/%v", p, r), func(t *testing.T) {
				blocks := want[r.Start : r.End+1]
				sub := inRange(keys, r)
				if len(sub) == 0 {
					t.Fatal("no keys in range")
				}

				lb, _ := openLSM(t, filepath.Join(t.TempDir(), "db"), r)
				defer lb.Dispose()
				// A block of another subtask's key group is refused.
				other := want[(r.End+1)%maxPar]
				if err := lb.RestoreKeyGroups([]state.KeyGroupBlock{other}, 1); err == nil {
					t.Fatalf("restoring key group %d into %v succeeded", other.KeyGroup, r)
				}
				l := restoreInto(t, lb, blocks, 1, i%2 == 0)
				fromLSM := takeBlocks(t, lb)
				sameBlocks(t, "hashmap -> lsm", fromLSM, blocks)

				h := restoreInto(t, state.NewKeyedBackend(keySer, maxPar, r), fromLSM, 2, i%2 == 1)
				sameBlocks(t, "lsm -> hashmap", takeBlocks(t, h.b), blocks)

				// The source has the timers of every key group.
				compareKeyedReads(t, src, l, sub)
				compareReads(t, h, l, sub)
				fireAll(t, h, l)
				sameBlocks(t, "after firing every timer", takeBlocks(t, l.b), takeBlocks(t, h.b))
			})
		}
	}
}

// Merging the sub-range snapshots of an LSM-backed job gives the blocks of
// a job at parallelism 1 (scaling in).
func TestRestoreScaleIn(t *testing.T) {
	keys := manyKeys()
	src := declare(t, state.NewKeyedBackend(keySer, maxPar, fullRange))
	populate(src, keys)
	want := takeBlocks(t, src.b)

	var merged []state.KeyGroupBlock
	for i := range 3 {
		r := state.RangeForSubtask(maxPar, 3, i)
		lb, _ := openLSM(t, filepath.Join(t.TempDir(), "db"), r)
		l := restoreInto(t, lb, want[r.Start:r.End+1], 1, false)
		l.b.SetCurrentKey(inRange(keys, r)[0])
		l.v.Update(42) // the new subtasks go on writing
		merged = append(merged, takeBlocks(t, lb)...)
		if err := lb.Dispose(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		src.b.SetCurrentKey(inRange(keys, state.RangeForSubtask(maxPar, 3, i))[0])
		src.v.Update(42)
	}
	want = takeBlocks(t, src.b)

	lb, _ := openLSM(t, filepath.Join(t.TempDir(), "db"), fullRange)
	defer lb.Dispose()
	restoreInto(t, lb, merged, 1, false)
	sameBlocks(t, "scaled in", takeBlocks(t, lb), want)
}

// ---- Dispose ----

func TestDisposeRemovesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	lb, _ := openLSM(t, dir, fullRange)
	l := declare(t, lb)
	populate(l, manyKeys()[:50])
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("working directory: %v", err)
	}
	if err := lb.Dispose(); err != nil {
		t.Fatalf("Dispose: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("working directory still there after Dispose (%v)", err)
	}
	if s, err := lb.TakeSnapshot(state.SnapshotOptions{}); err == nil {
		s.Release()
		t.Fatal("TakeSnapshot after Dispose succeeded")
	}
	if err := lb.Dispose(); err != nil {
		t.Fatalf("second Dispose: %v", err)
	}
}

func TestDisposeWaitsForSnapshots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	lb, _ := openLSM(t, dir, fullRange)
	l := declare(t, lb)
	h := declare(t, state.NewKeyedBackend(keySer, maxPar, fullRange))
	keys := manyKeys()

	populate(l, keys[:100])
	populate(h, keys[:100])
	want1 := takeBlocks(t, h.b)
	s1, err := lb.TakeSnapshot(state.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	populate(l, keys[100:200])
	populate(h, keys[100:200])
	want2 := takeBlocks(t, h.b)
	s2, err := lb.TakeSnapshot(state.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	populate(l, keys[200:])

	if err := lb.Dispose(); err != nil {
		t.Fatalf("Dispose with snapshots open: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Dispose removed the working directory under open snapshots: %v", err)
	}
	if s, err := lb.TakeSnapshot(state.SnapshotOptions{}); err == nil {
		s.Release()
		t.Fatal("TakeSnapshot after Dispose succeeded")
	}
	// The snapshots still encode, in the order of an encoder that got to
	// the second one first.
	sameBlocks(t, "second snapshot after Dispose", encodeSnapshot(s2), want2)
	s2.Release()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("working directory removed with a snapshot still open: %v", err)
	}
	sameBlocks(t, "first snapshot after Dispose", encodeSnapshot(s1), want1)
	s1.Release()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("working directory still there after the last snapshot's Release (%v)", err)
	}
	s1.Release()
	s2.Release()
	if err := lb.Dispose(); err != nil {
		t.Fatalf("Dispose after close: %v", err)
	}
}

// A snapshot encoded on another goroutine while the task writes shows the
// state as of TakeSnapshot.
func TestSnapshotEncodeConcurrentWithWrites(t *testing.T) {
	lb, _ := openLSM(t, filepath.Join(t.TempDir(), "db"), fullRange)
	defer lb.Dispose()
	l := declare(t, lb)
	h := declare(t, state.NewKeyedBackend(keySer, maxPar, fullRange))
	keys := manyKeys()
	populate(l, keys)
	populate(h, keys)
	want := takeBlocks(t, h.b)

	ls, err := lb.TakeSnapshot(state.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := h.b.TakeSnapshot(state.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var lgot, hgot []state.KeyGroupBlock
	wg.Go(func() { lgot = encodeSnapshot(ls) })
	wg.Go(func() { hgot = encodeSnapshot(hs) })
	for round := range 3 {
		for i, k := range keys {
			for _, x := range []*handles{l, h} {
				x.b.SetCurrentKey(k)
				x.v.Update(int64(round*i + 1))
				x.l.Add("more")
				x.m.Remove(userKeys[i%len(userKeys)])
				x.m.Put("new", int64(round))
				x.tq[0].Delete(int64(i%200) - 60)
				x.tq[1].Register(int64(round))
				if i%10 == 0 {
					x.l.Clear()
					x.m.Clear()
				}
			}
		}
	}
	wg.Wait()
	ls.Release()
	hs.Release()
	sameBlocks(t, "lsm snapshot encoded during writes", lgot, want)
	sameBlocks(t, "hashmap snapshot encoded during writes", hgot, want)
	sameBlocks(t, "after the writes", takeBlocks(t, lb), takeBlocks(t, h.b))
}

// ---- restored state that no operator declares ----

const legacyName = "legacy"

// legacySource is a hashmap backend with the usual states and one more,
// "legacy", that the restored operators do not declare.
func legacySource(t *testing.T, keys []string) []state.KeyGroupBlock {
	src := declare(t, state.NewKeyedBackend(keySer, maxPar, fullRange))
	legacy, err := state.GetValueState[string](src.b, legacyName, state.SerializerFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	populate(src, keys)
	for i, k := range keys {
		if i%2 == 0 {
			src.b.SetCurrentKey(k)
			legacy.Update("old-" + k)
		}
	}
	return takeBlocks(t, src.b)
}

func TestUndeclaredStateIsKept(t *testing.T) {
	keys := manyKeys()
	want := legacySource(t, keys)

	store := func() (*state.LSMBackend[string], *lsm.Store) {
		return openLSM(t, filepath.Join(t.TempDir(), "db"), fullRange)
	}
	lb, lstore := store()
	defer lb.Dispose()
	hb := state.NewKeyedBackend(keySer, maxPar, fullRange)
	for _, b := range []state.Backend[string]{lb, hb} {
		if err := b.RestoreKeyGroups(want, 1); err != nil {
			t.Fatalf("%T: %v", b, err)
		}
	}
	l, h := declare(t, lb), declare(t, hb)
	sameStates(t, hb, lb)
	if !slices.ContainsFunc(lb.States(), func(s state.StateInfo) bool { return s.Name == legacyName && s.Kind == state.KindValue }) {
		t.Fatalf("undeclared state not listed: %v", lb.States())
	}

	// Untouched, the snapshot is the restored one, undeclared state and all.
	sameBlocks(t, "lsm, restored", takeBlocks(t, lb), want)
	sameBlocks(t, "hashmap, restored", takeBlocks(t, hb), want)

	// Writes to the declared states leave the undeclared one as it was.
	for i, k := range keys {
		for _, x := range []*handles{l, h} {
			x.b.SetCurrentKey(k)
			x.v.Update(int64(-i))
			x.m.Put("written", 1)
		}
	}
	gotL := takeBlocks(t, lb)
	sameBlocks(t, "lsm vs hashmap after writes", gotL, takeBlocks(t, hb))
	legacyBlocks := 0
	for i := range gotL {
		was, ok := parseBlock(t, want[i].Block)[legacyName]
		now, ok2 := parseBlock(t, gotL[i].Block)[legacyName]
		if ok != ok2 || !bytes.Equal(was.payload, now.payload) || was.typ != now.typ || was.kind != now.kind {
			t.Fatalf("key group %d: undeclared state %+v became %+v", i, was, now)
		}
		if ok {
			legacyBlocks++
		}
	}
	if legacyBlocks == 0 {
		t.Fatal("no key group has the undeclared state")
	}

	// DropUnregistered drops it, from snapshots and from the store.
	for _, b := range []state.Backend[string]{lb, hb} {
		if got := b.DropUnregistered(); !slices.Equal(got, []string{legacyName}) {
			t.Fatalf("%T: DropUnregistered() = %q", b, got)
		}
		if got := b.DropUnregistered(); len(got) != 0 {
			t.Fatalf("%T: second DropUnregistered() = %q", b, got)
		}
	}
	sameStates(t, hb, lb)
	gotL = takeBlocks(t, lb)
	sameBlocks(t, "lsm vs hashmap after DropUnregistered", gotL, takeBlocks(t, hb))
	for i := range gotL {
		if _, ok := parseBlock(t, gotL[i].Block)[legacyName]; ok {
			t.Fatalf("key group %d: dropped state is still in the snapshot", i)
		}
	}
	// The lsm backend keeps restored, undeclared state under the state id
	// 0xFFFF (lsm_backend.go); nothing may be left there.
	it, err := lstore.NewIter([]byte{0xFF, 0xFF}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var left [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		left = append(left, slices.Clone(it.Key()))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("%d keys of dropped state left in the store, e.g. %q", len(left), left[0])
	}

	// Declared now, the dropped state is empty.
	for _, b := range []state.Backend[string]{lb, hb} {
		legacy, err := state.GetValueState[string](b, legacyName, state.SerializerFor[string]())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			b.SetCurrentKey(k)
			if v, ok := legacy.Value(); ok {
				t.Fatalf("%T: dropped state has %q for key %q", b, v, k)
			}
		}
	}
}

// Restored state declared while a snapshot taken before is still open: the
// snapshot writes it as it was restored; later snapshots as declared and
// written.
func TestDeclareUnderOpenSnapshot(t *testing.T) {
	keys := manyKeys()
	want := legacySource(t, keys)

	lb, _ := openLSM(t, filepath.Join(t.TempDir(), "db"), fullRange)
	defer lb.Dispose()
	hb := state.NewKeyedBackend(keySer, maxPar, fullRange)
	var snaps []state.Snapshot
	var legacies []state.ValueState[string]
	for _, b := range []state.Backend[string]{lb, hb} {
		if err := b.RestoreKeyGroups(want, 1); err != nil {
			t.Fatalf("%T: %v", b, err)
		}
		declare(t, b)
		s, err := b.TakeSnapshot(state.SnapshotOptions{})
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, s)
		legacy, err := state.GetValueState[string](b, legacyName, state.SerializerFor[string]())
		if err != nil {
			t.Fatalf("%T: declare %q: %v", b, legacyName, err)
		}
		legacies = append(legacies, legacy)
		for i, k := range keys {
			b.SetCurrentKey(k)
			v, ok := legacy.Value()
			if wantOK := i%2 == 0; ok != wantOK || (ok && v != "old-"+k) {
				t.Fatalf("%T: key %q: legacy state %q,%v after restore", b, k, v, ok)
			}
			if i%3 == 0 {
				legacy.Update("new-" + k)
			} else {
				legacy.Clear()
			}
		}
	}
	sameBlocks(t, "lsm snapshot taken before declaring", encodeSnapshot(snaps[0]), want)
	sameBlocks(t, "hashmap snapshot taken before declaring", encodeSnapshot(snaps[1]), want)
	for _, s := range snaps {
		s.Release()
	}
	sameStates(t, hb, lb)
	sameBlocks(t, "lsm vs hashmap after declaring", takeBlocks(t, lb), takeBlocks(t, hb))
}

// recordingStore notes the keys a backend prefetches and reads.
type recordingStore struct {
	*lsm.Store
	prefetched, read []string
}

func (r *recordingStore) Prefetch(key []byte) {
	r.prefetched = append(r.prefetched, string(key))
	r.Store.Prefetch(key)
}

func (r *recordingStore) Get(key, dst []byte) ([]byte, bool, error) {
	r.read = append(r.read, string(key))
	return r.Store.Get(key, dst)
}

// TestPrefetchKeyWarmsWhatIsRead: PrefetchKey warms exactly the keys the
// value and list states then read for that key (a prefetch of other keys
// would cost a miss and save none), nothing for a key group outside the
// backend's range, and changes no state.
func TestPrefetchKeyWarmsWhatIsRead(t *testing.T) {
	st, err := lsm.Open(lsm.Options{Dir: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingStore{Store: st}
	r := state.KeyGroupRange{Start: 0, End: 63}
	b := state.NewLSMBackend[string](rec, keySer, maxPar, r)
	defer b.Dispose()
	v, err := state.GetValueState[int64](b, valueName, state.SerializerFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	l, err := state.GetListState[int64](b, listName, state.SerializerFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := state.GetMapState[string, int64](b, mapName, state.SerializerFor[string](), state.SerializerFor[int64]()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 200 {
		k := fmt.Sprint("key-", i)
		kg := b.KeyGroupOf(k)
		rec.prefetched, rec.read = rec.prefetched[:0], rec.read[:0]
		b.PrefetchKey(k, kg)
		if !r.Contains(kg) {
			if len(rec.prefetched) != 0 {
				t.Fatalf("key %q of key group %d, outside %v: prefetched %q", k, kg, r, rec.prefetched)
			}
			continue
		}
		n++
		b.SetCurrentKeyAndGroup(k, kg)
		if got, ok := v.Value(); ok || got != 0 {
			t.Fatalf("key %q: value %d, %v before any write", k, got, ok)
		}
		l.Get()
		if !slices.Equal(rec.read, rec.prefetched) {
			t.Fatalf("key %q: prefetched %q, read %q", k, rec.prefetched, rec.read)
		}
		v.Update(int64(i))
		l.Add(int64(i))
		// The input prefetches records ahead of the current one: another
		// key's prefetch must leave the current key's reads and writes alone.
		other := fmt.Sprint("key-", i+1)
		b.PrefetchKey(other, b.KeyGroupOf(other))
		if got, ok := v.Value(); !ok || got != int64(i) {
			t.Fatalf("key %q: value %d, %v after a prefetch of %q; want %d", k, got, ok, other, i)
		}
		v.Update(int64(i) + 1)
		if got := l.Get(); len(got) != 1 || got[0] != int64(i) {
			t.Fatalf("key %q: list %v after a prefetch of %q; want [%d]", k, got, other, i)
		}
	}
	if n == 0 || n == 200 {
		t.Fatalf("%d of 200 keys in %v: the test needs keys in and out of the range", n, r)
	}
}

// encodeKG encodes a key group of a snapshot whose store cannot fail here;
// a failure panics, which fails the test.
func encodeKG(s state.Snapshot, dst []byte, kg int) []byte {
	b, err := s.EncodeKeyGroup(dst, kg)
	if err != nil {
		panic(err)
	}
	return b
}

// failingStore is an LSM store whose reads and writes fail once failing
// is set (a corrupt block, a full disk).
type failingStore struct {
	*lsm.Store
	failing bool
	sets    int // writes that reached the store
}

var errStore = errors.New("pebble: corrupt block 000012.sst")

func (f *failingStore) Get(key, dst []byte) ([]byte, bool, error) {
	if f.failing {
		return dst, false, errStore
	}
	return f.Store.Get(key, dst)
}

func (f *failingStore) Set(key, value []byte) error {
	if f.failing {
		return errStore
	}
	f.sets++
	return f.Store.Set(key, value)
}

// TestStoreFailureIsAnError: a state accessor whose store fails neither
// panics nor pretends: the backend's failure flag holds a state.Failure wrapping
// the store's error (the task fails with it), the read returns nothing,
// and no later write reaches the store.
func TestStoreFailureIsAnError(t *testing.T) {
	st, err := lsm.Open(lsm.Options{Dir: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	fs := &failingStore{Store: st}
	b := state.NewLSMBackend[string](fs, keySer, maxPar, fullRange)
	defer b.Dispose()
	v, err := state.GetValueState[int64](b, valueName, state.SerializerFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	b.SetCurrentKey("a")
	v.Update(1)
	if b.Failure().Err() != nil {
		t.Fatalf("Err before any failure: %v", b.Failure().Err())
	}
	fs.failing = true
	if got, ok := v.Value(); ok || got != 0 {
		t.Errorf("a failed read returned %d, %v", got, ok)
	}
	var f *state.Failure
	if err := b.Failure().Err(); !errors.As(err, &f) || !errors.Is(err, errStore) {
		t.Fatalf("Err = %v; want a state.Failure wrapping %v", err, errStore)
	}
	fs.failing = false
	sets := fs.sets
	v.Update(2) // after the failure: not written
	if fs.sets != sets {
		t.Errorf("%d writes reached the store after it failed; want none", fs.sets-sets)
	}
	if got, ok := v.Value(); ok || got != 0 {
		t.Errorf("after the failure, Value = %d, %v: the backend went on", got, ok)
	}
	if b.Failure().Err() == nil || !strings.Contains(b.Failure().Err().Error(), "state backend: pebble: corrupt block 000012.sst") {
		t.Errorf("Err = %v", b.Failure().Err())
	}
}

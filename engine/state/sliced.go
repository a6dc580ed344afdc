package state

// # Map state sliced by user key
//
// A window operator keeps, per key, an entry per open window: a map from
// the window's start to its accumulator. Kept as one map per key, a record
// costs the key's slot and then a search of the key's map, and a key's
// map outgrows its slot as soon as more than two windows are open (with
// watermarks every 200 ms, a fast input opens several before the first
// fires): a Go map per key, two more cache misses a record, a heap
// allocation per key, and a map lookup per key and window when the window
// fires. Flink's window state is keyed by (key, namespace) for the same
// reason: the windows of one key are not read together.
//
// A sliced map state keeps one table per user key instead — per window,
// the accumulators of every key that has it. A record looks its key up in
// its window's table, which holds one small value per key as a running
// count's does; and a window fires by one scan of its own table in memory
// order, which is then dropped whole, not key by key. The tables are
// ordinary layered tables, so snapshots, pins, folding and copy-on-write
// work exactly as for any other state; and the snapshot bytes are map
// state's own (savepoint/FORMAT.md v1), so a sliced state restores into a
// per-key map state and back, in any backend.
//
// It suits user keys that are few, shared by many keys, and removed all
// at once (SweepMapEntry), as windows are. Reading all of one key's
// entries (All, Len, Clear) costs a lookup in every table.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
)

// GetSlicedMapState registers (or returns) the map state called name,
// kept by the hashmap backend as one table per user key (see above); the
// other backends keep it as GetMapState does, and its snapshots are map
// state's in every backend.
func GetSlicedMapState[UK comparable, UV any, K comparable](be Backend[K], name string, ukSer Serializer[UK], uvSer Serializer[UV]) (MapState[UK, UV], error) {
	return declared[MapState[UK, UV]](be, declaration[K]{
		onHeap: erase(func(b *KeyedBackend[K]) (MapState[UK, UV], error) { return heapSlicedMapState(b, name, ukSer, uvSer) }),
		onBytes: erase(func(b *LSMBackend[K]) (MapState[UK, UV], error) {
			return getLSMMapState(b, name, ukSer, uvSer)
		}),
		logged: erase(func(b *ChangelogBackend[K]) (MapState[UK, UV], error) {
			return getChangelogMapState(b, name, ukSer, uvSer)
		}),
	})
}

type slicedMapState[K comparable, UK comparable, UV any] struct {
	b      *KeyedBackend[K]
	slices map[UK]*table[K, UV]
	// last is the table of lastUK, the user key accessed last: records
	// mostly go to the window opened last.
	lastUK UK
	last   *table[K, UV]
	// mru are the tables read last, the most recent first; fan is how
	// many tables the key before the current one read (cur: the current
	// one so far; epoch: the backend's key epoch cur counts for).
	mru      []*table[K, UV]
	fan, cur int
	epoch    uint64
	// mu guards slices while key groups restore on several goroutines.
	mu    sync.Mutex
	ukSer Serializer[UK]
	uvSer Serializer[UV]
	typ   string
}

func heapSlicedMapState[UK comparable, UV any, K comparable](b *KeyedBackend[K], name string, ukSer Serializer[UK], uvSer Serializer[UV]) (MapState[UK, UV], error) {
	return register(b, name, KindMap, func() *slicedMapState[K, UK, UV] {
		return &slicedMapState[K, UK, UV]{b: b, slices: map[UK]*table[K, UV]{}, ukSer: ukSer, uvSer: uvSer,
			typ: "map[" + typeName[UK]() + "]" + typeName[UV]()}
	})
}

// slice returns uk's table, made if create is set (else nil if none).
func (s *slicedMapState[K, UK, UV]) slice(uk UK, create bool) *table[K, UV] {
	if s.last != nil && s.lastUK == uk {
		return s.last // small enough to inline: most accesses stop here
	}
	return s.find(uk, create)
}

func (s *slicedMapState[K, UK, UV]) find(uk UK, create bool) *table[K, UV] {
	t := s.slices[uk]
	if t == nil {
		if !create {
			return nil
		}
		nt := newTable[K, UV](s.b.pins, s.b.nkg, s.b.cloneKey)
		t = &nt
		if s.last != nil {
			// A window mostly holds the keys the one before held: its key
			// groups start at that size, not growing through seven
			// doublings each.
			for i := range t.kgs {
				if n := s.last.kgs[i].base.len(); n > 0 {
					t.kgs[i].base, t.kgs[i].baseTag = newBaseLayer[K, UV](t.str, n), s.b.pins.ver
				}
			}
		}
		s.slices[uk] = t
	}
	s.last, s.lastUK = t, uk
	return t
}

// getIn is the current key's value in t.
func (s *slicedMapState[K, UK, UV]) getIn(t *table[K, UV]) (UV, bool) {
	b := s.b
	if l := &t.kgs[b.kgIndex]; b.hashed && len(l.over) == 0 && l.base.s != nil {
		return l.base.s.getHashed(asString(b.currentKey), b.currentHash)
	}
	return t.get(b.kgIndex, b.currentKey)
}

func (s *slicedMapState[K, UK, UV]) Get(uk UK) (UV, bool) {
	t := s.slice(uk, false)
	if t == nil {
		var zero UV
		return zero, false
	}
	s.touch(t)
	return s.getIn(t)
}

// Put writes the slot its Get found when it can (the table's last hint,
// checked against the key's hash and bytes), without a second lookup.
func (s *slicedMapState[K, UK, UV]) Put(uk UK, uv UV) {
	t := s.slice(uk, true)
	b := s.b
	kgi := b.kgIndex
	if l := &t.kgs[kgi]; b.hashed && l.base.s != nil && t.baseWritable(kgi, l) {
		m, k := l.base.s, asString(b.currentKey)
		if i := m.last; i < len(m.slots) && m.slots[i].h == b.currentHash && m.matches(&m.slots[i], k) {
			m.slots[i].e = uv
			return
		}
		m.putHashed(k, b.currentHash, uv)
		return
	}
	_, ok := t.get(kgi, b.currentKey)
	t.set(kgi, b.currentKey, uv, ok)
}

// Upsert sets the current key's entry for uk to f of its value (and
// whether it has one): Get and Put in one lookup, for a window operator's
// read-modify-write of an accumulator. f must not touch the state.
func (s *slicedMapState[K, UK, UV]) Upsert(uk UK, f func(uv UV, ok bool) UV) {
	t := s.slice(uk, true)
	s.touch(t)
	b := s.b
	kgi := b.kgIndex
	if l := &t.kgs[kgi]; b.hashed && l.base.s != nil && t.baseWritable(kgi, l) {
		m, k := l.base.s, asString(b.currentKey)
		if i, ok := m.find(k, b.currentHash); ok {
			e := &m.slots[i].e
			*e = f(*e, true)
			return
		}
		var zero UV
		m.putHashed(k, b.currentHash, f(zero, false))
		return
	}
	uv, ok := t.get(kgi, b.currentKey)
	t.set(kgi, b.currentKey, f(uv, ok), ok)
}

func (s *slicedMapState[K, UK, UV]) Contains(uk UK) bool { _, ok := s.Get(uk); return ok }

func (s *slicedMapState[K, UK, UV]) Remove(uk UK) {
	if t := s.slice(uk, false); t != nil {
		if _, ok := t.get(s.b.kgIndex, s.b.currentKey); ok {
			t.del(s.b.kgIndex, s.b.currentKey)
		}
	}
}

func (s *slicedMapState[K, UK, UV]) All(f func(UK, UV) bool) {
	for uk, t := range s.slices {
		if uv, ok := t.get(s.b.kgIndex, s.b.currentKey); ok && !f(uk, uv) {
			return
		}
	}
}

func (s *slicedMapState[K, UK, UV]) Len() int {
	n := 0
	s.All(func(UK, UV) bool { n++; return true })
	return n
}

func (s *slicedMapState[K, UK, UV]) Clear() {
	for _, t := range s.slices {
		if _, ok := t.get(s.b.kgIndex, s.b.currentKey); ok {
			t.del(s.b.kgIndex, s.b.currentKey)
		}
	}
}

// sweep hands f every entry of uk's table and drops the table. Nothing is
// written while f runs, so f sees the table as it was. An error from f
// stops the sweep; the entries f was handed before are removed, as map
// state's sweep removes them, and the rest stay.
func (s *slicedMapState[K, UK, UV]) sweep(uk UK, f func(K, UV) error) error {
	t := s.slices[uk]
	if t == nil {
		return nil
	}
	var err error
	for kgi, v := range t.views() {
		done := 0
		v.all(func(k K, uv UV) bool {
			if err = f(t.clone(k), uv); err == nil {
				done++
			}
			return err == nil
		})
		if err != nil {
			// The entries handed over, in the same order again (nothing
			// was written since), then removed.
			var ks []K
			v.all(func(k K, _ UV) bool {
				ks = append(ks, t.clone(k))
				return len(ks) < done
			})
			for _, k := range ks[:done] {
				t.del(kgi, k)
			}
			return err
		}
	}
	delete(s.slices, uk)
	if s.last == t {
		s.last = nil
	}
	if i := slices.Index(s.mru, t); i >= 0 {
		s.mru = slices.Delete(s.mru, i, i+1)
	}
	return nil
}

// prefetchSlot warms the key's slot in the tables the keys before it
// read: the window opened last for a tumbling window, each of a record's
// windows for a sliding one (its misses then overlap, not one after the
// other).
func (s *slicedMapState[K, UK, UV]) prefetchSlot(kgi int, h uint32) {
	if s.fan <= 1 && len(s.mru) > 0 {
		s.mru[0].prefetchSlot(kgi, h) // tumbling windows
		return
	}
	for _, t := range s.mru[:min(s.fan, len(s.mru))] {
		t.prefetchSlot(kgi, h)
	}
}

// touch notes that the current key reads t: t moves to the front of the
// tables read last, and fan counts the tables one key reads.
func (s *slicedMapState[K, UK, UV]) touch(t *table[K, UV]) {
	if e := s.b.keyEpoch; e != s.epoch {
		s.epoch, s.fan, s.cur = e, max(s.cur, 1), 0
	}
	s.cur++
	if len(s.mru) > 0 && s.mru[0] == t {
		return
	}
	i := slices.Index(s.mru, t)
	if i < 0 {
		if len(s.mru) < maxPrefetchedSlices {
			s.mru = append(s.mru, nil)
		}
		i = len(s.mru) - 1
	}
	copy(s.mru[1:i+1], s.mru[:i])
	s.mru[0] = t
}

// maxPrefetchedSlices bounds the tables prefetched for a key.
const maxPrefetchedSlices = 16

// UserKeys calls f with every user key that has a table (a window
// operator finds its windows after a restore without reading every key).
func (s *slicedMapState[K, UK, UV]) UserKeys(f func(UK)) {
	for uk := range s.slices {
		f(uk)
	}
}

func (s *slicedMapState[K, UK, UV]) kind() Kind       { return KindMap }
func (s *slicedMapState[K, UK, UV]) typeName() string { return s.typ }

// keys calls f with a copy of every key that has an entry, once.
func (s *slicedMapState[K, UK, UV]) keys(f func(K)) {
	if len(s.slices) == 1 {
		for _, t := range s.slices {
			t.keys(f)
		}
		return
	}
	seen := map[K]struct{}{}
	for _, t := range s.slices {
		t.keys(func(k K) {
			if _, ok := seen[k]; !ok {
				seen[k] = struct{}{}
				f(k)
			}
		})
	}
}

func (s *slicedMapState[K, UK, UV]) count() int {
	n := 0
	s.keys(func(K) { n++ })
	return n
}

func (s *slicedMapState[K, UK, UV]) foldAll() {
	for _, t := range s.slices {
		t.foldAll()
	}
}

func (s *slicedMapState[K, UK, UV]) overlays() int {
	n := 0
	for _, t := range s.slices {
		n += t.overlays()
	}
	return n
}

// capturedSlices is a snapshot's view of a sliced map state: each user
// key's table as it was, and that user key encoded.
type capturedSlices[K comparable, UK comparable, UV any] struct {
	s      *slicedMapState[K, UK, UV]
	tables []*capturedTable[K, UV]
	uks    [][]byte
}

func (s *slicedMapState[K, UK, UV]) capture() capturedTables {
	c := &capturedSlices[K, UK, UV]{s: s}
	for uk, t := range s.slices {
		ukb := s.ukSer.Append(nil, uk)
		c.uks = append(c.uks, ukb)
		c.tables = append(c.tables, &capturedTable[K, UV]{views: t.views(), encK: s.b.keySer.Append, ordered: s.b.strKeys,
			encE: func(_ *encScratch, dst []byte, _ K, uv UV) []byte {
				// A key's map of one entry, as map state writes it.
				dst = binary.AppendUvarint(dst, 1)
				return s.uvSer.Append(append(dst, ukb...), uv)
			}})
	}
	return c
}

// encode writes a key group as map state does: each key once, with its
// entries sorted by encoded user key. A key group whose entries are all in
// one table (one open window) is that table's encode, in its kept order.
func (c *capturedSlices[K, UK, UV]) encode(sc *encScratch, dst []byte, kgi int) ([]byte, bool) {
	var only *capturedTable[K, UV]
	n := 0
	for _, t := range c.tables {
		if v := &t.views[kgi]; v.base.len() > 0 || len(v.over) > 0 {
			only = t
			n++
		}
	}
	switch n {
	case 0:
		return dst, false
	case 1:
		return only.encode(sc, dst, kgi)
	}
	sc.reset()
	for i, t := range c.tables {
		v := &t.views[kgi]
		v.all(func(k K, uv UV) bool {
			off := len(sc.arena)
			sc.arena = c.s.b.keySer.Append(sc.arena, k)
			kl := len(sc.arena) - off
			sc.arena = c.s.uvSer.Append(append(sc.arena, c.uks[i]...), uv)
			sc.add(off, kl)
			return true
		})
	}
	if len(sc.ents) == 0 {
		return dst, false
	}
	return sc.emitGrouped(dst), true
}

// restore decodes one key group of map state's bytes into the tables of
// the user keys it holds (made under mu: key groups restore concurrently,
// and each writes only its own key group of a table).
func (s *slicedMapState[K, UK, UV]) restore(kgi int, payload []byte) error {
	n, k := binary.Uvarint(payload)
	if k <= 0 {
		return ErrShortBuffer
	}
	rest := payload[k:]
	var lastUK UK
	var last *table[K, UV]
	for i := uint64(0); i < n; i++ {
		key, r, err := s.b.keySer.Decode(rest)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		m, c := binary.Uvarint(r)
		if c <= 0 {
			return fmt.Errorf("value: %w", ErrShortBuffer)
		}
		r = r[c:]
		for j := uint64(0); j < m; j++ {
			uk, r2, err := s.ukSer.Decode(r)
			if err != nil {
				return fmt.Errorf("value: %w", err)
			}
			uv, r3, err := s.uvSer.Decode(r2)
			if err != nil {
				return fmt.Errorf("value: %w", err)
			}
			if last == nil || uk != lastUK {
				last, lastUK = s.restoredSlice(uk), uk
			}
			last.set(kgi, key, uv, false)
			r = r3
		}
		rest = r
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d bytes left over after %d entries", len(rest), n)
	}
	return nil
}

func (s *slicedMapState[K, UK, UV]) restoredSlice(uk UK) *table[K, UV] {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.slices[uk]
	if t == nil {
		nt := newTable[K, UV](s.b.pins, s.b.nkg, s.b.cloneKey)
		t = &nt
		s.slices[uk] = t
	}
	return t
}

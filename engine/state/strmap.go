package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// # Why string keys get a table of their own
//
// Most keyed state is keyed by strings (words, user ids, URLs). In a Go
// map[string]E each key is a string header in the map's slot pointing to
// bytes allocated on their own, so a lookup at 1 M keys waits for two cache
// misses (the map's group, then the key's bytes, which memeqbody reads) and
// every key is a pointer the garbage collector follows on every cycle: at
// 1 M keys a mark phase took one of two processors for 50–65 ms, which is
// where the job's longest pauses came from, and encoding a snapshot walked
// keys scattered over the heap.
//
// strMap keeps short keys inside its slots: one slot holds the key's hash,
// its length, up to inlineKey bytes of it and the entry, so a lookup of a
// short key reads one slot (and its neighbours, with linear probing), the
// slots hold no pointers (when E holds none) for the collector to follow,
// and a snapshot walks them in memory order. Longer keys live in an arena
// of bytes beside the slots. Deletion shifts the following entries back
// (no tombstones), so a table's probe lengths never degrade.
//
// The same rules as for the Go maps it replaces hold: one goroutine writes,
// and a table a snapshot reads is not written until the snapshot lets go of
// it (see the layered table in backend.go), so readers need no locks.

// inlineKey is how many key bytes a slot holds: with a 4-byte hash and a
// length byte, a slot with an 8-byte entry is 24 bytes.
const inlineKey = 11

// longKey marks a slot whose key is in the arena: the slot's key bytes hold
// the offset and the length.
const longKey = 0xff

type strSlot[E any] struct {
	h    uint32 // the key's hash, never 0; 0 marks an empty slot
	klen uint8  // the key's length, or longKey
	key  [inlineKey]byte
	e    E
}

// strMap is an open-addressing hash table from strings to E.
type strMap[E any] struct {
	slots []strSlot[E] // a power of two long
	n     int
	arena []byte // long keys' bytes
	dead  int    // arena bytes of deleted keys
	// last is the slot get found last: a read-modify-write (Value, then
	// Update) finds its slot there without hashing and probing again. It
	// is only a hint, checked against the key before use.
	last int
	ord  strOrder
	// drainAt is where drain resumes (a hint).
	drainAt int
}

func newStrMap[E any](n int) *strMap[E] {
	return &strMap[E]{slots: make([]strSlot[E], tableSize(n))}
}

// tableSize is the slots a table of n entries starts with: a power of two
// at most three quarters full.
func tableSize(n int) int {
	size := 8
	for size*3/4 < n {
		size <<= 1
	}
	return size
}

// strHash is the upper half of the key's key-group hash (the string
// serializer's): a keyed exchange computed it already to route the record,
// and passes it on (KeyedBackend.SetCurrentKeyHashed), so that a record's
// key is hashed once. Key groups take the hash's low bits, so within a key
// group the upper half is as good as a fresh hash.
func strHash(k string) uint32 { return fixHash(uint32(xxhash.Sum64String(k) >> 32)) }

// fixHash maps 0, the mark of an empty slot, to 1.
func fixHash(h uint32) uint32 {
	if h == 0 {
		return 1
	}
	return h
}

// keyOf returns the slot's key. The string shares the table's memory: it is
// valid until the table is next written.
func (m *strMap[E]) keyOf(s *strSlot[E]) string {
	if s.klen != longKey {
		return unsafe.String(&s.key[0], int(s.klen))
	}
	off, n := binary.LittleEndian.Uint32(s.key[0:]), binary.LittleEndian.Uint32(s.key[4:])
	if n == 0 {
		return ""
	}
	return unsafe.String(&m.arena[off], int(n))
}

func (m *strMap[E]) matches(s *strSlot[E], k string) bool {
	if s.klen != longKey {
		return int(s.klen) == len(k) && string(s.key[:s.klen]) == k
	}
	return len(k) > inlineKey && m.keyOf(s) == k
}

// find returns the index of k's slot, or of the empty slot where it would
// go.
func (m *strMap[E]) find(k string, h uint32) (int, bool) {
	mask := uint32(len(m.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.h == 0 {
			return int(i), false
		}
		if s.h == h && m.matches(s, k) {
			return int(i), true
		}
	}
}

// lookup is get for readers other than the writer (a snapshot's encoder
// reading a pinned overlay): it does not note the slot in last.
func (m *strMap[E]) lookup(k string) (E, bool) {
	i, ok := m.find(k, strHash(k))
	return m.slots[i].e, ok
}

// drain calls f with entries and deletes them, at most budget of them, and
// returns the budget left: the table is empty when it returns with budget
// left. Calls may be interleaved with writes. Slots are visited from the
// end down, resuming where the last call stopped (drainAt), so that a
// table drained over many calls is scanned about once: a deletion shifts
// entries back into the slot just emptied (looked at again) or, further
// along a run, into slots this pass has passed only when writes between
// calls filled them, or into slots not visited yet where a run wraps
// around the end; so when a scan reaches the first slot with entries left,
// it starts again from the end, and only an empty table ends the drain. f
// gets keys that share the table's memory: it must copy what it keeps
// before the next call.
func (m *strMap[E]) drain(budget int, f func(k string, e E)) int {
	return m.drainHashed(budget, nil, func(k string, _ uint32, e E) { f(k, e) })
}

// drainAhead is how many slots ahead of the one drained drainHashed hands
// to ahead.
const drainAhead = 8

// drainHashed is drain that also gives f each key's hash (strHash's), and,
// when ahead is set, calls it with the hash of the entry drainAhead slots
// further down first: a fold moving entries into a large base table
// prefetches their slots there, so that its misses overlap.
func (m *strMap[E]) drainHashed(budget int, ahead func(h uint32), f func(k string, h uint32, e E)) int {
	i := min(m.drainAt, len(m.slots)-1)
	for m.n > 0 && budget > 0 {
		if i < 0 {
			i = len(m.slots) - 1
		}
		s := &m.slots[i]
		if s.h == 0 {
			i--
			continue
		}
		if j := i - drainAhead; ahead != nil && j >= 0 && m.slots[j].h != 0 {
			ahead(m.slots[j].h)
		}
		f(m.keyOf(s), s.h, s.e)
		m.delAt(i)
		budget--
	}
	m.drainAt = max(i, 0)
	return budget
}

// prefetchHash starts loading the slot where a key with hash h is looked
// up first.
func (m *strMap[E]) prefetchHash(h uint32) {
	prefetch(unsafe.Pointer(&m.slots[h&uint32(len(m.slots)-1)]))
}

// get is called by the goroutine that writes the table (it sets last).
func (m *strMap[E]) get(k string) (E, bool) { return m.getHashed(k, strHash(k)) }

// getHashed is get with k's strHash known.
func (m *strMap[E]) getHashed(k string, h uint32) (E, bool) {
	i, ok := m.find(k, h)
	if ok {
		m.last = i
	}
	return m.slots[i].e, ok
}

// put stores e under k, copying k's bytes into the table.
func (m *strMap[E]) put(k string, e E) {
	if m.last < len(m.slots) {
		if s := &m.slots[m.last]; s.h != 0 && m.matches(s, k) {
			s.e = e
			return
		}
	}
	m.putHashed(k, strHash(k), e)
}

// putHashed is put with k's strHash known (and without the last hint).
func (m *strMap[E]) putHashed(k string, h uint32, e E) {
	i, ok := m.find(k, h)
	if ok {
		m.slots[i].e = e
		return
	}
	if (m.n+1)*4 > len(m.slots)*3 {
		m.grow()
		i, _ = m.find(k, h)
	}
	if m.ord.valid {
		if a := len(m.ord.added); a >= 1024 && a > m.n/2 {
			// Sorting everything costs no more now; and a table that is
			// not snapshotted any more does not note inserts forever.
			m.ord.forget()
		} else {
			m.ord.added = append(m.ord.added, uint32(i))
		}
	}
	s := &m.slots[i]
	s.h, s.e = h, e
	if len(k) <= inlineKey {
		s.klen = uint8(len(k))
		copy(s.key[:], k)
	} else {
		if uint64(len(k)) > math.MaxUint32 || uint64(len(m.arena))+uint64(len(k)) > math.MaxUint32 {
			panic(fmt.Sprintf("state: a key group's string keys exceed %d bytes", uint32(math.MaxUint32)))
		}
		s.klen = longKey
		binary.LittleEndian.PutUint32(s.key[0:], uint32(len(m.arena)))
		binary.LittleEndian.PutUint32(s.key[4:], uint32(len(k)))
		m.arena = append(m.arena, k...)
	}
	m.n++
}

// grow doubles the slots.
func (m *strMap[E]) grow() { m.rehash(2 * len(m.slots)) }

// shrink moves the entries into as few slots as a table made for them has,
// if the table has at least four times that many: a table that held many
// entries once (the LSM store's rows, before their room shrank) gives the
// memory back. The arena drops the bytes of deleted keys on the way.
func (m *strMap[E]) shrink() {
	if size := tableSize(m.n); len(m.slots) >= 4*size {
		m.rehash(size)
		m.last = 0
		m.compactArena()
	}
}

// rehash moves the entries into size slots by their stored hash, without
// reading their keys. The kept snapshot order follows them.
func (m *strMap[E]) rehash(size int) {
	old := m.slots
	m.slots = make([]strSlot[E], size)
	mask := uint32(size - 1)
	var moved []uint32 // old slot -> new slot, for the kept order
	if m.ord.valid {
		moved = make([]uint32, len(old))
	}
	for j := range old {
		s := &old[j]
		if s.h == 0 {
			continue
		}
		i := s.h & mask
		for m.slots[i].h != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = *s
		if moved != nil {
			moved[j] = i
		}
	}
	if moved != nil {
		for k, j := range m.ord.slots {
			m.ord.slots[k] = moved[j]
		}
		for k, j := range m.ord.added {
			m.ord.added[k] = moved[j]
		}
	}
}

func (m *strMap[E]) del(k string) {
	i, ok := m.find(k, strHash(k))
	if !ok {
		return
	}
	m.delAt(i)
}

// delAt deletes the entry in slot i; entries later in its run may shift
// back, into slot i and the slots the shift empties after it (wrapping
// around the end of the slots).
func (m *strMap[E]) delAt(i int) {
	m.ord.forget()
	if s := &m.slots[i]; s.klen == longKey {
		m.dead += int(binary.LittleEndian.Uint32(s.key[4:]))
	}
	// Shift back the entries after i that probed past it, so that no
	// lookup stops early at the hole.
	mask := uint32(len(m.slots) - 1)
	hole := uint32(i)
	for j := (hole + 1) & mask; m.slots[j].h != 0; j = (j + 1) & mask {
		home := m.slots[j].h & mask
		// The entry at j may move to hole if its home is not cyclically in
		// (hole, j].
		if (j-home)&mask >= (j-hole)&mask {
			m.slots[hole] = m.slots[j]
			hole = j
		}
	}
	m.slots[hole] = strSlot[E]{}
	m.n--
	if m.dead > 4096 && m.dead*2 > len(m.arena) {
		m.compactArena()
	}
}

// compactArena drops the bytes of deleted long keys.
func (m *strMap[E]) compactArena() {
	arena := make([]byte, 0, len(m.arena)-m.dead)
	for i := range m.slots {
		s := &m.slots[i]
		if s.h == 0 || s.klen != longKey {
			continue
		}
		off, n := binary.LittleEndian.Uint32(s.key[0:]), binary.LittleEndian.Uint32(s.key[4:])
		binary.LittleEndian.PutUint32(s.key[0:], uint32(len(arena)))
		arena = append(arena, m.arena[off:off+n]...)
	}
	m.arena, m.dead = arena, 0
}

// all yields every entry, in slot order. Keys share the table's memory
// (keyOf).
func (m *strMap[E]) all(yield func(string, E) bool) {
	for i := range m.slots {
		s := &m.slots[i]
		if s.h != 0 && !yield(m.keyOf(s), s.e) {
			return
		}
	}
}

// baseLayer is a key group's bottom layer: a strMap when keys are strings,
// else a Go map. Neither exists until the key group is first written.
type baseLayer[K comparable, E any] struct {
	m map[K]E
	s *strMap[E]
}

// asString and fromString convert between K and string; they are called
// only when K is string (a strMap exists only then).
func asString[K any](k K) string      { return *(*string)(unsafe.Pointer(&k)) }
func fromString[K any](s string) K    { return *(*K)(unsafe.Pointer(&s)) }
func isString[K any]() bool           { _, ok := any(*new(K)).(string); return ok }
func (b *baseLayer[K, E]) made() bool { return b.m != nil || b.s != nil }

func newBaseLayer[K comparable, E any](str bool, n int) baseLayer[K, E] {
	if str {
		return baseLayer[K, E]{s: newStrMap[E](n)}
	}
	return baseLayer[K, E]{m: make(map[K]E, n)}
}

func (b *baseLayer[K, E]) get(k K) (E, bool) {
	if b.s != nil {
		return b.s.get(asString(k))
	}
	e, ok := b.m[k]
	return e, ok
}

// put stores e under k. A Go map stores k itself (the caller copies a new
// key first, see table.set); a strMap copies its bytes.
func (b *baseLayer[K, E]) put(k K, e E) {
	if b.s != nil {
		b.s.put(asString(k), e)
		return
	}
	b.m[k] = e
}

// lookup is get for readers other than the layer's writer.
func (b *baseLayer[K, E]) lookup(k K) (E, bool) {
	if b.s != nil {
		return b.s.lookup(asString(k))
	}
	e, ok := b.m[k]
	return e, ok
}

// drain calls f with entries and deletes them, at most budget of them, and
// returns the budget left (see strMap.drain; keys of a strMap share its
// memory until f returns).
func (b *baseLayer[K, E]) drain(budget int, f func(K, E)) int {
	if b.s != nil {
		return b.s.drain(budget, func(k string, e E) { f(fromString[K](k), e) })
	}
	for k, e := range b.m {
		if budget == 0 {
			break
		}
		f(k, e)
		delete(b.m, k)
		budget--
	}
	return budget
}

func (b *baseLayer[K, E]) del(k K) {
	if b.s != nil {
		b.s.del(asString(k))
		return
	}
	delete(b.m, k)
}

func (b *baseLayer[K, E]) len() int {
	if b.s != nil {
		return b.s.n
	}
	return len(b.m)
}

// all yields every entry. Keys of a strMap share its memory: they are valid
// until the layer is next written, so a caller that keeps one copies it.
func (b *baseLayer[K, E]) all(yield func(K, E) bool) {
	if b.s != nil {
		for k, e := range b.s.all {
			if !yield(fromString[K](k), e) {
				return
			}
		}
		return
	}
	for k, e := range b.m {
		if !yield(k, e) {
			return
		}
	}
}

// # Why a string table keeps its snapshot order
//
// A snapshot writes a key group's entries sorted by encoded key (the
// canonical order of savepoint/FORMAT.md). Sorting every entry at every
// checkpoint, even by radix, was half of what a snapshot cost; yet between
// two checkpoints most tables only change values, and insert a few keys.
// Linear probing never moves an entry on insert, only on delete (the
// backward shift) and growth; so a table keeps the order of its slots from
// the last snapshot, notes the slots inserted since, and the next snapshot
// sorts only those and merges them in, encoding as it goes. Growth carries
// the order over to the new slots; a delete forgets it, and the next
// snapshot sorts everything, as before. The order is only kept for the
// built-in string serializer, whose encoding the merge writes itself.
//
// Snapshots build the order on their encoding goroutines, one key group at
// a time, while the task may read the table but not write it (the key
// group is pinned); two snapshots open at once may encode the same table,
// hence the mutex. The task notes inserts only into a table no snapshot
// pins, so it never contends for it.
type strOrder struct {
	mu    sync.Mutex
	valid bool
	slots []uint32 // occupied slots, by encoded key
	added []uint32 // slots inserted since slots was built (while valid)
	next  []uint32 // the next order, being built
}

func (o *strOrder) forget() {
	if o.valid {
		o.valid, o.added = false, o.added[:0]
	}
}

// prefixOf is a key's first 8 bytes, big-endian, padded with zeros (as
// prefixAt).
func prefixOf(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var p uint64
	for _, c := range key {
		p = p<<8 | uint64(c)
	}
	return p << (8 * uint(8-len(key)))
}

// isVarint64 reports whether ser is a built-in serializer that appends an
// 8-byte integer as binary.AppendVarint does (int64, and int where it is
// 8 bytes: callers read the value as an int64).
func isVarint64[V any](ser Serializer[V]) bool {
	switch any(ser).(type) {
	case int64Serializer, intSerializer:
		return unsafe.Sizeof(*new(V)) == 8
	}
	return false
}

// encodedPrefix is prefixOf the string serializer's encoding of the slot's
// key k: for a key in the slot, its length byte and first 7 bytes, read
// from the slot without encoding it.
func (m *strMap[E]) encodedPrefix(s *strSlot[E], k string, sc *encScratch) uint64 {
	if s.klen == longKey {
		sc.cur = stringSerializer{}.Append(sc.cur[:0], k)
		return prefixOf(sc.cur)
	}
	p := uint64(s.klen)<<56 | binary.BigEndian.Uint64(s.key[:8])>>8
	if n := 1 + int(s.klen); n < 8 {
		p &= ^uint64(0) << (8 * uint(8-n)) // bytes past the key are not the key's
	}
	return p
}

// gatherChunk is how many slots an ordered encode copies out at a time.
const gatherChunk = 128

// encodeOrdered appends the table's payload for a snapshot (as
// encScratch.emit with lenPrefix does): uvarint length, uvarint count,
// the entries by encoded key. encE appends an entry's value part. It
// reports whether there were entries.
//
// It is one function on purpose, longer than the runtime's others: split
// into a sort, a merge and a tail (each its own function, same loops),
// BenchmarkSnapshotEncodeAdded measured 1.11× slower at the median of seven
// alternating pairs (0.82–1.18), and this loop is a checkpoint's cost at
// millions of keys.
func (m *strMap[E]) encodeOrdered(sc *encScratch, dst []byte, varint bool, encE func(sub *encScratch, dst []byte, k string, e E) []byte) ([]byte, bool) {
	if m.n == 0 {
		return dst, false
	}
	varint = varint && unsafe.Sizeof(*new(E)) == 8
	o := &m.ord
	o.mu.Lock()
	defer o.mu.Unlock()
	sc.reset()
	// The entries to sort: every slot, or those inserted since the order
	// was built.
	sc.slots = sc.slots[:0]
	if o.valid {
		sc.slots = append(sc.slots, o.added...)
	} else {
		for i := range m.slots {
			if m.slots[i].h != 0 {
				sc.slots = append(sc.slots, uint32(i))
			}
		}
	}
	for _, i := range sc.slots {
		s := &m.slots[i]
		k := m.keyOf(s)
		off := len(sc.arena)
		sc.arena = stringSerializer{}.Append(sc.arena, k)
		kl := len(sc.arena) - off
		sc.arena = encE(sc.sub(), sc.arena, k, s.e)
		sc.add(off, kl)
	}
	added := sc.sorted(false)

	// Merge the sorted additions into the kept order, encoding the kept
	// entries as they come: encoded keys compare as the canonical order
	// does.
	out := sc.out[:0]
	next := o.next[:0]
	j := 0
	var pfx uint64 // prefixAt of added[j] when havePfx
	havePfx := false
	if o.valid {
		// The kept order visits the slots at random. They are copied out a
		// chunk at a time first, in a loop that does nothing else, so the
		// processor has many of those misses in flight at once instead of
		// waiting for one after another between encodings.
		gath, _ := sc.gath.(*[gatherChunk]strSlot[E])
		if gath == nil {
			gath = new([gatherChunk]strSlot[E])
			sc.gath = gath
		}
		for c := 0; c < len(o.slots); c += gatherChunk {
			idx := o.slots[c:min(c+gatherChunk, len(o.slots))]
			g := gath[:len(idx)]
			for x, i := range idx {
				g[x] = m.slots[i]
			}
			for x := range g {
				s, i := &g[x], idx[x]
				k := m.keyOf(s) // a short key shares the copy: valid for this chunk
				if j < len(added) {
					cur := m.encodedPrefix(s, k, sc)
					for ; j < len(added); j++ {
						e := &sc.ents[added[j].i]
						if !havePfx {
							// Once per addition, not once per kept entry it
							// is compared with: that was 0.4 s of a 5 M-key
							// run's checkpoints.
							pfx, havePfx = prefixAt(sc.arena, e, 0), true
						}
						// The first 8 bytes decide, as a rule; the rest only
						// when they tie.
						if pfx > cur {
							break
						} else if pfx == cur {
							sc.cur = stringSerializer{}.Append(sc.cur[:0], k)
							if bytes.Compare(e.key(sc.arena), sc.cur) > 0 {
								break
							}
						}
						out = append(out, sc.arena[e.off:e.off+e.n]...)
						next = append(next, sc.slots[added[j].i])
						havePfx = false
					}
				}
				if s.klen != longKey {
					// The string serializer's encoding of a short key: its
					// length, then the slot's bytes, copied whole (a fixed
					// size: no call to memmove) and cut to the key.
					n := len(out)
					out = slices.Grow(out, 1+inlineKey)[:n+1+inlineKey]
					out[n] = s.klen
					*(*[inlineKey]byte)(out[n+1:]) = s.key
					out = out[:n+1+int(s.klen)]
				} else if len(k) < 0x80 {
					out = append(append(out, byte(len(k))), k...)
				} else {
					out = stringSerializer{}.Append(out, k)
				}
				if varint {
					out = binary.AppendVarint(out, *(*int64)(unsafe.Pointer(&s.e)))
				} else {
					out = encE(sc.sub(), out, k, s.e)
				}
				if len(added) > 0 {
					next = append(next, i)
				}
			}
		}
	}
	for ; j < len(added); j++ {
		e := &sc.ents[added[j].i]
		out = append(out, sc.arena[e.off:e.off+e.n]...)
		next = append(next, sc.slots[added[j].i])
	}
	if o.valid && len(added) == 0 {
		next = o.slots // the same order: nothing was inserted
	} else {
		o.next, o.slots = o.slots, next
	}
	o.valid, o.added = true, o.added[:0]
	sc.out = out

	dst = binary.AppendUvarint(dst, uint64(uvarintLen(uint64(len(next)))+len(out)))
	dst = binary.AppendUvarint(dst, uint64(len(next)))
	return append(dst, out...), true
}

// StringMap is the string table of the hashmap backend (strMap) for other
// stores keyed by bytes: the LSM backend's write buffer. Keys are copied in;
// one goroutine writes, and readers may share it only while nobody does.
type StringMap[E any] struct{ m *strMap[E] }

// NewStringMap returns an empty table sized for n entries.
func NewStringMap[E any](n int) *StringMap[E] { return &StringMap[E]{newStrMap[E](n)} }

func bytesAsString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Get returns the entry under key. The slot found last (by Get or
// GetHashed) is tried first, without hashing: a read-modify-write reads the
// key, then writes it (the LSM store's put reads the entry it updates).
func (s *StringMap[E]) Get(key []byte) (E, bool) {
	m, k := s.m, bytesAsString(key)
	if m.last < len(m.slots) {
		if sl := &m.slots[m.last]; sl.h != 0 && m.matches(sl, k) {
			return sl.e, true
		}
	}
	return m.get(k)
}

// HashKey is the hash a StringMap files key under: a reader of several
// tables hashes a key once (GetHashed) and may warm its slots ahead
// (Prefetch).
func HashKey(key []byte) uint32 { return strHash(bytesAsString(key)) }

// GetHashed is Get with key's HashKey known.
func (s *StringMap[E]) GetHashed(key []byte, h uint32) (E, bool) {
	return s.m.getHashed(bytesAsString(key), h)
}

// Prefetch starts loading the slot where a key with hash h (HashKey's) is
// looked up first, without waiting for it.
func (s *StringMap[E]) Prefetch(h uint32) { s.m.prefetchHash(h) }

// Put stores e under key (a copy of it).
func (s *StringMap[E]) Put(key []byte, e E) { s.m.put(bytesAsString(key), e) }

// Len is the number of entries.
func (s *StringMap[E]) Len() int { return s.m.n }

// Shrink gives back the memory of a table that holds far fewer entries
// than it once did (see strMap.shrink); it costs a pass over the table.
func (s *StringMap[E]) Shrink() { s.m.shrink() }

// Bytes is the memory the table takes: its slots and its arena.
func (s *StringMap[E]) Bytes() int {
	var slot strSlot[E]
	return len(s.m.slots)*int(unsafe.Sizeof(slot)) + cap(s.m.arena)
}

// All yields every entry. A key shares the table's memory: it is valid
// until the table is next written.
func (s *StringMap[E]) All(yield func(key []byte, e E) bool) {
	for k, e := range s.m.all {
		if !yield(unsafe.Slice(unsafe.StringData(k), len(k)), e) {
			return
		}
	}
}

// Ref returns a pointer to the entry under key (with key's HashKey h), or
// nil; the pointer is valid until the table is next written. A later Put
// of the same key finds the slot without hashing again.
func (s *StringMap[E]) Ref(key []byte, h uint32) *E {
	m := s.m
	i, ok := m.find(bytesAsString(key), h)
	if !ok {
		return nil
	}
	m.last = i
	return &m.slots[i].e
}

// PutHashed is Put with key's HashKey known.
func (s *StringMap[E]) PutHashed(key []byte, h uint32, e E) {
	s.m.putHashed(bytesAsString(key), h, e)
}

// Delete removes the entry under key, if any.
func (s *StringMap[E]) Delete(key []byte) { s.m.del(bytesAsString(key)) }

// Range calls f with every entry, which f may change in place (but not
// add or delete entries), until f returns false.
func (s *StringMap[E]) Range(f func(key []byte, e *E) bool) {
	m := s.m
	for i := range m.slots {
		sl := &m.slots[i]
		if sl.h == 0 {
			continue
		}
		k := m.keyOf(sl)
		if !f(unsafe.Slice(unsafe.StringData(k), len(k)), &sl.e) {
			return
		}
	}
}

// Sweep visits entries from slot hand downwards, wrapping around, and
// deletes those drop says to (drop may change the entries it keeps), until
// done says to stop or every slot was visited once; it returns where the
// next sweep resumes. A deletion shifts entries back into the slot just
// emptied, which this sweep then passes over: they were visited already,
// unless the run wrapped around the end.
func (s *StringMap[E]) Sweep(hand int, drop func(key []byte, e *E) bool, done func() bool) int {
	m := s.m
	n := len(m.slots)
	i := hand % n
	for visited := 0; visited < n && m.n > 0 && !done(); visited++ {
		if i < 0 {
			i = n - 1
		}
		sl := &m.slots[i]
		if sl.h != 0 {
			k := m.keyOf(sl)
			if drop(unsafe.Slice(unsafe.StringData(k), len(k)), &sl.e) {
				m.delAt(i)
			}
		}
		i--
	}
	return max(i, 0)
}

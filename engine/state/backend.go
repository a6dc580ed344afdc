package state

import (
	"encoding/binary"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Kind is the kind of a keyed state.
type Kind byte

// The kinds of keyed state, as written in snapshots.
const (
	KindValue          Kind = 1
	KindList           Kind = 2
	KindMap            Kind = 3
	KindProcessingTime Kind = 4 // processing-time timers
	KindEventTime      Kind = 5 // event-time timers
)

func (k Kind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	case KindProcessingTime:
		return "processing-time-timers"
	case KindEventTime:
		return "event-time-timers"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// Names under which timers are stored among an operator's keyed states.
const (
	ProcessingTimersName = "_timer_state/processing_user-timers"
	EventTimersName      = "_timer_state/event_user-timers"
)

// cowClock implements copy-on-write at the granularity of a key group's
// table (and of a key's nested map for map state). Each table carries the
// generation in which it was created or last copied. A snapshot captures the
// current generation and then starts a new one; a table whose generation is
// at or below the last capture is shared with a snapshot until that
// snapshot's asynchronous write releases it, and must be copied before it is
// written. This keeps the synchronous part of a snapshot O(key groups)
// instead of O(state).
type cowClock struct {
	gen         uint64 // the generation tables written now are stamped with
	lastCapture uint64 // the generation captured by the latest snapshot

	// released is read on every write; only release (any goroutine) writes it.
	released atomic.Uint64 // every capture up to here is released
	mu       sync.Mutex
	done     map[uint64]bool // captures released out of order
}

func (c *cowClock) shared(tableGen uint64) bool {
	if tableGen > c.lastCapture {
		return false
	}
	return c.released.Load() < c.lastCapture
}

// capture starts a new generation and returns the captured one.
func (c *cowClock) capture() uint64 {
	g := c.gen
	c.lastCapture = g
	c.gen++
	return g
}

// release marks a capture's tables as no longer read. Captures are
// consecutive, so released advances over every one that is done.
func (c *cowClock) release(g uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = map[uint64]bool{}
	}
	c.done[g] = true
	r := c.released.Load()
	for c.done[r+1] {
		delete(c.done, r+1)
		r++
	}
	c.released.Store(r)
}

// KeyedBackend is the hashmap keyed state backend of one operator subtask:
// Go maps per state and key group. It is used from the task's goroutine only,
// except for snapshot encoding, which reads tables captured by Snapshot.
type KeyedBackend[K comparable] struct {
	keySer  KeySerializer[K]
	maxPar  int
	kgRange KeyGroupRange

	currentKey K
	kgIndex    int // current key group minus kgRange.Start
	// keyEpoch changes with every SetCurrentKey, so that a state can tell
	// whether its last lookup was for the current key.
	keyEpoch uint64
	// cloneKey copies a key before it is stored, so that stored keys are
	// compact and do not pin larger strings they were cut from.
	cloneKey func(K) K

	states  map[string]keyedState
	pending map[string]*rawState // restored, not yet registered
	cow     cowClock
}

// keyedState is one registered state, erased of its types.
type keyedState interface {
	kind() Kind
	typeName() string
	// capture returns an immutable view of the per-key-group tables.
	capture() capturedTables
	// restore decodes entries of one key group.
	restore(kgIndex int, payload []byte) error
	count() int
}

type capturedTables interface {
	// encode appends the entries of one key group, returning the entry count.
	encode(dst []byte, kgIndex int) ([]byte, int)
}

// rawState is restored state whose operator has not registered it (yet).
// It is kept and written into later snapshots unchanged, so that state is
// never lost just because an operator did not ask for it in one attempt.
type rawState struct {
	kind  Kind
	typ   string
	byKG  map[int][]byte // key group index -> payload (count + entries)
	count int
}

// NewKeyedBackend returns an empty backend for the given key groups.
func NewKeyedBackend[K comparable](keySer KeySerializer[K], maxParallelism int, kgRange KeyGroupRange) *KeyedBackend[K] {
	b := &KeyedBackend[K]{
		keySer: keySer, maxPar: maxParallelism, kgRange: kgRange,
		states: map[string]keyedState{}, pending: map[string]*rawState{},
		cloneKey: func(k K) K { return k },
	}
	if _, ok := any(*new(K)).(string); ok {
		b.cloneKey = func(k K) K { return any(strings.Clone(any(k).(string))).(K) }
	}
	b.cow.gen = 1
	return b
}

// KeyGroupRange returns the key groups this backend owns.
func (b *KeyedBackend[K]) KeyGroupRange() KeyGroupRange { return b.kgRange }

// MaxParallelism returns the number of key groups of the job.
func (b *KeyedBackend[K]) MaxParallelism() int { return b.maxPar }

// KeyGroupOf returns the key group of k.
func (b *KeyedBackend[K]) KeyGroupOf(k K) int {
	return KeyGroupForHash(b.keySer.Hash(k), b.maxPar)
}

// SetCurrentKey sets the key that state accesses refer to. It panics if the
// key does not belong to this backend's key groups: that would mean a
// partitioning bug, and writing the state anyway would lose it on restore.
func (b *KeyedBackend[K]) SetCurrentKey(k K) {
	kg := b.KeyGroupOf(k)
	if !b.kgRange.Contains(kg) {
		panic(fmt.Sprintf("state: key %v (key group %d) is outside %v", k, kg, b.kgRange))
	}
	b.setCurrent(k, kg)
}

func (b *KeyedBackend[K]) setCurrent(k K, kg int) {
	b.currentKey = k
	b.kgIndex = kg - b.kgRange.Start
	b.keyEpoch++
}

// storedKey returns the key to store for a new entry.
func (b *KeyedBackend[K]) storedKey() K { return b.cloneKey(b.currentKey) }

// CurrentKey returns the current key.
func (b *KeyedBackend[K]) CurrentKey() K { return b.currentKey }

func register[K comparable, S keyedState](b *KeyedBackend[K], name string, kind Kind, create func() S) (S, error) {
	var zero S
	if existing, ok := b.states[name]; ok {
		if s, ok := existing.(S); ok && existing.kind() == kind {
			return s, nil
		}
		return zero, fmt.Errorf("state %q is already registered as %s state of %s", name, existing.kind(), existing.typeName())
	}
	s := create()
	if raw, ok := b.pending[name]; ok {
		if raw.kind != kind {
			return zero, fmt.Errorf("state %q was restored as %s state but is now declared as %s state", name, raw.kind, kind)
		}
		for kgi, payload := range raw.byKG {
			if err := s.restore(kgi, payload); err != nil {
				return zero, fmt.Errorf("restore state %q (declared %s, snapshot has %s): %w", name, s.typeName(), raw.typ, err)
			}
		}
		delete(b.pending, name)
	}
	b.states[name] = s
	return s, nil
}

func newTables[M any](n int) ([]M, []uint64) { return make([]M, n), make([]uint64, n) }

// table is a per-key-group map with copy-on-write.
type table[K comparable, E any] struct {
	b    *KeyedBackend[K]
	maps []map[K]E
	gens []uint64
}

func newTable[K comparable, E any](b *KeyedBackend[K]) table[K, E] {
	m, g := newTables[map[K]E](b.kgRange.Len())
	return table[K, E]{b: b, maps: m, gens: g}
}

// writable returns the current key group's map, ready to be written.
func (t *table[K, E]) writable(kgi int) map[K]E {
	m := t.maps[kgi]
	if m == nil {
		m = make(map[K]E)
		t.maps[kgi], t.gens[kgi] = m, t.b.cow.gen
		return m
	}
	if t.b.cow.shared(t.gens[kgi]) {
		m = maps.Clone(m)
		t.maps[kgi], t.gens[kgi] = m, t.b.cow.gen
	}
	return m
}

func (t *table[K, E]) count() int {
	n := 0
	for _, m := range t.maps {
		n += len(m)
	}
	return n
}

// capturedTable is a snapshot's view of a table: the maps as they were.
type capturedTable[K comparable, E any] struct {
	maps   []map[K]E
	keySer KeySerializer[K]
	encE   func(dst []byte, e E) []byte
}

func (c capturedTable[K, E]) encode(dst []byte, kgi int) ([]byte, int) {
	m := c.maps[kgi]
	// Sort keys by their encoding so that a snapshot of the same state is
	// byte-for-byte the same, whatever Go's map order.
	type kv struct {
		key []byte
		e   E
	}
	entries := make([]kv, 0, len(m))
	var buf []byte
	for k, e := range m {
		start := len(buf)
		buf = c.keySer.Append(buf, k)
		entries = append(entries, kv{buf[start:len(buf):len(buf)], e})
	}
	slices.SortFunc(entries, func(a, b kv) int { return compareBytes(a.key, b.key) })
	for _, e := range entries {
		dst = append(dst, e.key...)
		dst = c.encE(dst, e.e)
	}
	return dst, len(entries)
}

func compareBytes(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

func (t *table[K, E]) capture(encE func([]byte, E) []byte) capturedTables {
	return capturedTable[K, E]{maps: slices.Clone(t.maps), keySer: t.b.keySer, encE: encE}
}

// restoreInto decodes count entries of one key group into the table.
func restoreInto[K comparable, E any](t *table[K, E], kgi int, payload []byte, dec func([]byte) (E, []byte, error)) error {
	n, k := binary.Uvarint(payload)
	if k <= 0 {
		return ErrShortBuffer
	}
	rest := payload[k:]
	m := t.writable(kgi)
	for i := uint64(0); i < n; i++ {
		key, r, err := t.b.keySer.Decode(rest)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		e, r, err := dec(r)
		if err != nil {
			return fmt.Errorf("value: %w", err)
		}
		m[key] = e
		rest = r
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d bytes left over after %d entries", len(rest), n)
	}
	return nil
}

// ValueState holds one value per key.
type ValueState[V any] interface {
	// Value returns the current key's value and whether there is one.
	Value() (V, bool)
	// Update sets the current key's value. Values are not copied: do not
	// modify a value (through a pointer, slice or map in it) after Update.
	Update(v V)
	// Clear removes the current key's value.
	Clear()
}

type valueState[K comparable, V any] struct {
	t   table[K, V]
	ser Serializer[V]
	typ string
	// present caches whether the current key has a value, from Value, so
	// that Update knows without a second lookup whether it inserts.
	presentEpoch uint64
	present      bool
}

// GetValueState registers (or returns) the value state called name.
func GetValueState[V any, K comparable](b *KeyedBackend[K], name string, ser Serializer[V]) (ValueState[V], error) {
	return register(b, name, KindValue, func() *valueState[K, V] {
		return &valueState[K, V]{t: newTable[K, V](b), ser: ser, typ: typeName[V]()}
	})
}

func (s *valueState[K, V]) Value() (V, bool) {
	v, ok := s.t.maps[s.t.b.kgIndex][s.t.b.currentKey]
	s.present, s.presentEpoch = ok, s.t.b.keyEpoch
	return v, ok
}

func (s *valueState[K, V]) Update(v V) {
	b := s.t.b
	m := s.t.writable(b.kgIndex)
	if s.presentEpoch == b.keyEpoch && s.present {
		m[b.currentKey] = v
		return
	}
	// Possibly a new key: store a compact copy of it. (Assigning to an
	// existing key keeps the key already stored.)
	m[b.storedKey()] = v
	s.present, s.presentEpoch = true, b.keyEpoch
}

func (s *valueState[K, V]) Clear() {
	if _, ok := s.t.maps[s.t.b.kgIndex][s.t.b.currentKey]; ok {
		delete(s.t.writable(s.t.b.kgIndex), s.t.b.currentKey)
	}
	s.present, s.presentEpoch = false, s.t.b.keyEpoch
}

func (s *valueState[K, V]) kind() Kind       { return KindValue }
func (s *valueState[K, V]) typeName() string { return s.typ }
func (s *valueState[K, V]) count() int       { return s.t.count() }
func (s *valueState[K, V]) capture() capturedTables {
	return s.t.capture(s.ser.Append)
}
func (s *valueState[K, V]) restore(kgi int, payload []byte) error {
	return restoreInto(&s.t, kgi, payload, s.ser.Decode)
}

// ListState holds a list of values per key.
type ListState[V any] interface {
	// Get returns the current key's list. The slice must not be modified.
	Get() []V
	// Add appends v to the current key's list.
	Add(v V)
	// Update replaces the current key's list with a copy of vs.
	Update(vs []V)
	// Clear removes the current key's list.
	Clear()
}

type listState[K comparable, V any] struct {
	t   table[K, []V]
	ser Serializer[V]
	typ string
}

// GetListState registers (or returns) the list state called name.
func GetListState[V any, K comparable](b *KeyedBackend[K], name string, ser Serializer[V]) (ListState[V], error) {
	return register(b, name, KindList, func() *listState[K, V] {
		return &listState[K, V]{t: newTable[K, []V](b), ser: ser, typ: typeName[V]()}
	})
}

func (s *listState[K, V]) Get() []V {
	return slices.Clip(s.t.maps[s.t.b.kgIndex][s.t.b.currentKey])
}

// Add appends in place: a snapshot that captured this list holds its old
// length and never reads past it, so appending into spare capacity of the
// shared array is safe without a copy.
func (s *listState[K, V]) Add(v V) {
	b := s.t.b
	m := s.t.writable(b.kgIndex)
	if old, ok := m[b.currentKey]; ok {
		m[b.currentKey] = append(old, v)
	} else {
		m[b.storedKey()] = []V{v}
	}
}

func (s *listState[K, V]) Update(vs []V) {
	if len(vs) == 0 {
		s.Clear()
		return
	}
	b := s.t.b
	m := s.t.writable(b.kgIndex)
	if _, ok := m[b.currentKey]; ok {
		m[b.currentKey] = slices.Clone(vs)
	} else {
		m[b.storedKey()] = slices.Clone(vs)
	}
}

func (s *listState[K, V]) Clear() {
	if _, ok := s.t.maps[s.t.b.kgIndex][s.t.b.currentKey]; ok {
		delete(s.t.writable(s.t.b.kgIndex), s.t.b.currentKey)
	}
}

func (s *listState[K, V]) kind() Kind       { return KindList }
func (s *listState[K, V]) typeName() string { return s.typ }
func (s *listState[K, V]) count() int       { return s.t.count() }
func (s *listState[K, V]) capture() capturedTables {
	return s.t.capture(func(dst []byte, vs []V) []byte {
		dst = binary.AppendUvarint(dst, uint64(len(vs)))
		for _, v := range vs {
			dst = s.ser.Append(dst, v)
		}
		return dst
	})
}
func (s *listState[K, V]) restore(kgi int, payload []byte) error {
	return restoreInto(&s.t, kgi, payload, func(src []byte) ([]V, []byte, error) {
		n, k := binary.Uvarint(src)
		if k <= 0 {
			return nil, nil, ErrShortBuffer
		}
		src = src[k:]
		vs := make([]V, 0, n)
		for i := uint64(0); i < n; i++ {
			v, rest, err := s.ser.Decode(src)
			if err != nil {
				return nil, nil, err
			}
			vs, src = append(vs, v), rest
		}
		return vs, src, nil
	})
}

// MapState holds a map per key.
type MapState[UK comparable, UV any] interface {
	Get(uk UK) (UV, bool)
	Put(uk UK, uv UV)
	Remove(uk UK)
	Contains(uk UK) bool
	// All calls f for each entry of the current key's map until f returns
	// false. The map must not be modified during the call.
	All(f func(UK, UV) bool)
	Len() int
	Clear()
}

// mapEntry is one key's map, with its own copy-on-write generation, because
// copying a key group's table copies only references to these maps.
type mapEntry[UK comparable, UV any] struct {
	m   map[UK]UV
	gen uint64
}

type mapState[K comparable, UK comparable, UV any] struct {
	t     table[K, mapEntry[UK, UV]]
	ukSer Serializer[UK]
	uvSer Serializer[UV]
	typ   string
}

// GetMapState registers (or returns) the map state called name.
func GetMapState[UK comparable, UV any, K comparable](b *KeyedBackend[K], name string, ukSer Serializer[UK], uvSer Serializer[UV]) (MapState[UK, UV], error) {
	return register(b, name, KindMap, func() *mapState[K, UK, UV] {
		return &mapState[K, UK, UV]{t: newTable[K, mapEntry[UK, UV]](b), ukSer: ukSer, uvSer: uvSer,
			typ: "map[" + typeName[UK]() + "]" + typeName[UV]()}
	})
}

func (s *mapState[K, UK, UV]) inner() map[UK]UV {
	return s.t.maps[s.t.b.kgIndex][s.t.b.currentKey].m
}

func (s *mapState[K, UK, UV]) writableInner() map[UK]UV {
	b := s.t.b
	m := s.t.writable(b.kgIndex)
	e, ok := m[b.currentKey]
	switch {
	case !ok:
		e = mapEntry[UK, UV]{m: make(map[UK]UV), gen: b.cow.gen}
		m[b.storedKey()] = e
	case b.cow.shared(e.gen):
		e = mapEntry[UK, UV]{m: maps.Clone(e.m), gen: b.cow.gen}
		m[b.currentKey] = e
	}
	return e.m
}

func (s *mapState[K, UK, UV]) Get(uk UK) (UV, bool) { v, ok := s.inner()[uk]; return v, ok }
func (s *mapState[K, UK, UV]) Put(uk UK, uv UV)     { s.writableInner()[uk] = uv }
func (s *mapState[K, UK, UV]) Contains(uk UK) bool  { _, ok := s.inner()[uk]; return ok }
func (s *mapState[K, UK, UV]) Len() int             { return len(s.inner()) }

func (s *mapState[K, UK, UV]) Remove(uk UK) {
	if !s.Contains(uk) {
		return
	}
	delete(s.writableInner(), uk)
	if len(s.inner()) == 0 {
		s.Clear()
	}
}

func (s *mapState[K, UK, UV]) All(f func(UK, UV) bool) {
	for k, v := range s.inner() {
		if !f(k, v) {
			return
		}
	}
}

func (s *mapState[K, UK, UV]) Clear() {
	if _, ok := s.t.maps[s.t.b.kgIndex][s.t.b.currentKey]; ok {
		delete(s.t.writable(s.t.b.kgIndex), s.t.b.currentKey)
	}
}

func (s *mapState[K, UK, UV]) kind() Kind       { return KindMap }
func (s *mapState[K, UK, UV]) typeName() string { return s.typ }
func (s *mapState[K, UK, UV]) count() int       { return s.t.count() }

func (s *mapState[K, UK, UV]) capture() capturedTables {
	return s.t.capture(func(dst []byte, e mapEntry[UK, UV]) []byte {
		dst = binary.AppendUvarint(dst, uint64(len(e.m)))
		// Sorted by encoded user key, for deterministic snapshots.
		type kv struct {
			k []byte
			v UV
		}
		entries := make([]kv, 0, len(e.m))
		for k, v := range e.m {
			entries = append(entries, kv{s.ukSer.Append(nil, k), v})
		}
		slices.SortFunc(entries, func(a, b kv) int { return compareBytes(a.k, b.k) })
		for _, x := range entries {
			dst = append(dst, x.k...)
			dst = s.uvSer.Append(dst, x.v)
		}
		return dst
	})
}

func (s *mapState[K, UK, UV]) restore(kgi int, payload []byte) error {
	gen := s.t.b.cow.gen
	return restoreInto(&s.t, kgi, payload, func(src []byte) (mapEntry[UK, UV], []byte, error) {
		n, k := binary.Uvarint(src)
		if k <= 0 {
			return mapEntry[UK, UV]{}, nil, ErrShortBuffer
		}
		src = src[k:]
		m := make(map[UK]UV, n)
		for i := uint64(0); i < n; i++ {
			uk, rest, err := s.ukSer.Decode(src)
			if err != nil {
				return mapEntry[UK, UV]{}, nil, err
			}
			uv, rest, err := s.uvSer.Decode(rest)
			if err != nil {
				return mapEntry[UK, UV]{}, nil, err
			}
			m[uk], src = uv, rest
		}
		return mapEntry[UK, UV]{m: m, gen: gen}, src, nil
	})
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

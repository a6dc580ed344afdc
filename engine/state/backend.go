package state

// # Why the hashmap backend is a stack of layers per key group
//
// A checkpoint must not stall the task. Its synchronous part runs on the
// task goroutine between two records, so it may only cost
// O(states × key groups); the encoding runs on another goroutine while the
// task goes on writing state. Something must therefore keep the state as it
// was at the barrier for as long as the encoder reads it, and that something
// must cost O(what is written meanwhile), never a copy of the state.
//
// The previous design copied on write per key-group map: the first write to
// a key group after a barrier cloned its whole map, and no key group was
// released before the whole encode ended. Word count touches every key group
// within a few hundred records, so every barrier cost a full copy of the
// state on the task goroutine (~40 ms with zero throughput at 1 M keys).
// Flink's heap backend copies per entry (CopyOnWriteStateMap keeps a version
// in every entry and copies an entry, and the bucket chain in front of it,
// the first time it is written after a snapshot). Go maps give no access to
// their entries, and a version per entry would cost memory in every entry
// forever, snapshot or not.
//
// So each state keeps, per key group, a stack of layers:
//
//   - layer 0, the base, is a plain table: a strMap for string keys (see
//     strmap.go), else a map[K]E. With no snapshot open there is nothing
//     else, and the state costs what a hash table of the same keys and
//     values costs (no tombstones, no versions, no boxes);
//   - above it, while snapshots are open, small overlays
//     map[K]slot{e E; deleted bool} hold what was written since.
//
// Every layer carries a tag, the backend version it was created at. A
// snapshot's synchronous part pins the current version in every key group
// and bumps the version (O(key groups)), and records each state's layers
// (O(states × key groups), no allocation per entry). A layer is read by an
// open snapshot exactly when its tag is at or below that snapshot's pin, so
// it may be written only while its tag is above the highest open pin of its
// key group. The first write to a key group whose top layer is pinned pushes
// a new overlay; later writes go there; reads look top-down, and only while
// overlays exist (a key group with one layer costs one map lookup, as
// before).
//
// The encoder releases each key group as soon as it has encoded it
// (KeyedSnapshot.EncodeKeyGroup does), not at the end of the snapshot, so a
// key group stops costing overlays as soon as it is written out. Releases
// come from the encoder's goroutine and are handed over through a mutex and
// an atomic flag the task checks once per key change; the task folds layers
// itself, lazily, on the next access to a key group whose pins changed: the
// layers no open snapshot reads any more (tag above the highest open pin)
// are merged into the lowest of them, and with no snapshot open into the
// base. Folding only ever mutates a map no snapshot reads, which is what
// makes the encoder's reads safe without locks (Go maps are safe for
// concurrent readers, never for a reader and a writer). A fold costs what
// was written to one state in one key group while the snapshot was open,
// never the state, and an access moves at most foldBudget entries into a
// base map (the rest move on the next accesses: reads see the same state
// after every move), so that no access holds up the task for long however
// large a key group grows. Several snapshots can be open at once
// (checkpoints and savepoints) and released in any order; each adds at most
// one layer per key group.
//
// Writes under an open snapshot copy only keys that are new (cloneKey), as
// any map assignment stores the key it is given; so the overlays allocate
// little beyond their own growth, and the garbage collector has little more
// to do while a snapshot is open.
//
// The same rule covers nested values. Map state keeps per key an inner map
// stamped with the version it was created at: it is changed in place only
// when no open snapshot can read it, else cloned first (a key's map, not a
// key group's). List state appends in place: a snapshot holds the old slice
// header and never reads past its length, and Update replaces the slice.
// Timers are a set per key group stored in the same layered table, with a
// heap beside it for their order that only the task touches.
//
// Encoding must produce the canonical bytes of savepoint/FORMAT.md v1:
// entries sorted by their encoded key. A string table with no overlays
// keeps that order between snapshots and merges in what was inserted
// since (strMap.encodeOrdered); otherwise each state's entries of a key group
// are appended to one scratch arena (key, then value, exactly the bytes that
// go out), indexed by small fixed-size records, and sorted by an LSD radix
// sort on the first 8 key bytes, recursing on the next 8 bytes for runs that
// share them (insertion sort for small runs). Keys are prefix-free (every
// serializer is self-delimiting), so this is the order the byte comparison
// gives, and the output is byte-for-byte what it was. The arena and the
// index are reused from key group to key group and from snapshot to
// snapshot, so an encode allocates almost nothing per entry. Once the sort
// was cheap, most of the time went into waiting for memory: string keys of
// a Go map (an overlay's) live in allocations of their own, in no order
// related to their map's, and
// copying them one after the other waits for one cache miss after another;
// so a key group's entries are gathered first and the first byte of every
// key is read with independent loads the processor overlaps (touchKeys)
// before the keys are copied. (Measured when this was written, on a shared
// 2-core machine at 1 M keys: encoding went from ~1.8 µs and ~160 bytes of
// garbage per entry to ~0.12 µs and ~1 byte; the task's longest work for
// 100 updates while a snapshot is open from ~60–140 ms to ~1–2 ms.)
//
// Restore decodes every key group into its own base maps, presized from the
// entry count. Key groups are independent maps, so RestoreKeyGroups decodes
// them on several goroutines; timers rebuild their heap once afterwards.

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gflink/gflink/savepoint/changelog"
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

// pinBook holds the versions layers are tagged with and, per key group, the
// pins of the open snapshots. Everything but the release queue belongs to
// the task goroutine.
type pinBook struct {
	ver uint64 // the tag of layers created now; above every open pin
	kgs []kgPins

	// Releases arrive from encoders; the task drains them (drain).
	pending atomic.Bool
	mu      sync.Mutex
	queue   []kgRelease
	spare   []kgRelease

	// foldBudget is how many entries an access moves into a base map at
	// most (defaultFoldBudget; tests lower it to stop folds half-way).
	foldBudget int
}

type kgPins struct {
	maxPin uint64   // the highest open pin; 0 when none is open
	pins   []uint64 // open snapshots' pins, in any order
	// relGen changes whenever a pin is released, so that a layered table
	// knows, with one comparison, that it may have layers to fold.
	relGen uint32
}

type kgRelease struct {
	kgi int
	pin uint64
}

func newPinBook(nkg int) *pinBook {
	return &pinBook{ver: 1, kgs: make([]kgPins, nkg), foldBudget: defaultFoldBudget}
}

// pin pins the current version in every key group and returns it.
func (p *pinBook) pin() uint64 {
	p.drain()
	v := p.ver
	for i := range p.kgs {
		k := &p.kgs[i]
		k.pins = append(k.pins, v)
		k.maxPin = v
	}
	p.ver++
	return v
}

// release (any goroutine) queues the release of a pin in one key group.
func (p *pinBook) release(kgi int, pin uint64) {
	p.mu.Lock()
	p.queue = append(p.queue, kgRelease{kgi, pin})
	p.pending.Store(true)
	p.mu.Unlock()
}

// drain (task goroutine) applies queued releases.
func (p *pinBook) drain() {
	if !p.pending.Load() {
		return
	}
	p.mu.Lock()
	q := p.queue
	p.queue, p.spare = p.spare[:0], nil // two queues, swapped, so that draining allocates nothing
	p.pending.Store(false)
	p.mu.Unlock()
	for _, r := range q {
		k := &p.kgs[r.kgi]
		if i := slices.Index(k.pins, r.pin); i >= 0 {
			k.pins = slices.Delete(k.pins, i, i+1)
		}
		k.maxPin = 0
		for _, v := range k.pins {
			k.maxPin = max(k.maxPin, v)
		}
		k.relGen++
	}
	p.mu.Lock()
	p.spare = q[:0]
	p.mu.Unlock()
}

// KeyedBackend is the hashmap keyed state backend of one operator subtask:
// Go maps per state and key group. It is used from the task's goroutine only,
// except for snapshot encoding, which reads layers pinned by Snapshot.
type KeyedBackend[K comparable] struct {
	keySer  KeySerializer[K]
	maxPar  int
	kgRange KeyGroupRange
	nkg     int

	currentKey K
	kgIndex    int // current key group minus kgRange.Start
	// currentHash is the current key's hash as string tables use it
	// (strHash), when hashed says it is known: the keyed exchange hashed
	// the key already, and with the built-in string serializer that hash
	// is the tables' own.
	currentHash uint32
	hashed      bool
	strKeys     bool // keySer is the built-in string serializer
	// keyEpoch changes with every SetCurrentKey, so that a state can tell
	// whether its last lookup was for the current key.
	keyEpoch uint64
	// cloneKey copies a key before it is stored, so that stored keys are
	// compact and do not pin larger strings they were cut from.
	cloneKey func(K) K

	states  map[string]keyedState
	pending map[string]*rawState // restored, not yet registered
	pins    *pinBook
	// prefetchers are the states whose tables Prefetch warms: those in
	// string tables, with the built-in string serializer (whose hash the
	// keyed exchange passes on).
	prefetchers []slotPrefetcher
}

// slotPrefetcher is a state whose tables can start loading the slot a key
// hashes to (slotPrefetcher.prefetchSlot, with the hash as strHash gives it).
type slotPrefetcher interface {
	prefetchSlot(kgi int, h uint32)
}

// keyedState is one registered state, erased of its types.
type keyedState interface {
	kind() Kind
	typeName() string
	// capture returns the snapshot's view of every key group's layers.
	capture() capturedTables
	// restore decodes entries of one key group. Calls for different key
	// groups may run concurrently.
	restore(kgIndex int, payload []byte) error
	count() int
	// foldAll folds every key group's layers as far as open pins allow;
	// overlays counts the overlays left (for tests).
	foldAll()
	overlays() int
}

// restoreFinisher is a state that needs a step after its key groups have
// been restored (timers rebuild their queue).
type restoreFinisher interface{ finishRestore() }

type capturedTables interface {
	// encode appends one key group's payload (uvarint length, then uvarint
	// count and the sorted entries) and reports whether it had entries; with
	// none it appends nothing.
	encode(sc *encScratch, dst []byte, kgIndex int) ([]byte, bool)
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
		keySer: keySer, maxPar: maxParallelism, kgRange: kgRange, nkg: kgRange.Len(),
		states: map[string]keyedState{}, pending: map[string]*rawState{},
		cloneKey: func(k K) K { return k },
		pins:     newPinBook(kgRange.Len()),
	}
	if _, ok := any(*new(K)).(string); ok {
		b.cloneKey = func(k K) K { return any(strings.Clone(any(k).(string))).(K) }
	}
	_, b.strKeys = any(keySer).(stringSerializer)
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
	h := b.keySer.Hash(k)
	b.SetCurrentKeyHashed(k, KeyGroupForHash(h, b.maxPar), uint32(h>>32))
}

// HashedKeys is a backend that takes a key's hash with the key (the
// hashmap backend, and the changelog over it): a keyed exchange hashed the
// key already.
type HashedKeys[K comparable] interface {
	SetCurrentKeyHashed(k K, kg int, hash uint32)
}

// SetCurrentKeyHashed is SetCurrentKeyAndGroup for a caller that also has
// the upper half of the key's hash, uint32(keySer.Hash(k)>>32): a state
// table keyed by strings looks the key up by it rather than hashing the
// key again.
func (b *KeyedBackend[K]) SetCurrentKeyHashed(k K, kg int, hash uint32) {
	b.SetCurrentKeyAndGroup(k, kg)
	b.currentHash, b.hashed = fixHash(hash), b.strKeys
}

// Prefetcher is a backend that can warm the processor's caches for a key
// it will be given soon.
type Prefetcher interface {
	// Prefetch starts loading what a lookup of a key of key group kg, with
	// the upper half of its hash (as for SetCurrentKeyHashed), will read,
	// without waiting for it.
	Prefetch(kg int, hash uint32)
}

// KeyPrefetcher is a backend that warms its caches from a key rather than
// its hash: the LSM backend, whose write buffer files a state's entries
// under composite keys ([state][key group][key]) that the record's hash
// does not give.
type KeyPrefetcher[K any] interface {
	PrefetchKey(k K, kg int)
}

// Prefetchers returns how b warms its caches for keys to come: from their
// hash (hashmap), from the keys themselves (rocksdb), or not at all (nil,
// nil). Behind the changelog's wrapper it is the wrapped backend's tables
// that lookups read, so that backend answers.
func Prefetchers[K comparable](b Backend[K]) (Prefetcher, KeyPrefetcher[K]) {
	if c, ok := b.(*ChangelogBackend[K]); ok {
		b = c.inner
	}
	byHash, _ := b.(Prefetcher)
	byKey, _ := b.(KeyPrefetcher[K])
	if byHash != nil {
		return byHash, nil
	}
	return nil, byKey
}

// Prefetch starts loading the table slots where the states in string
// tables keep a key of key group kg with this hash (the first slot a
// lookup probes; a key longer than 11 bytes, kept in the table's arena, or
// a slot that straddles two cache lines, still misses once). Why: from about 1 M
// keys a lookup is a cache miss (and, on a virtual machine, a page walk
// besides): 200 ns of a word count's ~350 ns per record on 2 cores, during
// which the processor waits. The keyed input calls Prefetch a few records
// ahead, so the misses of several records are in flight at once (measured
// on a 1 M-key table: 238 → 81 ns per read-modify-write, BenchmarkPrefetch). Keys of other
// types, and keys not yet in the table, gain nothing and cost a few ns.
func (b *KeyedBackend[K]) Prefetch(kg int, hash uint32) {
	kgi := kg - b.kgRange.Start
	if uint(kgi) >= uint(b.nkg) {
		return
	}
	h := fixHash(hash)
	for _, p := range b.prefetchers {
		p.prefetchSlot(kgi, h)
	}
}

// prefetchSlot starts loading the base layer's slot where a string key
// with hash h (strHash's) is looked up first.
func (t *table[K, E]) prefetchSlot(kgi int, h uint32) {
	l := &t.kgs[kgi]
	if m := l.base.s; m != nil {
		m.prefetchHash(h)
	}
	// While a snapshot is open (and until the key group is folded) a
	// lookup reads the overlays first and a write goes to the top one:
	// at 5 M keys, where a checkpoint takes ~300 ms, a third of the
	// records, whose overlay lookups were misses too.
	for j := range l.over {
		if m := l.over[j].m.s; m != nil {
			m.prefetchHash(h)
		}
	}
}

func (s *valueState[K, V]) prefetchSlot(kgi int, h uint32)    { s.t.prefetchSlot(kgi, h) }
func (s *listState[K, V]) prefetchSlot(kgi int, h uint32)     { s.t.prefetchSlot(kgi, h) }
func (s *mapState[K, UK, UV]) prefetchSlot(kgi int, h uint32) { s.t.prefetchSlot(kgi, h) }

// SetCurrentKeyAndGroup is SetCurrentKey for a caller that already knows the
// key's group (the keyed exchange computed it): the key is not hashed again.
// kg must be KeyGroupOf(k); it panics if kg is outside the backend's range.
func (b *KeyedBackend[K]) SetCurrentKeyAndGroup(k K, kg int) {
	if uint(kg-b.kgRange.Start) >= uint(b.nkg) {
		panic(fmt.Sprintf("state: key %v (key group %d) is outside %v", k, kg, b.kgRange))
	}
	b.setCurrent(k, kg)
}

func (b *KeyedBackend[K]) setCurrent(k K, kg int) {
	b.currentKey, b.hashed = k, false
	b.kgIndex = kg - b.kgRange.Start
	b.keyEpoch++
	if b.pins.pending.Load() {
		b.pins.drain()
	}
}

// storedKey returns the key to store for a new entry.
func (b *KeyedBackend[K]) storedKey() K { return b.cloneKey(b.currentKey) }

// CurrentKey returns the current key.
func (b *KeyedBackend[K]) CurrentKey() K { return b.currentKey }

// FoldLayers folds, in every state and key group, the layers no open
// snapshot reads any more (they are otherwise folded lazily, when their key
// group is next accessed). With no snapshot open, only base maps remain.
func (b *KeyedBackend[K]) FoldLayers() {
	b.pins.drain()
	for _, s := range b.states {
		s.foldAll()
	}
}

// overlays is the number of overlay layers over all states and key groups.
func (b *KeyedBackend[K]) overlays() int {
	n := 0
	for _, s := range b.states {
		n += s.overlays()
	}
	return n
}

// takePending removes and returns the restored payloads of a state not
// registered yet (nil if there are none), for a caller that decodes them
// itself: the changelog decodes each key group right before replaying its
// records. The state must then be registered before anything else.
func (b *KeyedBackend[K]) takePending(name string, kind Kind) (*rawState, error) {
	raw, ok := b.pending[name]
	if !ok || b.states[name] != nil {
		return nil, nil
	}
	if raw.kind != kind {
		return nil, fmt.Errorf("state %q was restored as %s state but is now declared as %s state", name, raw.kind, kind)
	}
	delete(b.pending, name)
	return raw, nil
}

// restoreRaw decodes one key group of raw into s (see takePending); safe on
// several goroutines for distinct key groups, as RestoreKeyGroups' decode.
func restoreRaw[K comparable](b *KeyedBackend[K], name string, s keyedState, raw *rawState, kgi int) error {
	payload, ok := raw.byKG[kgi]
	if !ok {
		return nil
	}
	if err := s.restore(kgi, payload); err != nil {
		return fmt.Errorf("restore state %q (declared %s, snapshot has %s) in key group %d: %w", name, s.typeName(), raw.typ, kgi+b.kgRange.Start, err)
	}
	return nil
}

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
		// Key groups decode independently, as in RestoreKeyGroups: on
		// every core.
		kgis := slices.Sorted(maps.Keys(raw.byKG))
		err := inParallel(len(kgis), runtime.GOMAXPROCS(0), func(i int) error { return restoreRaw(b, name, s, raw, kgis[i]) })
		if err != nil {
			return zero, err
		}
		if f, ok := any(s).(restoreFinisher); ok {
			f.finishRestore()
		}
		delete(b.pending, name)
	}
	b.states[name] = s
	if p, ok := any(s).(slotPrefetcher); ok && b.strKeys {
		b.prefetchers = append(b.prefetchers, p)
	}
	return s, nil
}

// slot is an overlay's entry: a value, or the deletion of a key that lower
// layers hold.
type slot[E any] struct {
	e       E
	deleted bool
}

// overlay is a layer above the base: a strMap for string keys (its slots
// hold no pointers, it copies the key's bytes itself, and folding scans its
// slots in memory order), else a Go map.
type overlay[K comparable, E any] struct {
	m   baseLayer[K, slot[E]]
	tag uint64
}

// layered is one state's entries in one key group.
type layered[K comparable, E any] struct {
	base    baseLayer[K, E]
	baseTag uint64
	over    []overlay[K, E] // empty unless snapshots were open since the last fold
	relGen  uint32          // the key group's relGen at the last fold
	// overHint is about the size of the last overlays folded (a slowly
	// decaying maximum): a new overlay starts at it.
	overHint int
}

// table is a state's layered maps, one per key group.
type table[K comparable, E any] struct {
	p     *pinBook
	kgs   []layered[K, E]
	clone func(K) K
	str   bool // K is string: base layers are strMaps
}

func newTable[K comparable, E any](p *pinBook, nkg int, clone func(K) K) table[K, E] {
	return table[K, E]{p: p, kgs: make([]layered[K, E], nkg), clone: clone, str: isString[K]()}
}

func (t *table[K, E]) get(kgi int, k K) (E, bool) {
	l := &t.kgs[kgi]
	if len(l.over) == 0 {
		return l.base.get(k)
	}
	return t.getLayered(kgi, l, k)
}

func (t *table[K, E]) getLayered(kgi int, l *layered[K, E], k K) (E, bool) {
	if l.relGen != t.p.kgs[kgi].relGen {
		t.fold(kgi, l, t.p.foldBudget)
	}
	for j := len(l.over) - 1; j >= 0; j-- {
		if s, ok := l.over[j].m.get(k); ok {
			return s.e, !s.deleted
		}
	}
	return l.base.get(k)
}

// baseWritable reports whether writes may go straight into the base map.
func (t *table[K, E]) baseWritable(kgi int, l *layered[K, E]) bool {
	return len(l.over) == 0 && l.base.made() && l.baseTag > t.p.kgs[kgi].maxPin
}

// target readies a key group for a write and returns the overlay to write
// into, or nil for the base map.
func (t *table[K, E]) target(kgi int, l *layered[K, E]) *overlay[K, E] {
	kp := &t.p.kgs[kgi]
	if l.relGen != kp.relGen {
		t.fold(kgi, l, t.p.foldBudget)
	}
	if len(l.over) == 0 {
		if !l.base.made() {
			// A snapshot that read this key group read it empty (nil): a new
			// map is not shared with it.
			l.base, l.baseTag = newBaseLayer[K, E](t.str, 0), t.p.ver
			return nil
		}
		if l.baseTag > kp.maxPin {
			return nil
		}
	} else if top := &l.over[len(l.over)-1]; top.tag > kp.maxPin {
		return top
	}
	// Sized for what the key group's last overlay held: grown from 8
	// slots, an overlay of ~6 K entries (5 M keys) was rehashed 10 times.
	l.over = append(l.over, overlay[K, E]{m: newBaseLayer[K, slot[E]](t.str, l.overHint), tag: t.p.ver})
	return &l.over[len(l.over)-1]
}

// set stores e under k. exists tells whether k has a value now: only a new
// key is copied (clone), as a map assignment to an existing key stores the
// key given anyway, and writes while a snapshot is open should not allocate
// more than the overlay's own growth. A strMap copies key bytes itself.
func (t *table[K, E]) set(kgi int, k K, e E, exists bool) {
	l := &t.kgs[kgi]
	o := t.target(kgi, l)
	if o == nil {
		if !exists && l.base.s == nil {
			k = t.clone(k)
		}
		l.base.put(k, e)
		return
	}
	if !exists && o.m.s == nil {
		k = t.clone(k)
	}
	o.m.put(k, slot[E]{e: e})
}

// del deletes k, which has a value now.
func (t *table[K, E]) del(kgi int, k K) {
	l := &t.kgs[kgi]
	o := t.target(kgi, l)
	if o == nil {
		l.base.del(k)
		return
	}
	o.m.put(k, slot[E]{deleted: true})
}

// defaultFoldBudget is how many entries an access moves into a base map at
// most: a key group's overlays fold into its base over several accesses if
// need be, so that folding never holds up the task for long, however large
// a key group.
const defaultFoldBudget = 1024

// fold merges the layers that no open snapshot reads (those tagged above the
// highest open pin) into the lowest of them: into the base when none is
// pinned, moving at most budget entries (the rest on later accesses: until
// then the key group's relGen stays stale). Only maps no snapshot reads are
// written.
func (t *table[K, E]) fold(kgi int, l *layered[K, E], budget int) {
	kp := &t.p.kgs[kgi]
	if len(l.over) == 0 {
		l.relGen = kp.relGen
		return
	}
	if !l.base.made() || l.baseTag > kp.maxPin {
		if !l.base.made() {
			l.base = newBaseLayer[K, E](t.str, l.over[0].m.len())
		}
		// Entries move from the lowest overlay into the base one by one;
		// reads see the same state after every move, as the overlays above
		// still shadow the base.
		for len(l.over) > 0 {
			o := &l.over[0]
			l.overHint = max(l.overHint-l.overHint/4, o.m.len())
			if bs, os := l.base.s, o.m.s; bs != nil && os != nil {
				// String tables: the overlay's hash serves the base, and
				// the base slots of the entries to come are prefetched (a
				// fold's puts are random, each a miss from ~1 M keys on).
				budget = os.drainHashed(budget, bs.prefetchHash, func(k string, h uint32, s slot[E]) {
					if s.deleted {
						bs.del(k)
					} else {
						bs.putHashed(k, h, s.e)
					}
				})
			} else {
				budget = o.m.drain(budget, func(k K, s slot[E]) {
					if s.deleted {
						l.base.del(k)
					} else {
						l.base.put(k, s.e)
					}
				})
			}
			if o.m.len() > 0 {
				return
			}
			l.baseTag = o.tag
			l.over = slices.Delete(l.over, 0, 1)
		}
		l.relGen = kp.relGen
		return
	}
	l.relGen = kp.relGen
	top := l.over[len(l.over)-1].tag
	for j := range l.over {
		if l.over[j].tag <= kp.maxPin {
			continue
		}
		if j == len(l.over)-1 {
			return
		}
		dst := &l.over[j].m
		for _, o := range l.over[j+1:] {
			for k, s := range o.m.all {
				dst.put(k, s)
			}
		}
		l.over[j].tag = top
		clear(l.over[j+1:])
		l.over = l.over[:j+1]
		return
	}
}

func (t *table[K, E]) foldAll() {
	for i := range t.kgs {
		if len(t.kgs[i].over) > 0 {
			t.fold(i, &t.kgs[i], math.MaxInt)
		}
	}
}

func (t *table[K, E]) overlays() int {
	n := 0
	for i := range t.kgs {
		n += len(t.kgs[i].over)
	}
	return n
}

// count is the number of keys with a value.
func (t *table[K, E]) count() int {
	n := 0
	for i := range t.kgs {
		n += t.kgs[i].count()
	}
	return n
}

func (l *layered[K, E]) count() int {
	n := l.base.len()
	for j, o := range l.over {
		for k, s := range o.m.all {
			below := l.visibleBelow(j, k)
			switch {
			case s.deleted && below:
				n--
			case !s.deleted && !below:
				n++
			}
		}
	}
	return n
}

// visibleBelow reports whether k has a value in the layers under overlay j.
func (l *layered[K, E]) visibleBelow(j int, k K) bool {
	for i := j - 1; i >= 0; i-- {
		if s, ok := l.over[i].m.lookup(k); ok {
			return !s.deleted
		}
	}
	_, ok := l.base.lookup(k)
	return ok
}

// view is a snapshot's view of one key group: the layers as they were.
type view[K comparable, E any] struct {
	base baseLayer[K, E]
	over []baseLayer[K, slot[E]]
}

func (t *table[K, E]) views() []view[K, E] {
	vs := make([]view[K, E], len(t.kgs))
	for i := range t.kgs {
		l := &t.kgs[i]
		vs[i].base = l.base
		if len(l.over) > 0 {
			vs[i].over = make([]baseLayer[K, slot[E]], len(l.over))
			for j, o := range l.over {
				vs[i].over[j] = o.m
			}
		}
	}
	return vs
}

// all yields the view's entries (each key once, deletions left out).
func (v *view[K, E]) all(yield func(K, E) bool) {
	for j := len(v.over) - 1; j >= 0; j-- {
		for k, s := range v.over[j].all {
			if s.deleted || shadowed(v.over[j+1:], k) {
				continue
			}
			if !yield(k, s.e) {
				return
			}
		}
	}
	for k, e := range v.base.all {
		if len(v.over) > 0 && shadowed(v.over, k) {
			continue
		}
		if !yield(k, e) {
			return
		}
	}
}

func shadowed[K comparable, E any](over []baseLayer[K, slot[E]], k K) bool {
	for i := range over {
		if _, ok := over[i].lookup(k); ok {
			return true
		}
	}
	return false
}

// capturedTable is a snapshot's view of a table with its encoders.
type capturedTable[K comparable, E any] struct {
	views []view[K, E]
	encK  func(dst []byte, k K) []byte
	// encE appends the entry's value part; sub is scratch for nested sorts.
	encE func(sub *encScratch, dst []byte, k K, e E) []byte
	tie  bool // equal keys are ordered by the varint after them (timers)
	// ordered: string keys with the built-in serializer, whose strMaps keep
	// their snapshot order (strMap.encodeOrdered).
	ordered bool
	// varint: an entry is an 8-byte integer that encE appends as a zig-zag
	// varint (a count, a sum: the common value state); an ordered encode
	// then writes it itself rather than through three function calls.
	varint bool

	// The key group's entries, gathered before they are encoded (reused).
	ks []K
	es []E
}

// touchKeys reads the first byte of every string key, with loads that do not
// depend on each other, so that the processor fetches many of them from
// memory at once. Encoding then finds the keys in cache: copying each key
// in turn would wait for one cache miss after another (string keys live in
// their own allocations, in no order related to the map's), which is most
// of the time an encode takes.
func touchKeys[K any](ks []K) byte {
	ss, ok := any(ks).([]string)
	if !ok {
		return 0
	}
	var x byte
	for _, s := range ss {
		if len(s) > 0 {
			x += s[0]
		}
	}
	return x
}

func (c *capturedTable[K, E]) encode(sc *encScratch, dst []byte, kgi int) ([]byte, bool) {
	v := &c.views[kgi]
	if v.base.len() == 0 && len(v.over) == 0 {
		return dst, false
	}
	if m := v.base.s; m != nil && len(v.over) == 0 && c.ordered {
		return m.encodeOrdered(sc, dst, c.varint, func(sub *encScratch, dst []byte, k string, e E) []byte {
			return c.encE(sub, dst, fromString[K](k), e)
		})
	}
	c.ks, c.es = c.ks[:0], c.es[:0]
	if len(v.over) == 0 && v.base.m != nil {
		for k, e := range v.base.m { // the common case, without the iterator
			c.ks, c.es = append(c.ks, k), append(c.es, e)
		}
	} else {
		for k, e := range v.all {
			c.ks, c.es = append(c.ks, k), append(c.es, e)
		}
	}
	sc.reset()
	sc.sink += touchKeys(c.ks) // kept, so that the loads are not optimized away
	for i, k := range c.ks {
		off := len(sc.arena)
		sc.arena = c.encK(sc.arena, k)
		kl := len(sc.arena) - off
		sc.arena = c.encE(sc.sub(), sc.arena, k, c.es[i])
		sc.add(off, kl)
	}
	if len(sc.ents) == 0 {
		return dst, false
	}
	return sc.emit(dst, c.tie, true), true
}

// restoreInto decodes count entries of one key group into the table. Only
// that key group's maps are written, so key groups restore concurrently.
func restoreInto[K comparable, E any](t *table[K, E], kgi int, payload []byte, decK func([]byte) (K, []byte, error), dec func([]byte) (E, []byte, error)) error {
	n, k := binary.Uvarint(payload)
	if k <= 0 {
		return ErrShortBuffer
	}
	rest := payload[k:]
	l := &t.kgs[kgi]
	if !l.base.made() {
		// Presized from the count (bounded by the bytes, against a
		// corrupt count).
		l.base, l.baseTag = newBaseLayer[K, E](t.str, int(min(n, uint64(len(rest))))), t.p.ver
	}
	direct := t.baseWritable(kgi, l)
	for i := uint64(0); i < n; i++ {
		key, r, err := decK(rest)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		e, r, err := dec(r)
		if err != nil {
			return fmt.Errorf("value: %w", err)
		}
		if direct {
			l.base.put(key, e)
		} else {
			t.set(kgi, key, e, true)
		}
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
	b   *KeyedBackend[K]
	t   table[K, V]
	ser Serializer[V]
	typ string
	// present caches whether the current key has a value, from Value, so
	// that Update knows without a second lookup whether it inserts.
	presentEpoch uint64
	present      bool
	// log, when set, writes every change to the changelog from here: a
	// string key's state of varint integers under the changelog, which
	// would otherwise wrap it (see getChangelogValueState).
	log *directLog
}

// directLog is the changelog's writer for a state that logs its own
// changes: at full speed the wrapper's layer of calls around Value and
// Update cost a word count ~4 ns a record, ~4% of its throughput.
type directLog struct {
	w     *changelog.Writer
	id    uint32
	dirty *bool // the changelog backend's: changes since its last materialization
}

// heapValueState registers (or returns) a value state in Go maps.
func heapValueState[V any, K comparable](b *KeyedBackend[K], name string, ser Serializer[V]) (ValueState[V], error) {
	return register(b, name, KindValue, func() *valueState[K, V] {
		return &valueState[K, V]{b: b, t: newTable[K, V](b.pins, b.nkg, b.cloneKey), ser: ser, typ: typeName[V]()}
	})
}

func (s *valueState[K, V]) Value() (V, bool) {
	b := s.b
	var v V
	var ok bool
	if l := &s.t.kgs[b.kgIndex]; b.hashed && len(l.over) == 0 && l.base.s != nil {
		v, ok = l.base.s.getHashed(asString(b.currentKey), b.currentHash)
	} else {
		v, ok = s.t.get(b.kgIndex, b.currentKey)
	}
	s.present, s.presentEpoch = ok, b.keyEpoch
	return v, ok
}

func (s *valueState[K, V]) Update(v V) {
	b := s.b
	kgi := b.kgIndex
	known := s.presentEpoch == b.keyEpoch
	exists := s.present
	if !known {
		_, exists = s.t.get(kgi, b.currentKey)
	}
	if l := &s.t.kgs[kgi]; exists && s.t.baseWritable(kgi, l) {
		l.base.put(b.currentKey, v) // the common case: one assignment
	} else {
		// Possibly a new key: set stores a compact copy of it.
		s.t.set(kgi, b.currentKey, v, exists)
	}
	s.present, s.presentEpoch = true, b.keyEpoch
	if l := s.log; l != nil {
		// V is an 8-byte integer here (getChangelogValueState).
		*l.dirty = true
		l.w.SetStringVarint(l.id, b.kgRange.Start+kgi, asString(b.currentKey), *(*int64)(unsafe.Pointer(&v)))
	}
}

func (s *valueState[K, V]) Clear() {
	b := s.b
	if _, ok := s.t.get(b.kgIndex, b.currentKey); ok {
		s.t.del(b.kgIndex, b.currentKey)
	}
	s.present, s.presentEpoch = false, b.keyEpoch
	if l := s.log; l != nil {
		*l.dirty = true
		l.w.HeadString(changelog.OpClear, l.id, b.kgRange.Start+b.kgIndex, asString(b.currentKey))
		l.w.Done()
	}
}

// updateAt and clearAt change key k of key group index kgi without the
// current key, for changelog replay, which calls them on several
// goroutines for distinct key groups: a key group's layers are its own, and
// the pin book is only read (it changes on the task goroutine, which waits
// for the replay). For other key types than string, k must be the caller's
// own copy; a string key may share memory the caller keeps unchanged only
// for the call (the changelog's replay reads keys in place from its index),
// because string tables copy a key's bytes — base layers and overlays alike.
// endReplay then forgets
// whether the current key has a value (Update's cache): the replay may have
// changed its entry, and a stale "has a value" would make Update store the
// caller's key uncopied.
func (s *valueState[K, V]) updateAt(kgi int, k K, v V) {
	s.t.set(kgi, k, v, true)
}

func (s *valueState[K, V]) clearAt(kgi int, k K) {
	if _, ok := s.t.get(kgi, k); ok {
		s.t.del(kgi, k)
	}
}

func (s *valueState[K, V]) endReplay() { s.present, s.presentEpoch = false, 0 }

func (s *valueState[K, V]) kind() Kind       { return KindValue }
func (s *valueState[K, V]) typeName() string { return s.typ }
func (s *valueState[K, V]) count() int       { return s.t.count() }
func (s *valueState[K, V]) foldAll()         { s.t.foldAll() }
func (s *valueState[K, V]) overlays() int    { return s.t.overlays() }
func (s *valueState[K, V]) capture() capturedTables {
	return &capturedTable[K, V]{views: s.t.views(), encK: s.b.keySer.Append, ordered: s.b.strKeys, varint: isVarint64(s.ser),
		encE: func(_ *encScratch, dst []byte, _ K, v V) []byte { return s.ser.Append(dst, v) }}
}
func (s *valueState[K, V]) restore(kgi int, payload []byte) error {
	return restoreInto(&s.t, kgi, payload, s.b.keySer.Decode, s.ser.Decode)
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
	b   *KeyedBackend[K]
	t   table[K, []V]
	ser Serializer[V]
	typ string
}

// heapListState registers (or returns) a list state in Go maps.
func heapListState[V any, K comparable](b *KeyedBackend[K], name string, ser Serializer[V]) (ListState[V], error) {
	return register(b, name, KindList, func() *listState[K, V] {
		return &listState[K, V]{b: b, t: newTable[K, []V](b.pins, b.nkg, b.cloneKey), ser: ser, typ: typeName[V]()}
	})
}

func (s *listState[K, V]) Get() []V {
	vs, _ := s.t.get(s.b.kgIndex, s.b.currentKey)
	return slices.Clip(vs)
}

// Add appends in place: a snapshot that read this list holds its old length
// and never reads past it, and no list is ever shortened in place (Update
// and Clear replace it), so appending into spare capacity of an array a
// snapshot shares is safe without a copy.
func (s *listState[K, V]) Add(v V)       { s.addAt(s.b.kgIndex, s.b.currentKey, v) }
func (s *listState[K, V]) Update(vs []V) { s.updateAt(s.b.kgIndex, s.b.currentKey, vs) }
func (s *listState[K, V]) Clear()        { s.clearAt(s.b.kgIndex, s.b.currentKey) }

// addAt, updateAt and clearAt are Add, Update and Clear on key k of key
// group index kgi; changelog replay calls them on several goroutines for
// distinct key groups (see valueState.updateAt).
func (s *listState[K, V]) addAt(kgi int, k K, v V) {
	old, ok := s.t.get(kgi, k)
	if ok {
		s.t.set(kgi, k, append(old, v), true)
	} else {
		s.t.set(kgi, k, []V{v}, false)
	}
}

func (s *listState[K, V]) updateAt(kgi int, k K, vs []V) {
	if len(vs) == 0 {
		s.clearAt(kgi, k)
		return
	}
	_, ok := s.t.get(kgi, k)
	s.t.set(kgi, k, slices.Clone(vs), ok)
}

func (s *listState[K, V]) clearAt(kgi int, k K) {
	if _, ok := s.t.get(kgi, k); ok {
		s.t.del(kgi, k)
	}
}

func (s *listState[K, V]) kind() Kind       { return KindList }
func (s *listState[K, V]) typeName() string { return s.typ }
func (s *listState[K, V]) count() int       { return s.t.count() }
func (s *listState[K, V]) foldAll()         { s.t.foldAll() }
func (s *listState[K, V]) overlays() int    { return s.t.overlays() }
func (s *listState[K, V]) capture() capturedTables {
	return &capturedTable[K, []V]{views: s.t.views(), encK: s.b.keySer.Append, ordered: s.b.strKeys,
		encE: func(_ *encScratch, dst []byte, _ K, vs []V) []byte {
			dst = binary.AppendUvarint(dst, uint64(len(vs)))
			for _, v := range vs {
				dst = s.ser.Append(dst, v)
			}
			return dst
		}}
}
func (s *listState[K, V]) restore(kgi int, payload []byte) error {
	return restoreInto(&s.t, kgi, payload, s.b.keySer.Decode, func(src []byte) ([]V, []byte, error) {
		n, k := binary.Uvarint(src)
		if k <= 0 {
			return nil, nil, ErrShortBuffer
		}
		src = src[k:]
		vs := make([]V, 0, min(n, uint64(len(src))))
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

// mapEntry is one key's map. A map of one or two entries — the common
// cases: one open window per key, or two while the next has opened and
// the last not yet fired; one pending match — is kept inline (m nil, tag
// the number of entries), so that reaching it costs the table's lookup
// alone and not also a Go map's header and group, two cache misses per
// access at 100 K keys, and an allocation when a key's second window
// opens. A larger map is a Go map stamped with the version it was
// created at: a snapshot whose pin is at or above tag may read it, so it
// is cloned before it is written while such a snapshot is open. An
// inline entry is a plain value, which the table's layers already keep
// apart from snapshots.
type mapEntry[UK comparable, UV any] struct {
	m       map[UK]UV
	tag     uint64
	uk, uk2 UK
	uv, uv2 UV
}

// inlineTag is the tag of an inline entry (m nil) of one entry, uk and
// uv; inlineTag2 of two, uk2 and uv2 the second. A map's tag is only read
// while it has a map, so no flag is needed.
const (
	inlineTag  = 1
	inlineTag2 = 2
)

func (e *mapEntry[UK, UV]) one() bool { return e.m == nil && e.tag == inlineTag }
func (e *mapEntry[UK, UV]) two() bool { return e.m == nil && e.tag == inlineTag2 }

// inlineOf is an inline entry of one.
func inlineOf[UK comparable, UV any](uk UK, uv UV) mapEntry[UK, UV] {
	return mapEntry[UK, UV]{uk: uk, uv: uv, tag: inlineTag}
}

func (e *mapEntry[UK, UV]) get(uk UK) (UV, bool) {
	if e.m != nil {
		v, ok := e.m[uk]
		return v, ok
	}
	if e.tag >= inlineTag && e.uk == uk {
		return e.uv, true
	}
	if e.tag == inlineTag2 && e.uk2 == uk {
		return e.uv2, true
	}
	var zero UV
	return zero, false
}

func (e *mapEntry[UK, UV]) len() int {
	if e.m != nil {
		return len(e.m)
	}
	return int(min(e.tag, inlineTag2))
}

func (e *mapEntry[UK, UV]) all(f func(UK, UV) bool) {
	if e.m == nil {
		if e.tag >= inlineTag && f(e.uk, e.uv) && e.tag == inlineTag2 {
			f(e.uk2, e.uv2)
		}
		return
	}
	for k, v := range e.m {
		if !f(k, v) {
			return
		}
	}
}

// without is an inline entry of two without uk, one of its keys.
func (e *mapEntry[UK, UV]) without(uk UK) mapEntry[UK, UV] {
	if e.uk == uk {
		return inlineOf(e.uk2, e.uv2)
	}
	return inlineOf(e.uk, e.uv)
}

type mapState[K comparable, UK comparable, UV any] struct {
	b     *KeyedBackend[K]
	t     table[K, mapEntry[UK, UV]]
	ukSer Serializer[UK]
	uvSer Serializer[UV]
	typ   string
}

// heapMapState registers (or returns) a map state in Go maps.
func heapMapState[UK comparable, UV any, K comparable](b *KeyedBackend[K], name string, ukSer Serializer[UK], uvSer Serializer[UV]) (MapState[UK, UV], error) {
	return register(b, name, KindMap, func() *mapState[K, UK, UV] {
		return &mapState[K, UK, UV]{b: b, t: newTable[K, mapEntry[UK, UV]](b.pins, b.nkg, b.cloneKey), ukSer: ukSer, uvSer: uvSer,
			typ: "map[" + typeName[UK]() + "]" + typeName[UV]()}
	})
}

func (s *mapState[K, UK, UV]) entry() mapEntry[UK, UV] {
	e, _ := s.current()
	return e
}

// current is the current key's entry, looked up by the hash the keyed
// exchange computed when there is one (as valueState.Value does).
func (s *mapState[K, UK, UV]) current() (mapEntry[UK, UV], bool) {
	b := s.b
	if l := &s.t.kgs[b.kgIndex]; b.hashed && len(l.over) == 0 && l.base.s != nil {
		return l.base.s.getHashed(asString(b.currentKey), b.currentHash)
	}
	return s.t.get(b.kgIndex, b.currentKey)
}

func (s *mapState[K, UK, UV]) Get(uk UK) (UV, bool) { e := s.entry(); return e.get(uk) }
func (s *mapState[K, UK, UV]) Put(uk UK, uv UV) {
	if s.putInline(uk, uv) {
		return
	}
	e, ok := s.current()
	s.putEntry(s.b.kgIndex, s.b.currentKey, e, ok, uk, uv)
}

// putInline is Put's common case — a read-modify-write of an inline
// entry, or a new key — done in the current key's slot of a string table
// no snapshot reads, found from the slot its Get found last and the
// exchange's hash, without a second lookup. It reports whether it did
// the put.
func (s *mapState[K, UK, UV]) putInline(uk UK, uv UV) bool {
	b := s.b
	l := &s.t.kgs[b.kgIndex]
	if !b.hashed || len(l.over) > 0 || l.base.s == nil || !s.t.baseWritable(b.kgIndex, l) {
		return false
	}
	m, k := l.base.s, asString(b.currentKey)
	i := m.last
	found := i < len(m.slots) && m.slots[i].h == b.currentHash && m.matches(&m.slots[i], k)
	if !found {
		if i, found = m.find(k, b.currentHash); !found {
			m.putHashed(k, b.currentHash, inlineOf(uk, uv))
			return true
		}
	}
	switch e := &m.slots[i].e; {
	case e.m != nil:
		return false
	case e.uk == uk:
		e.uv = uv
	case e.tag == inlineTag2 && e.uk2 == uk:
		e.uv2 = uv
	case e.tag == inlineTag:
		e.uk2, e.uv2, e.tag = uk, uv, inlineTag2
	default:
		return false
	}
	return true
}
func (s *mapState[K, UK, UV]) Contains(uk UK) bool { e := s.entry(); _, ok := e.get(uk); return ok }
func (s *mapState[K, UK, UV]) Len() int            { e := s.entry(); return e.len() }
func (s *mapState[K, UK, UV]) Remove(uk UK)        { s.removeAt(s.b.kgIndex, s.b.currentKey, uk) }
func (s *mapState[K, UK, UV]) Clear()              { s.clearAt(s.b.kgIndex, s.b.currentKey) }

func (s *mapState[K, UK, UV]) All(f func(UK, UV) bool) { e := s.entry(); e.all(f) }

// putAt, removeAt and clearAt are Put, Remove and Clear on key k of key
// group index kgi; changelog replay calls them on several goroutines for
// distinct key groups (see valueState.updateAt).
func (s *mapState[K, UK, UV]) putAt(kgi int, k K, uk UK, uv UV) {
	e, ok := s.t.get(kgi, k)
	s.putEntry(kgi, k, e, ok, uk, uv)
}

// putEntry is putAt with k's entry e (ok: k has one) looked up already.
func (s *mapState[K, UK, UV]) putEntry(kgi int, k K, e mapEntry[UK, UV], ok bool, uk UK, uv UV) {
	switch {
	case !ok:
		s.t.set(kgi, k, inlineOf(uk, uv), false)
	case e.m == nil && e.uk == uk:
		e.uv = uv
		s.t.set(kgi, k, e, true)
	case e.one():
		e.uk2, e.uv2, e.tag = uk, uv, inlineTag2
		s.t.set(kgi, k, e, true)
	case e.m == nil && e.uk2 == uk:
		e.uv2 = uv
		s.t.set(kgi, k, e, true)
	case e.m == nil:
		// A third entry: the map goes out of line.
		m := make(map[UK]UV, 3)
		m[e.uk], m[e.uk2], m[uk] = e.uv, e.uv2, uv
		s.t.set(kgi, k, mapEntry[UK, UV]{m: m, tag: s.t.p.ver}, true)
	case e.tag <= s.t.p.kgs[kgi].maxPin:
		m := maps.Clone(e.m)
		m[uk] = uv
		s.t.set(kgi, k, mapEntry[UK, UV]{m: m, tag: s.t.p.ver}, true)
	default:
		e.m[uk] = uv
	}
}

func (s *mapState[K, UK, UV]) removeAt(kgi int, k K, uk UK) {
	e, ok := s.t.get(kgi, k)
	if !ok {
		return
	}
	if _, ok := e.get(uk); !ok {
		return
	}
	if e.len() == 1 {
		s.t.del(kgi, k)
		return
	}
	if e.two() {
		s.t.set(kgi, k, e.without(uk), true)
		return
	}
	if len(e.m) == 3 {
		// Back inline with the two entries that stay.
		in := mapEntry[UK, UV]{}
		for k2, v2 := range e.m {
			if k2 == uk {
				continue
			}
			if in.tag == 0 {
				in = inlineOf(k2, v2)
			} else {
				in.uk2, in.uv2, in.tag = k2, v2, inlineTag2
			}
		}
		s.t.set(kgi, k, in, true)
		return
	}
	m := e.m
	if e.tag <= s.t.p.kgs[kgi].maxPin {
		m = maps.Clone(e.m)
		s.t.set(kgi, k, mapEntry[UK, UV]{m: m, tag: s.t.p.ver}, true)
	}
	delete(m, uk)
}

func (s *mapState[K, UK, UV]) clearAt(kgi int, k K) {
	if _, ok := s.t.get(kgi, k); ok {
		s.t.del(kgi, k)
	}
}

func (s *mapState[K, UK, UV]) kind() Kind       { return KindMap }
func (s *mapState[K, UK, UV]) typeName() string { return s.typ }
func (s *mapState[K, UK, UV]) count() int       { return s.t.count() }
func (s *mapState[K, UK, UV]) foldAll()         { s.t.foldAll() }
func (s *mapState[K, UK, UV]) overlays() int    { return s.t.overlays() }

func (s *mapState[K, UK, UV]) capture() capturedTables {
	return &capturedTable[K, mapEntry[UK, UV]]{views: s.t.views(), encK: s.b.keySer.Append, ordered: s.b.strKeys,
		encE: func(sc *encScratch, dst []byte, _ K, e mapEntry[UK, UV]) []byte {
			if e.one() {
				// What the sort below writes for one entry, without it.
				dst = binary.AppendUvarint(dst, 1)
				return s.uvSer.Append(s.ukSer.Append(dst, e.uk), e.uv)
			}
			// Sorted by encoded user key, for deterministic snapshots.
			sc.reset()
			e.all(func(k UK, v UV) bool {
				off := len(sc.arena)
				sc.arena = s.ukSer.Append(sc.arena, k)
				kl := len(sc.arena) - off
				sc.arena = s.uvSer.Append(sc.arena, v)
				sc.add(off, kl)
				return true
			})
			return sc.emit(dst, false, false)
		}}
}

func (s *mapState[K, UK, UV]) restore(kgi int, payload []byte) error {
	ver := s.t.p.ver
	return restoreInto(&s.t, kgi, payload, s.b.keySer.Decode, func(src []byte) (mapEntry[UK, UV], []byte, error) {
		n, k := binary.Uvarint(src)
		if k <= 0 {
			return mapEntry[UK, UV]{}, nil, ErrShortBuffer
		}
		src = src[k:]
		var e mapEntry[UK, UV]
		if n > 2 || n == 0 {
			e = mapEntry[UK, UV]{m: make(map[UK]UV, min(n, uint64(len(src)))), tag: ver}
		}
		for i := uint64(0); i < n; i++ {
			uk, rest, err := s.ukSer.Decode(src)
			if err != nil {
				return mapEntry[UK, UV]{}, nil, err
			}
			uv, rest, err := s.uvSer.Decode(rest)
			if err != nil {
				return mapEntry[UK, UV]{}, nil, err
			}
			if i == 0 && n <= 2 {
				e = inlineOf(uk, uv)
			} else if i == 1 && n == 2 {
				e.uk2, e.uv2, e.tag = uk, uv, inlineTag2
			} else {
				e.m[uk] = uv
			}
			src = rest
		}
		return e, src, nil
	})
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

package state

// # The LSM backend (Flink's `rocksdb`)
//
// State lives in an ordered byte store (KVStore; Pebble in package lsm),
// not in Go maps, so it is bounded by disk rather than memory, and a
// snapshot's synchronous part is the store's own snapshot: O(1), nothing
// copied, and the task never waits for an encode.
//
// Keys are laid out as Flink's RocksDB backend lays them out, with a
// two-byte state id in place of a column family:
//
//	value, list:  [state id:2][key group:2, big endian][key]
//	map:          [state id:2][key group:2][key][user key]
//	timers:       [state id:2][key group:2][key][timestamp:8]
//
// where key and user key are their canonical encodings (savepoint/FORMAT.md)
// and a timestamp is big endian with the sign bit flipped. Every canonical
// encoding is self-delimiting, so keys are prefix-free and the store's byte
// order is exactly the canonical order of a snapshot: entries sorted by
// encoded key (a map's by key, then user key; timers by key, then time).
// Encoding a canonical key-group block is therefore one ordered scan per
// state, with no sort, and restoring one is a sequence of writes.
//
// Values are the canonical encoding of the value. A list is the
// concatenation of its elements, each length-prefixed, so that Add is a
// blind Merge (the store concatenates), as Flink's RocksDB list state does.
//
// State restored from a snapshot before its operator declares it (which is
// always the case: operators declare state in Open, after restore) cannot be
// decoded yet, as its value serializer is not known: its key-group payloads
// are kept in the store under [0xFF 0xFF][key group:2][name] and decoded
// when the state is declared, so that a restore never holds state in memory.
//
// The store does not count keys; a snapshot counts them while it encodes
// (EntryCounts), and States reports the counts of the last one.

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/gflink/gflink/savepoint"
)

// rawID is the id prefix under which restored, undeclared state is kept.
const rawID = 0xFFFF

// LSMBackend is the LSM keyed state backend of one operator subtask.
type LSMBackend[K comparable] struct {
	kv      KVStore
	keySer  KeySerializer[K]
	maxPar  int
	kgRange KeyGroupRange

	currentKey K
	kg         int
	epoch      uint64
	// key is [id:2][kg:2][current key]; the id is written per access.
	key []byte
	// scratch buffers for composite keys and values.
	key2, val []byte
	// For PrefetchKey: the store, if it prefetches; the ids of the value
	// and list states (keyed by the current key alone); their keys.
	warmKV  KVPrefetcher
	warmIDs []uint16
	warmKey []byte

	states map[string]lsmState
	// flag holds the first failure of the store under a state accessor
	// (fail).
	flag FailureFlag
	// known are states in the store that no operator declared (yet): the
	// store was restored from native files, which carry their ids.
	known   map[string]lsmMeta
	nextID  uint16
	pending map[string]*lsmRaw
	counts  map[string]int64 // entries per state, from the last snapshot encoded

	mu sync.Mutex
	// confirmed: where the SST files of the last completed incremental
	// checkpoint are shared, with their checksums (file name -> its Path
	// and CRC32C); uploads: the same for checkpoints not completed yet, by
	// id.
	confirmed map[string]savepoint.NativeFile
	uploads   map[int64]map[string]savepoint.NativeFile
	open      int  // snapshots not released
	disposing bool // Dispose was called; the store closes with the last snapshot
	disposed  bool
}

type lsmRaw struct {
	kind  Kind
	typ   string
	count int64
}

// lsmState is one declared state, erased of its types.
type lsmState interface {
	kind() Kind
	typeName() string
	id() uint16
	// encode appends one key group's entries, read from it, and returns
	// their number.
	encode(it KVIter, dst []byte) ([]byte, int, error)
	// restore writes one key group's payload (count + entries) into the
	// store.
	restore(kg int, payload []byte) error
}

// NewLSMBackend returns an empty backend over kv for the given key groups.
// The backend owns kv: Dispose closes it.
func NewLSMBackend[K comparable](kv KVStore, keySer KeySerializer[K], maxParallelism int, kgRange KeyGroupRange) *LSMBackend[K] {
	b := &LSMBackend[K]{
		kv: kv, keySer: keySer, maxPar: maxParallelism, kgRange: kgRange,
		key:    make([]byte, 4, 64),
		states: map[string]lsmState{}, pending: map[string]*lsmRaw{}, counts: map[string]int64{},
		known:   map[string]lsmMeta{},
		nextID:  1,
		warmKey: make([]byte, 4, 64),
	}
	b.warmKV, _ = kv.(KVPrefetcher)
	return b
}

func (b *LSMBackend[K]) KeyGroupRange() KeyGroupRange { return b.kgRange }
func (b *LSMBackend[K]) MaxParallelism() int          { return b.maxPar }
func (b *LSMBackend[K]) CurrentKey() K                { return b.currentKey }

func (b *LSMBackend[K]) KeyGroupOf(k K) int {
	return KeyGroupForHash(b.keySer.Hash(k), b.maxPar)
}

func (b *LSMBackend[K]) SetCurrentKey(k K) { b.SetCurrentKeyAndGroup(k, b.KeyGroupOf(k)) }

func (b *LSMBackend[K]) SetCurrentKeyAndGroup(k K, kg int) {
	if !b.kgRange.Contains(kg) {
		panic(fmt.Sprintf("state: key %v (key group %d) is outside %v", k, kg, b.kgRange))
	}
	b.currentKey, b.kg = k, kg
	b.epoch++
	b.key = binary.BigEndian.AppendUint16(b.key[:2], uint16(kg))
	b.key = b.keySer.Append(b.key, k)
}

// PrefetchKey warms the store for a key that will be current a few records
// from now: the keys its value and list states keep it under (map states'
// keys need the user key, and timers are rare). A key group outside the
// range, which SetCurrentKeyAndGroup would refuse, is left alone.
func (b *LSMBackend[K]) PrefetchKey(k K, kg int) {
	if b.warmKV == nil || len(b.warmIDs) == 0 || !b.kgRange.Contains(kg) {
		return
	}
	b.warmKey = binary.BigEndian.AppendUint16(b.warmKey[:2], uint16(kg))
	b.warmKey = b.keySer.Append(b.warmKey, k)
	for _, id := range b.warmIDs {
		binary.BigEndian.PutUint16(b.warmKey, id)
		b.warmKV.Prefetch(b.warmKey)
	}
}

// stateKey returns [id][kg][current key], valid until the next call.
func (b *LSMBackend[K]) stateKey(id uint16) []byte {
	binary.BigEndian.PutUint16(b.key, id)
	return b.key
}

// prefix returns [id][kg], the range of one state in one key group.
func kgPrefix(dst []byte, id uint16, kg int) []byte {
	dst = binary.BigEndian.AppendUint16(dst, id)
	return binary.BigEndian.AppendUint16(dst, uint16(kg))
}

// prefixEnd returns the first key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xFF: no upper bound
}

func rawKey(kg int, name string) []byte {
	k := binary.BigEndian.AppendUint16(nil, rawID)
	k = binary.BigEndian.AppendUint16(k, uint16(kg))
	return append(k, name...)
}

// get reads key into the backend's value buffer (valid until the next
// read).
func (b *LSMBackend[K]) get(key []byte) ([]byte, bool) {
	var ok bool
	var err error
	if b.flag.err != nil {
		return nil, false
	}
	b.val, ok, err = b.kv.Get(key, b.val[:0])
	if b.fail(err) {
		return nil, false
	}
	return b.val, ok
}

// lsmStateBase is what every LSM state has: its backend, id and type.
type lsmStateBase[K comparable] struct {
	b   *LSMBackend[K]
	sid uint16
	typ string
}

func (s *lsmStateBase[K]) typeName() string { return s.typ }
func (s *lsmStateBase[K]) id() uint16       { return s.sid }

// fail records err, a failure of the store under a state accessor, which
// has no error result (state reads and writes cannot fail in the hashmap
// backend, and an error result on every Value and Update would burden every
// job for the one backend that can). The first failure sticks: the
// backend's FailureFlag holds it, the accessors that follow read nothing
// and write nothing, and the operator fails the task once the function
// returns, before anything it emitted after the failure leaves the
// operator (see the keyed operator's failGuard). fail reports whether
// there was a failure.
func (b *LSMBackend[K]) fail(err error) bool {
	if err == nil {
		return false
	}
	b.flag.Set(&Failure{Err: err})
	return true
}

// Failure is the storage under a state failing (a corrupt or unreadable
// file, a full disk) inside a state accessor. The task fails with its
// message and no stack trace: the message says what failed, and nothing
// in the code is wrong.
type Failure struct{ Err error }

func (f *Failure) Error() string { return "state backend: " + f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// Failing is a backend whose state accessors can fail (the store under the
// LSM backend): its FailureFlag holds the first failure, after which the
// accessors do nothing. Backends that hold state in memory do not
// implement it.
type Failing interface {
	Failure() *FailureFlag
}

// FailureFlag holds a backend's first storage failure. The task checks it
// after every call into a function, so it is a plain field read, not a
// call through an interface.
type FailureFlag struct{ err error }

// Err returns the failure, or nil.
func (f *FailureFlag) Err() error { return f.err }

// Set records err, unless a failure is recorded already.
func (f *FailureFlag) Set(err error) {
	if f.err == nil {
		f.err = err
	}
}

// Failure returns the backend's failure flag (Failing).
func (b *LSMBackend[K]) Failure() *FailureFlag { return &b.flag }

func lsmRegister[K comparable, S lsmState](b *LSMBackend[K], name string, kind Kind, create func(id uint16) S) (S, error) {
	var zero S
	if existing, ok := b.states[name]; ok {
		if s, ok := existing.(S); ok && existing.kind() == kind {
			return s, nil
		}
		return zero, fmt.Errorf("state %q is already registered as %s state of %s", name, existing.kind(), existing.typeName())
	}
	var s S
	if m, ok := b.known[name]; ok {
		// In the store already (restored from native files): its entries
		// stay where they are.
		if m.kind != kind {
			return zero, fmt.Errorf("state %q was restored as %s state but is now declared as %s state", name, m.kind, kind)
		}
		s = create(m.id)
		delete(b.known, name)
	} else {
		if b.nextID == rawID {
			return zero, fmt.Errorf("state %q: too many states in one operator", name)
		}
		s = create(b.nextID)
		b.nextID++
		if err := b.kv.Set(metaKey(name), metaValue(s.id(), kind, s.typeName())); err != nil {
			return zero, err
		}
	}
	if raw, ok := b.pending[name]; ok {
		if raw.kind != kind {
			return zero, fmt.Errorf("state %q was restored as %s state but is now declared as %s state", name, raw.kind, kind)
		}
		if err := b.adoptRaw(name, s); err != nil {
			return zero, fmt.Errorf("restore state %q (declared %s, snapshot has %s): %w", name, s.typeName(), raw.typ, err)
		}
		b.addCount(name, raw.count)
		delete(b.pending, name)
	}
	if f, ok := any(s).(restoreFinisher); ok {
		f.finishRestore()
	}
	b.states[name] = s
	if kind == KindValue || kind == KindList {
		b.warmIDs = append(b.warmIDs, s.id())
	}
	return s, nil
}

// adoptRaw decodes the kept payloads of a restored state into s and
// deletes them.
func (b *LSMBackend[K]) adoptRaw(name string, s lsmState) error {
	lo := binary.BigEndian.AppendUint16(nil, rawID)
	it, err := b.kv.NewIter(lo, prefixEnd(lo))
	if err != nil {
		return err
	}
	type part struct {
		kg      int
		payload []byte
	}
	var parts []part
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if string(k[4:]) != name {
			continue
		}
		_, _, payload, err := readRawValue(it.Value())
		if err != nil {
			it.Close()
			return err
		}
		parts = append(parts, part{int(binary.BigEndian.Uint16(k[2:4])), slices.Clone(payload)})
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	for _, p := range parts {
		if err := s.restore(p.kg, p.payload); err != nil {
			return fmt.Errorf("key group %d: %w", p.kg, err)
		}
		if err := b.kv.Delete(rawKey(p.kg, name)); err != nil {
			return err
		}
	}
	return nil
}

func rawValue(kind Kind, typ string, payload []byte) []byte {
	v := append([]byte{byte(kind)}, appendString(nil, typ)...)
	return append(v, payload...)
}

func readRawValue(v []byte) (Kind, string, []byte, error) {
	if len(v) < 1 {
		return 0, "", nil, ErrShortBuffer
	}
	typ, rest, err := readString(v[1:])
	return Kind(v[0]), typ, rest, err
}

// States describes the declared and the restored-but-undeclared states.
// Entries are those counted by the last snapshot encoded (or restored).
func (b *LSMBackend[K]) States() []StateInfo {
	var out []StateInfo
	b.mu.Lock()
	for name, s := range b.states {
		out = append(out, StateInfo{Name: name, Kind: s.kind(), Type: s.typeName(), Entries: int(b.counts[name])})
	}
	b.mu.Unlock()
	for name, r := range b.pending {
		out = append(out, StateInfo{Name: name, Kind: r.kind, Type: r.typ, Entries: int(r.count)})
	}
	b.mu.Lock()
	for name, m := range b.known {
		out = append(out, StateInfo{Name: name, Kind: m.kind, Type: m.typ, Entries: int(b.counts[name])})
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(a, b StateInfo) int { return compareStrings(a.Name, b.Name) })
	return out
}

// RestoreKeyGroups writes canonical key-group blocks into the store:
// declared states are decoded now, the others kept as payloads until
// declared. workers is ignored: the store takes one writer.
func (b *LSMBackend[K]) RestoreKeyGroups(blocks []KeyGroupBlock, _ int) error {
	for _, blk := range blocks {
		kg := blk.KeyGroup
		if !b.kgRange.Contains(kg) {
			return fmt.Errorf("key group %d is outside %v", kg, b.kgRange)
		}
		err := forEachStatePayload(blk.Block, func(name string, kind Kind, typ string, payload []byte) error {
			if st, ok := b.states[name]; ok {
				if st.kind() != kind {
					return fmt.Errorf("state %q was restored as %s state but is declared as %s state", name, kind, st.kind())
				}
				if err := st.restore(kg, payload); err != nil {
					return fmt.Errorf("restore state %q (declared %s, snapshot has %s) in key group %d: %w", name, st.typeName(), typ, kg, err)
				}
				b.addCount(name, payloadCount(payload))
				return nil
			}
			raw := b.pending[name]
			if raw == nil {
				raw = &lsmRaw{kind: kind, typ: typ}
				b.pending[name] = raw
			}
			if raw.kind != kind {
				return fmt.Errorf("state %q appears as both %s and %s state", name, raw.kind, kind)
			}
			raw.count += payloadCount(payload)
			return b.kv.Set(rawKey(kg, name), rawValue(kind, typ, payload))
		})
		if err != nil {
			return fmt.Errorf("key group %d: %w", kg, err)
		}
	}
	for _, st := range b.states {
		if f, ok := st.(restoreFinisher); ok {
			f.finishRestore()
		}
	}
	return nil
}

func (b *LSMBackend[K]) addCount(name string, n int64) {
	b.mu.Lock()
	b.counts[name] += n
	b.mu.Unlock()
}

func payloadCount(payload []byte) int64 {
	n, k := binary.Uvarint(payload)
	if k <= 0 {
		return 0
	}
	return int64(n)
}

// forEachStatePayload walks a canonical key-group block.
func forEachStatePayload(block []byte, f func(name string, kind Kind, typ string, payload []byte) error) error {
	n, k := binary.Uvarint(block)
	if k <= 0 {
		return ErrShortBuffer
	}
	rest := block[k:]
	for i := uint64(0); i < n; i++ {
		name, r, err := readString(rest)
		if err != nil || len(r) < 1 {
			return fmt.Errorf("state header: %w", errors.Join(err, ErrShortBuffer))
		}
		kind := Kind(r[0])
		typ, r, err := readString(r[1:])
		if err != nil {
			return fmt.Errorf("state %q: %w", name, err)
		}
		payload, r, err := readBytes(r)
		if err != nil {
			return fmt.Errorf("state %q: %w", name, err)
		}
		rest = r
		if err := f(name, kind, typ, payload); err != nil {
			return err
		}
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d unexpected trailing bytes", len(rest))
	}
	return nil
}

// DropUnregistered discards restored state no operator declared.
func (b *LSMBackend[K]) DropUnregistered() []string {
	for name, m := range b.known {
		lo := binary.BigEndian.AppendUint16(nil, m.id)
		b.fail(b.kv.DeleteRange(lo, prefixEnd(lo)))
		b.fail(b.kv.Delete(metaKey(name)))
		b.pending[name] = nil // listed below
	}
	clear(b.known)
	names := slices.Sorted(maps.Keys(b.pending))
	if len(names) > 0 {
		// Not prefixEnd(lo): lo is all 0xFF, so it has no prefix end (nil),
		// and DeleteRange(lo, nil) is an empty range that deleted nothing,
		// leaving the dropped state in the store. Raw keys are
		// [FF FF][kg][name] with kg < UpperBoundMaxParallelism, so
		// [FF FF][UpperBoundMaxParallelism] bounds them all.
		lo := binary.BigEndian.AppendUint16(nil, rawID)
		b.fail(b.kv.DeleteRange(lo, rawKey(UpperBoundMaxParallelism, "")))
	}
	clear(b.pending)
	return names
}

// TakeSnapshot takes a native snapshot (the store's files) when the
// options ask for one, else a canonical one from the store's snapshot;
// either way the synchronous part is O(1).
func (b *LSMBackend[K]) TakeSnapshot(o SnapshotOptions) (Snapshot, error) {
	if o.Native && o.LocalDir != "" {
		n, err := b.TakeNativeSnapshot(o.ID, o.LocalDir, o.Incremental, o.Incremental && !o.Full, o.RemoveDir)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
	return b.takeCanonical()
}

// takeCanonical takes the store's snapshot, encoded into canonical blocks
// on the asynchronous side.
func (b *LSMBackend[K]) takeCanonical() (Snapshot, error) {
	if err := b.opened(); err != nil {
		return nil, err
	}
	kvs, err := b.kv.NewSnapshot()
	if err != nil {
		b.released()
		return nil, err
	}
	s := &lsmSnapshot{kgRange: b.kgRange, kv: kvs, counts: map[string]int64{}, done: b.released}
	for name, st := range b.states {
		s.states = append(s.states, lsmSnapState{name: name, kind: st.kind(), typ: st.typeName(), st: st})
	}
	for name, r := range b.pending {
		s.states = append(s.states, lsmSnapState{name: name, kind: r.kind, typ: r.typ})
	}
	for name, m := range b.known {
		s.states = append(s.states, lsmSnapState{name: name, kind: m.kind, typ: m.typ, st: b.undeclared(m)})
	}
	slices.SortFunc(s.states, func(a, b lsmSnapState) int { return compareStrings(a.name, b.name) })
	s.onCounts = func(c map[string]int64) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.counts = maps.Clone(c)
	}
	return s, nil
}

// opened counts a snapshot about to be taken; a disposed backend takes
// none. released undoes it.
func (b *LSMBackend[K]) opened() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.disposing {
		return errors.New("state backend: disposed")
	}
	b.open++
	return nil
}

// released is called once per snapshot when it is released.
func (b *LSMBackend[K]) released() {
	b.mu.Lock()
	b.open--
	closeNow := b.disposing && b.open == 0 && !b.disposed
	if closeNow {
		b.disposed = true
	}
	b.mu.Unlock()
	if closeNow {
		b.kv.Close()
	}
}

// Dispose closes the store (removing its working directory) now, or when
// the last open snapshot is released.
func (b *LSMBackend[K]) Dispose() error {
	b.mu.Lock()
	b.disposing = true
	closeNow := b.open == 0 && !b.disposed
	if closeNow {
		b.disposed = true
	}
	b.mu.Unlock()
	if closeNow {
		return b.kv.Close()
	}
	return nil
}

type lsmSnapState struct {
	name string
	kind Kind
	typ  string
	st   lsmState // nil: restored, undeclared; its payloads are kept raw
}

// lsmSnapshot is a snapshot of the store, encoded into canonical blocks.
type lsmSnapshot struct {
	kgRange  KeyGroupRange
	kv       KVSnapshot
	states   []lsmSnapState
	scratch  []byte
	counts   map[string]int64
	encoded  int
	onCounts func(map[string]int64)
	done     func()

	mu     sync.Mutex
	closed bool
}

func (s *lsmSnapshot) KeyGroupRange() KeyGroupRange { return s.kgRange }

// EntryCounts returns the entries per state counted while encoding.
func (s *lsmSnapshot) EntryCounts() map[string]int64 { return s.counts }

// EncodeKeyGroup appends the canonical block of key group kg. A failure to
// read the store is returned (the caller declines the checkpoint).
func (s *lsmSnapshot) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0) // the number of states, fixed below
	n := 0
	var lo []byte
	for i := range s.states {
		st := &s.states[i]
		mark := len(dst)
		dst = appendString(dst, st.name)
		dst = append(dst, byte(st.kind))
		dst = appendString(dst, st.typ)
		var payload []byte
		var count int
		if st.st != nil {
			lo = kgPrefix(lo[:0], st.st.id(), kg)
			it, err := s.kv.NewIter(lo, prefixEnd(lo))
			if err != nil {
				return dst, err
			}
			s.scratch, count, err = st.st.encode(it, s.scratch[:0])
			if err := errors.Join(err, it.Close()); err != nil {
				return dst, err
			}
			if count > 0 {
				payload = binary.AppendUvarint(nil, uint64(count))
			}
		} else {
			k := rawKey(kg, st.name)
			it, err := s.kv.NewIter(k, append(slices.Clone(k), 0))
			if err != nil {
				return dst, err
			}
			if it.First() {
				var p []byte
				if _, _, p, err = readRawValue(it.Value()); err == nil {
					s.scratch = append(s.scratch[:0], p...)
					count = int(payloadCount(p))
				}
			}
			if err := errors.Join(err, it.Error(), it.Close()); err != nil {
				return dst, err
			}
			if count > 0 {
				payload = []byte{} // the kept payload has its count
			}
		}
		if payload == nil {
			dst = dst[:mark]
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(payload)+len(s.scratch)))
		dst = append(dst, payload...)
		dst = append(dst, s.scratch...)
		s.counts[st.name] += int64(count)
		n++
	}
	dst = putStateCount(dst, start, n)
	if s.encoded++; s.encoded == s.kgRange.Len() && s.onCounts != nil {
		s.onCounts(s.counts)
	}
	return dst, nil
}

// Release closes the store's snapshot.
func (s *lsmSnapshot) Release() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.kv.Close()
	s.done()
}

// ---- value state ----

type lsmValueState[K comparable, V any] struct {
	lsmStateBase[K]
	ser Serializer[V]
}

func getLSMValueState[V any, K comparable](b *LSMBackend[K], name string, ser Serializer[V]) (ValueState[V], error) {
	return lsmRegister(b, name, KindValue, func(id uint16) *lsmValueState[K, V] {
		return &lsmValueState[K, V]{lsmStateBase[K]{b, id, typeName[V]()}, ser}
	})
}

func (s *lsmValueState[K, V]) kind() Kind { return KindValue }

func (s *lsmValueState[K, V]) Value() (V, bool) {
	val, ok := s.b.get(s.b.stateKey(s.sid))
	if !ok {
		var zero V
		return zero, false
	}
	v, _, err := s.ser.Decode(val)
	if s.b.fail(err) {
		var zero V
		return zero, false
	}
	return v, true
}

func (s *lsmValueState[K, V]) Update(v V) {
	b := s.b
	if b.flag.err != nil {
		return
	}
	b.val = s.ser.Append(b.val[:0], v)
	b.fail(b.kv.Set(b.stateKey(s.sid), b.val))
}

func (s *lsmValueState[K, V]) Clear() { s.b.del(s.b.stateKey(s.sid)) }

// encode: each entry is key, value: the store's key after the prefix and
// its value.
func (s *lsmValueState[K, V]) encode(it KVIter, dst []byte) ([]byte, int, error) {
	return encodeValues(it, dst)
}

func encodeValues(it KVIter, dst []byte) ([]byte, int, error) {
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		dst = append(dst, it.Key()[4:]...)
		dst = append(dst, it.Value()...)
		n++
	}
	return dst, n, it.Error()
}

func (s *lsmValueState[K, V]) restore(kg int, payload []byte) error {
	return forEachEntry(payload, func(src []byte) ([]byte, error) {
		k, rest, err := s.keySpan(src)
		if err != nil {
			return nil, err
		}
		v, rest, err := span(rest, s.ser.Decode)
		if err != nil {
			return nil, err
		}
		return rest, s.b.kv.Set(append(kgPrefix(nil, s.sid, kg), k...), v)
	})
}

func (s *lsmValueState[K, V]) keySpan(src []byte) ([]byte, []byte, error) {
	return span(src, s.b.keySer.Decode)
}

// span returns the bytes of one encoded value at the front of src.
func span[T any](src []byte, dec func([]byte) (T, []byte, error)) ([]byte, []byte, error) {
	_, rest, err := dec(src)
	if err != nil {
		return nil, nil, err
	}
	return src[:len(src)-len(rest)], rest, nil
}

// forEachEntry walks a payload's count entries; f consumes one entry from
// the front of its argument and returns the rest.
func forEachEntry(payload []byte, f func(src []byte) ([]byte, error)) error {
	n, k := binary.Uvarint(payload)
	if k <= 0 {
		return ErrShortBuffer
	}
	src := payload[k:]
	for i := uint64(0); i < n; i++ {
		rest, err := f(src)
		if err != nil {
			return fmt.Errorf("entry %d of %d: %w", i, n, err)
		}
		src = rest
	}
	if len(src) != 0 {
		return fmt.Errorf("%d bytes left over after %d entries", len(src), n)
	}
	return nil
}

// ---- list state ----

type lsmListState[K comparable, V any] struct {
	lsmStateBase[K]
	ser Serializer[V]
}

func getLSMListState[V any, K comparable](b *LSMBackend[K], name string, ser Serializer[V]) (ListState[V], error) {
	return lsmRegister(b, name, KindList, func(id uint16) *lsmListState[K, V] {
		return &lsmListState[K, V]{lsmStateBase[K]{b, id, typeName[V]()}, ser}
	})
}

func (s *lsmListState[K, V]) kind() Kind { return KindList }

func (s *lsmListState[K, V]) Get() []V {
	val, ok := s.b.get(s.b.stateKey(s.sid))
	if !ok {
		return nil
	}
	var vs []V
	for src := val; len(src) > 0; {
		elem, rest, err := readBytes(src)
		if s.b.fail(err) {
			return nil
		}
		v, _, err := s.ser.Decode(elem)
		if s.b.fail(err) {
			return nil
		}
		vs, src = append(vs, v), rest
	}
	return vs
}

func (s *lsmListState[K, V]) Add(v V) {
	b := s.b
	if b.flag.err != nil {
		return
	}
	b.val = appendBytes(b.val[:0], s.ser.Append(b.key2[:0], v))
	b.fail(b.kv.Merge(b.stateKey(s.sid), b.val))
}

func (s *lsmListState[K, V]) Update(vs []V) {
	b := s.b
	if len(vs) == 0 {
		s.Clear()
		return
	}
	if b.flag.err != nil {
		return
	}
	b.val = b.val[:0]
	for _, v := range vs {
		b.key2 = s.ser.Append(b.key2[:0], v)
		b.val = appendBytes(b.val, b.key2)
	}
	b.fail(b.kv.Set(b.stateKey(s.sid), b.val))
}

func (s *lsmListState[K, V]) Clear() { s.b.del(s.b.stateKey(s.sid)) }

// encode: each entry is key, uvarint n, n values; the store holds the
// values length-prefixed.
func (s *lsmListState[K, V]) encode(it KVIter, dst []byte) ([]byte, int, error) {
	return encodeLists(it, dst)
}

func encodeLists(it KVIter, dst []byte) ([]byte, int, error) {
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		cnt := 0
		for src := v; len(src) > 0; cnt++ {
			_, rest, err := readBytes(src)
			if err != nil {
				return dst, n, err
			}
			src = rest
		}
		if cnt == 0 {
			continue
		}
		dst = append(dst, it.Key()[4:]...)
		dst = binary.AppendUvarint(dst, uint64(cnt))
		for src := v; len(src) > 0; {
			elem, rest, _ := readBytes(src)
			dst, src = append(dst, elem...), rest
		}
		n++
	}
	return dst, n, it.Error()
}

func (s *lsmListState[K, V]) restore(kg int, payload []byte) error {
	return forEachEntry(payload, func(src []byte) ([]byte, error) {
		k, rest, err := span(src, s.b.keySer.Decode)
		if err != nil {
			return nil, err
		}
		cnt, w := binary.Uvarint(rest)
		if w <= 0 {
			return nil, ErrShortBuffer
		}
		rest = rest[w:]
		var val []byte
		for range cnt {
			var v []byte
			if v, rest, err = span(rest, s.ser.Decode); err != nil {
				return nil, err
			}
			val = appendBytes(val, v)
		}
		if cnt == 0 {
			return rest, nil
		}
		return rest, s.b.kv.Set(append(kgPrefix(nil, s.sid, kg), k...), val)
	})
}

// ---- map state ----

type lsmMapState[K comparable, UK comparable, UV any] struct {
	lsmStateBase[K]
	ukSer Serializer[UK]
	uvSer Serializer[UV]
}

func getLSMMapState[UK comparable, UV any, K comparable](b *LSMBackend[K], name string, ukSer Serializer[UK], uvSer Serializer[UV]) (MapState[UK, UV], error) {
	return lsmRegister(b, name, KindMap, func(id uint16) *lsmMapState[K, UK, UV] {
		return &lsmMapState[K, UK, UV]{lsmStateBase[K]{b, id, "map[" + typeName[UK]() + "]" + typeName[UV]()}, ukSer, uvSer}
	})
}

func (s *lsmMapState[K, UK, UV]) kind() Kind { return KindMap }

// userKey returns [id][kg][key][uk].
func (s *lsmMapState[K, UK, UV]) userKey(uk UK) []byte {
	b := s.b
	b.key2 = append(b.key2[:0], b.stateKey(s.sid)...)
	b.key2 = s.ukSer.Append(b.key2, uk)
	return b.key2
}

func (s *lsmMapState[K, UK, UV]) Get(uk UK) (UV, bool) {
	val, ok := s.b.get(s.userKey(uk))
	if !ok {
		var zero UV
		return zero, false
	}
	v, _, err := s.uvSer.Decode(val)
	if s.b.fail(err) {
		var zero UV
		return zero, false
	}
	return v, true
}

func (s *lsmMapState[K, UK, UV]) Put(uk UK, uv UV) {
	b := s.b
	if b.flag.err != nil {
		return
	}
	k := s.userKey(uk)
	b.val = s.uvSer.Append(b.val[:0], uv)
	b.fail(b.kv.Set(k, b.val))
}

func (s *lsmMapState[K, UK, UV]) Remove(uk UK) { s.b.del(s.userKey(uk)) }

func (s *lsmMapState[K, UK, UV]) Contains(uk UK) bool {
	_, ok := s.Get(uk)
	return ok
}

func (s *lsmMapState[K, UK, UV]) All(f func(UK, UV) bool) {
	b := s.b
	if b.flag.err != nil {
		return
	}
	p := slices.Clone(b.stateKey(s.sid))
	it, err := b.kv.NewIter(p, prefixEnd(p))
	if b.fail(err) {
		return
	}
	defer func() { b.fail(it.Close()) }()
	for ok := it.First(); ok; ok = it.Next() {
		uk, _, err := s.ukSer.Decode(it.Key()[len(p):])
		if b.fail(err) {
			return
		}
		uv, _, err := s.uvSer.Decode(it.Value())
		if b.fail(err) {
			return
		}
		if !f(uk, uv) {
			return
		}
	}
	b.fail(it.Error())
}

func (s *lsmMapState[K, UK, UV]) Len() int {
	p := slices.Clone(s.b.stateKey(s.sid))
	return s.b.count(p, prefixEnd(p))
}

func (s *lsmMapState[K, UK, UV]) Clear() {
	if s.b.flag.err != nil {
		return
	}
	p := s.b.stateKey(s.sid)
	s.b.fail(s.b.kv.DeleteRange(p, prefixEnd(p)))
}

// encode: each entry is key, uvarint n, n × (user key, user value); the
// store's keys are [key][user key], grouped by key in order.
func (s *lsmMapState[K, UK, UV]) encode(it KVIter, dst []byte) ([]byte, int, error) {
	return encodeMaps(it, dst, func(src []byte) ([]byte, []byte, error) { return span(src, s.b.keySer.Decode) })
}

// encodeMaps needs keySpan to tell a key from the user key after it.
func encodeMaps(it KVIter, dst []byte, keySpan func([]byte) ([]byte, []byte, error)) ([]byte, int, error) {
	n := 0
	var cur []byte // the current key's encoding
	var body []byte
	cnt := 0
	flush := func() {
		if cnt > 0 {
			dst = append(dst, cur...)
			dst = binary.AppendUvarint(dst, uint64(cnt))
			dst = append(dst, body...)
			n++
		}
		body, cnt = body[:0], 0
	}
	for ok := it.First(); ok; ok = it.Next() {
		kk := it.Key()[4:]
		if cur == nil || len(kk) < len(cur) || string(kk[:len(cur)]) != string(cur) {
			flush()
			k, _, err := keySpan(kk)
			if err != nil {
				return dst, n, err
			}
			cur = append(cur[:0], k...)
			if cur == nil {
				cur = []byte{}
			}
		}
		body = append(body, kk[len(cur):]...)
		body = append(body, it.Value()...)
		cnt++
	}
	flush()
	return dst, n, it.Error()
}

func (s *lsmMapState[K, UK, UV]) restore(kg int, payload []byte) error {
	return forEachEntry(payload, func(src []byte) ([]byte, error) {
		k, rest, err := span(src, s.b.keySer.Decode)
		if err != nil {
			return nil, err
		}
		cnt, w := binary.Uvarint(rest)
		if w <= 0 {
			return nil, ErrShortBuffer
		}
		rest = rest[w:]
		base := append(kgPrefix(nil, s.sid, kg), k...)
		for range cnt {
			var uk, uv []byte
			if uk, rest, err = span(rest, s.ukSer.Decode); err != nil {
				return nil, err
			}
			if uv, rest, err = span(rest, s.uvSer.Decode); err != nil {
				return nil, err
			}
			if err := s.b.kv.Set(append(slices.Clone(base), uk...), uv); err != nil {
				return nil, err
			}
		}
		return rest, nil
	})
}

// ---- timers ----

// lsmTimers keeps timers in the store (Flink's ROCKSDB timer service) and
// their order in a heap of (time, key group, key) that the task keeps in
// memory: the store is the truth, the heap may hold deleted timers, which
// are skipped when they come up.
type lsmTimers[K comparable] struct {
	b   *LSMBackend[K]
	sid uint16
	k   Kind
	q   timerHeap[K]
	// requeue: timers were restored; q is rebuilt before it is read.
	requeue bool
}

func getLSMTimers[K comparable](b *LSMBackend[K], kind Kind) (TimerQueue, error) {
	name := ProcessingTimersName
	if kind == KindEventTime {
		name = EventTimersName
	}
	return lsmRegister(b, name, kind, func(id uint16) *lsmTimers[K] {
		return &lsmTimers[K]{b: b, sid: id, k: kind}
	})
}

func (t *lsmTimers[K]) kind() Kind       { return t.k }
func (t *lsmTimers[K]) typeName() string { return "timer[" + typeName[K]() + "]" }
func (t *lsmTimers[K]) id() uint16       { return t.sid }
func (t *lsmTimers[K]) finishRestore()   { t.requeue = true }

// timerTS encodes a time so that byte order is time order.
func timerTS(dst []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ts)^(1<<63))
}

func (t *lsmTimers[K]) timerKey(ts int64) []byte {
	b := t.b
	b.key2 = timerTS(append(b.key2[:0], b.stateKey(t.sid)...), ts)
	return b.key2
}

func (t *lsmTimers[K]) exists(k []byte) bool {
	_, ok := t.b.get(k)
	return ok
}

func (t *lsmTimers[K]) Register(ts int64) {
	k := t.timerKey(ts)
	if t.exists(k) {
		return
	}
	if t.b.flag.err != nil || t.b.fail(t.b.kv.Set(k, nil)) {
		return
	}
	if !t.requeue {
		heap.Push(&t.q, queued[K]{timer[K]{t.b.currentKey, ts}, t.b.kg})
	}
}

func (t *lsmTimers[K]) Delete(ts int64) { t.b.del(t.timerKey(ts)) }

// queuedKey returns the store key of a queued timer.
func (t *lsmTimers[K]) queuedKey(q queued[K]) []byte {
	k := kgPrefix(t.b.key2[:0], t.sid, q.kg)
	k = t.b.keySer.Append(k, q.key)
	t.b.key2 = timerTS(k, q.ts)
	return t.b.key2
}

func (t *lsmTimers[K]) Next() (int64, bool) {
	if t.requeue {
		t.rebuildQueue()
	}
	for t.q.Len() > 0 {
		top := t.q[0]
		if t.exists(t.queuedKey(top)) {
			return top.ts, true
		}
		heap.Pop(&t.q) // deleted
	}
	return 0, false
}

func (t *lsmTimers[K]) rebuildQueue() {
	t.requeue = false
	t.q = t.q[:0]
	for kg := t.b.kgRange.Start; kg <= t.b.kgRange.End; kg++ {
		p := kgPrefix(nil, t.sid, kg)
		it, err := t.b.kv.NewIter(p, prefixEnd(p))
		if t.b.fail(err) {
			break
		}
		for ok := it.First(); ok; ok = it.Next() {
			kk := it.Key()[4:]
			if len(kk) < 8 {
				continue
			}
			key, _, derr := t.b.keySer.Decode(kk[:len(kk)-8])
			if err = derr; err != nil {
				break
			}
			ts := int64(binary.BigEndian.Uint64(kk[len(kk)-8:]) ^ (1 << 63))
			t.q = append(t.q, queued[K]{timer[K]{key, ts}, kg})
		}
		if t.b.fail(errors.Join(err, it.Error(), it.Close())) {
			break
		}
	}
	heap.Init(&t.q)
}

func (t *lsmTimers[K]) FireDue(upTo int64, fire func(ts int64) error) error {
	for {
		ts, ok := t.Next()
		if !ok || ts > upTo {
			return t.b.flag.err // a failed store finds no timers: that is no end
		}
		q := heap.Pop(&t.q).(queued[K])
		if err := t.b.kv.Delete(t.queuedKey(q)); err != nil {
			t.b.fail(err)
			return t.b.flag.err
		}
		t.b.SetCurrentKeyAndGroup(q.key, q.kg)
		if err := fire(q.ts); err != nil {
			return err
		}
	}
}

// Len counts the live timers (a scan of the store).
func (t *lsmTimers[K]) Len() int {
	lo := binary.BigEndian.AppendUint16(nil, t.sid)
	return t.b.count(lo, prefixEnd(lo))
}

// del deletes key, unless the store has failed.
func (b *LSMBackend[K]) del(key []byte) {
	if b.flag.err == nil {
		b.fail(b.kv.Delete(key))
	}
}

// count counts the store's keys in [lo, hi): 0 once the store has failed.
func (b *LSMBackend[K]) count(lo, hi []byte) int {
	if b.flag.err != nil {
		return 0
	}
	it, err := b.kv.NewIter(lo, hi)
	if b.fail(err) {
		return 0
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if b.fail(errors.Join(it.Error(), it.Close())) {
		return 0
	}
	return n
}

// encode: each entry is key, varint time.
func (t *lsmTimers[K]) encode(it KVIter, dst []byte) ([]byte, int, error) {
	return encodeTimers(it, dst)
}

func encodeTimers(it KVIter, dst []byte) ([]byte, int, error) {
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		kk := it.Key()[4:]
		if len(kk) < 8 {
			return dst, n, ErrShortBuffer
		}
		dst = append(dst, kk[:len(kk)-8]...)
		dst = binary.AppendVarint(dst, int64(binary.BigEndian.Uint64(kk[len(kk)-8:])^(1<<63)))
		n++
	}
	return dst, n, it.Error()
}

func (t *lsmTimers[K]) restore(kg int, payload []byte) error {
	return forEachEntry(payload, func(src []byte) ([]byte, error) {
		k, rest, err := span(src, t.b.keySer.Decode)
		if err != nil {
			return nil, err
		}
		ts, w := binary.Varint(rest)
		if w <= 0 {
			return nil, ErrShortBuffer
		}
		return rest[w:], t.b.kv.Set(timerTS(append(kgPrefix(nil, t.sid, kg), k...), ts), nil)
	})
}

// keysOf scans the state's range in each key group: a value's or list's
// entry is one key; a map's entries are grouped by key (its user keys
// follow the key).
func (b *LSMBackend[K]) keysOf(name string) ([]K, error) {
	s, ok := b.states[name]
	if !ok {
		return nil, noKeyedState(name)
	}
	kind := s.kind()
	if kind != KindValue && kind != KindList && kind != KindMap {
		return nil, fmt.Errorf("state %q is %s state, which has no keys to list", name, kind)
	}
	var out []K
	var prev []byte
	for kg := b.kgRange.Start; kg <= b.kgRange.End; kg++ {
		lo := kgPrefix(nil, s.id(), kg)
		it, err := b.kv.NewIter(lo, prefixEnd(lo))
		if err != nil {
			return nil, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			if kind == KindList && len(it.Value()) == 0 {
				continue
			}
			k, rest, err := b.keySer.Decode(it.Key()[len(lo):])
			if err != nil {
				it.Close()
				return nil, fmt.Errorf("state %q: %w", name, err)
			}
			enc := it.Key()[len(lo) : len(it.Key())-len(rest)]
			if kind == KindMap && bytes.Equal(enc, prev) {
				continue
			}
			prev = append(prev[:0], enc...)
			out = append(out, k)
		}
		err = it.Error()
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

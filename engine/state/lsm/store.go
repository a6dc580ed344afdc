// Package lsm is the storage under gflink's `rocksdb` state backend: one
// embedded LSM tree (Pebble, a Go LSM in RocksDB's family, no cgo) per
// stateful subtask, in a working directory of its own.
//
// The state package's LSM backend keeps keyed state in it as bytes, in
// Flink's RocksDB layout (see state/lsm_backend.go); this package only
// stores bytes and knows nothing of keys, states or snapshots' formats.
package lsm

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/gflink/gflink/engine/state"
)

// Cache is a block cache that several stores may share (Flink's managed
// memory: one budget for every subtask's LSM).
type Cache struct{ c *pebble.Cache }

// NewCache makes a block cache that keeps blocks bytes of blocks for
// stores stores with write buffers of writeBuffer bytes; Unref releases it
// once the stores using it are closed.
func NewCache(blocks, writeBuffer int64, stores int) *Cache {
	return &Cache{pebble.NewCache(blocks + int64(stores)*memtableRoom(writeBuffer))}
}

// memtableRoom is what a store's memtables take of its block cache: Pebble
// charges every memtable it allocates to the cache (Cache.Reserve), so a
// cache sized for blocks alone kept a third of them at Flink's default
// write-buffer ratio (42 MB of 128 MB at 256 MB of managed memory, p=1),
// and a store of its own none (two 64 MB memtables in an 8 MB cache). A
// store has at most two memtables (MemTableStopWritesThreshold).
func memtableRoom(writeBuffer int64) int64 { return 2 * writeBuffer }

// Unref releases the caller's reference.
func (c *Cache) Unref() { c.c.Unref() }

// Options bound the store's memory, as Flink's RocksDB options do.
type Options struct {
	// Dir is the working directory; it is created, and removed by Close.
	Dir string
	// Cache, if set, is shared with other stores and BlockCacheSize is
	// ignored.
	Cache *Cache
	// BlockCacheSize is state.backend.rocksdb.block.cache-size.
	BlockCacheSize int64
	// WriteBufferSize is state.backend.rocksdb.writebuffer.size: the size
	// of one memtable (Pebble keeps at most two, one being flushed).
	WriteBufferSize int64
	// RowCacheSize bounds the clean rows the store keeps beyond the write
	// buffer (see the row cache); 0 means DefaultRowCacheSize, a negative
	// size none. With a shared Cache, the rows' room is reserved in that
	// block cache, and it adapts (see adapt).
	RowCacheSize int64
	// LBaseMaxBytes is the most the base level holds (see
	// DefaultLBaseMaxBytes); 0 means the default.
	LBaseMaxBytes int64
	// Restored names, by file name in Dir, where the files of a restored
	// snapshot came from, so that an error about a corrupt file names the
	// snapshot's file rather than the working copy.
	Restored map[string]string
}

// Defaults as Flink's RocksDB backend: an 8 MB block cache and 64 MB write
// buffers.
// The row cache has no counterpart in Flink's options; 64 MB holds about
// half a million rows.
//
// DefaultLBaseMaxBytes is far below Flink's 256 MB (and Pebble's 64 MB) for
// incremental checkpoints: keyed state is updated at keys spread over the
// whole key space, so every L0 file overlaps every file of the base level,
// and each compaction out of L0 rewrites all of it. With a state smaller
// than the base level's bound, that is the whole state, uploaded again by
// the next incremental checkpoint: after 1 % of 5 M keys changed, the three
// checkpoints that followed uploaded 0.99 of the state (a 56 MB state in
// one level). With a 4 MB base level, L0 compacts into a level of a few
// megabytes, and only a level spilling over rewrites a slice of the next:
// 0.010 (median; at most 0.046 over five rounds). Throughput did not
// suffer: the compactions write less in all (write amplification 5.5
// against 7.4 at 10 M keys).
const (
	DefaultBlockCacheSize  = 8 << 20
	DefaultWriteBufferSize = 64 << 20
	DefaultRowCacheSize    = 64 << 20
	DefaultLBaseMaxBytes   = 4 << 20
)

// # The row cache
//
// Every Pebble write lands in a skiplist (the memtable), and every read
// searches memtables and, for a key not written lately, the levels below:
// index blocks, a bloom filter, a data block to decompress, ~2 µs at 1 M
// keys, where a Go map takes ~0.1 µs. The store therefore keeps rows, a
// bounded, write-back cache of keys in a hash table (the hashmap backend's
// string table, state.StringMap: a lookup reads one slot): the latest
// value of every key written since the last flush (dirty), and the values
// of keys read or flushed before (clean: exactly what Pebble holds, or
// that it holds nothing). A read or a write of a cached key is one lookup
// and no Pebble at all; Pebble sees one version per key per flush.
//
// Dirty rows are handed to Pebble (flushed) when they outgrow the write
// buffer and at every snapshot: a flush copies them into a batch (they
// turn clean), and applies the batch on a goroutine of its own, which then
// takes the Pebble snapshot, so that the task does not wait for the
// memtable inserts. At most one flush is in flight; the next waits for it,
// which keeps the order of writes. Iterators and range deletions (rare:
// map state's All, Len and Clear, timers after a restore) first wait for
// everything to be in Pebble.
//
// When rows outgrow their budget (the row cache plus the write buffer),
// clean rows are evicted, the least recently used first as far as a CLOCK
// sweep tells: a row read since the hand last passed it stays. A row the
// flush in flight wrote is not evicted until that flush is in Pebble, so
// that a key not in rows is always current in Pebble. A merge (a list
// append) whose base is not cached stays a row too: after its flush it
// reads Pebble once and caches the result.

// row is a cached key's state.
type row struct {
	kind opKind
	// dirty: written since the last flush; otherwise Pebble holds it (a
	// clean merge: Pebble holds its operands, the value is not cached).
	dirty bool
	// ref is set by a read and cleared by the eviction hand.
	ref bool
	// gen is the flush that last wrote the row to Pebble: until it is
	// applied, Pebble must not be read for the key, nor the row evicted.
	gen uint8
	// n is the length of a value kept in inl, or bigValue.
	n   uint8
	inl [inlineValue]byte
	// big indexes a value longer than inlineValue in the store's
	// bigValues: the table's slots hold no pointers, so that the garbage
	// collector does not scan them, and a row takes 20 bytes.
	big uint32
}

// inlineValue is how many value bytes a row keeps in its slot (counts,
// sums and timestamps are varints of up to 10 bytes).
const inlineValue = 11

const bigValue = 0xff

// bigValues holds the rows' long values; index 0 is none.
type bigValues struct {
	vals [][]byte
	free []uint32
}

func (s *Store) value(r *row) []byte {
	if r.n == bigValue {
		return s.bigs.vals[r.big]
	}
	return r.inl[:r.n]
}

// bigCap is the memory of the row's long value.
func (s *Store) bigCap(r *row) int {
	if r.n == bigValue {
		return cap(s.bigs.vals[r.big])
	}
	return 0
}

// dropValue empties the row, releasing a long value; it returns the
// change of the bytes the row holds beyond its slot.
func (s *Store) dropValue(r *row) int {
	if r.n != bigValue {
		r.n = 0
		return 0
	}
	c := cap(s.bigs.vals[r.big])
	s.bigs.vals[r.big] = nil
	s.bigs.free = append(s.bigs.free, r.big)
	r.n, r.big = 0, 0
	return -c
}

// setValue replaces the row's value; it returns the change of the bytes
// the row holds beyond its slot.
func (s *Store) setValue(r *row, v []byte) int {
	if len(v) <= inlineValue {
		d := s.dropValue(r)
		r.n = uint8(copy(r.inl[:], v))
		return d
	}
	if r.n != bigValue {
		r.big, r.n = s.newBig(), bigValue
	}
	before := cap(s.bigs.vals[r.big])
	s.bigs.vals[r.big] = append(s.bigs.vals[r.big][:0], v...)
	return cap(s.bigs.vals[r.big]) - before
}

// appendValue appends an operand to the row's value.
func (s *Store) appendValue(r *row, v []byte) int {
	if r.n != bigValue && int(r.n)+len(v) <= inlineValue {
		r.n += uint8(copy(r.inl[r.n:], v))
		return 0
	}
	if r.n != bigValue {
		i := s.newBig()
		s.bigs.vals[i] = append(s.bigs.vals[i][:0], r.inl[:r.n]...)
		r.big, r.n = i, bigValue
	}
	before := cap(s.bigs.vals[r.big])
	s.bigs.vals[r.big] = append(s.bigs.vals[r.big], v...)
	return cap(s.bigs.vals[r.big]) - before
}

func (s *Store) newBig() uint32 {
	if n := len(s.bigs.free); n > 0 {
		i := s.bigs.free[n-1]
		s.bigs.free = s.bigs.free[:n-1]
		return i
	}
	if len(s.bigs.vals) == 0 {
		s.bigs.vals = append(s.bigs.vals, nil) // index 0: none
	}
	s.bigs.vals = append(s.bigs.vals, nil)
	return uint32(len(s.bigs.vals) - 1)
}

// op kinds of a row.
type opKind uint8

const (
	opSet opKind = iota + 1
	opDelete
	opMerge // append value to whatever lies below
)

// rowOverhead approximates a row's memory beyond its key and a long
// value: its slot (36 bytes) at the table's average load.
const rowOverhead = 64

// rowBytes is what a row with this key costs beyond a long value.
func rowBytes(key []byte) int {
	if len(key) > 11 { // state.inlineKey: longer keys live in an arena
		return rowOverhead + len(key)
	}
	return rowOverhead
}

// Store is one subtask's LSM. It is used from the task's goroutine only,
// except for the snapshots it hands out, which any goroutine may read.
type Store struct {
	db    *pebble.DB
	cache interface{ Unref() }
	dir   string
	id    string // names this instance's files in shared storage

	// rows is the row cache. A state's read-modify-write (Value, then
	// Update) finds its slot again without a second lookup (the table
	// remembers the slot it found last).
	rows *state.StringMap[row]
	bigs bigValues
	// dirtyBytes is the memory of the dirty rows, flushed at flushAt;
	// rowBytes that of all rows, evicted down from rowLimit; limit is
	// the write buffer's size.
	dirtyBytes, limit  int
	rowBytes, rowLimit int
	hand               int  // the eviction sweep's position
	stuck              bool // no row could be evicted since the last flush
	// gen numbers flushes (mod 256); the flush in flight, if any, is gen.
	gen uint8
	// done is closed once the flush in flight is in Pebble (and its
	// snapshot, if asked for, taken); nil when none is.
	done     chan struct{}
	applyErr error // of the last flush, read after done
	// handOver and handData hold the dirty rows a flush hands to its
	// goroutine; reused once it is done.
	handOver, handScratch []handOverEntry
	handData              []byte
	// dirtyKeys lists, end to end (dirtyEnds), the keys whose rows turned
	// dirty since the last flush.
	dirtyKeys []byte
	dirtyEnds []uint32
	// dirtyMany: more rows turned dirty than a lookup each would beat a
	// scan of the table; the list stopped growing (a flush scans).
	dirtyMany bool
	// misses counts reads that went to Pebble, fresh those of keys new
	// to the store (the filter's), reads all reads.
	misses, fresh, reads int64
	// With a shared block cache, the room the clean rows may take
	// (room, at most maxRoom) is reserved in it, chunk by chunk; the
	// window's counts decide whether it grows or shrinks.
	shared                    *pebble.Cache
	room, maxRoom             int
	reservations              []func()
	winReads, winMis, winNews int64
	// gone holds the keys evicted from rows, while the store can tell
	// which keys Pebble may hold (nil once it cannot): a store opened
	// empty puts every key in rows before Pebble, so a key not in rows
	// and never evicted is in neither — a new key is then looked up
	// without Pebble, whose memtables have no bloom filters.
	gone *keyFilter
	// h is what Pebble reported without returning it as an error.
	h *health
}

// RowCacheStats says what the row cache holds and how often a read missed it.
type RowCacheStats struct {
	Rows, Bytes, Limit int
	Misses             int64
}

// RowCache reports the row cache's state.
func (s *Store) RowCache() RowCacheStats {
	return RowCacheStats{Rows: s.rows.Len(), Bytes: s.rowBytes, Limit: s.rowLimit, Misses: s.misses}
}

var (
	_ state.KVStore      = (*Store)(nil)
	_ state.KVPrefetcher = (*Store)(nil)
)

// Open creates the working directory (which must not exist, or be empty)
// and opens a new LSM in it.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("lsm: no working directory")
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("lsm: create working directory: %w", err)
	}
	// Files there are a restored snapshot's: keys the rows never saw.
	entries, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("lsm: read working directory: %w", err)
	}
	if o.BlockCacheSize <= 0 {
		o.BlockCacheSize = DefaultBlockCacheSize
	}
	if o.WriteBufferSize <= 0 {
		o.WriteBufferSize = DefaultWriteBufferSize
	}
	if o.LBaseMaxBytes <= 0 {
		o.LBaseMaxBytes = DefaultLBaseMaxBytes
	}
	switch {
	case o.RowCacheSize == 0:
		o.RowCacheSize = DefaultRowCacheSize
	case o.RowCacheSize < 0:
		o.RowCacheSize = 0
	}
	// Pebble takes a reference of its own on the cache; the store keeps
	// the creator's reference of a cache it made (dropped by Close).
	var cache *pebble.Cache
	var own interface{ Unref() } = noUnref{}
	if o.Cache != nil {
		cache = o.Cache.c
	} else {
		cache = pebble.NewCache(o.BlockCacheSize + memtableRoom(o.WriteBufferSize))
		own = cache
	}
	h := newHealth(o.Dir, o.Restored)
	opts := &pebble.Options{
		Cache:        cache,
		MemTableSize: uint64(o.WriteBufferSize),
		// Two memtables, one of them being flushed: memory stays at about
		// twice the write buffer plus the block cache.
		MemTableStopWritesThreshold: 2,
		LBaseMaxBytes:               o.LBaseMaxBytes,
		// State is made durable by checkpoints, never by the LSM's own log:
		// a failed task restores from its last checkpoint, and a working
		// directory is never reopened after a crash.
		DisableWAL: true,
		// List state appends with Merge; the operands concatenate.
		Merger: pebble.DefaultMerger,
		// Corruption and Pebble's fatal conditions fail the store, not the
		// process (see health).
		Logger:        storeLogger{h},
		EventListener: &pebble.EventListener{DataCorruption: h.corruption, BackgroundError: h.background},
	}
	// Bloom filters on every level: a key seen for the first time (most
	// keys of a large keyed state, at first) is then looked up without
	// reading and decompressing a data block of every level. Measured:
	// without them, word count over 2 M new keys spent 28% of its time in
	// snappy decoding blocks for lookups that found nothing.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := openDB(o.Dir, opts, h)
	if err != nil {
		own.Unref()
		os.RemoveAll(o.Dir)
		return nil, err
	}
	// The dirty rows take what a memtable would: the bound of the store's
	// memory stays about what the options say.
	var id [8]byte
	rand.Read(id[:])
	st := &Store{db: db, cache: own, dir: o.Dir, id: hex.EncodeToString(id[:]), rows: state.NewStringMap[row](0),
		limit: int(o.WriteBufferSize), rowLimit: int(o.WriteBufferSize + o.RowCacheSize), h: h}
	if o.Cache != nil && o.RowCacheSize > 0 {
		st.shared, st.maxRoom = o.Cache.c, int(o.RowCacheSize)
		st.resize(st.maxRoom)
	}
	if len(entries) == 0 {
		// Room for eight times the keys the rows hold at most; past that
		// the filter would be as costly as Pebble's own.
		st.gone = newKeyFilter(max(1<<16, 8*st.rowLimit/rowOverhead))
	}
	return st, nil
}

// openDB opens Pebble on dir; a panic or a fatal condition while it reads
// the files (a damaged manifest, a missing table) is an error.
func openDB(dir string, opts *pebble.Options, h *health) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = h.panicked(r)
		}
		if err == nil {
			if err = h.get(); err != nil {
				db.Close()
				db = nil
			}
		}
		if err != nil {
			err = fmt.Errorf("lsm: open %s: %w", dir, err)
		}
	}()
	return pebble.Open(dir, opts)
}

// Compacting says whether Pebble is flushing or compacting now: files a
// snapshot refers to may then be rewritten into new ones, which the next
// incremental snapshot uploads although no key changed.
func (s *Store) Compacting() bool {
	m := s.db.Metrics()
	return m.Compact.NumInProgress > 0 || m.Flush.NumInProgress > 0
}

// ID names this store instance: its files' names are unique within it.
func (s *Store) ID() string { return s.id }

// Dir is the working directory.
func (s *Store) Dir() string { return s.dir }

// Prefetch starts loading the row cache's slot where key would be, so
// that a Get of it a few records later does not wait for memory.
func (s *Store) Prefetch(key []byte) { s.rows.Prefetch(state.HashKey(key)) }

// Get appends the value of key to dst.
func (s *Store) Get(key, dst []byte) ([]byte, bool, error) {
	if s.h.failed.Load() {
		return dst, false, s.h.get() // the store's state is damaged: no read may look successful
	}
	h := state.HashKey(key)
	s.reads++
	r := s.rows.Ref(key, h)
	if r == nil {
		return s.readThrough(key, h, dst)
	}
	r.ref = true
	switch {
	case r.kind == opSet:
		return append(dst, s.value(r)...), true, nil
	case r.kind == opDelete:
		return dst, false, nil
	}
	// A merge: its operands on what Pebble holds, once Pebble has what
	// the flush in flight wrote of the key.
	if err := s.waitFor(r.gen); err != nil {
		return dst, false, err
	}
	if r = s.rows.Ref(key, h); r == nil {
		// The wait made room, and a clean merge row went: Pebble is
		// current for the key.
		return s.readThrough(key, h, dst)
	}
	base, found, err := s.dbRead(key, nil)
	if err != nil {
		return dst, false, err
	}
	if r.dirty {
		// The operands join the base into one value, still dirty: the
		// flush writes it as a set, which Pebble's operands lie under.
		ops := append([]byte(nil), s.value(r)...)
		s.account(r, key, s.setValue(r, append(base, ops...)))
	} else {
		if !found {
			r.kind = opDelete
			return dst, false, nil
		}
		s.account(r, key, s.setValue(r, base))
	}
	r.kind = opSet
	return append(dst, s.value(r)...), true, nil
}

// readThrough reads a key that is not cached from Pebble and caches what
// it found (or that it found nothing).
func (s *Store) readThrough(key []byte, h uint32, dst []byte) ([]byte, bool, error) {
	n := len(dst)
	found := false
	if s.gone != nil && !s.gone.mayContain(key) {
		s.fresh++
	} else {
		s.misses++
		var err error
		if dst, found, err = s.dbRead(key, dst); err != nil {
			return dst[:n], false, err
		}
	}
	r := row{kind: opDelete, ref: true}
	delta := rowBytes(key)
	if found {
		r.kind = opSet
		delta += s.setValue(&r, dst[n:])
	}
	s.rows.PutHashed(key, h, r)
	s.rowBytes += delta
	if s.rowBytes > s.rowLimit {
		s.evict()
	}
	return dst, found, nil
}

// dbRead appends the value Pebble holds for key to dst.
func (s *Store) dbRead(key, dst []byte) ([]byte, bool, error) {
	v, closer, err := s.dbGet(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, false, nil
	}
	if err != nil {
		return dst, false, err
	}
	dst = append(dst, v...)
	if err := closer.Close(); err != nil {
		return dst, false, s.h.wrap(err)
	}
	return dst, true, nil
}

// account adds a change of a row's long value to the byte counts.
func (s *Store) account(r *row, key []byte, delta int) {
	s.rowBytes += delta
	if r.dirty {
		s.dirtyBytes += delta
	}
}

// evict drops clean rows, the hand passing over those read since it last
// came by, until rows are within nine tenths of their budget. Rows of the
// flush in flight stay, and so do dirty ones: when nothing else is left,
// rows stay over budget, and eviction waits, until the next flush or the
// end of the one in flight.
func (s *Store) evict() {
	s.reap()
	if s.stuck {
		return
	}
	if s.shared != nil {
		s.adapt()
	}
	target := s.rowLimit - s.rowLimit/10
	inflight := s.done != nil
	for pass := range 2 {
		s.hand = s.rows.Sweep(s.hand, func(key []byte, r *row) bool {
			if r.dirty || inflight && r.gen == s.gen {
				return false
			}
			if r.ref && pass == 0 {
				r.ref = false
				return false
			}
			s.rowBytes -= rowBytes(key) + s.bigCap(r)
			s.dropValue(r)
			s.forget(key)
			return true
		}, func() bool { return s.rowBytes <= target })
		if s.rowBytes <= target {
			// Rows that once had more room (adapt shrank it) give the
			// table's memory back: at 20 M keys the table grown for 3 M
			// rows outlived their room, 300 MB of a 980 MB peak.
			s.rows.Shrink()
			return
		}
	}
	s.stuck = true
}

// reserveChunk is the unit of the rows' reservations in a shared cache.
const reserveChunk = 4 << 20

// adapt grows or shrinks the clean rows' room in a shared block cache by
// how often reads of keys it has seen before, since the last call, went to
// Pebble. A row takes about
// three times what a key takes in a compressed block, so rows that hold
// most of the keys read beat the block cache they displace, and rows that
// hold a fraction lose to it: measured on word count with 256 MB, rows
// serving 70 % of reads (3 M keys) took half the time of none, and rows
// serving 20 % (10 M keys) a third more. Past half the reads missing, the
// room shrinks by a quarter (to no clean rows at all), below a third it
// grows back (reads it gives room to evict rows, so it only grows when
// rows are short of room).
func (s *Store) adapt() {
	// Reads of new keys are nobody's to serve: they do not count.
	reads, misses := s.reads-s.winReads-(s.fresh-s.winNews), s.misses-s.winMis
	if reads < 1<<16 {
		return
	}
	s.winReads, s.winMis, s.winNews = s.reads, s.misses, s.fresh
	switch {
	case misses*2 > reads:
		s.resize(s.room - max(s.room/4, reserveChunk))
	case misses*3 < reads:
		s.resize(s.room + max(s.room/4, reserveChunk))
	}
}

// resize sets the clean rows' room, reserving it in the shared cache.
func (s *Store) resize(room int) {
	room = min(max(room, 0), s.maxRoom) / reserveChunk * reserveChunk
	for len(s.reservations)*reserveChunk < room {
		s.reservations = append(s.reservations, s.shared.Reserve(reserveChunk))
	}
	for len(s.reservations)*reserveChunk > room {
		n := len(s.reservations) - 1
		s.reservations[n]()
		s.reservations = s.reservations[:n]
	}
	s.room = room
	s.rowLimit = s.limit + room
}

// forget notes that key left rows: Pebble may hold it.
func (s *Store) forget(key []byte) {
	if s.gone != nil && !s.gone.add(key) {
		s.gone = nil // full: every key not in rows is looked up in Pebble
	}
}

// dbGet reads key from Pebble; what Pebble reports on the way (a corrupt
// file, a panic) is an error naming the file.
func (s *Store) dbGet(key []byte) (v []byte, closer io.Closer, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = s.h.panicked(r)
		}
	}()
	v, closer, err = s.db.Get(key)
	if herr := s.h.get(); herr != nil {
		if err == nil {
			closer.Close()
		}
		return nil, nil, herr
	}
	if err != nil && !errors.Is(err, pebble.ErrNotFound) {
		err = s.h.wrap(err)
	}
	return v, closer, err
}

func (s *Store) put(key []byte, kind opKind, value []byte) error {
	if s.h.failed.Load() {
		return s.h.get() // the store's state is damaged: no write may look successful
	}
	h := state.HashKey(key)
	r := s.rows.Ref(key, h)
	if r == nil {
		// A new row, of the key's state in Pebble, current: a merge's
		// base is read there once flushed.
		nr := row{kind: kind, dirty: true}
		delta := rowBytes(key) + s.setValue(&nr, value)
		s.rows.PutHashed(key, h, nr)
		s.noteDirty(key)
		s.rowBytes += delta
		s.dirtyBytes += delta
		return s.afterWrite()
	}
	if !r.dirty {
		r.dirty = true
		b := rowBytes(key) + s.bigCap(r)
		s.dirtyBytes += b
		s.noteDirty(key)
	}
	switch {
	case kind == opMerge && (r.kind == opSet || r.kind == opMerge):
		// The operand joins the value. A merge row that was flushed holds
		// no operands (dropped at the flush, they are in Pebble), so the
		// new ones go to Pebble on top of those as a merge again.
		s.account(r, key, s.appendValue(r, value))
	case kind == opMerge && r.kind == opDelete:
		r.kind = opSet
		s.account(r, key, s.setValue(r, value))
	default: // a set or a delete
		r.kind = kind
		s.account(r, key, s.setValue(r, value))
	}
	return s.afterWrite()
}

// noteDirty lists a key whose row turned dirty, for a flush of few rows.
func (s *Store) noteDirty(key []byte) {
	if s.dirtyMany {
		return
	}
	if len(s.dirtyEnds) >= max(1024, s.rows.Len()/8) {
		// A flush will scan the table: the list would only cost a copy
		// of every key written (14 MB and a growing slice at 1 M keys).
		s.dirtyMany = true
		return
	}
	s.dirtyKeys = append(s.dirtyKeys, key...)
	s.dirtyEnds = append(s.dirtyEnds, uint32(len(s.dirtyKeys)))
}

// afterWrite flushes the dirty rows once they fill the write buffer or
// half of all the rows' budget, whichever is more.
func (s *Store) afterWrite() error {
	if s.dirtyBytes >= s.flushAt() {
		return s.flush(false)
	}
	if s.rowBytes > s.rowLimit {
		s.evict()
	}
	return nil
}

// flushAt is how much the dirty rows may take before they are flushed:
// the write buffer, or half of all the rows' budget if that is more —
// clean rows give way to dirty ones (the eviction drops them), so that a
// state whose keys are all updated between two checkpoints is not
// flushed several times over. Each flush puts the updated keys into
// Pebble once more, and Pebble's compactions rewrite them again: at 1 M
// keys on 256 MB of managed memory, flushing at the 21 MB write buffer
// took 5.3 s where this takes 3.8 s (RLSM 0.26 -> 0.37). The batch handed
// to Pebble is about a third of what its rows take (a row's slot weighs
// more than its key and value); larger than half a memtable, Pebble takes
// it as a flushable batch, its memory reserved in the block cache.
func (s *Store) flushAt() int { return max(s.limit, s.rowLimit/2) }

// Set stores value under key.
func (s *Store) Set(key, value []byte) error { return s.put(key, opSet, value) }

// Merge appends value to key's value (list state).
func (s *Store) Merge(key, value []byte) error { return s.put(key, opMerge, value) }

// Delete removes key.
func (s *Store) Delete(key []byte) error { return s.put(key, opDelete, nil) }

// DeleteRange removes the keys in [start, end).
func (s *Store) DeleteRange(start, end []byte) error {
	if err := s.sync(); err != nil {
		return err
	}
	// Every row is clean now, so the range's cached rows are among the
	// keys Pebble holds in it: those leave the cache.
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return s.h.wrap(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if r := s.rows.Ref(it.Key(), state.HashKey(it.Key())); r != nil {
			// Deleted, so absent from Pebble too: no need to forget it.
			s.rowBytes -= rowBytes(it.Key()) + s.bigCap(r)
			s.dropValue(r)
			s.rows.Delete(it.Key())
		}
	}
	if err := it.Close(); err != nil {
		return s.h.wrap(err)
	}
	if err := s.db.DeleteRange(start, end, pebble.NoSync); err != nil {
		return s.h.wrap(err)
	}
	return s.h.get()
}

// wait waits for the flush in flight, if any, and returns the error of
// the last one.
func (s *Store) wait() error {
	if s.done == nil && s.applyErr == nil {
		return nil
	}
	if s.done != nil {
		<-s.done
		s.done, s.stuck = nil, false
	}
	err := s.applyErr
	s.applyErr = nil
	if err == nil && s.rowBytes > s.rowLimit {
		s.evict() // the rows of that flush may go now
	}
	return err
}

// reap notes the end of the flush in flight if it has ended (its error,
// if any, stays for wait): its rows may then be evicted, which a task
// that only reads would otherwise never allow.
func (s *Store) reap() {
	if s.done == nil {
		return
	}
	select {
	case <-s.done:
		s.done, s.stuck = nil, false
	default:
	}
}

// waitFor waits for the flush in flight if it is gen.
func (s *Store) waitFor(gen uint8) error {
	if s.done != nil && gen == s.gen {
		return s.wait()
	}
	return nil
}

// flush hands the dirty rows to Pebble on a goroutine of its own (after the
// previous flush is done); with snap, that goroutine takes a Pebble
// snapshot once they are in, and flush returns it.
func (s *Store) flush(snap bool) error {
	_, err := s.flushWith(snap, nil)
	return err
}

// flushWith hands the dirty rows over; after, if set, runs on the flush's
// goroutine once they are in Pebble (or at once, with nothing to hand
// over, on a goroutine of its own all the same).
func (s *Store) flushWith(snap bool, after func(error)) (<-chan *pebble.Snapshot, error) {
	if err := s.wait(); err != nil {
		return nil, err
	}
	var snapCh chan *pebble.Snapshot
	if snap {
		snapCh = make(chan *pebble.Snapshot, 1)
	}
	if s.dirtyBytes == 0 && after == nil {
		if snap {
			snapCh <- s.db.NewSnapshot()
		}
		return snapCh, nil
	}
	gen := s.gen + 1
	// The dirty rows are copied out here, in the table's order, and
	// sorted on the flush's goroutine before they go into a batch: Pebble
	// sorts a batch as large as this one (a flushable batch) by comparing
	// keys in place, a cache miss each, which took a fifth of a word
	// count's CPU at 1 M keys; given them in order, its sort checks the
	// order and is done.
	h := s.handOver[:0]
	data := s.handData[:0]
	handOver := func(k []byte, r *row) bool {
		if !r.dirty {
			return true
		}
		v := s.value(r)
		if r.kind == opDelete {
			v = nil
		}
		h = append(h, handOverEntry{prefix: keyPrefix(k), off: uint32(len(data)), klen: uint32(len(k)), vlen: uint32(len(v)), kind: r.kind})
		data = append(append(data, k...), v...)
		r.dirty, r.gen = false, gen
		if r.kind == opMerge {
			// A flushed merge's operands are not kept: its next read
			// takes the value from Pebble. (The hand-over copied them.)
			s.rowBytes += s.dropValue(r)
		}
		return true
	}
	if n := len(s.dirtyEnds); !s.dirtyMany && n < s.rows.Len()/8 {
		// Few dirty rows (an iterator or a range deletion flushes after
		// every few writes): look them up rather than scan the table.
		start := uint32(0)
		for _, end := range s.dirtyEnds {
			k := s.dirtyKeys[start:end]
			start = end
			if r := s.rows.Ref(k, state.HashKey(k)); r != nil {
				handOver(k, r)
			}
		}
	} else {
		s.rows.Range(handOver)
	}
	s.dirtyKeys, s.dirtyEnds, s.dirtyMany = s.dirtyKeys[:0], s.dirtyEnds[:0], false
	s.handOver, s.handData = h, data
	tmp := s.handScratch
	if cap(tmp) < len(h) {
		tmp = make([]handOverEntry, 0, cap(h))
		s.handScratch = tmp
	}
	s.gen, s.dirtyBytes, s.stuck = gen, 0, false
	done := make(chan struct{})
	s.done = done
	go func() {
		defer close(done)
		err := s.h.protect(func() error {
			b, err := sortedBatch(s.db, h, tmp, data)
			if err != nil {
				return err
			}
			defer b.Close()
			return s.db.Apply(b, pebble.NoSync)
		})
		if err != nil {
			// Rows the flush marked clean are not in Pebble: the
			// store's state is lost, and says so to every later call.
			err = fmt.Errorf("lsm: apply writes: %w", err)
			s.applyErr = err
			s.h.fail(err)
		}
		if after != nil {
			after(err)
		}
		if err != nil {
			if snap {
				close(snapCh)
			}
			return
		}
		if snap {
			snapCh <- s.db.NewSnapshot()
		}
	}()
	return snapCh, nil
}

// handOverEntry is a dirty row handed to a flush: its key and value at
// off in the flush's data.
type handOverEntry struct {
	prefix          uint64 // the key's first 8 bytes, big-endian
	off, klen, vlen uint32
	kind            opKind
}

// keyPrefix is k's first 8 bytes as a big-endian number (zero-padded):
// keys compare as their prefixes do unless those are equal.
func keyPrefix(k []byte) uint64 {
	var p [8]byte
	copy(p[:], k)
	return binary.BigEndian.Uint64(p[:])
}

// sortByPrefix sorts entries by prefix: a least-significant-digit radix
// sort, 16 bits a pass, that skips the passes whose digit all entries
// share (the state and key-group bytes, mostly). It returns the sorted
// entries, in h or in tmp (scratch of any length, grown as needed).
func sortByPrefix(h, tmp []handOverEntry) []handOverEntry {
	if len(h) < 256 {
		slices.SortFunc(h, func(a, b handOverEntry) int { return cmp.Compare(a.prefix, b.prefix) })
		return h
	}
	tmp = slices.Grow(tmp[:0], len(h))[:len(h)]
	var counts [1 << 16]int
	for shift := uint(0); shift < 64; shift += 16 {
		clear(counts[:])
		for i := range h {
			counts[uint16(h[i].prefix>>shift)]++
		}
		if counts[uint16(h[0].prefix>>shift)] == len(h) {
			continue // one digit for all: already in order by it
		}
		sum := 0
		for d, c := range counts {
			counts[d] = sum
			sum += c
		}
		for i := range h {
			d := uint16(h[i].prefix >> shift)
			tmp[counts[d]] = h[i]
			counts[d]++
		}
		h, tmp = tmp, h
	}
	return h
}

// sortHandOver sorts handed-over entries by their keys in data, using
// tmp as scratch.
func sortHandOver(h, tmp []handOverEntry, data []byte) []handOverEntry {
	key := func(e *handOverEntry) []byte { return data[e.off : e.off+e.klen] }
	h = sortByPrefix(h, tmp)
	// Entries with equal prefixes sort by the rest of their keys.
	for i := 0; i < len(h); {
		j := i + 1
		for j < len(h) && h[j].prefix == h[i].prefix {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(h[i:j], func(a, b handOverEntry) int { return bytes.Compare(key(&a), key(&b)) })
		}
		i = j
	}
	return h
}

// sortedBatch sorts the handed-over rows by key and writes them into a
// batch in that order.
func sortedBatch(db *pebble.DB, h, tmp []handOverEntry, data []byte) (*pebble.Batch, error) {
	h = sortHandOver(h, tmp, data)
	key := func(e *handOverEntry) []byte { return data[e.off : e.off+e.klen] }
	// Sized up front: grown by doubling, a batch of a million rows was
	// copied again and again (a tenth of a word count's CPU at 1 M keys).
	// Pebble makes room for a record's longest length prefixes before it
	// writes one, so the last record needs that much beyond the end.
	b := db.NewBatchWithSize(batchSize(h) + 2*binary.MaxVarintLen32)
	for i := range h {
		e := &h[i]
		k := key(e)
		v := data[e.off+e.klen : e.off+e.klen+e.vlen]
		var err error
		switch e.kind { // the batch copies k and v
		case opSet:
			err = b.Set(k, v, nil)
		case opDelete:
			err = b.Delete(k, nil)
		case opMerge:
			err = b.Merge(k, v, nil)
		}
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("lsm: %w", err)
		}
	}
	return b, nil
}

// batchSize is the length of a batch holding the entries h.
func batchSize(h []handOverEntry) int {
	size := batchrepr.HeaderLen
	for i := range h {
		e := &h[i]
		size += 1 + uvarintLen(e.klen) + int(e.klen)
		if e.kind != opDelete {
			size += uvarintLen(e.vlen) + int(e.vlen)
		}
	}
	return size
}

// uvarintLen is the length of v as a uvarint.
func uvarintLen(v uint32) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// Checkpoint writes the store as it is now into dir, a directory that must
// not exist, as Pebble's own checkpoint: its SST files hard-linked, its
// manifest and options copied. The memtables are flushed first (the store
// keeps no write-ahead log). The task does not wait: the work runs on the
// flush's goroutine, as later writes go to the next buffer; the channel
// yields its outcome.
func (s *Store) Checkpoint(dir string) (<-chan error, error) {
	res := make(chan error, 1)
	_, err := s.flushWith(false, func(applyErr error) {
		if applyErr != nil {
			res <- applyErr
			return
		}
		if err := s.h.protect(s.db.Flush); err != nil {
			res <- fmt.Errorf("lsm: flush: %w", err)
			return
		}
		if err := s.h.protect(func() error { return s.db.Checkpoint(dir) }); err != nil {
			res <- fmt.Errorf("lsm: checkpoint: %w", err)
			return
		}
		// A file found corrupt meanwhile (by a compaction) may be among
		// the checkpoint's: it must not complete.
		res <- s.h.get()
	})
	return res, err
}

// sync puts everything written into Pebble.
func (s *Store) sync() error {
	if err := s.flush(false); err != nil {
		return err
	}
	return s.wait()
}

// NewIter iterates over [lower, upper) as the task sees it. The iterator
// must be closed before the next write.
func (s *Store) NewIter(lower, upper []byte) (state.KVIter, error) {
	if err := s.sync(); err != nil {
		return nil, err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, s.h.wrap(err)
	}
	return &iter{it, s.h}, nil
}

// NewSnapshot returns a consistent, read-only view of the store as it is
// now, without waiting: the buffered writes are applied, and the Pebble
// snapshot taken (O(1), nothing copied), on the flush's goroutine; the
// view's first read waits for them. Later writes do not show in it.
func (s *Store) NewSnapshot() (state.KVSnapshot, error) {
	ch, err := s.flushWith(true, nil)
	if err != nil {
		return nil, err
	}
	return &snapshot{ch: ch, h: s.h}, nil
}

type snapshot struct {
	h   *health
	ch  <-chan *pebble.Snapshot
	s   *pebble.Snapshot
	err error
	got bool
}

func (v *snapshot) get() (*pebble.Snapshot, error) {
	if !v.got {
		v.got = true
		var ok bool
		if v.s, ok = <-v.ch; !ok {
			v.err = errors.New("lsm: the writes of the snapshot could not be applied")
		}
	}
	return v.s, v.err
}

func (v *snapshot) NewIter(lower, upper []byte) (state.KVIter, error) {
	s, err := v.get()
	if err != nil {
		return nil, err
	}
	it, err := s.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, v.h.wrap(err)
	}
	return &iter{it, v.h}, nil
}

func (v *snapshot) Close() error {
	s, err := v.get()
	if err != nil {
		return nil
	}
	return s.Close()
}

// Close closes the LSM and removes its working directory. A failure the
// store has reported already (see health) is not reported again.
func (s *Store) Close() error {
	var errs []error
	if err := s.wait(); err != nil && !errors.Is(err, s.h.get()) {
		errs = append(errs, err)
	}
	for _, release := range s.reservations {
		release()
	}
	s.reservations = nil
	if s.db != nil {
		errs = append(errs, s.db.Close())
		s.db = nil
		s.cache.Unref()
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

var _ io.Closer = (*Store)(nil)

type noUnref struct{}

func (noUnref) Unref() {}

// # Corruption and Pebble's fatal conditions
//
// Pebble reports a damaged file it finds (a block failing its checksum) to
// its event listener, and conditions it cannot go on from (an invariant
// violated, a manifest it cannot write) to its logger's Fatalf; the
// defaults of both end the process — a panic on whatever goroutine found
// it, often one of Pebble's own compactions, which nothing can recover.
// The store records the first such report instead, and every operation
// from then on fails with it: the task fails, the restart strategy
// decides, and the store's working directory is removed when the task
// closes it. The error names the file, as the snapshot it was restored
// from calls it.

// health is what Pebble reported of one store without returning it as
// an error.
type health struct {
	dir      string
	restored map[string]string
	failed   atomic.Bool
	mu       sync.Mutex
	err      error
	done     chan struct{} // closed at the first report
}

// CorruptionError is a file of the store that Pebble found damaged.
type CorruptionError struct {
	// File is the file's name in the working directory; Origin, where it
	// was restored from ("" for a file the store wrote).
	File, Origin string
	Err          error
}

func (e *CorruptionError) Error() string {
	if e.Origin != "" {
		return fmt.Sprintf("lsm: state file %s (restored from %s) is corrupt: %v", e.File, e.Origin, e.Err)
	}
	return fmt.Sprintf("lsm: state file %s is corrupt: %v", e.File, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

func newHealth(dir string, restored map[string]string) *health {
	return &health{dir: dir, restored: restored, done: make(chan struct{})}
}

// fail records err, if it is the first report.
func (h *health) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
		h.failed.Store(true)
		close(h.done)
	}
}

// get returns the first report, nil if none.
func (h *health) get() error {
	if !h.failed.Load() {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// corruption is Pebble's DataCorruption event.
func (h *health) corruption(info pebble.DataCorruptionInfo) {
	name := filepath.Base(info.Path)
	h.fail(&CorruptionError{File: name, Origin: h.restored[name], Err: info.Details})
}

// background is Pebble's BackgroundError event (a compaction or flush that
// failed): reported once, on stderr, as the default does; a corrupt file
// among its inputs has failed the store already (corruption), and the
// store's next operation says so.
func (h *health) background(err error) {
	if h.failed.Load() {
		return
	}
	fmt.Fprintf(os.Stderr, "lsm: %s: background error: %v\n", h.dir, err)
}

// wrap returns the store's recorded failure, which says more, if there is
// one, else err.
func (h *health) wrap(err error) error {
	if herr := h.get(); herr != nil {
		return herr
	}
	return fmt.Errorf("lsm: %w", err)
}

// panicked turns a panic of Pebble's into the store's failure.
func (h *health) panicked(r any) error {
	if herr := h.get(); herr != nil {
		return herr
	}
	err := fmt.Errorf("lsm: %s: pebble panicked: %v", h.dir, r)
	if e, ok := r.(error); ok {
		err = fmt.Errorf("lsm: %s: pebble panicked: %w", h.dir, e)
	}
	h.fail(err)
	return err
}

// protect runs f, a call into Pebble on a goroutine of the store's own,
// turning a panic and a failure Pebble reported meanwhile into its error.
func (h *health) protect(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = h.panicked(r)
		}
	}()
	err = f()
	if herr := h.get(); herr != nil {
		return herr
	}
	return err
}

// iter is a Pebble iterator whose Error reports the store's failure.
type iter struct {
	*pebble.Iterator
	h *health
}

func (i *iter) Error() error {
	if herr := i.h.get(); herr != nil {
		return herr
	}
	if err := i.Iterator.Error(); err != nil {
		return fmt.Errorf("lsm: %w", err)
	}
	return nil
}

func (i *iter) Close() error {
	err := i.Iterator.Close()
	if herr := i.h.get(); herr != nil {
		return herr
	}
	if err != nil {
		return fmt.Errorf("lsm: %w", err)
	}
	return nil
}

// storeLogger drops Pebble's informational messages (flushes,
// compactions), reports its errors on stderr, and records its fatal
// conditions as the store's failure instead of ending the process.
type storeLogger struct{ h *health }

func (storeLogger) Infof(string, ...any) {}
func (storeLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "lsm: "+format+"\n", args...)
}
func (l storeLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "lsm: %s: %s\n", l.h.dir, msg)
	l.h.fail(fmt.Errorf("lsm: %s: %s", l.h.dir, msg))
}

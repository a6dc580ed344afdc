// Package lsm is the storage under gflink's `rocksdb` state backend: one
// embedded LSM tree (Pebble, a Go LSM in RocksDB's family, no cgo) per
// stateful subtask, in a working directory of its own.
//
// The state package's LSM backend keeps keyed state in it as bytes, in
// Flink's RocksDB layout (see state/lsm_backend.go); this package only
// stores bytes and knows nothing of keys, states or snapshots' formats.
package lsm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/gflink/gflink/engine/state"
)

// Cache is a block cache that several stores may share (Flink's managed
// memory: one budget for every subtask's LSM).
type Cache struct{ c *pebble.Cache }

// NewCache makes a block cache of size bytes; Unref releases it once the
// stores using it are closed.
func NewCache(size int64) *Cache { return &Cache{pebble.NewCache(size)} }

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
	// Restored names, by file name in Dir, where the files of a restored
	// snapshot came from, so that an error about a corrupt file names the
	// snapshot's file rather than the working copy.
	Restored map[string]string
}

// Defaults as Flink's RocksDB backend: an 8 MB block cache and 64 MB write
// buffers.
const (
	DefaultBlockCacheSize  = 8 << 20
	DefaultWriteBufferSize = 64 << 20
)

// # The write buffer
//
// Every Pebble write lands in a skiplist (the memtable), and every read
// searches one or more: about 4 µs per update of a hot key in word count,
// each update a new version of the key. The store therefore keeps the
// task's writes in a hash table first (the hashmap backend's string
// table, state.StringMap: a lookup reads one slot) — the last write per key, a set, a
// delete or a pending list append — and reads look there before Pebble.
// Hot keys are then updated at the speed of a map, and Pebble sees one
// version per key per flush instead of one per record.
//
// The buffer is handed to Pebble (flushed) when it outgrows its bound
// (the write buffer size: memory stays bounded) and at every snapshot.
// A flush swaps the map for an empty one and applies the old one on a
// goroutine of its own, which then takes the Pebble snapshot, so that the
// task does not wait for the memtable inserts: reads look through the
// buffer, then the map being applied, then Pebble. At most one flush is in
// flight; the next waits for it, which keeps the order of writes.
// Iterators and range deletions (rare: map state's All, Len and Clear,
// timers after a restore) first wait for everything to be in Pebble.
//
// Once applied, a map is kept as a read cache (prev) until the next one is
// applied: it holds exactly what Pebble holds for its keys, so a read that
// finds a set or a delete there need not search Pebble. Without it, every
// checkpoint (a flush) sent the next read of every hot key to Pebble's
// memtables: at 100 K keys and a checkpoint a second, 100 K searches of a
// skiplist a second. A range deletion, which writes Pebble directly, drops
// the cache. It costs at most one more write buffer of memory.

// op is a buffered write.
type op struct {
	kind  opKind
	value []byte // set: the value; merge: the operands, concatenated
}

type opKind uint8

const (
	opSet opKind = iota + 1
	opDelete
	opMerge // append value to whatever lies below
)

// entryOverhead approximates a buffered entry's memory beyond its bytes
// (map slot, string and slice headers).
const entryOverhead = 64

// Store is one subtask's LSM. It is used from the task's goroutine only,
// except for the snapshots it hands out, which any goroutine may read.
type Store struct {
	db    *pebble.DB
	cache interface{ Unref() }
	dir   string
	id    string // names this instance's files in shared storage

	// buf holds the ops in its slots. A state's read-modify-write (Value,
	// then Update) finds its slot again without a second lookup (the
	// table remembers the slot it found last).
	buf      *state.StringMap[op]
	bufBytes int
	limit    int
	// inflight is the buffer being applied, nil when none; done is closed
	// once it is in Pebble (and its snapshot, if asked for, taken).
	inflight *state.StringMap[op]
	done     chan struct{}
	applyErr error // of the last flush, read after done
	// prev is the last map applied to Pebble, kept for reads; nil after a
	// range deletion or a failed flush.
	prev *state.StringMap[op]
	// h is what Pebble reported without returning it as an error.
	h *health
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
	if o.BlockCacheSize <= 0 {
		o.BlockCacheSize = DefaultBlockCacheSize
	}
	if o.WriteBufferSize <= 0 {
		o.WriteBufferSize = DefaultWriteBufferSize
	}
	// Pebble takes a reference of its own on the cache; the store keeps
	// the creator's reference of a cache it made (dropped by Close).
	var cache *pebble.Cache
	var own interface{ Unref() } = noUnref{}
	if o.Cache != nil {
		cache = o.Cache.c
	} else {
		cache = pebble.NewCache(o.BlockCacheSize)
		own = cache
	}
	h := newHealth(o.Dir, o.Restored)
	opts := &pebble.Options{
		Cache:        cache,
		MemTableSize: uint64(o.WriteBufferSize),
		// Two memtables, one of them being flushed: memory stays at about
		// twice the write buffer plus the block cache.
		MemTableStopWritesThreshold: 2,
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
	// The write buffer takes what a memtable would: the bound of the
	// store's memory stays about what the options say.
	var id [8]byte
	rand.Read(id[:])
	return &Store{db: db, cache: own, dir: o.Dir, id: hex.EncodeToString(id[:]), buf: state.NewStringMap[op](0), limit: int(o.WriteBufferSize), h: h}, nil
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

// Prefetch starts loading the write buffer's slots (and the flushed maps')
// where key would be, so that a Get of it a few records later does not wait
// for memory: at 100 K keys the buffer is ~12 MB, and its lookups were half
// of a word count's time on this backend.
func (s *Store) Prefetch(key []byte) {
	h := state.HashKey(key)
	s.buf.Prefetch(h)
	if s.inflight != nil {
		s.inflight.Prefetch(h)
	}
	if s.prev != nil {
		s.prev.Prefetch(h)
	}
}

// Get appends the value of key to dst.
func (s *Store) Get(key, dst []byte) ([]byte, bool, error) {
	if s.h.failed.Load() {
		return dst, false, s.h.get() // the store's state is damaged: no read may look successful
	}
	// Merge operands found on the way down, newest first.
	var pending [][]byte
	h := state.HashKey(key) // once for every map
	for i, m := range [2]*state.StringMap[op]{s.buf, s.inflight} {
		if m == nil {
			continue
		}
		o, ok := m.GetHashed(key, h)
		if !ok {
			continue
		}
		if i == 1 && o.kind == opMerge {
			// Operands are not idempotent: read them from Pebble once the
			// flush has put them there, not from the map as well.
			if err := s.wait(); err != nil {
				return dst, false, err
			}
			break
		}
		if out, found, ok := settled(dst, o, pending); ok {
			return out, found, nil
		}
		pending = append(pending, o.value) // a merge: look further down
	}
	if s.prev != nil {
		// Older than the map in flight, if any, but still what Pebble
		// holds for a key that map does not have. A merge's operands are
		// in Pebble with what lay below them: read there.
		if o, ok := s.prev.GetHashed(key, h); ok {
			if out, found, ok := settled(dst, o, pending); ok {
				return out, found, nil
			}
		}
	}
	v, closer, err := s.dbGet(key)
	if errors.Is(err, pebble.ErrNotFound) {
		out, found, _ := settled(dst, op{kind: opDelete}, pending)
		return out, found, nil
	}
	if err != nil {
		return dst, false, err
	}
	dst = appendOperands(append(dst, v...), pending)
	if err := closer.Close(); err != nil {
		return dst, false, s.h.wrap(err)
	}
	return dst, true, nil
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

// settled answers a read that met a set or a delete of the key, with the
// newer merge operands pending (newest first); ok is false for a merge.
func settled(dst []byte, o op, pending [][]byte) (out []byte, found, ok bool) {
	switch o.kind {
	case opSet:
		return appendOperands(append(dst, o.value...), pending), true, true
	case opDelete:
		if pending == nil {
			return dst, false, true
		}
		return appendOperands(dst, pending), true, true
	}
	return dst, false, false
}

// appendOperands appends merge operands, given newest first, oldest first.
func appendOperands(dst []byte, newestFirst [][]byte) []byte {
	for i := len(newestFirst) - 1; i >= 0; i-- {
		dst = append(dst, newestFirst[i]...)
	}
	return dst
}

func (s *Store) put(key []byte, kind opKind, value []byte) error {
	if s.h.failed.Load() {
		return s.h.get() // the store's state is damaged: no write may look successful
	}
	o, ok := s.buf.Get(key)
	if !ok {
		s.bufBytes += len(key) + entryOverhead
	}
	s.bufBytes -= cap(o.value)
	switch {
	case kind == opMerge && o.kind == opSet, kind == opMerge && o.kind == opMerge:
		o.value = append(o.value, value...) // the operand joins what is buffered
	case kind == opMerge && o.kind == opDelete:
		o.kind, o.value = opSet, append(o.value[:0], value...)
	default:
		o.kind, o.value = kind, append(o.value[:0], value...)
	}
	s.buf.Put(key, o)
	s.bufBytes += cap(o.value)
	if s.bufBytes < s.limit {
		return nil
	}
	return s.flush(false)
}

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
	s.prev = nil // it may hold keys of the range
	if err := s.db.DeleteRange(start, end, pebble.NoSync); err != nil {
		return s.h.wrap(err)
	}
	return s.h.get()
}

// wait waits for the flush in flight, if any.
func (s *Store) wait() error {
	if s.done == nil {
		return nil
	}
	<-s.done
	err := s.applyErr
	s.prev = s.inflight
	if err != nil {
		s.prev = nil
	}
	s.done, s.inflight = nil, nil
	s.applyErr = nil
	return err
}

// flush hands the buffer to Pebble on a goroutine of its own (after the
// previous flush is done); with snap, that goroutine takes a Pebble
// snapshot once the buffer is in, and flush returns it.
func (s *Store) flush(snap bool) error {
	_, err := s.flushWith(snap, nil)
	return err
}

// flushWith hands the buffer over; after, if set, runs on the flush's
// goroutine once the buffer is in Pebble (or at once, with nothing to
// hand over, on a goroutine of its own all the same).
func (s *Store) flushWith(snap bool, after func(error)) (<-chan *pebble.Snapshot, error) {
	if err := s.wait(); err != nil {
		return nil, err
	}
	var snapCh chan *pebble.Snapshot
	if snap {
		snapCh = make(chan *pebble.Snapshot, 1)
	}
	if s.buf.Len() == 0 && after == nil {
		if snap {
			snapCh <- s.db.NewSnapshot()
		}
		return snapCh, nil
	}
	b := s.db.NewBatch()
	for k, o := range s.buf.All { // the batch copies k
		var err error
		switch o.kind {
		case opSet:
			err = b.Set(k, o.value, nil)
		case opDelete:
			err = b.Delete(k, nil)
		case opMerge:
			err = b.Merge(k, o.value, nil)
		}
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("lsm: %w", err)
		}
	}
	s.inflight, s.buf, s.bufBytes = s.buf, state.NewStringMap[op](s.buf.Len()), 0
	done := make(chan struct{})
	s.done = done
	go func() {
		defer close(done)
		err := s.h.protect(func() error { return s.db.Apply(b, pebble.NoSync) })
		b.Close()
		if err != nil {
			err = fmt.Errorf("lsm: apply writes: %w", err)
			s.applyErr = err
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

// Package lsm is the storage under gflink's `rocksdb` state backend: one
// embedded LSM tree (Pebble, a Go LSM in RocksDB's family, no cgo) per
// stateful subtask, in a working directory of its own.
//
// The state package's LSM backend keeps keyed state in it as bytes, in
// Flink's RocksDB layout (see state/lsm_backend.go); this package only
// stores bytes and knows nothing of keys, states or snapshots' formats.
package lsm

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2"

	"github.com/gflink/gflink/engine/state"
)

// Options bound the store's memory, as Flink's RocksDB options do.
type Options struct {
	// Dir is the working directory; it is created, and removed by Close.
	Dir string
	// BlockCacheSize is state.backend.rocksdb.block.cache-size.
	BlockCacheSize int64
	// WriteBufferSize is state.backend.rocksdb.writebuffer.size: the size
	// of one memtable (Pebble keeps at most two, one being flushed).
	WriteBufferSize int64
}

// Defaults as Flink's RocksDB backend: an 8 MB block cache and 64 MB write
// buffers.
const (
	DefaultBlockCacheSize  = 8 << 20
	DefaultWriteBufferSize = 64 << 20
)

// batchLimit is how many bytes of writes the store gathers in its indexed
// batch before committing it to the LSM. Committing a batch per write costs
// a trip through Pebble's commit pipeline per record (about a microsecond);
// an indexed batch serves the task's reads of its own writes, and is
// committed whole when it grows past this or a snapshot is taken.
const batchLimit = 4 << 20

// Store is one subtask's LSM. It is used from the task's goroutine only,
// except for the snapshots it hands out, which any goroutine may read.
type Store struct {
	db    *pebble.DB
	cache interface{ Unref() }
	dir   string
	batch *pebble.Batch
}

var _ state.KVStore = (*Store)(nil)

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
	cache := pebble.NewCache(o.BlockCacheSize)
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
		Logger: quietLogger{},
	}
	db, err := pebble.Open(o.Dir, opts)
	if err != nil {
		cache.Unref()
		os.RemoveAll(o.Dir)
		return nil, fmt.Errorf("lsm: open %s: %w", o.Dir, err)
	}
	return &Store{db: db, cache: cache, dir: o.Dir, batch: db.NewIndexedBatch()}, nil
}

// Dir is the working directory.
func (s *Store) Dir() string { return s.dir }

// Get appends the value of key to dst.
func (s *Store) Get(key, dst []byte) ([]byte, bool, error) {
	v, closer, err := s.batch.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, false, nil
	}
	if err != nil {
		return dst, false, err
	}
	dst = append(dst, v...)
	return dst, true, closer.Close()
}

// Set stores value under key.
func (s *Store) Set(key, value []byte) error {
	if err := s.batch.Set(key, value, nil); err != nil {
		return err
	}
	return s.maybeCommit()
}

// Merge appends value to key's value (list state).
func (s *Store) Merge(key, value []byte) error {
	if err := s.batch.Merge(key, value, nil); err != nil {
		return err
	}
	return s.maybeCommit()
}

// Delete removes key.
func (s *Store) Delete(key []byte) error {
	if err := s.batch.Delete(key, nil); err != nil {
		return err
	}
	return s.maybeCommit()
}

// DeleteRange removes the keys in [start, end).
func (s *Store) DeleteRange(start, end []byte) error {
	if err := s.batch.DeleteRange(start, end, nil); err != nil {
		return err
	}
	return s.maybeCommit()
}

func (s *Store) maybeCommit() error {
	if s.batch.Len() < batchLimit {
		return nil
	}
	return s.commit()
}

// commit writes the gathered batch into the LSM and starts a new one.
func (s *Store) commit() error {
	if s.batch.Empty() {
		return nil
	}
	if err := s.batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("lsm: commit: %w", err)
	}
	s.batch.Close()
	s.batch = s.db.NewIndexedBatch()
	return nil
}

// NewIter iterates over [lower, upper) as the task sees it, its own
// uncommitted writes included. The iterator must be closed before the next
// write.
func (s *Store) NewIter(lower, upper []byte) (state.KVIter, error) {
	it, err := s.batch.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	return it, nil
}

// NewSnapshot commits what the task wrote and returns a consistent,
// read-only view of the store as it is now: Pebble snapshots cost O(1) and
// copy nothing; later writes do not show in it.
func (s *Store) NewSnapshot() (state.KVSnapshot, error) {
	if err := s.commit(); err != nil {
		return nil, err
	}
	return &snapshot{s.db.NewSnapshot()}, nil
}

type snapshot struct{ s *pebble.Snapshot }

func (v *snapshot) NewIter(lower, upper []byte) (state.KVIter, error) {
	it, err := v.s.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	return it, nil
}

func (v *snapshot) Close() error { return v.s.Close() }

// Close closes the LSM and removes its working directory.
func (s *Store) Close() error {
	var errs []error
	if s.batch != nil {
		errs = append(errs, s.batch.Close())
		s.batch = nil
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

// quietLogger drops Pebble's informational messages (flushes, compactions)
// and reports its errors on stderr.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "lsm: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("lsm: "+format, args...))
}

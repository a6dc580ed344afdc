package state

// KVStore is an ordered byte store, the storage of the LSM backend
// (implemented over Pebble in package lsm). Keys sort as bytes. It is used
// from the task's goroutine only, but for its snapshots.
type KVStore interface {
	// Get appends key's value to dst.
	Get(key, dst []byte) ([]byte, bool, error)
	Set(key, value []byte) error
	// Merge appends value to key's value (the values concatenate).
	Merge(key, value []byte) error
	Delete(key []byte) error
	// DeleteRange deletes the keys in [start, end).
	DeleteRange(start, end []byte) error
	// NewIter iterates over [lower, upper), the task's own writes included;
	// it must be closed before the next write.
	NewIter(lower, upper []byte) (KVIter, error)
	// NewSnapshot returns a read-only view of the store as it is now, which
	// any goroutine may read while the task goes on writing.
	NewSnapshot() (KVSnapshot, error)
	// Close releases the store and its files.
	Close() error
}

// KVPrefetcher is implemented by a KVStore that can warm the processor's
// caches for a key it will be asked for soon (the LSM store's write buffer: from ~100 K
// keys a lookup there is a cache miss).
type KVPrefetcher interface {
	Prefetch(key []byte)
}

// KVSnapshot is a point-in-time view of a KVStore.
type KVSnapshot interface {
	NewIter(lower, upper []byte) (KVIter, error)
	Close() error
}

// KVIter iterates over a key range in order (Pebble's iterator has these
// methods).
type KVIter interface {
	First() bool
	Next() bool
	Valid() bool
	Key() []byte
	Value() []byte
	Error() error
	Close() error
}

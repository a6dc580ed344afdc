package state

import "fmt"

// Backend is a keyed state backend of one operator subtask, as the task
// runtime uses it: the hashmap backend (KeyedBackend, Go maps) and the LSM
// backend (LSMBackend, Flink's `rocksdb`) implement it. States are declared
// with GetValueState, GetListState, GetMapState and TimersFor, which pick
// the backend's implementation.
type Backend[K comparable] interface {
	KeyGroupRange() KeyGroupRange
	MaxParallelism() int
	KeyGroupOf(k K) int
	// SetCurrentKey sets the key that state accesses refer to.
	SetCurrentKey(k K)
	// SetCurrentKeyAndGroup is SetCurrentKey with the key's group known.
	SetCurrentKeyAndGroup(k K, kg int)
	CurrentKey() K
	// States describes the registered and the restored-but-unregistered
	// states.
	States() []StateInfo
	// TakeSnapshot is a snapshot's synchronous part: O(states × key
	// groups) for the hashmap backend, O(1) for the LSM. The options pick
	// the strategy; a backend without a native format takes canonical
	// snapshots whatever they say.
	TakeSnapshot(o SnapshotOptions) (Snapshot, error)
	// CheckpointComplete and CheckpointAborted tell the backend how its
	// checkpoints ended (an incremental backend refers, in its next
	// checkpoint, to what the last completed one uploaded).
	CheckpointComplete(id int64)
	CheckpointAborted(id int64)
	// RestoreKeyGroups loads canonical key-group blocks.
	RestoreKeyGroups(blocks []KeyGroupBlock, workers int) error
	// DropUnregistered discards restored state no operator registered.
	DropUnregistered() []string
	// Dispose releases the backend's resources (the LSM's working
	// directory) once every snapshot taken is released.
	Dispose() error
	// declare builds a state in the backend's representation of it
	// (declare.go).
	declare(d declaration[K]) (any, error)
	// keysOf lists the keys with an entry in the state called name
	// (KeysOf).
	keysOf(name string) ([]K, error)
}

// KeysOf returns the keys of the backend's key groups that have an entry
// in the keyed state called name — a value, a non-empty list, a map with
// entries — each once, in no particular order, copied so that the state
// may change while the caller goes through them (Flink's
// applyToKeyedState collects them the same way). Timers have no keys to
// list.
func KeysOf[K comparable](b Backend[K], name string) ([]K, error) { return b.keysOf(name) }

// noKeyedState is KeysOf's error for a name no state has.
func noKeyedState(name string) error {
	return fmt.Errorf("no keyed state %q is declared: declare it in Open (GetValueState, GetListState or GetMapState) before applying a function to its keys", name)
}

// keyLister is a hashmap state whose keys KeysOf lists.
type keyLister[K comparable] interface{ keys(f func(K)) }

func (b *KeyedBackend[K]) keysOf(name string) ([]K, error) {
	s, ok := b.states[name]
	if !ok {
		return nil, noKeyedState(name)
	}
	l, ok := s.(keyLister[K])
	if !ok {
		return nil, fmt.Errorf("state %q is %s state, which has no keys to list", name, s.kind())
	}
	var out []K
	l.keys(func(k K) { out = append(out, k) })
	return out, nil
}

// keys calls f with a copy of every key of every key group's layers.
func (t *table[K, E]) keys(f func(K)) {
	for _, v := range t.views() {
		v.all(func(k K, _ E) bool {
			f(t.clone(k))
			return true
		})
	}
}

func (s *valueState[K, V]) keys(f func(K)) { s.t.keys(f) }
func (s *mapState[K, UK, UV]) keys(f func(K)) {
	for _, v := range s.t.views() {
		v.all(func(k K, e mapEntry[UK, UV]) bool {
			if e.len() > 0 {
				f(s.t.clone(k))
			}
			return true
		})
	}
}
func (s *listState[K, V]) keys(f func(K)) {
	for _, v := range s.t.views() {
		v.all(func(k K, l []V) bool {
			if len(l) > 0 {
				f(s.t.clone(k))
			}
			return true
		})
	}
}

// SnapshotOptions say what a snapshot is for.
type SnapshotOptions struct {
	ID int64
	// Native: the snapshot may be the backend's own files, written into
	// LocalDir (a local directory that must not exist), which RemoveDir
	// removes once they are uploaded. Otherwise it is canonical blocks.
	Native    bool
	LocalDir  string
	RemoveDir func(string) error
	// Incremental: a native snapshot's SST files are shared with the
	// checkpoints after it, and it may refer to the files the backend's
	// last completed checkpoint uploaded — unless Full: then it refers to
	// none and uploads every file anew (Flink's FORWARD sharing, a full
	// checkpoint of an incremental backend), so that the next incremental
	// checkpoint refers to its files rather than uploading everything.
	Incremental bool
	Full        bool
	// Changelog: a checkpoint a changelog backend may take as the log's
	// tail (not a savepoint, nor a full checkpoint).
	Changelog bool
}

// Snapshot is a keyed state snapshot whose asynchronous part, encoding, may
// run on another goroutine while the task goes on writing state.
type Snapshot interface {
	KeyGroupRange() KeyGroupRange
	// EncodeKeyGroup appends the canonical block of one key group
	// (savepoint/FORMAT.md) and releases that key group. An error is the
	// store under the snapshot failing.
	EncodeKeyGroup(dst []byte, kg int) ([]byte, error)
	// Release ends the snapshot; it is idempotent.
	Release()
}

// EntryCounter is a Snapshot that learns the number of entries of its
// states only while encoding them (the LSM does not count its keys); after
// every key group is encoded, EntryCounts returns them by state name.
type EntryCounter interface {
	EntryCounts() map[string]int64
}

// TimerQueue is a keyed timer service (processing or event time).
type TimerQueue interface {
	// Register sets a timer for the current key at ts.
	Register(ts int64)
	// Delete removes the current key's timer at ts, if any.
	Delete(ts int64)
	// Next returns the time of the earliest timer.
	Next() (int64, bool)
	// FireDue fires, in time order, every timer at or before upTo, with its
	// key made current.
	FireDue(upTo int64, fire func(ts int64) error) error
	// Len is the number of live timers.
	Len() int
}

var (
	_ Backend[string] = (*KeyedBackend[string])(nil)
	_ Backend[string] = (*LSMBackend[string])(nil)
	_ Backend[string] = (*ChangelogBackend[string])(nil)
	_ Snapshot        = (*KeyedSnapshot)(nil)
)

// TakeSnapshot is Snapshot as the Backend interface has it: the hashmap
// backend's snapshots are canonical blocks, whatever the options say.
func (b *KeyedBackend[K]) TakeSnapshot(SnapshotOptions) (Snapshot, error) { return b.Snapshot(), nil }

// CheckpointComplete: the hashmap backend's checkpoints are always full.
func (b *KeyedBackend[K]) CheckpointComplete(int64) {}

// CheckpointAborted: nothing to forget.
func (b *KeyedBackend[K]) CheckpointAborted(int64) {}

// Dispose: the hashmap backend holds nothing but memory.
func (b *KeyedBackend[K]) Dispose() error { return nil }

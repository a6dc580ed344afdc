package state

// Native snapshots of the LSM backend are the LSM's own files (Pebble's
// checkpoint: SST files hard-linked, the manifest copied), so that a
// checkpoint costs a memtable flush and the upload of the SST files the
// last completed checkpoint did not hold (incremental), not an encode of
// the whole state. The files carry the state's ids: every declared state
// is recorded under the meta prefix [0x00 0x00][name] as
// [id:2][kind:1][type string], so that a store opened on restored files
// knows which id is which state before any operator declares it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/gflink/gflink/savepoint"
)

// metaID is the id prefix of the state meta records.
const metaID = 0x0000

type lsmMeta struct {
	id   uint16
	kind Kind
	typ  string
}

func metaKey(name string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, metaID), name...)
}

func metaValue(id uint16, kind Kind, typ string) []byte {
	v := binary.BigEndian.AppendUint16(nil, id)
	v = append(v, byte(kind))
	return appendString(v, typ)
}

func readMeta(v []byte) (lsmMeta, error) {
	if len(v) < 3 {
		return lsmMeta{}, ErrShortBuffer
	}
	typ, _, err := readString(v[3:])
	return lsmMeta{id: binary.BigEndian.Uint16(v), kind: Kind(v[2]), typ: typ}, err
}

// loadMeta reads the state meta records of a store.
func loadMeta(kv KVStore) (map[string]lsmMeta, error) {
	lo := binary.BigEndian.AppendUint16(nil, metaID)
	it, err := kv.NewIter(lo, prefixEnd(lo))
	if err != nil {
		return nil, err
	}
	out := map[string]lsmMeta{}
	for ok := it.First(); ok; ok = it.Next() {
		m, err := readMeta(it.Value())
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("state meta record %q: %w", it.Key()[2:], err)
		}
		out[string(it.Key()[2:])] = m
	}
	return out, errors.Join(it.Error(), it.Close())
}

// OpenLSMBackend returns a backend over a store restored from native files
// (of the same key groups): its states are known by their meta records,
// and declared states take their ids.
func OpenLSMBackend[K comparable](kv KVStore, keySer KeySerializer[K], maxParallelism int, kgRange KeyGroupRange) (*LSMBackend[K], error) {
	b := NewLSMBackend(kv, keySer, maxParallelism, kgRange)
	known, err := loadMeta(kv)
	if err != nil {
		return nil, err
	}
	b.known = known
	for _, m := range known {
		b.nextID = max(b.nextID, m.id+1)
	}
	// Canonical state restored into the old store and not declared before
	// its native snapshot is in the files as raw payloads (rawKey), which
	// only b.pending makes visible: without this, such state was neither
	// listed nor snapshotted nor adopted when declared, and so was lost by
	// the next checkpoint (CopyKeyGroups, the rescaling path, kept it).
	it, err := kv.NewIter(rawKey(kgRange.Start, ""), rawKey(kgRange.End+1, ""))
	if err != nil {
		return nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		kind, typ, payload, err := readRawValue(it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		name := string(it.Key()[4:])
		raw := b.pending[name]
		if raw == nil {
			raw = &lsmRaw{kind: kind, typ: typ}
			b.pending[name] = raw
		}
		raw.count += payloadCount(payload)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	return b, nil
}

// undeclaredState encodes a state the store holds but no operator
// declared, from its bytes alone (no value serializer is needed).
type undeclaredState struct {
	m       lsmMeta
	keySpan func([]byte) ([]byte, []byte, error)
}

func (b *LSMBackend[K]) undeclared(m lsmMeta) lsmState {
	return &undeclaredState{m: m, keySpan: func(src []byte) ([]byte, []byte, error) { return span(src, b.keySer.Decode) }}
}

func (u *undeclaredState) kind() Kind       { return u.m.kind }
func (u *undeclaredState) typeName() string { return u.m.typ }
func (u *undeclaredState) id() uint16       { return u.m.id }
func (u *undeclaredState) restore(int, []byte) error {
	return errors.New("state: an undeclared state restores nothing")
}

func (u *undeclaredState) encode(it KVIter, dst []byte) ([]byte, int, error) {
	return encodeKind(u.m.kind, it, dst, u.keySpan)
}

func encodeKind(kind Kind, it KVIter, dst []byte, keySpan func([]byte) ([]byte, []byte, error)) ([]byte, int, error) {
	switch kind {
	case KindValue:
		return encodeValues(it, dst)
	case KindList:
		return encodeLists(it, dst)
	case KindMap:
		return encodeMaps(it, dst, keySpan)
	case KindProcessingTime, KindEventTime:
		return encodeTimers(it, dst)
	}
	return dst, 0, fmt.Errorf("state: unknown kind %d", kind)
}

// NativeKV is a KVStore that can write its own files as a checkpoint.
type NativeKV interface {
	KVStore
	// Checkpoint writes the store as it is now into dir (which must not
	// exist) without making the caller wait; the channel yields the
	// outcome.
	Checkpoint(dir string) (<-chan error, error)
	// ID names the store instance (file names are unique within one).
	ID() string
}

// NativeSnapshot is a native snapshot of the LSM backend: the store's
// files in a local directory, once Wait returns.
type NativeSnapshot struct {
	kgRange KeyGroupRange
	// Dir is the local directory of the files; BackendID names the store
	// instance that wrote them.
	Dir       string
	BackendID string
	// Incremental: the SST files are shared with later checkpoints, and
	// those the backend's last completed checkpoint uploaded may be
	// referenced rather than uploaded again (Shared: none for a full
	// checkpoint).
	Incremental bool
	shared      map[string]savepoint.NativeFile // file name -> where it is shared, and its checksum
	res         <-chan error
	err         error
	waited      bool
	done        func()
	uploaded    func(shared map[string]savepoint.NativeFile)
	once        sync.Once
}

// Uploaded tells the backend where the snapshot's SST files are shared,
// with their checksums, once uploaded: they become referable when its
// checkpoint completes.
func (n *NativeSnapshot) Uploaded(shared map[string]savepoint.NativeFile) { n.uploaded(shared) }

// KeyGroupRange is the range of the snapshot.
func (n *NativeSnapshot) KeyGroupRange() KeyGroupRange { return n.kgRange }

// Wait waits until the files are written.
func (n *NativeSnapshot) Wait() error {
	if !n.waited {
		n.waited = true
		var ok bool
		if n.err, ok = <-n.res; !ok && n.err == nil {
			n.err = errors.New("state backend: the checkpoint was not written")
		}
	}
	return n.err
}

// Shared returns where an SST file of the snapshot is shared already (its
// Path, relative to a checkpoint directory, "../shared/<file>") and the
// checksum recorded when it was uploaded (CRC32C), if the backend's last
// completed incremental checkpoint uploaded it.
func (n *NativeSnapshot) Shared(name string) (savepoint.NativeFile, bool) {
	f, ok := n.shared[name]
	return f, ok
}

// EncodeKeyGroup is not available: a native snapshot is files.
func (n *NativeSnapshot) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	return dst, errors.New("state: a native snapshot has no canonical blocks")
}

// Release removes the local files (once written).
func (n *NativeSnapshot) Release() {
	n.once.Do(func() {
		n.Wait()
		n.done()
	})
}

// TakeNativeSnapshot starts a native snapshot for checkpoint id into dir
// (a local directory that must not exist). The task does not wait for the
// files (see lsm.Store.Checkpoint). With incremental, its SST files are
// shared with the checkpoints after it; with refer too, it may refer to
// the SST files of the last completed checkpoint (a full checkpoint of an
// incremental backend refers to none).
func (b *LSMBackend[K]) TakeNativeSnapshot(id int64, dir string, incremental, refer bool, removeDir func(string) error) (*NativeSnapshot, error) {
	nkv, ok := b.kv.(NativeKV)
	if !ok {
		return nil, errors.New("state backend: the store cannot write native snapshots")
	}
	if err := b.opened(); err != nil {
		return nil, err
	}
	res, err := nkv.Checkpoint(dir)
	if err != nil {
		b.released()
		return nil, err
	}
	n := &NativeSnapshot{kgRange: b.kgRange, Dir: dir, BackendID: nkv.ID(), Incremental: incremental, res: res}
	n.done = func() {
		if removeDir != nil {
			removeDir(dir)
		}
		b.released()
	}
	n.uploaded = func(shared map[string]savepoint.NativeFile) { b.Uploaded(id, shared) }
	if incremental && refer {
		b.mu.Lock()
		n.shared = maps.Clone(b.confirmed)
		b.mu.Unlock()
	}
	return n, nil
}

// SeedShared makes the files of a restored incremental checkpoint (file name
// -> where it is shared, relative to a checkpoint directory of this job,
// and its checksum) what the next incremental checkpoint may refer to: a
// CLAIM restore, in which the restored checkpoint's files become the
// job's own.
func (b *LSMBackend[K]) SeedShared(shared map[string]savepoint.NativeFile) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.confirmed = shared
}

// Uploaded records where the SST files of checkpoint id are shared, once
// its upload is done; they become referable when the checkpoint completes.
func (b *LSMBackend[K]) Uploaded(id int64, shared map[string]savepoint.NativeFile) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.uploads == nil {
		b.uploads = map[int64]map[string]savepoint.NativeFile{}
	}
	b.uploads[id] = shared
}

// CheckpointComplete: the SST files of checkpoint id are what the next
// incremental checkpoint may refer to. Files of older checkpoints may be
// deleted once subsumed, so only the latest completed one's count.
func (b *LSMBackend[K]) CheckpointComplete(id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if up, ok := b.uploads[id]; ok {
		b.confirmed = up
	}
	for k := range b.uploads {
		if k <= id {
			delete(b.uploads, k)
		}
	}
}

// CheckpointAborted forgets the uploads of an aborted checkpoint.
func (b *LSMBackend[K]) CheckpointAborted(id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.uploads, id)
}

// CopyKeyGroups copies every state of src, a store restored from another
// subtask's native files, that lies in this backend's key groups, into
// this backend (rescaling from native snapshots). States are matched by
// name, so ids may differ between the stores.
func (b *LSMBackend[K]) CopyKeyGroups(src KVStore) error {
	meta, err := loadMeta(src)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(meta)) {
		m := meta[name]
		id, err := b.knownID(name, m)
		if err != nil {
			return err
		}
		lo := kgPrefix(nil, m.id, b.kgRange.Start)
		hi := kgPrefix(nil, m.id, b.kgRange.End+1)
		it, err := src.NewIter(lo, hi)
		if err != nil {
			return err
		}
		var key []byte
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			key = binary.BigEndian.AppendUint16(key[:0], id)
			key = append(key, k[2:]...)
			if err := b.kv.Set(key, it.Value()); err != nil {
				it.Close()
				return err
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return err
		}
	}
	// Restored canonical state not declared before the native snapshot.
	lo := rawKey(b.kgRange.Start, "")
	hi := rawKey(b.kgRange.End+1, "")
	it, err := src.NewIter(lo, hi)
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		kind, typ, payload, err := readRawValue(it.Value())
		if err != nil {
			it.Close()
			return err
		}
		name := string(it.Key()[4:])
		raw := b.pending[name]
		if raw == nil {
			raw = &lsmRaw{kind: kind, typ: typ}
			b.pending[name] = raw
		}
		raw.count += payloadCount(payload)
		if err := b.kv.Set(slices.Clone(it.Key()), it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	for _, st := range b.states {
		if f, ok := st.(restoreFinisher); ok {
			f.finishRestore()
		}
	}
	return nil
}

// knownID returns this backend's id for a state of another store, making
// it known (with a meta record) if it is new here.
func (b *LSMBackend[K]) knownID(name string, m lsmMeta) (uint16, error) {
	if st, ok := b.states[name]; ok {
		if st.kind() != m.kind {
			return 0, fmt.Errorf("state %q was restored as %s state but is declared as %s state", name, m.kind, st.kind())
		}
		return st.id(), nil
	}
	if k, ok := b.known[name]; ok {
		if k.kind != m.kind {
			return 0, fmt.Errorf("state %q appears as both %s and %s state", name, k.kind, m.kind)
		}
		return k.id, nil
	}
	if b.nextID == rawID {
		return 0, fmt.Errorf("state %q: too many states in one operator", name)
	}
	id := b.nextID
	b.nextID++
	b.known[name] = lsmMeta{id: id, kind: m.kind, typ: m.typ}
	return id, b.kv.Set(metaKey(name), metaValue(id, m.kind, m.typ))
}

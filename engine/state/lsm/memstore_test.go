package lsm_test

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/gflink/gflink/engine/state"
)

// memStore is an ordered byte store in a Go map: a stand-in for a fourth
// backend's storage, written against state.KVStore alone.
type memStore struct{ m map[string][]byte }

func (s *memStore) Get(key, dst []byte) ([]byte, bool, error) {
	v, ok := s.m[string(key)]
	return append(dst, v...), ok, nil
}
func (s *memStore) Set(key, value []byte) error {
	s.m[string(key)] = bytes.Clone(value)
	return nil
}
func (s *memStore) Merge(key, value []byte) error {
	s.m[string(key)] = append(bytes.Clone(s.m[string(key)]), value...)
	return nil
}
func (s *memStore) Delete(key []byte) error {
	delete(s.m, string(key))
	return nil
}
func (s *memStore) DeleteRange(start, end []byte) error {
	for k := range s.m {
		if k >= string(start) && k < string(end) {
			delete(s.m, k)
		}
	}
	return nil
}
func (s *memStore) NewIter(lower, upper []byte) (state.KVIter, error) {
	return newMemIter(s.m, lower, upper), nil
}
func (s *memStore) NewSnapshot() (state.KVSnapshot, error) {
	return &memSnapshot{maps.Clone(s.m)}, nil
}
func (s *memStore) Close() error { return nil }

type memSnapshot struct{ m map[string][]byte }

func (s *memSnapshot) NewIter(lower, upper []byte) (state.KVIter, error) {
	return newMemIter(s.m, lower, upper), nil
}
func (s *memSnapshot) Close() error { return nil }

// memIter iterates over a sorted copy of the keys in [lower, upper).
type memIter struct {
	m    map[string][]byte
	keys []string
	i    int
}

func newMemIter(m map[string][]byte, lower, upper []byte) *memIter {
	it := &memIter{m: m, i: -1}
	for k := range m {
		if k >= string(lower) && (upper == nil || k < string(upper)) {
			it.keys = append(it.keys, k)
		}
	}
	slices.Sort(it.keys)
	return it
}

func (it *memIter) First() bool   { it.i = 0; return it.Valid() }
func (it *memIter) Next() bool    { it.i++; return it.Valid() }
func (it *memIter) Valid() bool   { return it.i >= 0 && it.i < len(it.keys) }
func (it *memIter) Key() []byte   { return []byte(it.keys[it.i]) }
func (it *memIter) Value() []byte { return it.m[it.keys[it.i]] }
func (it *memIter) Error() error  { return nil }
func (it *memIter) Close() error  { return nil }

// A backend over another ordered byte store needs no state code of its
// own: state.NewLSMBackend over memStore — the same typed wrappers as
// Pebble's — reads, snapshots, restores and fires timers exactly as the
// hashmap backend does.
func TestAnotherByteStoreNeedsNoStateCode(t *testing.T) {
	keys := manyKeys()
	mem := declare(t, state.NewLSMBackend(&memStore{m: map[string][]byte{}}, keySer, maxPar, fullRange))
	heap := declare(t, state.NewKeyedBackend(keySer, maxPar, fullRange))
	populate(mem, keys)
	populate(heap, keys)
	blocks := takeBlocks(t, heap.b)
	sameBlocks(t, "snapshot", takeBlocks(t, mem.b), blocks)
	compareReads(t, heap, mem, keys)

	// Restored from the hashmap backend's snapshot, read and fired.
	back := restoreInto(t, state.NewLSMBackend(&memStore{m: map[string][]byte{}}, keySer, maxPar, fullRange), blocks, 1, false)
	compareReads(t, heap, back, keys)
	fireAll(t, heap, back)
}

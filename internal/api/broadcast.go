package api

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/savepoint"
)

// BroadcastState is a map that every subtask of an operator holds the
// same copy of (Flink's BroadcastState): the records of a broadcast input
// reach every subtask, and each subtask applies them to its copy alike. It
// is operator state, checkpointed with the subtask, and restored at another
// parallelism by giving new subtask i the copy of old subtask i mod the old
// parallelism.
type BroadcastState[K comparable, V any] struct {
	m map[K]V
}

// Get returns the value of k.
func (b *BroadcastState[K, V]) Get(k K) (V, bool) {
	v, ok := b.m[k]
	return v, ok
}

// Contains reports whether k has a value.
func (b *BroadcastState[K, V]) Contains(k K) bool {
	_, ok := b.m[k]
	return ok
}

// Put sets k's value.
func (b *BroadcastState[K, V]) Put(k K, v V) { b.m[k] = v }

// Remove removes k.
func (b *BroadcastState[K, V]) Remove(k K) { delete(b.m, k) }

// Clear removes every entry.
func (b *BroadcastState[K, V]) Clear() { clear(b.m) }

// Len is the number of entries.
func (b *BroadcastState[K, V]) Len() int { return len(b.m) }

// All iterates over the entries, in no particular order.
func (b *BroadcastState[K, V]) All() iter.Seq2[K, V] { return maps.All(b.m) }

// GetBroadcastState declares (in Open) the broadcast state called name.
func GetBroadcastState[K comparable, V any](ctx *RuntimeContext, name string) (*BroadcastState[K, V], error) {
	c := ctx.store
	if c == nil || !c.Opening() {
		return nil, fmt.Errorf("broadcast state %q: declare broadcast state in Open", name)
	}
	if c.Declared(name) {
		return nil, fmt.Errorf("broadcast state %q is declared twice", name)
	}
	kser, vser := state.SerializerFor[K](), state.SerializerFor[V]()
	b := &BroadcastState[K, V]{m: map[K]V{}}
	for i, item := range c.Restored(name) {
		k, rest, err := kser.Decode(item)
		var v V
		if err == nil {
			v, rest, err = vser.Decode(rest)
		}
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%d bytes left over", len(rest))
		}
		if err != nil {
			return nil, fmt.Errorf("broadcast state %q: entry %d of the snapshot: %w", name, i, err)
		}
		b.m[k] = v
	}
	c.Declare(name, savepoint.Broadcast, func() [][]byte {
		items := make([][]byte, 0, len(b.m))
		for k, v := range b.m {
			items = append(items, vser.Append(kser.Append(nil, k), v))
		}
		// In the order of the encoded entries, as keyed state is: a
		// snapshot of the same state is the same bytes.
		slices.SortFunc(items, bytes.Compare)
		return items
	})
	return b, nil
}

package state

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

// Timers is a keyed timer service (processing time or event time). Timers
// belong to a key and so to a key group; they are part of snapshots and are
// restored with their key group, so that a timer set before a failure fires
// after recovery, on whichever subtask then owns the key.
type Timers[K comparable] struct {
	b    *KeyedBackend[K]
	k    Kind
	sets []map[timer[K]]struct{} // per key group, with copy-on-write
	gens []uint64
	q    timerHeap[K] // may hold deleted timers; sets is the truth
}

type timer[K comparable] struct {
	key K
	ts  int64
}

type queued[K comparable] struct {
	timer[K]
	kg int
}

type timerHeap[K comparable] []queued[K]

func (h timerHeap[K]) Len() int           { return len(h) }
func (h timerHeap[K]) Less(i, j int) bool { return h[i].ts < h[j].ts }
func (h timerHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap[K]) Push(x any)        { *h = append(*h, x.(queued[K])) }
func (h *timerHeap[K]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// GetTimers registers (or returns) the timer service of the given kind
// (KindProcessingTime or KindEventTime).
func GetTimers[K comparable](b *KeyedBackend[K], kind Kind) (*Timers[K], error) {
	name := ProcessingTimersName
	if kind == KindEventTime {
		name = EventTimersName
	}
	return register(b, name, kind, func() *Timers[K] {
		n := b.kgRange.Len()
		return &Timers[K]{b: b, k: kind, sets: make([]map[timer[K]]struct{}, n), gens: make([]uint64, n)}
	})
}

func (t *Timers[K]) writable(kgi int) map[timer[K]]struct{} {
	m := t.sets[kgi]
	if m == nil {
		m = map[timer[K]]struct{}{}
		t.sets[kgi], t.gens[kgi] = m, t.b.cow.gen
	} else if t.b.cow.shared(t.gens[kgi]) {
		m = maps.Clone(m)
		t.sets[kgi], t.gens[kgi] = m, t.b.cow.gen
	}
	return m
}

// Register sets a timer for the current key at ts. Registering the same
// (key, time) twice makes one timer, as in Flink.
func (t *Timers[K]) Register(ts int64) {
	if _, ok := t.sets[t.b.kgIndex][timer[K]{t.b.currentKey, ts}]; ok {
		return
	}
	t.add(t.b.kgIndex, timer[K]{t.b.storedKey(), ts})
}

func (t *Timers[K]) add(kgi int, tm timer[K]) {
	if _, ok := t.sets[kgi][tm]; ok {
		return
	}
	t.writable(kgi)[tm] = struct{}{}
	heap.Push(&t.q, queued[K]{tm, kgi})
}

// Delete removes the current key's timer at ts, if any.
func (t *Timers[K]) Delete(ts int64) {
	tm := timer[K]{t.b.currentKey, ts}
	if _, ok := t.sets[t.b.kgIndex][tm]; ok {
		delete(t.writable(t.b.kgIndex), tm)
	}
}

// Next returns the time of the earliest timer.
func (t *Timers[K]) Next() (int64, bool) {
	for t.q.Len() > 0 {
		top := t.q[0]
		if _, ok := t.sets[top.kg][top.timer]; ok {
			return top.ts, true
		}
		heap.Pop(&t.q) // deleted
	}
	return 0, false
}

// FireDue fires, in time order, every timer at or before upTo: it removes
// the timer, makes its key current and calls fire. Timers that fire may set
// new timers; those that are due fire in the same call.
func (t *Timers[K]) FireDue(upTo int64, fire func(ts int64) error) error {
	for {
		ts, ok := t.Next()
		if !ok || ts > upTo {
			return nil
		}
		q := heap.Pop(&t.q).(queued[K])
		delete(t.writable(q.kg), q.timer)
		t.b.setCurrent(q.key, q.kg+t.b.kgRange.Start)
		if err := fire(q.ts); err != nil {
			return err
		}
	}
}

// Len is the number of live timers.
func (t *Timers[K]) Len() int {
	n := 0
	for _, s := range t.sets {
		n += len(s)
	}
	return n
}

func (t *Timers[K]) kind() Kind       { return t.k }
func (t *Timers[K]) typeName() string { return "timer[" + typeName[K]() + "]" }
func (t *Timers[K]) count() int       { return t.Len() }

type capturedTimers[K comparable] struct {
	sets   []map[timer[K]]struct{}
	keySer KeySerializer[K]
}

func (t *Timers[K]) capture() capturedTables {
	return capturedTimers[K]{sets: slices.Clone(t.sets), keySer: t.b.keySer}
}

func (c capturedTimers[K]) encode(dst []byte, kgi int) ([]byte, int) {
	type enc struct {
		key []byte
		ts  int64
	}
	entries := make([]enc, 0, len(c.sets[kgi]))
	for tm := range c.sets[kgi] {
		entries = append(entries, enc{c.keySer.Append(nil, tm.key), tm.ts})
	}
	slices.SortFunc(entries, func(a, b enc) int {
		if c := compareBytes(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.ts, b.ts)
	})
	for _, e := range entries {
		dst = append(dst, e.key...)
		dst = binary.AppendVarint(dst, e.ts)
	}
	return dst, len(entries)
}

func (t *Timers[K]) restore(kgi int, payload []byte) error {
	n, k := binary.Uvarint(payload)
	if k <= 0 {
		return ErrShortBuffer
	}
	rest := payload[k:]
	for i := uint64(0); i < n; i++ {
		key, r, err := t.b.keySer.Decode(rest)
		if err != nil {
			return fmt.Errorf("timer key: %w", err)
		}
		ts, m := binary.Varint(r)
		if m <= 0 {
			return ErrShortBuffer
		}
		t.add(kgi, timer[K]{key, ts})
		rest = r[m:]
	}
	return nil
}

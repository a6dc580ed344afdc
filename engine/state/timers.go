package state

import (
	"container/heap"
	"encoding/binary"
	"fmt"
)

// Timers is a keyed timer service (processing time or event time). Timers
// belong to a key and so to a key group; they are part of snapshots and are
// restored with their key group, so that a timer set before a failure fires
// after recovery, on whichever subtask then owns the key.
type Timers[K comparable] struct {
	b *KeyedBackend[K]
	k Kind
	t table[timer[K], struct{}] // the timers of each key group, layered like any state
	q timerHeap[K]              // may hold deleted timers; t is the truth
	// requeue: timers were restored into t; q is rebuilt before it is read.
	requeue bool
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
		clone := func(tm timer[K]) timer[K] { return timer[K]{b.cloneKey(tm.key), tm.ts} }
		return &Timers[K]{b: b, k: kind, t: newTable[timer[K], struct{}](b.pins, b.nkg, clone)}
	})
}

// Register sets a timer for the current key at ts. Registering the same
// (key, time) twice makes one timer, as in Flink.
func (t *Timers[K]) Register(ts int64) { t.registerAt(t.b.kgIndex, t.b.currentKey, ts) }

// Delete removes the current key's timer at ts, if registered.
func (t *Timers[K]) Delete(ts int64) { t.deleteAt(t.b.kgIndex, t.b.currentKey, ts) }

// registerAt and deleteAt are Register and Delete for key k of key group
// index kgi. Changelog replay calls them on several goroutines for
// distinct key groups after beginReplay, which leaves the queue to be
// rebuilt once from the table (as a restore does): the queue is the task's
// alone, the table's key groups are their own.
func (t *Timers[K]) registerAt(kgi int, k K, ts int64) {
	tm := timer[K]{k, ts}
	if _, ok := t.t.get(kgi, tm); ok {
		return
	}
	t.t.set(kgi, tm, struct{}{}, false)
	if !t.requeue {
		heap.Push(&t.q, queued[K]{tm, kgi})
	}
}

func (t *Timers[K]) deleteAt(kgi int, k K, ts int64) {
	tm := timer[K]{k, ts}
	if _, ok := t.t.get(kgi, tm); ok {
		t.t.del(kgi, tm)
	}
}

func (t *Timers[K]) beginReplay() { t.requeue = true }

// Next returns the time of the earliest timer.
func (t *Timers[K]) Next() (int64, bool) {
	if t.requeue {
		t.rebuildQueue()
	}
	for t.q.Len() > 0 {
		top := t.q[0]
		if _, ok := t.t.get(top.kg, top.timer); ok {
			return top.ts, true
		}
		heap.Pop(&t.q) // deleted
	}
	return 0, false
}

func (t *Timers[K]) rebuildQueue() {
	t.requeue = false
	t.q = t.q[:0]
	for kgi := range t.t.kgs {
		l := &t.t.kgs[kgi]
		v := view[timer[K], struct{}]{base: l.base}
		for _, o := range l.over {
			v.over = append(v.over, o.m)
		}
		for tm := range v.all {
			t.q = append(t.q, queued[K]{tm, kgi})
		}
	}
	heap.Init(&t.q)
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
		t.t.del(q.kg, q.timer)
		t.b.setCurrent(q.key, q.kg+t.b.kgRange.Start)
		if err := fire(q.ts); err != nil {
			return err
		}
	}
}

// Len is the number of live timers.
func (t *Timers[K]) Len() int { return t.t.count() }

func (t *Timers[K]) kind() Kind       { return t.k }
func (t *Timers[K]) typeName() string { return "timer[" + typeName[K]() + "]" }
func (t *Timers[K]) count() int       { return t.Len() }
func (t *Timers[K]) foldAll()         { t.t.foldAll() }
func (t *Timers[K]) overlays() int    { return t.t.overlays() }

// capture encodes timers sorted by (key, timestamp): the key is the sort
// key, and equal keys are ordered by the varint timestamp after them.
func (t *Timers[K]) capture() capturedTables {
	keySer := t.b.keySer
	return &capturedTable[timer[K], struct{}]{views: t.t.views(), tie: true,
		encK: func(dst []byte, tm timer[K]) []byte { return keySer.Append(dst, tm.key) },
		encE: func(_ *encScratch, dst []byte, tm timer[K], _ struct{}) []byte {
			return binary.AppendVarint(dst, tm.ts)
		}}
}

// restore decodes one key group's timers; the queue is rebuilt once all
// are in (finishRestore), as key groups may restore concurrently.
func (t *Timers[K]) restore(kgi int, payload []byte) error {
	return restoreInto(&t.t, kgi, payload,
		func(src []byte) (timer[K], []byte, error) {
			key, r, err := t.b.keySer.Decode(src)
			if err != nil {
				return timer[K]{}, nil, fmt.Errorf("timer key: %w", err)
			}
			ts, m := binary.Varint(r)
			if m <= 0 {
				return timer[K]{}, nil, ErrShortBuffer
			}
			return timer[K]{key, ts}, r[m:], nil
		},
		func(src []byte) (struct{}, []byte, error) { return struct{}{}, src, nil })
}

func (t *Timers[K]) finishRestore() { t.requeue = true }

package stream

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/gflink/gflink/internal/api"
)

// A window's pre-aggregation buffer (Flink SQL's mini-batch window buffer,
// for the DataStream windows that allow it): tumbling and sliding
// event-time windows with the default trigger and no allowed lateness
// combine their records in a Go map by key and window, not in keyed state.
// A record costs one map update, where state costs a read and a write of
// the key's window entry and the window's first record a timer. When the
// watermark passes a window's end, its keys' results are emitted straight
// from the buffer: no state, no timers. What must survive a failure goes to
// state (and timers) as before:
//
//   - before every checkpoint and savepoint (PrepareSnapshot), all of it;
//   - when the buffer holds windowBufferSize entries, all of it.
//
// A window some of whose entries were moved to state is "flushed": when it
// is due, its buffered entries go to state too, and its timers fire it, so
// that each key's window is emitted once with all its records. The flushed
// windows are operator state (a union list), so that after a restore —
// at any parallelism — a window restored in state is never also emitted
// from the buffer. A job restored from a snapshot without that list (taken
// before windows had buffers) moves every due window through state.

// windowBufferSize is how many (key, window) entries a buffer holds before
// it moves them to state: ~8 MB for string keys and small accumulators.
const windowBufferSize = 1 << 17

type bufKey[K comparable] struct {
	key   K
	start int64
}

type windowBuffer[K comparable, ACC any] struct {
	m map[bufKey[K]]ACC
	// starts counts the entries of each window (by start).
	starts map[int64]int
	// flushed: windows (by start) that may have entries in state.
	flushed map[int64]bool
	// legacy: restored from a snapshot without the flushed list; every
	// window may have entries in state.
	legacy bool
	list   api.ListState[int64] // the flushed list's operator state
	due    []bufEntry[K, ACC]
}

type bufEntry[K comparable, ACC any] struct {
	k   bufKey[K]
	acc ACC
}

const flushedStateName = "window-flushed"

// OpenOperatorState declares the flushed list, if the operator buffers.
func (o *windowOperator[K, T, ACC, OUT]) OpenOperatorState(rc *RuntimeContext) error {
	if !o.buffers() {
		return nil
	}
	list, err := api.GetUnionListState[int64](rc, flushedStateName)
	if err != nil {
		return err
	}
	b := &windowBuffer[K, ACC]{m: map[bufKey[K]]ACC{}, starts: map[int64]int{}, flushed: map[int64]bool{}, list: list}
	restored := list.Get()
	for _, s := range restored {
		b.flushed[s] = true
	}
	// Every subtask adds its list, empty or not, so a restore from a
	// snapshot with buffers always finds at least one (a sentinel).
	b.legacy = rc.IsRestored() && len(restored) == 0
	delete(b.flushed, noWindow)
	o.wbuf = b
	return nil
}

// noWindow is the flushed list's sentinel: no window starts there (it is
// the smallest int64, and a window's start is above its timestamp minus
// its size).
const noWindow = int64(-1 << 63)

// windowBuffersOff turns buffers off for the windows built after it
// (tests: a snapshot without them).
var windowBuffersOff bool

// buffers reports whether the operator's windows go through a buffer.
func (o *windowOperator[K, T, ACC, OUT]) buffers() bool {
	if o.unbuffered {
		return false
	}
	switch o.trigger.(type) {
	case eventTimeTrigger[T]:
	default:
		return false
	}
	return !o.a.merging() && !o.a.global && !o.a.processing && o.lateness == 0
}

// bufferAdd adds in to window w of the current key.
func (o *windowOperator[K, T, ACC, OUT]) bufferAdd(ctx *Context[K], w TimeWindow, in T) {
	b := o.wbuf
	k := bufKey[K]{ctx.CurrentKey(), w.Start}
	acc, ok := b.m[k]
	if !ok {
		k.key = cloneKey(k.key)
		b.starts[w.Start]++
	}
	b.m[k] = o.add(acc, ok, in)
	if !ok && len(b.m) >= windowBufferSize {
		o.flushAll(ctx)
	}
}

// cloneKey copies a string key, so that the buffer does not pin the line
// it was cut from.
func cloneKey[K comparable](k K) K {
	if s, ok := any(k).(string); ok {
		return any(strings.Clone(s)).(K)
	}
	return k
}

// flushAll moves every buffered entry to state.
func (o *windowOperator[K, T, ACC, OUT]) flushAll(ctx *Context[K]) {
	b := o.wbuf
	for k, acc := range b.m {
		o.flushEntry(ctx, k, acc)
	}
	for s := range b.starts {
		b.flushed[s] = true
	}
	clear(b.m)
	clear(b.starts)
}

// flushEntry adds a buffered entry to its window's entry in state, which
// a new window's timer comes with (the default trigger's, which is also
// its cleanup without lateness).
func (o *windowOperator[K, T, ACC, OUT]) flushEntry(ctx *Context[K], k bufKey[K], acc ACC) {
	api.SetCurrentKey(ctx, k.key)
	e, ok := o.entries.Get(k.start)
	if ok && e.has {
		e.acc = o.merge(e.acc, acc)
	} else {
		e = winEntry[ACC]{end: k.start + o.a.size, acc: acc, has: true}
		ctx.TimerService().RegisterEventTimeTimer(k.start + o.a.size - 1)
	}
	o.entries.Put(k.start, e)
}

// PrepareSnapshot moves the buffer to state before a checkpoint or
// savepoint, and stores which windows are in state.
func (o *windowOperator[K, T, ACC, OUT]) PrepareSnapshot(ctx *Context[K]) error {
	b := o.wbuf
	if b == nil {
		return nil
	}
	o.flushAll(ctx)
	list := append(slices.Sorted(maps.Keys(b.flushed)), noWindow)
	b.list.Update(list)
	return nil
}

// BeforeTimers emits the windows the watermark passed from the buffer, or
// moves them to state for their timers to fire.
func (o *windowOperator[K, T, ACC, OUT]) BeforeTimers(ctx *Context[K], wm int64, out Collector[OUT]) error {
	b := o.wbuf
	if b == nil {
		return nil
	}
	viaState := b.legacy
	any := false
	for s := range b.starts {
		if s+o.a.size-1 <= wm {
			any = true
			viaState = viaState || b.flushed[s]
		}
	}
	if any {
		b.due = b.due[:0]
		for k, acc := range b.m {
			if k.start+o.a.size-1 <= wm {
				b.due = append(b.due, bufEntry[K, ACC]{k, acc})
				delete(b.m, k)
			}
		}
		for s := range b.starts {
			if s+o.a.size-1 <= wm {
				delete(b.starts, s)
			}
		}
		if viaState {
			// Some of it is in state already: all of it fires by timer,
			// so that a key's windows come out in order.
			for _, d := range b.due {
				o.flushEntry(ctx, d.k, d.acc)
			}
		} else {
			// By window, as timers would fire them.
			slices.SortFunc(b.due, func(x, y bufEntry[K, ACC]) int { return cmp.Compare(x.k.start, y.k.start) })
			saved := ctx.Timestamp()
			for _, d := range b.due {
				api.SetCurrentKey(ctx, d.k.key)
				w := TimeWindow{d.k.start, d.k.start + o.a.size}
				api.SetOutputTimestamp(ctx, w.MaxTimestamp())
				if err := o.fire(d.k.key, w, d.acc, out); err != nil {
					return err
				}
			}
			api.SetOutputTimestamp(ctx, saved)
		}
		clear(b.due)
	}
	// Windows the watermark passed are fired (now, or by their timers
	// right after this) and cleaned up.
	for s := range b.flushed {
		if s+o.a.size-1 <= wm {
			delete(b.flushed, s)
		}
	}
	return nil
}

package stream

import (
	"fmt"
	"math"
	"time"

	"github.com/gflink/gflink/internal/api"
)

// Windows on a keyed stream, in event time (Flink's KeyedStream.window with
// TumblingEventTimeWindows or SlidingEventTimeWindows and the default
// event-time trigger): each record goes to the windows its timestamp falls
// in; a window's result is emitted once the watermark passes its end, with
// the window's last millisecond (End-1) as its timestamp, and its state is
// dropped. A record for a window the watermark has passed is late: it is
// dropped, unless the window's AllowedLateness has not passed either —
// then the window keeps its state that much longer and fires again with
// each late record (Flink's allowedLateness). The records need timestamps: put
// AssignTimestampsAndWatermarks upstream. A window's contents live in keyed
// state, so windows are checkpointed, restored and rescaled as all keyed
// state is.

// TimeWindow is the window [Start, End) in milliseconds.
type TimeWindow struct{ Start, End int64 }

// MaxTimestamp is the last millisecond in the window.
func (w TimeWindow) MaxTimestamp() int64 { return w.End - 1 }

// WindowAssigner puts a timestamp into windows.
type WindowAssigner struct {
	size, slide, offset int64
}

// TumblingEventTimeWindows are windows of size, one after another, aligned
// to the epoch (shift them with WithOffset).
func TumblingEventTimeWindows(size time.Duration) WindowAssigner {
	return WindowAssigner{size: size.Milliseconds(), slide: size.Milliseconds()}
}

// SlidingEventTimeWindows are windows of size starting every slide: a
// record falls in size/slide of them.
func SlidingEventTimeWindows(size, slide time.Duration) WindowAssigner {
	return WindowAssigner{size: size.Milliseconds(), slide: slide.Milliseconds()}
}

// WithOffset shifts the windows' starts by offset (a time zone's, for
// daily windows).
func (a WindowAssigner) WithOffset(offset time.Duration) WindowAssigner {
	a.offset = offset.Milliseconds()
	return a
}

func (a WindowAssigner) check() error {
	if a.size <= 0 || a.slide <= 0 || a.slide > a.size {
		return fmt.Errorf("window size %d ms and slide %d ms: both must be at least 1 ms, and the slide at most the size", a.size, a.slide)
	}
	return nil
}

// windows lists the windows ts falls in, latest first (Flink's
// SlidingEventTimeWindows.assignWindows).
func (a WindowAssigner) windows(ts int64) []TimeWindow {
	last := ts - mod(ts-a.offset, a.slide)
	var out []TimeWindow
	for start := last; start > ts-a.size; start -= a.slide {
		out = append(out, TimeWindow{start, start + a.size})
	}
	return out
}

// mod is the remainder of a by b, never negative (Flink's
// TimeWindow.getWindowStartWithOffset, for timestamps before the epoch too).
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// WindowedStream is a keyed stream cut into windows; give it a function
// with Reduce, WindowAggregate or WindowProcess.
type WindowedStream[T any, K comparable] struct {
	ks       KeyedStream[T, K]
	a        WindowAssigner
	lateness int64
}

// AllowedLateness keeps each window's state d past its end: a late record
// within it is added and fires the window again, with all its records.
func (w WindowedStream[T, K]) AllowedLateness(d time.Duration) WindowedStream[T, K] {
	w.lateness = d.Milliseconds()
	return w
}

// Window cuts a keyed stream into windows.
func Window[T any, K comparable](ks KeyedStream[T, K], a WindowAssigner) WindowedStream[T, K] {
	return WindowedStream[T, K]{ks: ks, a: a}
}

// AggregateFunction aggregates a window's records incrementally (Flink's
// AggregateFunction): the window keeps only its accumulator.
type AggregateFunction[IN, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(in IN, acc ACC) ACC
	GetResult(acc ACC) OUT
}

// ProcessWindowFunction gets all of a window's records at once, with the
// key and the window (Flink's ProcessWindowFunction).
type ProcessWindowFunction[IN any, K comparable, OUT any] interface {
	Process(key K, w TimeWindow, elements []IN, out Collector[OUT]) error
}

// Reduce combines each window's records with f, and emits the result.
func (w WindowedStream[T, K]) Reduce(f func(a, b T) T) DataStream[T] {
	return Process(w.ks, &windowOperator[K, T, T, T]{a: w.a, lateness: w.lateness, add: func(acc T, ok bool, in T) T {
		if !ok {
			return in
		}
		return f(acc, in)
	}, fire: func(_ K, _ TimeWindow, acc T, out Collector[T]) error {
		out.Collect(acc)
		return nil
	}}).Name("Window")
}

// WindowAggregate aggregates each window's records with agg, and emits
// its result.
func WindowAggregate[T any, K comparable, ACC, OUT any](w WindowedStream[T, K], agg AggregateFunction[T, ACC, OUT]) DataStream[OUT] {
	return Process(w.ks, &windowOperator[K, T, ACC, OUT]{a: w.a, lateness: w.lateness, add: func(acc ACC, ok bool, in T) ACC {
		if !ok {
			acc = agg.CreateAccumulator()
		}
		return agg.Add(in, acc)
	}, fire: func(_ K, _ TimeWindow, acc ACC, out Collector[OUT]) error {
		out.Collect(agg.GetResult(acc))
		return nil
	}}).Name("Window")
}

// WindowProcess calls fn with each window's records once it fires.
func WindowProcess[T any, K comparable, OUT any](w WindowedStream[T, K], fn ProcessWindowFunction[T, K, OUT]) DataStream[OUT] {
	return Process(w.ks, &windowOperator[K, T, []T, OUT]{a: w.a, lateness: w.lateness, add: func(acc []T, _ bool, in T) []T {
		return append(acc, in)
	}, fire: fn.Process}).Name("Window")
}

// windowOperator keeps, per key, each open window's accumulator in map
// state (by the window's start), and fires a window with an event-time
// timer at its last millisecond.
type windowOperator[K comparable, T, ACC, OUT any] struct {
	a        WindowAssigner
	lateness int64
	add      func(acc ACC, ok bool, in T) ACC
	fire     func(key K, w TimeWindow, acc ACC, out Collector[OUT]) error
	accs     MapState[int64, ACC]
	// late counts the records dropped as late (Flink's
	// numLateRecordsDropped).
	late int64
}

func (o *windowOperator[K, T, ACC, OUT]) Open(ctx *Context[K]) (err error) {
	if err := o.a.check(); err != nil {
		return err
	}
	o.accs, err = GetMapState[int64, ACC](ctx, "window-contents")
	return err
}

func (o *windowOperator[K, T, ACC, OUT]) ProcessElement(ctx *Context[K], in T, out Collector[OUT]) error {
	ts := ctx.Timestamp()
	if ts == NoTimestamp {
		return fmt.Errorf("a record without a timestamp reached an event-time window: assign timestamps upstream with AssignTimestampsAndWatermarks")
	}
	timers := ctx.TimerService()
	wm := timers.CurrentWatermark()
	for _, w := range o.a.windows(ts) {
		if o.cleanupTime(w) <= wm {
			o.late++ // past its allowed lateness too: dropped
			continue
		}
		acc, ok := o.accs.Get(w.Start)
		acc = o.add(acc, ok, in)
		o.accs.Put(w.Start, acc)
		if o.lateness > 0 {
			timers.RegisterEventTimeTimer(o.cleanupTime(w))
		}
		if w.MaxTimestamp() > wm {
			timers.RegisterEventTimeTimer(w.MaxTimestamp())
			continue
		}
		// Late but within the allowed lateness: the window fires again
		// with the record, stamped as its first firing was.
		api.SetOutputTimestamp(ctx, w.MaxTimestamp())
		if err := o.fire(ctx.CurrentKey(), w, acc, out); err != nil {
			return err
		}
	}
	return nil
}

// cleanupTime is when a window's state goes: its end plus the allowed
// lateness (the end of time if that overflows, as in Flink).
func (o *windowOperator[K, T, ACC, OUT]) cleanupTime(w TimeWindow) int64 {
	c := w.MaxTimestamp() + o.lateness
	if c < w.MaxTimestamp() {
		return math.MaxInt64
	}
	return c
}

// OnTimer fires the window ending at ts and, with allowed lateness,
// drops the state of the window whose lateness ends at ts (one timer may
// be both).
func (o *windowOperator[K, T, ACC, OUT]) OnTimer(ctx *Context[K], ts int64, out Collector[OUT]) error {
	if o.lateness > 0 {
		o.accs.Remove(ts + 1 - o.lateness - o.a.size)
	}
	w := TimeWindow{Start: ts + 1 - o.a.size, End: ts + 1}
	acc, ok := o.accs.Get(w.Start)
	if !ok {
		return nil
	}
	if o.lateness == 0 {
		o.accs.Remove(w.Start)
	}
	return o.fire(ctx.CurrentKey(), w, acc, out)
}

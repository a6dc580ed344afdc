package stream

import (
	"fmt"
	"math"
	"time"

	"github.com/gflink/gflink/internal/api"
)

// Windows on a keyed stream (Flink's KeyedStream.window): an assigner puts
// each record into windows — tumbling, sliding or session, in event or
// processing time, or one global window — and a trigger decides when a
// window's function runs, by default once the watermark (or the clock)
// passes the window's end. An event-time window's result carries the
// window's last millisecond (End-1) as its timestamp. A record for a
// window the watermark has passed is late: it is dropped (or sent to
// SideOutputLateData's side output), unless the window's AllowedLateness
// has not passed either — then the window keeps its state that much longer
// and fires again with each late record. Event-time windows need
// timestamps: put AssignTimestampsAndWatermarks upstream. A window's
// contents and its trigger's state live in keyed state, so windows are
// checkpointed, restored and rescaled as all keyed state is.

// TimeWindow is the window [Start, End) in milliseconds.
type TimeWindow struct{ Start, End int64 }

// MaxTimestamp is the last millisecond in the window.
func (w TimeWindow) MaxTimestamp() int64 { return w.End - 1 }

// Intersects reports whether the windows overlap or touch (Flink's
// TimeWindow.intersects: session windows that touch merge).
func (w TimeWindow) Intersects(o TimeWindow) bool { return w.Start <= o.End && w.End >= o.Start }

// Cover is the smallest window holding both.
func (w TimeWindow) Cover(o TimeWindow) TimeWindow {
	return TimeWindow{min(w.Start, o.Start), max(w.End, o.End)}
}

// globalWindow is GlobalWindows' one window: all of time.
var globalWindow = TimeWindow{math.MinInt64, math.MaxInt64}

// WindowAssigner puts a record into windows by its timestamp (event time)
// or by the clock when it arrives (processing time).
type WindowAssigner struct {
	size, slide, offset, gap int64
	processing, global       bool
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

// EventTimeSessionWindows put a key's records closer than gap to one
// another into one window, from the first record's timestamp to the last
// one's plus gap (Flink's EventTimeSessionWindows.withGap).
func EventTimeSessionWindows(gap time.Duration) WindowAssigner {
	return WindowAssigner{gap: gap.Milliseconds()}
}

// TumblingProcessingTimeWindows are tumbling windows of the clock's time
// when records arrive. As in Flink's streaming mode, windows whose end has
// not come when a bounded input ends do not fire.
func TumblingProcessingTimeWindows(size time.Duration) WindowAssigner {
	a := TumblingEventTimeWindows(size)
	a.processing = true
	return a
}

// SlidingProcessingTimeWindows are sliding windows of the clock's time
// when records arrive.
func SlidingProcessingTimeWindows(size, slide time.Duration) WindowAssigner {
	a := SlidingEventTimeWindows(size, slide)
	a.processing = true
	return a
}

// ProcessingTimeSessionWindows are session windows of the clock's time
// when records arrive.
func ProcessingTimeSessionWindows(gap time.Duration) WindowAssigner {
	a := EventTimeSessionWindows(gap)
	a.processing = true
	return a
}

// GlobalWindows puts every record of a key into one window that never
// ends, and needs no timestamps: give it a Trigger (CountTrigger, say),
// or it never fires.
func GlobalWindows() WindowAssigner { return WindowAssigner{global: true} }

// WithOffset shifts the windows' starts by offset (a time zone's, for
// daily windows).
func (a WindowAssigner) WithOffset(offset time.Duration) WindowAssigner {
	a.offset = offset.Milliseconds()
	return a
}

func (a WindowAssigner) merging() bool { return a.gap != 0 }

// IsEventTime reports whether the assigner's windows are in event time.
func (a WindowAssigner) IsEventTime() bool { return !a.processing }

// String names the assigner as Flink does, sizes in milliseconds.
func (a WindowAssigner) String() string {
	kind := "EventTime"
	if a.processing {
		kind = "ProcessingTime"
	}
	switch {
	case a.global:
		return "GlobalWindows()"
	case a.merging():
		return fmt.Sprintf("%sSessionWindows(%d)", kind, a.gap)
	case a.size == a.slide:
		return fmt.Sprintf("Tumbling%sWindows(%d)", kind, a.size)
	}
	return fmt.Sprintf("Sliding%sWindows(%d, %d)", kind, a.size, a.slide)
}

func (a WindowAssigner) check() error {
	switch {
	case a.global:
		return nil
	case a.merging():
		if a.gap <= 0 {
			return fmt.Errorf("session window gap %d ms: it must be at least 1 ms", a.gap)
		}
		return nil
	case a.size <= 0 || a.slide <= 0 || a.slide > a.size:
		return fmt.Errorf("window size %d ms and slide %d ms: both must be at least 1 ms, and the slide at most the size", a.size, a.slide)
	}
	return nil
}

// windows lists the windows ts falls in, latest first (Flink's
// SlidingEventTimeWindows.assignWindows).
func (a WindowAssigner) windows(ts int64, dst []TimeWindow) []TimeWindow {
	switch {
	case a.global:
		return append(dst, globalWindow)
	case a.merging():
		end := ts + a.gap
		if end < ts {
			end = math.MaxInt64
		}
		return append(dst, TimeWindow{ts, end})
	}
	last := ts - mod(ts-a.offset, a.slide)
	for start := last; start > ts-a.size; start -= a.slide {
		dst = append(dst, TimeWindow{start, start + a.size})
	}
	return dst
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
// with Reduce, WindowReduce, WindowAggregate, WindowAggregateProcess or
// WindowProcess.
type WindowedStream[T any, K comparable] struct {
	ks       KeyedStream[T, K]
	a        WindowAssigner
	trigger  Trigger[T]
	lateness int64
	lateTag  *OutputTag[T]
}

// Window cuts a keyed stream into windows.
func Window[T any, K comparable](ks KeyedStream[T, K], a WindowAssigner) WindowedStream[T, K] {
	return WindowedStream[T, K]{ks: ks, a: a}
}

// AllowedLateness keeps each event-time window's state d past its end: a
// late record within it is added and fires the window again, with all its
// records.
func (w WindowedStream[T, K]) AllowedLateness(d time.Duration) WindowedStream[T, K] {
	w.lateness = d.Milliseconds()
	return w
}

// Trigger replaces the assigner's default trigger.
func (w WindowedStream[T, K]) Trigger(t Trigger[T]) WindowedStream[T, K] {
	w.trigger = t
	return w
}

// SideOutputLateData sends the records dropped as late to the side output
// tag (read it with GetSideOutput on the window's result).
func (w WindowedStream[T, K]) SideOutputLateData(tag OutputTag[T]) WindowedStream[T, K] {
	w.lateTag = &tag
	return w
}

// AggregateFunction aggregates a window's records incrementally (Flink's
// AggregateFunction): the window keeps only its accumulator. Merge
// combines the accumulators of session windows that merge.
type AggregateFunction[IN, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(in IN, acc ACC) ACC
	GetResult(acc ACC) OUT
	Merge(a, b ACC) ACC
}

// ProcessWindowFunction gets all of a window's records at once, with the
// key and the window (Flink's ProcessWindowFunction); after a reduce or an
// aggregate, elements is the one pre-aggregated result.
type ProcessWindowFunction[IN any, K comparable, OUT any] interface {
	Process(key K, w TimeWindow, elements []IN, out Collector[OUT]) error
}

// ProcessWindowFunc is a ProcessWindowFunction as a plain function.
type ProcessWindowFunc[IN any, K comparable, OUT any] func(key K, w TimeWindow, elements []IN, out Collector[OUT]) error

// Process calls f.
func (f ProcessWindowFunc[IN, K, OUT]) Process(key K, w TimeWindow, elements []IN, out Collector[OUT]) error {
	return f(key, w, elements, out)
}

func reduceAdd[T any](f func(a, b T) T) func(T, bool, T) T {
	return func(acc T, ok bool, in T) T {
		if !ok {
			return in
		}
		return f(acc, in)
	}
}

// windowFns are a window operator's functions over its accumulator ACC:
// add a record, merge two (sessions), fire a window.
type windowFns[K comparable, T, ACC, OUT any] struct {
	add   func(acc ACC, ok bool, in T) ACC
	merge func(a, b ACC) ACC
	fire  func(key K, w TimeWindow, acc ACC, out Collector[OUT]) error
}

// Reduce combines each window's records with f, and emits the result.
func (w WindowedStream[T, K]) Reduce(f func(a, b T) T) DataStream[T] {
	return windowed(w, "Reduce", func() windowFns[K, T, T, T] {
		return windowFns[K, T, T, T]{reduceAdd(f), f, func(_ K, _ TimeWindow, acc T, out Collector[T]) error {
			out.Collect(acc)
			return nil
		}}
	})
}

// WindowReduce combines each window's records with f, and calls fn with
// the result, the key and the window.
func WindowReduce[T any, K comparable, OUT any](w WindowedStream[T, K], f func(a, b T) T, fn ProcessWindowFunction[T, K, OUT]) DataStream[OUT] {
	return windowed(w, "Reduce", func() windowFns[K, T, T, OUT] {
		fn := api.CloneFunction(fn)
		return windowFns[K, T, T, OUT]{reduceAdd(f), f, func(key K, win TimeWindow, acc T, out Collector[OUT]) error {
			return fn.Process(key, win, []T{acc}, out)
		}}
	})
}

func aggregateAdd[T, ACC, OUT any](agg AggregateFunction[T, ACC, OUT]) func(ACC, bool, T) ACC {
	return func(acc ACC, ok bool, in T) ACC {
		if !ok {
			acc = agg.CreateAccumulator()
		}
		return agg.Add(in, acc)
	}
}

// WindowAggregate aggregates each window's records with agg, and emits
// its result.
func WindowAggregate[T any, K comparable, ACC, OUT any](w WindowedStream[T, K], agg AggregateFunction[T, ACC, OUT]) DataStream[OUT] {
	return windowed(w, "Aggregate", func() windowFns[K, T, ACC, OUT] {
		agg := api.CloneFunction(agg)
		return windowFns[K, T, ACC, OUT]{aggregateAdd(agg), agg.Merge, func(_ K, _ TimeWindow, acc ACC, out Collector[OUT]) error {
			out.Collect(agg.GetResult(acc))
			return nil
		}}
	})
}

// WindowAggregateProcess aggregates each window's records with agg, and
// calls fn with its result, the key and the window.
func WindowAggregateProcess[T any, K comparable, ACC, AOUT, OUT any](w WindowedStream[T, K], agg AggregateFunction[T, ACC, AOUT], fn ProcessWindowFunction[AOUT, K, OUT]) DataStream[OUT] {
	return windowed(w, "Aggregate", func() windowFns[K, T, ACC, OUT] {
		agg, fn := api.CloneFunction(agg), api.CloneFunction(fn)
		return windowFns[K, T, ACC, OUT]{aggregateAdd(agg), agg.Merge, func(key K, win TimeWindow, acc ACC, out Collector[OUT]) error {
			return fn.Process(key, win, []AOUT{agg.GetResult(acc)}, out)
		}}
	})
}

// WindowProcess calls fn with each window's records once it fires.
func WindowProcess[T any, K comparable, OUT any](w WindowedStream[T, K], fn ProcessWindowFunction[T, K, OUT]) DataStream[OUT] {
	return windowed(w, "Process", func() windowFns[K, T, []T, OUT] {
		fn := api.CloneFunction(fn)
		return windowFns[K, T, []T, OUT]{func(acc []T, _ bool, in T) []T { return append(acc, in) },
			func(a, b []T) []T { return append(a, b...) }, fn.Process}
	})
}

// windowed adds the window operator to the stream; fns makes each
// subtask's functions (with its own copy of the user's function objects).
func windowed[T any, K comparable, ACC, OUT any](w WindowedStream[T, K], fname string, fns func() windowFns[K, T, ACC, OUT]) DataStream[OUT] {
	trig := w.trigger
	if trig == nil {
		trig = EventTimeTrigger[T]()
		if w.a.processing {
			trig = ProcessingTimeTrigger[T]()
		}
	}
	op := &windowOperator[K, T, ACC, OUT]{a: w.a, trigger: trig, lateness: w.lateness, lateTag: w.lateTag, fns: fns}
	if w.a.processing {
		op.lateness = 0 // processing time has no late records
	}
	return Process(w.ks, op).Name(fmt.Sprintf("Window(%v, %v, %s)", w.a, trig, fname))
}

// AllWindowedStream is a whole stream cut into windows (Flink's
// windowAll): one subtask sees every record.
type AllWindowedStream[T any] struct{ w WindowedStream[T, int] }

// WindowAll cuts a stream, not keyed, into windows; the window operator
// runs with parallelism 1.
func WindowAll[T any](s DataStream[T], a WindowAssigner) AllWindowedStream[T] {
	return AllWindowedStream[T]{Window(KeyBy(s, func(T) int { return 0 }), a)}
}

// AllowedLateness is WindowedStream.AllowedLateness.
func (w AllWindowedStream[T]) AllowedLateness(d time.Duration) AllWindowedStream[T] {
	return AllWindowedStream[T]{w.w.AllowedLateness(d)}
}

// Trigger is WindowedStream.Trigger.
func (w AllWindowedStream[T]) Trigger(t Trigger[T]) AllWindowedStream[T] {
	return AllWindowedStream[T]{w.w.Trigger(t)}
}

// SideOutputLateData is WindowedStream.SideOutputLateData.
func (w AllWindowedStream[T]) SideOutputLateData(tag OutputTag[T]) AllWindowedStream[T] {
	return AllWindowedStream[T]{w.w.SideOutputLateData(tag)}
}

// Reduce combines each window's records with f.
func (w AllWindowedStream[T]) Reduce(f func(a, b T) T) DataStream[T] {
	return w.w.Reduce(f).Parallelism(1)
}

// WindowAllAggregate aggregates each window's records with agg.
func WindowAllAggregate[T, ACC, OUT any](w AllWindowedStream[T], agg AggregateFunction[T, ACC, OUT]) DataStream[OUT] {
	return WindowAggregate(w.w, agg).Parallelism(1)
}

// ProcessAllWindowFunction gets all of a window's records at once (Flink's
// ProcessAllWindowFunction).
type ProcessAllWindowFunction[IN, OUT any] interface {
	Process(w TimeWindow, elements []IN, out Collector[OUT]) error
}

// WindowAllProcess calls fn with each window's records once it fires.
func WindowAllProcess[T, OUT any](w AllWindowedStream[T], fn ProcessAllWindowFunction[T, OUT]) DataStream[OUT] {
	return WindowProcess(w.w, ProcessWindowFunc[T, int, OUT](func(_ int, win TimeWindow, elements []T, out Collector[OUT]) error {
		return fn.Process(win, elements, out)
	})).Parallelism(1)
}

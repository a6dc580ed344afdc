package api

import (
	"math"
	"time"
)

// Event time, as Flink's DataStream API has it: a timestamp assigner gives
// each record its event time, and a watermark generator says how far event
// time has progressed — a watermark t promises that no record with a
// timestamp ≤ t follows (records that do are late). Event-time timers fire
// once the watermark passes them.

// WatermarkOutput is where a generator emits watermarks and says whether
// its input is idle (Flink's WatermarkOutput).
type WatermarkOutput interface {
	// EmitWatermark emits a watermark; one not above the last emitted is
	// ignored (watermarks never go back).
	EmitWatermark(ts int64)
	// MarkIdle says no records come for now: the downstream operators
	// leave this input out of their watermark until it is active again.
	MarkIdle()
	// MarkActive ends idleness (emitting a watermark or a record does too).
	MarkActive()
}

// WatermarkGenerator generates watermarks from the records' timestamps
// (OnEvent, for punctuated watermarks) or periodically
// (OnPeriodicEmit, every pipeline.auto-watermark-interval).
type WatermarkGenerator[T any] interface {
	OnEvent(event T, timestamp int64, out WatermarkOutput)
	OnPeriodicEmit(out WatermarkOutput)
}

// TimestampAssigner gives a record its event time (ms). recordTimestamp is
// the timestamp the record already has, or NoTimestamp.
type TimestampAssigner[T any] func(event T, recordTimestamp int64) int64

// NoTimestamp is the timestamp of a record that has none (Flink's
// Long.MIN_VALUE).
const NoTimestamp = math.MinInt64

// WatermarkStrategy says how a stream's records get their timestamps and
// watermarks (Flink's WatermarkStrategy): build one with
// ForBoundedOutOfOrderness, ForMonotonousTimestamps, NoWatermarks or
// ForGenerator, then WithTimestampAssigner and WithIdleness.
type WatermarkStrategy[T any] struct {
	generator func() WatermarkGenerator[T]
	assigner  TimestampAssigner[T]
	idleness  time.Duration
}

// ForBoundedOutOfOrderness expects records at most d out of order: the
// watermark trails the largest timestamp seen by d (and 1 ms, as Flink's
// BoundedOutOfOrdernessWatermarks), emitted periodically.
func ForBoundedOutOfOrderness[T any](d time.Duration) WatermarkStrategy[T] {
	ms := d.Milliseconds()
	return WatermarkStrategy[T]{generator: func() WatermarkGenerator[T] { return newBoundedOutOfOrderness[T](ms) }}
}

// ForMonotonousTimestamps expects ascending timestamps: the watermark is
// the largest timestamp seen (less 1 ms).
func ForMonotonousTimestamps[T any]() WatermarkStrategy[T] { return ForBoundedOutOfOrderness[T](0) }

// NoWatermarks assigns timestamps but generates no watermarks: event time
// does not progress until the input ends.
func NoWatermarks[T any]() WatermarkStrategy[T] {
	return WatermarkStrategy[T]{generator: func() WatermarkGenerator[T] { return noWatermarks[T]{} }}
}

// ForGenerator uses a generator of one's own; make is called once per
// subtask.
func ForGenerator[T any](make func() WatermarkGenerator[T]) WatermarkStrategy[T] {
	return WatermarkStrategy[T]{generator: make}
}

// WithTimestampAssigner sets how records get their timestamps.
func (s WatermarkStrategy[T]) WithTimestampAssigner(f TimestampAssigner[T]) WatermarkStrategy[T] {
	s.assigner = f
	return s
}

// WithIdleness marks the input idle once no record came for d, so that
// downstream operators' watermarks progress without it; the next record
// makes it active again.
func (s WatermarkStrategy[T]) WithIdleness(d time.Duration) WatermarkStrategy[T] {
	s.idleness = d
	return s
}

// Idleness is the strategy's idle timeout (0: none).
func (s WatermarkStrategy[T]) Idleness() time.Duration { return s.idleness }

// TimestampAssigner is the strategy's assigner: the record's own timestamp
// if none was set.
func (s WatermarkStrategy[T]) TimestampAssigner() TimestampAssigner[T] {
	if s.assigner == nil {
		return func(_ T, ts int64) int64 { return ts }
	}
	return s.assigner
}

// CreateGenerator makes one subtask's generator, wrapped for idleness if
// the strategy has it; now is the processing-time clock.
func (s WatermarkStrategy[T]) CreateGenerator(now func() time.Time) WatermarkGenerator[T] {
	var g WatermarkGenerator[T] = noWatermarks[T]{}
	if s.generator != nil {
		g = s.generator()
	}
	if s.idleness > 0 {
		g = &withIdleness[T]{g: g, timeout: s.idleness, now: now}
	}
	return g
}

// boundedOutOfOrderness is Flink's BoundedOutOfOrdernessWatermarks.
type boundedOutOfOrderness[T any] struct {
	maxTS, delay int64
}

func newBoundedOutOfOrderness[T any](delay int64) *boundedOutOfOrderness[T] {
	// Start so that the first watermark is Long.MIN_VALUE, not an overflow.
	return &boundedOutOfOrderness[T]{maxTS: math.MinInt64 + delay + 1, delay: delay}
}

func (g *boundedOutOfOrderness[T]) OnEvent(_ T, ts int64, _ WatermarkOutput) {
	g.maxTS = max(g.maxTS, ts)
}

func (g *boundedOutOfOrderness[T]) OnPeriodicEmit(out WatermarkOutput) {
	out.EmitWatermark(g.maxTS - g.delay - 1)
}

type noWatermarks[T any] struct{}

func (noWatermarks[T]) OnEvent(T, int64, WatermarkOutput) {}
func (noWatermarks[T]) OnPeriodicEmit(WatermarkOutput)    {}

// withIdleness is Flink's WatermarksWithIdleness: the input is idle once
// no record came for the timeout, checked at each periodic emit.
type withIdleness[T any] struct {
	g        WatermarkGenerator[T]
	timeout  time.Duration
	now      func() time.Time
	counter  int64 // records seen
	lastSeen int64 // counter at the last check
	since    time.Time
	idle     bool
}

func (w *withIdleness[T]) OnEvent(e T, ts int64, out WatermarkOutput) {
	w.g.OnEvent(e, ts, out)
	w.counter++
	if w.idle {
		w.idle = false
		out.MarkActive()
	}
}

func (w *withIdleness[T]) OnPeriodicEmit(out WatermarkOutput) {
	now := w.now()
	if w.counter != w.lastSeen || w.since.IsZero() {
		w.lastSeen, w.since = w.counter, now
	}
	if now.Sub(w.since) >= w.timeout {
		if !w.idle {
			w.idle = true
			out.MarkIdle()
		}
		return
	}
	w.g.OnPeriodicEmit(out)
}

// TimestampedCollector is implemented by the collector a source reader
// gets: CollectWithTimestamp emits a record with the timestamp its source
// holds (a Kafka record's), the recordTimestamp a TimestampAssigner is
// given (Flink's SourceOutput.collect(record, timestamp)).
type TimestampedCollector[T any] interface {
	CollectWithTimestamp(v T, ts int64)
}

// SplitCollector is implemented by the collector a source reader gets:
// ForSplit(id) is the collector of one split's records. With a watermark
// strategy on the source (FromSource with one), each split has its own
// generator and the source's watermark is the minimum over its splits
// that are not idle (Flink's split-local watermarks): a Kafka partition
// that falls behind holds event time back, an idle one does not with
// WithIdleness. ReleaseSplit(id) says a split has ended.
type SplitCollector[T any] interface {
	ForSplit(id string) Collector[T]
	ReleaseSplit(id string)
}

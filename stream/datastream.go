package stream

import (
	"github.com/gflink/gflink/engine"
)

// DataStream is a stream of records of type T. Its methods and the
// functions that take it add operators to the job; nothing runs until the
// job does.
type DataStream[T any] struct{ s engine.DataStream[T] }

// UID sets the operator's uid, the name its state has in snapshots. Set it
// on every stateful operator: a derived uid changes when the job's
// structure does, and state that cannot be matched to an operator cannot
// be restored (run -s refuses, unless --allowNonRestoredState).
func (s DataStream[T]) UID(uid string) DataStream[T] { return DataStream[T]{s.s.UID(uid)} }

// Name sets the operator's name, shown in task names, logs and the REST API.
func (s DataStream[T]) Name(name string) DataStream[T] { return DataStream[T]{s.s.Name(name)} }

// Parallelism sets the operator's parallelism (default: the
// environment's). Operators of different parallelism are connected by
// round-robin, as Flink's rebalance.
func (s DataStream[T]) Parallelism(p int) DataStream[T] { return DataStream[T]{s.s.Parallelism(p)} }

// MaxParallelism sets the operator's max parallelism: the number of key
// groups of a keyed operator, which bounds how far it can be rescaled.
func (s DataStream[T]) MaxParallelism(p int) DataStream[T] {
	return DataStream[T]{s.s.MaxParallelism(p)}
}

// AssignTimestampsAndWatermarks gives the stream's records their event
// time and generates watermarks with strategy, in an operator chained to
// the one before (Flink's assignTimestampsAndWatermarks): a watermark t
// says no record with a timestamp ≤ t follows, and event-time timers of
// the keyed functions after it fire once it passes them. Periodic
// generators emit every pipeline.auto-watermark-interval (default
// 200 ms); watermarks from upstream are held back, but the one that ends
// event time at the end of a bounded input or stop --drain.
func (s DataStream[T]) AssignTimestampsAndWatermarks(strategy WatermarkStrategy[T]) DataStream[T] {
	return DataStream[T]{s.s.AssignTimestampsAndWatermarks(strategy)}
}

// Rebalance sends the records to the next operator round-robin over its
// subtasks.
func (s DataStream[T]) Rebalance() DataStream[T] { return DataStream[T]{s.s.Rebalance()} }

// Shuffle sends the records to the next operator's subtasks at random.
func (s DataStream[T]) Shuffle() DataStream[T] { return DataStream[T]{s.s.Shuffle()} }

// Broadcast sends every record to every subtask of the next operator.
// The subtasks receive the same values: a record holding a pointer, slice
// or map must not be modified by them.
func (s DataStream[T]) Broadcast() DataStream[T] { return DataStream[T]{s.s.Broadcast()} }

// Filter keeps the records for which f returns true.
func (s DataStream[T]) Filter(f func(T) bool) DataStream[T] { return DataStream[T]{s.s.Filter(f)} }

// FilterErr is Filter for a predicate that can fail: an error fails the
// task.
func (s DataStream[T]) FilterErr(f func(T) (bool, error)) DataStream[T] {
	return DataStream[T]{s.s.FilterErr(f)}
}

// SinkTo writes the stream to a sink.
func (s DataStream[T]) SinkTo(sink Sink[T]) DataStreamSink { return DataStreamSink{s.s.SinkTo(sink)} }

// Print writes every record to the environment's Stdout, a line each, as
// fmt's %v renders it (or its AppendTo or String method). As in Flink,
// lines are prefixed with "<subtask>> " when the sink runs with a
// parallelism above 1. Printing is not transactional: after a recovery,
// lines may appear again.
func (s DataStream[T]) Print() DataStreamSink { return DataStreamSink{s.s.Print()} }

// FromSource adds a source: the start of a stream.
func FromSource[T any](env *Environment, src Source[T], name string) DataStream[T] {
	return DataStream[T]{engine.FromSource[T](env.e, src, name)}
}

// FromSourceWithWatermarks adds a source whose records get their event
// time and watermarks from strategy at the source, per split (Flink's
// env.fromSource(source, strategy, name)): each Kafka partition has its
// own generator and the source's watermark is the minimum over the
// partitions that are not idle — a partition that is behind holds event
// time back, and one without records stalls it unless the strategy has
// WithIdleness. A source that does not name its splits has one generator
// per subtask, as after AssignTimestampsAndWatermarks.
func FromSourceWithWatermarks[T any](env *Environment, src Source[T], strategy WatermarkStrategy[T], name string) DataStream[T] {
	return DataStream[T]{engine.FromSourceWithWatermarks[T](env.e, src, strategy, name)}
}

// Map applies f to every record.
func Map[IN, OUT any](s DataStream[IN], f func(IN) OUT) DataStream[OUT] {
	return DataStream[OUT]{engine.Map(s.s, f)}
}

// MapErr is Map for a function that can fail: an error fails the task.
func MapErr[IN, OUT any](s DataStream[IN], f func(IN) (OUT, error)) DataStream[OUT] {
	return DataStream[OUT]{engine.MapErr(s.s, f)}
}

// FlatMap calls f for every record; f emits any number of records.
func FlatMap[IN, OUT any](s DataStream[IN], f func(IN, Collector[OUT])) DataStream[OUT] {
	return DataStream[OUT]{engine.FlatMap(s.s, f)}
}

// FlatMapErr is FlatMap for a function that can fail: an error fails the
// task (the records it emitted before are kept).
func FlatMapErr[IN, OUT any](s DataStream[IN], f func(IN, Collector[OUT]) error) DataStream[OUT] {
	return DataStream[OUT]{engine.FlatMapErr(s.s, f)}
}

// Union merges streams of one type; the records of different inputs keep
// no order between them.
func Union[T any](first DataStream[T], more ...DataStream[T]) DataStream[T] {
	in := make([]engine.DataStream[T], len(more))
	for i, m := range more {
		in[i] = m.s
	}
	return DataStream[T]{engine.Union(first.s, in...)}
}

// KeyedStream is a stream partitioned by key: all records with one key go
// to the same subtask, which keeps that key's state.
type KeyedStream[T any, K comparable] struct{ ks engine.KeyedStream[T, K] }

// KeyBy partitions a stream by the key that key extracts. Keys are hashed
// into key groups (pipeline.max-parallelism of them) with a stable hash,
// so keyed state can be restored at another parallelism.
func KeyBy[T any, K comparable](s DataStream[T], key func(T) K) KeyedStream[T, K] {
	return KeyedStream[T, K]{engine.KeyBy(s.s, key)}
}

// WithKeySerializer replaces the built-in serializer of the key type,
// which hashes keys and stores them in keyed state.
func (ks KeyedStream[T, K]) WithKeySerializer(ser KeySerializer[K]) KeyedStream[T, K] {
	return KeyedStream[T, K]{ks.ks.WithKeySerializer(ser)}
}

// Process applies a keyed process function, which may keep keyed state
// (GetValueState, GetListState, GetMapState, declared in Open) and set
// timers. Each subtask gets its own copy of fn when fn is a pointer to a
// struct, so fields set in Open belong to one subtask.
func Process[T any, K comparable, OUT any](ks KeyedStream[T, K], fn KeyedProcessFunction[K, T, OUT]) DataStream[OUT] {
	return DataStream[OUT]{engine.Process(ks.ks, fn)}
}

// DataStreamSink is the end of a stream.
type DataStreamSink struct{ s engine.DataStreamSink }

// UID sets the sink's uid (a sink with two-phase commit has state).
func (s DataStreamSink) UID(uid string) DataStreamSink { return DataStreamSink{s.s.UID(uid)} }

// Name sets the sink's name.
func (s DataStreamSink) Name(name string) DataStreamSink { return DataStreamSink{s.s.Name(name)} }

// Parallelism sets the sink's parallelism.
func (s DataStreamSink) Parallelism(p int) DataStreamSink {
	return DataStreamSink{s.s.Parallelism(p)}
}

// MapFunc applies a map function object to every record (Flink's
// RichMapFunction): one that may also implement RichOpener, to set itself
// up and declare operator state, and Closer. Each subtask gets its own
// copy of fn when it is a pointer to a struct.
func MapFunc[IN, OUT any](s DataStream[IN], fn MapFunction[IN, OUT]) DataStream[OUT] {
	return DataStream[OUT]{engine.MapFunc(s.s, fn)}
}

// FlatMapFunc applies a flat-map function object to every record; see
// MapFunc.
func FlatMapFunc[IN, OUT any](s DataStream[IN], fn FlatMapFunction[IN, OUT]) DataStream[OUT] {
	return DataStream[OUT]{engine.FlatMapFunc(s.s, fn)}
}

// FilterFunc keeps the records a filter function object accepts; see
// MapFunc.
func FilterFunc[T any](s DataStream[T], fn FilterFunction[T]) DataStream[T] {
	return DataStream[T]{engine.FilterFunc(s.s, fn)}
}

package stream

import (
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/internal/api"
)

// Two-input operators (Flink's ConnectedStreams): records of both inputs
// reach one function, which sees which input each came from. The inputs
// travel as one stream of tagged records, so a two-input task aligns
// checkpoint barriers over the channels of both inputs and its watermark
// is the minimum over both, as in Flink's two-input tasks.

// Either is a record of one of two inputs: Second tells which field holds
// it. It is how the two inputs of a connected stream travel (and how their
// records in flight are stored in unaligned checkpoints).
type Either[A, B any] struct {
	Second bool `json:"second,omitempty"`
	First  A    `json:"first"`
	Other  B    `json:"other"`
}

// ConnectedStreams are two streams whose records go to one function.
type ConnectedStreams[A, B any] struct {
	a DataStream[A]
	b DataStream[B]
}

// Connect connects two streams, of any types (Flink's connect).
func Connect[A, B any](a DataStream[A], b DataStream[B]) ConnectedStreams[A, B] {
	return ConnectedStreams[A, B]{a, b}
}

// tagged turns both inputs into streams of Either, each in an operator
// chained to its input.
func (c ConnectedStreams[A, B]) tagged() (DataStream[Either[A, B]], DataStream[Either[A, B]]) {
	first := Map(c.a, func(v A) Either[A, B] { return Either[A, B]{First: v} }).Name("First")
	second := Map(c.b, func(v B) Either[A, B] { return Either[A, B]{Second: true, Other: v} }).Name("Second")
	return first, second
}

// CoProcessFunction processes the records of two connected streams, not
// keyed (Flink's CoProcessFunction, without timers). It may also implement
// RichOpener (for operator state) and Closer.
type CoProcessFunction[A, B, OUT any] interface {
	ProcessElement1(in A, out Collector[OUT]) error
	ProcessElement2(in B, out Collector[OUT]) error
}

// CoProcess applies fn to two connected streams.
func CoProcess[A, B, OUT any](c ConnectedStreams[A, B], fn CoProcessFunction[A, B, OUT]) DataStream[OUT] {
	first, second := c.tagged()
	return FlatMapFunc(Union(first, second), &coFlatMap[A, B, OUT]{fn: fn}).Name("CoProcess")
}

// coFlatMap runs a CoProcessFunction as a flat map over the tagged union.
type coFlatMap[A, B, OUT any] struct{ fn CoProcessFunction[A, B, OUT] }

func (f *coFlatMap[A, B, OUT]) Open(ctx *RuntimeContext) error {
	f.fn = api.CloneFunction(f.fn)
	if o, ok := f.fn.(RichOpener); ok {
		return o.Open(ctx)
	}
	return nil
}

func (f *coFlatMap[A, B, OUT]) FlatMap(in Either[A, B], out Collector[OUT]) error {
	if in.Second {
		return f.fn.ProcessElement2(in.Other, out)
	}
	return f.fn.ProcessElement1(in.First, out)
}

func (f *coFlatMap[A, B, OUT]) Close() error {
	if c, ok := f.fn.(Closer); ok {
		return c.Close()
	}
	return nil
}

// KeyedConnectedStreams are two connected streams partitioned by a key of
// one type: the records of both inputs with one key reach the same
// subtask, and share its keyed state and timers.
type KeyedConnectedStreams[A, B any, K comparable] struct {
	ks KeyedStream[Either[A, B], K]
}

// KeyConnected partitions two connected streams by key (Flink's
// ConnectedStreams.keyBy).
func KeyConnected[A, B any, K comparable](c ConnectedStreams[A, B], keyA func(A) K, keyB func(B) K) KeyedConnectedStreams[A, B, K] {
	first, second := c.tagged()
	key := func(e Either[A, B]) K {
		if e.Second {
			return keyB(e.Other)
		}
		return keyA(e.First)
	}
	return KeyedConnectedStreams[A, B, K]{KeyedStream[Either[A, B], K]{engine.KeyByUnion(key, first.s, second.s)}}
}

// KeyedCoProcessFunction processes the records of two keyed connected
// streams with the record's key current (Flink's KeyedCoProcessFunction):
// keyed state and timers are shared by both inputs. It may also implement
// Opener, TimerHandler and Closer, as a KeyedProcessFunction does.
type KeyedCoProcessFunction[K comparable, A, B, OUT any] interface {
	ProcessElement1(ctx *Context[K], in A, out Collector[OUT]) error
	ProcessElement2(ctx *Context[K], in B, out Collector[OUT]) error
}

// KeyedCoProcess applies fn to two keyed connected streams.
func KeyedCoProcess[A, B any, K comparable, OUT any](c KeyedConnectedStreams[A, B, K], fn KeyedCoProcessFunction[K, A, B, OUT]) DataStream[OUT] {
	return Process(c.ks, &keyedCo[K, A, B, OUT]{fn: fn}).Name("KeyedCoProcess")
}

// keyedCo runs a KeyedCoProcessFunction as a keyed process function over
// the tagged records.
type keyedCo[K comparable, A, B, OUT any] struct {
	fn KeyedCoProcessFunction[K, A, B, OUT]
}

func (f *keyedCo[K, A, B, OUT]) Open(ctx *Context[K]) error {
	f.fn = api.CloneFunction(f.fn)
	if o, ok := f.fn.(Opener[K]); ok {
		return o.Open(ctx)
	}
	return nil
}

func (f *keyedCo[K, A, B, OUT]) ProcessElement(ctx *Context[K], in Either[A, B], out Collector[OUT]) error {
	if in.Second {
		return f.fn.ProcessElement2(ctx, in.Other, out)
	}
	return f.fn.ProcessElement1(ctx, in.First, out)
}

func (f *keyedCo[K, A, B, OUT]) OnTimer(ctx *Context[K], ts int64, out Collector[OUT]) error {
	if h, ok := f.fn.(TimerHandler[K, OUT]); ok {
		return h.OnTimer(ctx, ts, out)
	}
	return nil
}

func (f *keyedCo[K, A, B, OUT]) Close() error {
	if c, ok := f.fn.(Closer); ok {
		return c.Close()
	}
	return nil
}

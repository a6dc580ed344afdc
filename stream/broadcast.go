package stream

import (
	"fmt"
	"iter"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/internal/api"
)

// Broadcast state (Flink's broadcast state pattern): a low-rate stream of
// rules or configuration reaches every subtask of a keyed operator, which
// keeps it in broadcast state — a map each subtask holds the same copy of —
// and reads it while processing the keyed stream. The broadcast records
// travel on an exchange of their own into the keyed operator's task, so
// the task aligns checkpoint barriers over both inputs and its watermark
// is the minimum over both (a broadcast input without watermarks holds
// event time back until it ends, as in Flink).

// BroadcastState is a map every subtask holds the same copy of; see
// GetBroadcastState.
type BroadcastState[K comparable, V any] = api.BroadcastState[K, V]

// ReadOnlyBroadcastState is the view ProcessElement gets of a broadcast
// state: only ProcessBroadcastElement changes it, so that every subtask's
// copy stays the same.
type ReadOnlyBroadcastState[K comparable, V any] interface {
	Get(k K) (V, bool)
	Contains(k K) bool
	Len() int
	All() iter.Seq2[K, V]
}

// MapStateDescriptor names a broadcast state and gives its key and value
// types (Flink's MapStateDescriptor passed to broadcast).
type MapStateDescriptor[K comparable, V any] struct{ name string }

// NewMapStateDescriptor describes the broadcast state called name.
func NewMapStateDescriptor[K comparable, V any](name string) MapStateDescriptor[K, V] {
	return MapStateDescriptor[K, V]{name: name}
}

// Name is the state's name.
func (d MapStateDescriptor[K, V]) Name() string { return d.name }

func (d MapStateDescriptor[K, V]) declare(rc *RuntimeContext) (any, error) {
	return api.GetBroadcastState[K, V](rc, d.name)
}

// BroadcastStateDescriptor is a MapStateDescriptor of any types.
type BroadcastStateDescriptor interface {
	Name() string
	declare(rc *RuntimeContext) (any, error)
}

// BroadcastStream is a stream whose every record goes to every subtask of
// the operator it is connected to, with the broadcast states that
// operator keeps (Flink's BroadcastStream).
type BroadcastStream[B any] struct {
	s     DataStream[B]
	descs []BroadcastStateDescriptor
}

// Broadcast makes s a broadcast stream with the given broadcast states
// (Flink's DataStream.broadcast(MapStateDescriptor...)).
func Broadcast[B any](s DataStream[B], descs ...BroadcastStateDescriptor) BroadcastStream[B] {
	return BroadcastStream[B]{s: s, descs: descs}
}

// BroadcastContext is what ProcessBroadcastElement gets: read-write access
// to the broadcast states, and the record's timestamp. It has no current
// key: a broadcast record belongs to no key.
type BroadcastContext[K comparable] struct {
	ctx    *Context[K]
	states map[string]any
}

// Timestamp is the broadcast record's event time (api.NoTimestamp if it
// has none).
func (c *BroadcastContext[K]) Timestamp() int64 { return c.ctx.Timestamp() }

// Subtask is the index of the subtask, from 0.
func (c *BroadcastContext[K]) Subtask() int { return c.ctx.Subtask() }

// Parallelism is the operator's parallelism.
func (c *BroadcastContext[K]) Parallelism() int { return c.ctx.Parallelism() }

// CurrentWatermark is the operator's event time.
func (c *BroadcastContext[K]) CurrentWatermark() int64 {
	return c.ctx.TimerService().CurrentWatermark()
}

// BroadcastStateContext is the context of a broadcast record, in which the
// broadcast states may change: *BroadcastContext (keyed) or
// *BroadcastProcessContext (not keyed).
type BroadcastStateContext interface{ writableStates() map[string]any }

// ReadOnlyBroadcastStateContext is the context of any other record or
// timer, in which the broadcast states are read only: *ReadOnlyContext
// (keyed) or *BroadcastProcessReadOnlyContext (not keyed).
type ReadOnlyBroadcastStateContext interface{ readOnlyStates() map[string]any }

func (c *BroadcastContext[K]) writableStates() map[string]any { return c.states }
func (c *ReadOnlyContext[K]) readOnlyStates() map[string]any  { return c.states }

// ApplyToKeyedState calls f for every key of this subtask that has an
// entry in the keyed state called name (declared in Open), with that key
// current, as Flink's applyToKeyedState: f reads, changes or clears the
// key's state through the function's own state handles. A rule that
// changes can so reset every key's state at once; every subtask applies it
// to its own keys.
func (c *BroadcastContext[K]) ApplyToKeyedState(name string, f func(key K) error) error {
	return api.ApplyToKeyedState(c.ctx, name, f)
}

// GetBroadcastState returns the broadcast state d describes, to read and
// change while processing a broadcast record. d must be one of the
// descriptors the stream was broadcast with.
func GetBroadcastState[K comparable, V any](ctx BroadcastStateContext, d MapStateDescriptor[K, V]) (*BroadcastState[K, V], error) {
	return lookupBroadcastState(ctx.writableStates(), d)
}

// OutputFromBroadcast emits v to the side output tag while processing a
// broadcast record.
func OutputFromBroadcast[T any, K comparable](ctx *BroadcastContext[K], tag OutputTag[T], v T) {
	api.Output(ctx.ctx, tag, v)
}

// ReadOnlyContext is what ProcessElement and OnTimer get: the keyed
// Context (current key, keyed state, timers, side outputs) and read-only
// access to the broadcast states.
type ReadOnlyContext[K comparable] struct {
	*Context[K]
	states map[string]any
}

// GetReadOnlyBroadcastState returns the broadcast state d describes, to
// read while processing a keyed record or a timer.
func GetReadOnlyBroadcastState[K comparable, V any](ctx ReadOnlyBroadcastStateContext, d MapStateDescriptor[K, V]) (ReadOnlyBroadcastState[K, V], error) {
	return lookupBroadcastState(ctx.readOnlyStates(), d)
}

func lookupBroadcastState[K comparable, V any](states map[string]any, d MapStateDescriptor[K, V]) (*BroadcastState[K, V], error) {
	s, ok := states[d.name]
	if !ok {
		return nil, fmt.Errorf("broadcast state %q: the stream was not broadcast with this descriptor (Broadcast(stream, descriptors...))", d.name)
	}
	b, ok := s.(*BroadcastState[K, V])
	if !ok {
		return nil, fmt.Errorf("broadcast state %q is %T, not %T", d.name, s, b)
	}
	return b, nil
}

// KeyedBroadcastProcessFunction processes a keyed stream connected to a
// broadcast stream (Flink's KeyedBroadcastProcessFunction): keyed records
// with their key current and the broadcast states read-only, broadcast
// records with no key and the broadcast states writable. It may also
// implement Opener (for keyed state), BroadcastTimerHandler and Closer.
//
// Every subtask gets every broadcast record, and must change its broadcast
// state alike, from the record alone: a change that depends on the keyed
// records a subtask saw would make the copies differ.
type KeyedBroadcastProcessFunction[K comparable, IN, B, OUT any] interface {
	ProcessElement(ctx *ReadOnlyContext[K], in IN, out Collector[OUT]) error
	ProcessBroadcastElement(ctx *BroadcastContext[K], in B, out Collector[OUT]) error
}

// BroadcastTimerHandler is implemented by a KeyedBroadcastProcessFunction
// that sets timers: OnTimer runs with the timer's key current.
type BroadcastTimerHandler[K comparable, OUT any] interface {
	OnTimer(ctx *ReadOnlyContext[K], ts int64, out Collector[OUT]) error
}

// BroadcastConnectedStream is a keyed stream connected to a broadcast
// stream.
type BroadcastConnectedStream[A any, K comparable, B any] struct {
	ks KeyedStream[A, K]
	bs BroadcastStream[B]
}

// ConnectBroadcast connects a keyed stream to a broadcast stream (Flink's
// KeyedStream.connect(BroadcastStream)).
func ConnectBroadcast[A any, K comparable, B any](ks KeyedStream[A, K], bs BroadcastStream[B]) BroadcastConnectedStream[A, K, B] {
	return BroadcastConnectedStream[A, K, B]{ks, bs}
}

// KeyedBroadcastProcess applies fn to a keyed stream connected to a
// broadcast stream.
func KeyedBroadcastProcess[A any, K comparable, B, OUT any](c BroadcastConnectedStream[A, K, B], fn KeyedBroadcastProcessFunction[K, A, B, OUT]) DataStream[OUT] {
	keyA := c.ks.ks.Key()
	first := Map(DataStream[A]{c.ks.ks.Stream()}, func(v A) Either[A, B] { return Either[A, B]{First: v} }).Name("Keyed")
	second := Map(c.bs.s, func(v B) Either[A, B] { return Either[A, B]{Second: true, Other: v} }).Name("Broadcast")
	key := func(e Either[A, B]) K {
		var k K
		if !e.Second {
			k = keyA(e.First)
		}
		return k
	}
	keyed := engine.KeyBy(first.s, key).WithKeySerializer(c.ks.ks.KeySerializer())
	ks := KeyedStream[Either[A, B], K]{keyed.WithBroadcastInput(second.s)}
	return Process(ks, &keyedBroadcast[K, A, B, OUT]{fn: fn, descs: c.bs.descs}).Name("KeyedBroadcastProcess")
}

// keyedBroadcast runs a KeyedBroadcastProcessFunction as a keyed process
// function over the tagged records of both inputs.
type keyedBroadcast[K comparable, A, B, OUT any] struct {
	fn     KeyedBroadcastProcessFunction[K, A, B, OUT]
	descs  []BroadcastStateDescriptor
	states map[string]any
	ro     ReadOnlyContext[K]
	bc     BroadcastContext[K]
}

// OpenOperatorState declares the broadcast states (operator state),
// before Open.
func (f *keyedBroadcast[K, A, B, OUT]) OpenOperatorState(rc *RuntimeContext) error {
	f.fn = api.CloneFunction(f.fn)
	f.states = make(map[string]any, len(f.descs))
	for _, d := range f.descs {
		s, err := d.declare(rc)
		if err != nil {
			return err
		}
		f.states[d.Name()] = s
	}
	return nil
}

func (f *keyedBroadcast[K, A, B, OUT]) Open(ctx *Context[K]) error {
	f.ro = ReadOnlyContext[K]{Context: ctx, states: f.states}
	f.bc = BroadcastContext[K]{ctx: ctx, states: f.states}
	if o, ok := f.fn.(Opener[K]); ok {
		return o.Open(ctx)
	}
	return nil
}

func (f *keyedBroadcast[K, A, B, OUT]) ProcessElement(ctx *Context[K], in Either[A, B], out Collector[OUT]) error {
	return f.fn.ProcessElement(&f.ro, in.First, out)
}

func (f *keyedBroadcast[K, A, B, OUT]) IsBroadcast(in Either[A, B]) bool { return in.Second }

func (f *keyedBroadcast[K, A, B, OUT]) ProcessBroadcast(ctx *Context[K], in Either[A, B], out Collector[OUT]) error {
	return f.fn.ProcessBroadcastElement(&f.bc, in.Other, out)
}

func (f *keyedBroadcast[K, A, B, OUT]) OnTimer(ctx *Context[K], ts int64, out Collector[OUT]) error {
	if h, ok := f.fn.(BroadcastTimerHandler[K, OUT]); ok {
		return h.OnTimer(&f.ro, ts, out)
	}
	return nil
}

func (f *keyedBroadcast[K, A, B, OUT]) Close() error {
	if c, ok := f.fn.(Closer); ok {
		return c.Close()
	}
	return nil
}

// BroadcastProcessFunction processes a stream that is not keyed connected
// to a broadcast stream (Flink's BroadcastProcessFunction): the stream's
// records with the broadcast states read-only, broadcast records with them
// writable. Like CoProcessFunction it has no timers; it may also implement
// RichOpener (for operator state of its own) and Closer. As with the keyed
// function, every subtask gets every broadcast record and must change its
// broadcast state alike, from the record alone.
type BroadcastProcessFunction[IN, B, OUT any] interface {
	ProcessElement(ctx *BroadcastProcessReadOnlyContext, in IN, out Collector[OUT]) error
	ProcessBroadcastElement(ctx *BroadcastProcessContext, in B, out Collector[OUT]) error
}

// broadcastProcessContext is what both contexts of a
// BroadcastProcessFunction have: the subtask and the broadcast states.
type broadcastProcessContext struct {
	rc     *RuntimeContext
	states map[string]any
}

// Subtask is the index of the subtask, from 0.
func (c *broadcastProcessContext) Subtask() int { return c.rc.Subtask() }

// Parallelism is the operator's parallelism.
func (c *broadcastProcessContext) Parallelism() int { return c.rc.Parallelism() }

// BroadcastProcessContext is what a BroadcastProcessFunction's
// ProcessBroadcastElement gets: the subtask and the writable broadcast
// states (GetBroadcastState).
type BroadcastProcessContext struct{ broadcastProcessContext }

func (c *BroadcastProcessContext) writableStates() map[string]any { return c.states }

// BroadcastProcessReadOnlyContext is what a BroadcastProcessFunction's
// ProcessElement gets: the subtask and the broadcast states, read only
// (GetReadOnlyBroadcastState).
type BroadcastProcessReadOnlyContext struct{ broadcastProcessContext }

func (c *BroadcastProcessReadOnlyContext) readOnlyStates() map[string]any { return c.states }

// BroadcastProcess applies fn to a stream that is not keyed connected to
// a broadcast stream (Flink's DataStream.connect(BroadcastStream)
// .process(BroadcastProcessFunction)). The stream's records keep their
// partitioning; every subtask of the operator gets every broadcast
// record. The task aligns checkpoint barriers over both inputs, and its
// watermark is the minimum over both.
func BroadcastProcess[A, B, OUT any](s DataStream[A], bs BroadcastStream[B], fn BroadcastProcessFunction[A, B, OUT]) DataStream[OUT] {
	first := Map(s, func(v A) Either[A, B] { return Either[A, B]{First: v} }).Name("Input")
	second := Map(bs.s, func(v B) Either[A, B] { return Either[A, B]{Second: true, Other: v} }).Name("Broadcast")
	return FlatMapFunc(Union(first, second.Broadcast()), &broadcastProcess[A, B, OUT]{fn: fn, descs: bs.descs}).Name("BroadcastProcess")
}

// broadcastProcess runs a BroadcastProcessFunction as a flat map over the
// tagged union of its inputs; the broadcast states are its operator
// state.
type broadcastProcess[A, B, OUT any] struct {
	fn    BroadcastProcessFunction[A, B, OUT]
	descs []BroadcastStateDescriptor
	ro    BroadcastProcessReadOnlyContext
	bc    BroadcastProcessContext
}

func (f *broadcastProcess[A, B, OUT]) Open(rc *RuntimeContext) error {
	f.fn = api.CloneFunction(f.fn)
	states := make(map[string]any, len(f.descs))
	for _, d := range f.descs {
		s, err := d.declare(rc)
		if err != nil {
			return err
		}
		states[d.Name()] = s
	}
	f.ro = BroadcastProcessReadOnlyContext{broadcastProcessContext{rc, states}}
	f.bc = BroadcastProcessContext{broadcastProcessContext{rc, states}}
	if o, ok := f.fn.(RichOpener); ok {
		return o.Open(rc)
	}
	return nil
}

func (f *broadcastProcess[A, B, OUT]) FlatMap(in Either[A, B], out Collector[OUT]) error {
	if in.Second {
		return f.fn.ProcessBroadcastElement(&f.bc, in.Other, out)
	}
	return f.fn.ProcessElement(&f.ro, in.First, out)
}

func (f *broadcastProcess[A, B, OUT]) Close() error {
	if c, ok := f.fn.(Closer); ok {
		return c.Close()
	}
	return nil
}

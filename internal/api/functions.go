package api

import (
	"fmt"
	"reflect"

	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/savepoint"
)

// Collector receives records.
type Collector[T any] interface {
	Collect(v T)
}

// KeyedProcessFunction processes the records of a keyed stream, one key at
// a time, with keyed state and timers (Flink's KeyedProcessFunction).
// A function may also implement Opener (to declare state), TimerHandler
// (to react to timers) and Closer.
type KeyedProcessFunction[K comparable, IN, OUT any] interface {
	ProcessElement(ctx *Context[K], in IN, out Collector[OUT]) error
}

// Opener is implemented by functions that declare state or set up
// resources before processing.
type Opener[K comparable] interface {
	Open(ctx *Context[K]) error
}

// TimerHandler is implemented by functions that set timers.
type TimerHandler[K comparable, OUT any] interface {
	OnTimer(ctx *Context[K], timestamp int64, out Collector[OUT]) error
}

// WatermarkHandler is implemented by keyed functions told of each advance
// of the event-time watermark: OnWatermark runs after the event-time
// timers the watermark passed have fired, and before the watermark goes
// downstream, so what it emits precedes it. No key is current: a function
// that acts per key goes through its state's keys (SweepMapEntry).
type WatermarkHandler[K comparable, OUT any] interface {
	OnWatermark(ctx *Context[K], watermark int64, out Collector[OUT]) error
}

// Closer is implemented by functions that hold resources.
type Closer interface {
	Close() error
}

// TimeDomain says which clock fired a timer.
type TimeDomain int

const (
	ProcessingTime TimeDomain = iota
	EventTime
)

// Context gives a keyed function its key, state and timers.
type Context[K comparable] struct {
	backend     state.Backend[K]
	timers      TimerService
	subtask     int
	parallelism int
	domain      TimeDomain
	ts          *int64 // the current record's or timer's timestamp
	side        sideOutputs
}

// NewContext is how a keyed operator of the runtime makes its functions'
// Context: over its state backend and timers.
func NewContext[K comparable](backend state.Backend[K], timers TimerService, subtask, parallelism int) Context[K] {
	return Context[K]{backend: backend, timers: timers, subtask: subtask, parallelism: parallelism}
}

// SetTimeDomain is how the runtime says which clock fired the timer it is
// about to hand to OnTimer.
func SetTimeDomain[K comparable](c *Context[K], d TimeDomain) { c.domain = d }

// SetTimestampSource is how the runtime tells a Context where the
// timestamp of the record being processed is kept.
func SetTimestampSource[K comparable](c *Context[K], ts *int64) { c.ts = ts }

// SetOutputTimestamp is how a runtime function of the job API (a window)
// stamps what it emits next with ts, as Flink's TimestampedCollector does.
func SetOutputTimestamp[K comparable](c *Context[K], ts int64) {
	if c.ts != nil {
		*c.ts = ts
	}
}

// Timestamp is the event time of the record being processed (from
// AssignTimestampsAndWatermarks upstream), or of the event-time timer
// being handled; NoTimestamp if it has none.
func (c *Context[K]) Timestamp() int64 {
	if c.ts == nil {
		return NoTimestamp
	}
	return *c.ts
}

// CurrentKey is the key of the record or timer being processed.
func (c *Context[K]) CurrentKey() K { return c.backend.CurrentKey() }

// TimeDomain is the clock of the timer being handled (in OnTimer).
func (c *Context[K]) TimeDomain() TimeDomain { return c.domain }

// Subtask is the index of the subtask running the function.
func (c *Context[K]) Subtask() int { return c.subtask }

// Parallelism is the operator's parallelism.
func (c *Context[K]) Parallelism() int { return c.parallelism }

// ApplyToKeyedState calls f for every key with an entry in the keyed state
// called name (Flink's applyToKeyedState), with that key current: the
// function's state handles read and change that key's state, and may
// clear it. The keys are listed first, so f may change any state. An
// error from f stops the walk and is returned. It is called where no key
// is current (a broadcast record): the key it leaves current does not
// matter, as every keyed record and timer sets its own (and before the
// first, the zero key may not even belong to this subtask's key groups).
func ApplyToKeyedState[K comparable](c *Context[K], name string, f func(key K) error) error {
	keys, err := state.KeysOf(c.backend, name)
	if err != nil {
		return err
	}
	for _, k := range keys {
		c.backend.SetCurrentKey(k)
		if err := f(k); err != nil {
			return err
		}
	}
	return nil
}

// SweepMapEntry calls f with each key whose map in the map state ms
// (declared as name) holds uk, and that entry, and removes the entry
// (state.SweepMapEntry): f must not write ms, and no key is current
// while it runs. An error from f stops the sweep.
func SweepMapEntry[K comparable, UK comparable, UV any](c *Context[K], name string, ms MapState[UK, UV], uk UK, f func(key K, uv UV) error) error {
	return state.SweepMapEntry(c.backend, name, ms, uk, f)
}

// HasEventTimers reports whether any key has an event-time timer: in
// Open, whether the restored state brought some.
func HasEventTimers[K comparable](c *Context[K]) bool {
	h, ok := c.timers.(interface{ HasEventTimers() bool })
	return ok && h.HasEventTimers()
}

// TimerService sets and deletes timers of the current key.
func (c *Context[K]) TimerService() TimerService { return c.timers }

// TimerService is the timer API of keyed functions.
type TimerService interface {
	CurrentProcessingTime() int64
	RegisterProcessingTimeTimer(ts int64)
	DeleteProcessingTimeTimer(ts int64)
	CurrentWatermark() int64
	RegisterEventTimeTimer(ts int64)
	DeleteEventTimeTimer(ts int64)
}

// Keyed state types, re-exported from the state backend.
type (
	ValueState[V any]               = state.ValueState[V]
	ListState[V any]                = state.ListState[V]
	MapState[UK comparable, UV any] = state.MapState[UK, UV]
	Serializer[T any]               = state.Serializer[T]
	KeySerializer[K any]            = state.KeySerializer[K]
)

// GetValueState declares (in Open) the value state called name.
func GetValueState[V any, K comparable](ctx *Context[K], name string) (ValueState[V], error) {
	return state.GetValueState[V](ctx.backend, name, state.SerializerFor[V]())
}

// GetListState declares (in Open) the list state called name.
func GetListState[V any, K comparable](ctx *Context[K], name string) (ListState[V], error) {
	return state.GetListState[V](ctx.backend, name, state.SerializerFor[V]())
}

// GetMapState declares (in Open) the map state called name.
func GetMapState[UK comparable, UV any, K comparable](ctx *Context[K], name string) (MapState[UK, UV], error) {
	return state.GetMapState[UK, UV](ctx.backend, name, state.SerializerFor[UK](), state.SerializerFor[UV]())
}

// MapFunction is a map function as an object (Flink's RichMapFunction):
// it may also implement RichOpener, to set itself up and declare operator
// state, and Closer.
type MapFunction[IN, OUT any] interface {
	Map(in IN) (OUT, error)
}

// FlatMapFunction is a flat-map function as an object; see MapFunction.
type FlatMapFunction[IN, OUT any] interface {
	FlatMap(in IN, out Collector[OUT]) error
}

// FilterFunction is a filter as an object; see MapFunction.
type FilterFunction[T any] interface {
	Filter(in T) (bool, error)
}

// BroadcastInput is implemented by a keyed process function that also
// reads a broadcast input (stream.KeyedBroadcastProcess): every subtask
// gets every record of it, so a record for which IsBroadcast is true
// reaches ProcessBroadcast with no current key.
type BroadcastInput[K comparable, IN, OUT any] interface {
	IsBroadcast(in IN) bool
	ProcessBroadcast(ctx *Context[K], in IN, out Collector[OUT]) error
}

// OperatorStateOpener is implemented by a keyed process function that
// keeps operator state as well (a keyed broadcast function's broadcast
// state): OpenOperatorState runs before Opener's Open, with the
// RuntimeContext where operator state is declared.
type OperatorStateOpener interface {
	OpenOperatorState(rc *RuntimeContext) error
}

// RichOpener is implemented by function objects that set themselves up
// before the first record: Open gets the subtask's RuntimeContext, where
// operator state is declared.
type RichOpener interface {
	Open(ctx *RuntimeContext) error
}

// RuntimeContext describes the subtask a function object runs in and holds
// its operator state (Flink's RuntimeContext and OperatorStateStore).
type RuntimeContext struct {
	subtask, parallelism, attempt int
	jobID                         string
	store                         OperatorStateStore
}

// SubtaskInfo describes the subtask a function runs in.
type SubtaskInfo struct {
	Subtask, Parallelism, Attempt int
	JobID                         string
}

// OperatorStateStore is the runtime's side of a function's operator state:
// the lists restored for the subtask, and the states declared in Open,
// which the runtime encodes at every snapshot.
type OperatorStateStore interface {
	// Opening reports whether the function is in Open, where states are
	// declared.
	Opening() bool
	// Declared reports whether a state called name was declared.
	Declared(name string) bool
	// Restored returns the items restored for the state called name.
	Restored(name string) [][]byte
	// Declare registers a state: encode returns its items at a snapshot.
	Declare(name string, mode savepoint.Redistribution, encode func() [][]byte)
}

// NewRuntimeContext is how the runtime makes a function object's
// RuntimeContext.
func NewRuntimeContext(info SubtaskInfo, store OperatorStateStore) RuntimeContext {
	return RuntimeContext{subtask: info.Subtask, parallelism: info.Parallelism, attempt: info.Attempt, jobID: info.JobID, store: store}
}

// Subtask is the index of the subtask, from 0.
func (c *RuntimeContext) Subtask() int { return c.subtask }

// Parallelism is the operator's parallelism.
func (c *RuntimeContext) Parallelism() int { return c.parallelism }

// Attempt counts the job's restarts, from 0.
func (c *RuntimeContext) Attempt() int { return c.attempt }

// JobID is the job's 32-hex id.
func (c *RuntimeContext) JobID() string { return c.jobID }

// GetOperatorListState declares (in Open) the operator list state called
// name (Flink's CheckpointedFunction with getListState): a list per
// subtask, checkpointed as it is at each barrier and restored from the
// subtask's last checkpoint. At another parallelism the lists of all
// subtasks are concatenated and split evenly (round-robin, as Flink does).
func GetOperatorListState[V any](ctx *RuntimeContext, name string) (ListState[V], error) {
	return getOperatorState[V](ctx, name, savepoint.SplitDistribute)
}

// GetUnionListState declares the operator list state called name whose
// restore gives every subtask the lists of all subtasks (Flink's
// getUnionListState): each keeps what it needs.
func GetUnionListState[V any](ctx *RuntimeContext, name string) (ListState[V], error) {
	return getOperatorState[V](ctx, name, savepoint.Union)
}

func getOperatorState[V any](ctx *RuntimeContext, name string, mode savepoint.Redistribution) (ListState[V], error) {
	c := ctx.store
	if c == nil || !c.Opening() {
		return nil, fmt.Errorf("operator state %q: declare operator state in Open", name)
	}
	if c.Declared(name) {
		return nil, fmt.Errorf("operator state %q is declared twice", name)
	}
	ser := state.SerializerFor[V]()
	l := &opList[V]{}
	for i, b := range c.Restored(name) {
		v, rest, err := ser.Decode(b)
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%d bytes left over", len(rest))
		}
		if err != nil {
			return nil, fmt.Errorf("operator state %q: item %d of the snapshot: %w", name, i, err)
		}
		l.vals = append(l.vals, v)
	}
	c.Declare(name, mode, func() [][]byte {
		items := make([][]byte, len(l.vals))
		for i, v := range l.vals {
			items[i] = ser.Append(nil, v)
		}
		return items
	})
	return l, nil
}

// opList is an operator's list state: a plain slice, touched only by the
// task's goroutine, encoded in the synchronous part of a snapshot (operator
// state is small: offsets, buffers, a few values per subtask).
type opList[V any] struct{ vals []V }

func (l *opList[V]) Get() []V      { return l.vals }
func (l *opList[V]) Add(v V)       { l.vals = append(l.vals, v) }
func (l *opList[V]) Update(vs []V) { l.vals = append([]V(nil), vs...) }
func (l *opList[V]) Clear()        { l.vals = nil }

// GetMapStateWith declares (in Open) the map state called name with the
// serializers of its keys and values.
func GetMapStateWith[UK comparable, UV any, K comparable](ctx *Context[K], name string, keySer Serializer[UK], valSer Serializer[UV]) (MapState[UK, UV], error) {
	return state.GetMapState[UK, UV](ctx.backend, name, keySer, valSer)
}

// GetSlicedMapStateWith is GetMapStateWith for a map whose user keys are
// few, shared by many keys and swept out whole (SweepMapEntry): the
// hashmap backend keeps a table per user key (state.GetSlicedMapState).
func GetSlicedMapStateWith[UK comparable, UV any, K comparable](ctx *Context[K], name string, keySer Serializer[UK], valSer Serializer[UV]) (MapState[UK, UV], error) {
	return state.GetSlicedMapState[UK, UV](ctx.backend, name, keySer, valSer)
}

// CloneFunction gives each subtask its own copy of a function object: a
// pointer to a struct is copied (shallowly), anything else is shared.
func CloneFunction[F any](fn F) F {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fn
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface().(F)
}

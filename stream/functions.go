package stream

import (
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/internal/api"
)

// Collector receives the records a function emits.
type Collector[T any] = api.Collector[T]

// KeyedProcessFunction processes the records of a keyed stream one at a
// time, with the record's key current (Flink's KeyedProcessFunction):
//
//	ProcessElement(ctx *Context[K], in IN, out Collector[OUT]) error
//
// A function may also implement Opener (to declare state), TimerHandler (to
// react to its timers) and Closer. An error fails the task.
type KeyedProcessFunction[K comparable, IN, OUT any] = api.KeyedProcessFunction[K, IN, OUT]

// Opener is implemented by keyed functions that declare state or set up
// resources before the first record: Open(ctx *Context[K]) error.
type Opener[K comparable] = api.Opener[K]

// TimerHandler is implemented by keyed functions that set timers:
// OnTimer(ctx *Context[K], timestamp int64, out Collector[OUT]) error is
// called with the timer's key current.
type TimerHandler[K comparable, OUT any] = api.TimerHandler[K, OUT]

// Closer is implemented by functions that hold resources: Close() error,
// after the last record or when the task is cancelled.
type Closer = api.Closer

// Context gives a keyed function its key (CurrentKey), its subtask
// (Subtask, Parallelism), its timers (TimerService) and, in OnTimer, the
// clock that fired (TimeDomain).
type Context[K comparable] = api.Context[K]

// TimerService sets and deletes the current key's timers:
// RegisterProcessingTimeTimer(ms), DeleteProcessingTimeTimer(ms),
// CurrentProcessingTime(); RegisterEventTimeTimer(ms),
// DeleteEventTimeTimer(ms), CurrentWatermark(). Timers are keyed state:
// checkpointed, restored and rescaled with it. Registering a timer that
// exists does nothing.
type TimerService = api.TimerService

// TimeDomain says which clock fired a timer.
type TimeDomain = api.TimeDomain

// The clocks of timers.
const (
	ProcessingTime = api.ProcessingTime
	EventTime      = api.EventTime
)

// ValueState holds one value per key: Value() (V, bool), Update(V),
// Clear(). Values are not copied: do not modify one after Update.
type ValueState[V any] = state.ValueState[V]

// ListState holds a list per key: Get, Add, AddAll, Update, Clear.
type ListState[V any] = state.ListState[V]

// MapState holds a map per key: Get, Put, Remove, Contains, All, Clear.
type MapState[UK comparable, UV any] = state.MapState[UK, UV]

// Serializer encodes values of T for state and channel state:
// Append(dst []byte, v T) []byte and Decode(src []byte) (T, []byte, error).
type Serializer[T any] = state.Serializer[T]

// KeySerializer is a Serializer that also hashes keys; the hash decides a
// key's key group, so it must be stable across processes and versions.
type KeySerializer[K any] = state.KeySerializer[K]

// GetValueState declares (in Open) the value state called name. Names are
// what snapshots store the state by.
func GetValueState[V any, K comparable](ctx *Context[K], name string) (ValueState[V], error) {
	return api.GetValueState[V](ctx, name)
}

// GetListState declares (in Open) the list state called name.
func GetListState[V any, K comparable](ctx *Context[K], name string) (ListState[V], error) {
	return api.GetListState[V](ctx, name)
}

// GetMapState declares (in Open) the map state called name.
func GetMapState[UK comparable, UV any, K comparable](ctx *Context[K], name string) (MapState[UK, UV], error) {
	return api.GetMapState[UK, UV](ctx, name)
}

// SuppressRestarts marks err as a failure no restart can mend: the job
// fails at once instead of asking the restart strategy (Flink's
// SuppressRestartsException).
func SuppressRestarts(err error) error { return api.SuppressRestarts(err) }

// MapFunction is a map function as an object: Map(in IN) (OUT, error).
type MapFunction[IN, OUT any] = api.MapFunction[IN, OUT]

// FlatMapFunction is a flat-map function as an object:
// FlatMap(in IN, out Collector[OUT]) error.
type FlatMapFunction[IN, OUT any] = api.FlatMapFunction[IN, OUT]

// FilterFunction is a filter as an object: Filter(in T) (bool, error).
type FilterFunction[T any] = api.FilterFunction[T]

// RichOpener is implemented by function objects of MapFunc, FlatMapFunc
// and FilterFunc that set themselves up before the first record:
// Open(ctx *RuntimeContext) error, where they declare operator state.
type RichOpener = api.RichOpener

// RuntimeContext describes the subtask a function object runs in
// (Subtask, Parallelism, Attempt, JobID) and holds its operator state.
type RuntimeContext = api.RuntimeContext

// GetOperatorListState declares (in Open) the operator list state called
// name (Flink's CheckpointedFunction): a list per subtask, checkpointed at
// each barrier as it is then, restored from the subtask's last checkpoint.
// At another parallelism the lists of all subtasks are concatenated and
// split evenly.
func GetOperatorListState[V any](ctx *RuntimeContext, name string) (ListState[V], error) {
	return api.GetOperatorListState[V](ctx, name)
}

// GetUnionListState declares an operator list state whose restore gives
// every subtask the lists of all subtasks; each keeps what it needs.
func GetUnionListState[V any](ctx *RuntimeContext, name string) (ListState[V], error) {
	return api.GetUnionListState[V](ctx, name)
}

// OutputTag names a side output of records of type T (Flink's OutputTag).
type OutputTag[T any] = api.OutputTag[T]

// NewOutputTag makes the tag of the side output called id.
func NewOutputTag[T any](id string) OutputTag[T] { return api.NewOutputTag[T](id) }

// Output emits v from a keyed function to the side output tag, with the
// current record's timestamp (Flink's Context.output). A side output that
// nothing reads drops it.
func Output[T any, K comparable](ctx *Context[K], tag OutputTag[T], v T) { api.Output(ctx, tag, v) }

// GetSideOutput is the stream of what s's function emits to tag (Flink's
// getSideOutput). s must come from Process, a window or a join.
func GetSideOutput[X, T any](s DataStream[T], tag OutputTag[X]) DataStream[X] {
	return DataStream[X]{engine.SideOutput(s.s, tag)}
}

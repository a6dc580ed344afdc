package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

// operator is the runtime view of one operator in a chain. The task calls
// these from its own goroutine only.
type operator interface {
	open(ctx *opContext) error
	// prepareSnapshot runs before the barrier is forwarded: sinks flush and
	// pre-commit here, so that what they wrote belongs to this checkpoint.
	prepareSnapshot(id int64) error
	// snapshot is the synchronous part of a checkpoint: it captures state
	// cheaply; encoding and writing happen later on another goroutine.
	snapshot(req snapshotRequest) (*opCapture, error)
	notifyComplete(id int64) error
	notifyAborted(id int64)
	// endInput is Flink's finish(): all input has been processed; fire what
	// is left (event time reaches its end) and emit final records.
	endInput() error
	// idle is called when the task has no input to process for now.
	idle()
	close() error
	// nextTimer returns the earliest processing-time timer.
	nextTimer() (int64, bool)
	fireTimers(now int64) error
}

// snapshotRequest says what a snapshot is for.
type snapshotRequest struct {
	id  int64
	typ checkpoint.SnapshotType
	// files: the snapshot goes to a checkpoint directory, so a backend may
	// take it as its own files (native); otherwise (kept in memory after
	// the input ended, or jobmanager storage) it must be canonical blocks.
	files bool
}

// canonicalRequest asks for canonical blocks.
var canonicalRequest = snapshotRequest{typ: checkpoint.SnapshotType{Kind: savepoint.KindCheckpoint, Format: savepoint.FormatCanonical}}

// opCapture is what an operator's synchronous snapshot captured.
type opCapture struct {
	// keyed is the keyed state snapshot: canonical blocks, or a
	// *state.NativeSnapshot (files).
	keyed   state.Snapshot
	opState []savepoint.OperatorListState
	states  []savepoint.StateDescriptor
}

// opContext is what an operator gets when it opens.
type opContext struct {
	t       *task
	uid     string
	maxPar  int
	restore *restore.SubtaskRestore // nil: fresh start
	blocks  *savepoint.BlockReader
}

// userError carries an error returned by user code up to the task, which
// fails with it; records are pushed through chains by plain calls, so an
// error deep in a chain unwinds as a panic.
type userError struct {
	op  string
	err error
}

func (e *userError) Error() string {
	if e.op == "" {
		return e.err.Error()
	}
	return e.op + ": " + e.err.Error()
}
func (e *userError) Unwrap() error { return e.err }

// cloneFunction gives each subtask its own copy of a function object, as
// Flink gives each parallel instance its own deserialized copy: a pointer
// to a struct is copied shallowly, so fields set in Open (state handles)
// belong to one subtask. Other values are shared as they are.
func cloneFunction[F any](fn F) F {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fn
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface().(F)
}

func fail(op string, err error) {
	panic(&userError{op: op, err: err})
}

type baseOperator struct{}

func (baseOperator) open(*opContext) error                        { return nil }
func (baseOperator) prepareSnapshot(int64) error                  { return nil }
func (baseOperator) snapshot(snapshotRequest) (*opCapture, error) { return nil, nil }
func (baseOperator) notifyComplete(int64) error                   { return nil }
func (baseOperator) notifyAborted(int64)                          {}
func (baseOperator) endInput() error                              { return nil }
func (baseOperator) idle()                                        {}
func (baseOperator) close() error                                 { return nil }
func (baseOperator) nextTimer() (int64, bool)                     { return 0, false }
func (baseOperator) fireTimers(int64) error                       { return nil }

type mapOperator[IN, OUT any] struct {
	baseOperator
	f   func(IN) OUT
	out Collector[OUT]
}

func (o *mapOperator[IN, OUT]) Collect(v IN) { o.out.Collect(o.f(v)) }

type flatMapOperator[IN, OUT any] struct {
	baseOperator
	f   func(IN, Collector[OUT])
	out Collector[OUT]
}

func (o *flatMapOperator[IN, OUT]) Collect(v IN) { o.f(v, o.out) }

type filterOperator[T any] struct {
	baseOperator
	f   func(T) bool
	out Collector[T]
}

func (o *filterOperator[T]) Collect(v T) {
	if o.f(v) {
		o.out.Collect(v)
	}
}

type mapErrOperator[IN, OUT any] struct {
	baseOperator
	f    func(IN) (OUT, error)
	out  Collector[OUT]
	name string
}

func (o *mapErrOperator[IN, OUT]) Collect(v IN) {
	r, err := o.f(v)
	if err != nil {
		fail(o.name, err)
	}
	o.out.Collect(r)
}

type flatMapErrOperator[IN, OUT any] struct {
	baseOperator
	f    func(IN, Collector[OUT]) error
	out  Collector[OUT]
	name string
}

func (o *flatMapErrOperator[IN, OUT]) Collect(v IN) {
	if err := o.f(v, o.out); err != nil {
		fail(o.name, err)
	}
}

type filterErrOperator[T any] struct {
	baseOperator
	f    func(T) (bool, error)
	out  Collector[T]
	name string
}

func (o *filterErrOperator[T]) Collect(v T) {
	keep, err := o.f(v)
	if err != nil {
		fail(o.name, err)
	}
	if keep {
		o.out.Collect(v)
	}
}

type unionOperator[T any] struct {
	baseOperator
	out Collector[T]
}

func (o *unionOperator[T]) Collect(v T) { o.out.Collect(v) }

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
	op     *keyedProcessOperatorCore[K]
	domain TimeDomain
}

// CurrentKey is the key of the record or timer being processed.
func (c *Context[K]) CurrentKey() K { return c.op.backend.CurrentKey() }

// TimeDomain is the clock of the timer being handled (in OnTimer).
func (c *Context[K]) TimeDomain() TimeDomain { return c.domain }

// Subtask is the index of the subtask running the function.
func (c *Context[K]) Subtask() int { return c.op.subtask }

// Parallelism is the operator's parallelism.
func (c *Context[K]) Parallelism() int { return c.op.parallelism }

// TimerService sets and deletes timers of the current key.
func (c *Context[K]) TimerService() TimerService { return c.op }

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
	return state.GetValueState[V](ctx.op.backend, name, state.SerializerFor[V]())
}

// GetListState declares (in Open) the list state called name.
func GetListState[V any, K comparable](ctx *Context[K], name string) (ListState[V], error) {
	return state.GetListState[V](ctx.op.backend, name, state.SerializerFor[V]())
}

// GetMapState declares (in Open) the map state called name.
func GetMapState[UK comparable, UV any, K comparable](ctx *Context[K], name string) (MapState[UK, UV], error) {
	return state.GetMapState[UK, UV](ctx.op.backend, name, state.SerializerFor[UK](), state.SerializerFor[UV]())
}

// keyedProcessOperatorCore is the key-typed part of a keyed operator: the
// backend and the timers, shared with the Context.
type keyedProcessOperatorCore[K comparable] struct {
	backend     state.Backend[K]
	backends    *stateBackends
	uid         string
	attempt     int
	ptimers     state.TimerQueue
	etimers     state.TimerQueue
	watermark   int64
	subtask     int
	parallelism int
	clock       func() time.Time
}

func (c *keyedProcessOperatorCore[K]) CurrentProcessingTime() int64 { return c.clock().UnixMilli() }
func (c *keyedProcessOperatorCore[K]) RegisterProcessingTimeTimer(ts int64) {
	c.ptimers.Register(ts)
}
func (c *keyedProcessOperatorCore[K]) DeleteProcessingTimeTimer(ts int64) { c.ptimers.Delete(ts) }
func (c *keyedProcessOperatorCore[K]) CurrentWatermark() int64            { return c.watermark }
func (c *keyedProcessOperatorCore[K]) RegisterEventTimeTimer(ts int64)    { c.etimers.Register(ts) }
func (c *keyedProcessOperatorCore[K]) DeleteEventTimeTimer(ts int64)      { c.etimers.Delete(ts) }

type keyedProcessOperator[K comparable, IN, OUT any] struct {
	keyedProcessOperatorCore[K]
	changelog *state.ChangelogBackend[K] // nil without the changelog
	// hashed is the backend if it takes the key's hash (hashmap, with or
	// without the changelog).
	hashed state.HashedKeys[K]
	// prefetch and keyWarm warm the backend's tables for keys to come
	// (state.Prefetchers: hashmap from the hash, rocksdb from the key).
	prefetch state.Prefetcher
	keyWarm  state.KeyPrefetcher[K]
	// failing is the store under the state if its accessors can fail
	// (state.Failing: the LSM's), checked after every call into the
	// function; nil for the hashmap, so that its record path pays nothing.
	failing state.Failing
	clErr   error
	ended   bool // endInput was called: all input is processed
	name    string
	fn      KeyedProcessFunction[K, IN, OUT]
	keyFn   func(IN) K
	keySer  state.KeySerializer[K]
	out     Collector[OUT]
	ctx     Context[K]
}

func newKeyedProcessOperator[K comparable, IN, OUT any](rt *buildContext, fn KeyedProcessFunction[K, IN, OUT], keyFn func(IN) K, keySer state.KeySerializer[K], out Collector[OUT]) *keyedProcessOperator[K, IN, OUT] {
	op := &keyedProcessOperator[K, IN, OUT]{fn: cloneFunction(fn), keyFn: keyFn, keySer: keySer, out: out, name: rt.name}
	op.watermark = math.MinInt64
	op.ctx.op = &op.keyedProcessOperatorCore
	return op
}

func (o *keyedProcessOperator[K, IN, OUT]) Collect(v IN) {
	o.backend.SetCurrentKey(o.keyFn(v))
	if err := o.fn.ProcessElement(&o.ctx, v, o.out); err != nil {
		fail(o.name, err)
	}
	if o.failing != nil {
		o.failIfStateFailed()
	}
}

// failIfStateFailed fails the task if the store under the state failed
// while the function ran (state accessors have no error result; see
// state.Failing). What the function emitted after the failure was dropped
// by failGuard.
func (o *keyedProcessOperator[K, IN, OUT]) failIfStateFailed() {
	if err := o.failing.Err(); err != nil {
		fail(o.name, err)
	}
}

// stateErr is err, or else the store's failure, if any.
func (o *keyedProcessOperator[K, IN, OUT]) stateErr(err error) error {
	if err == nil && o.failing != nil {
		err = o.failing.Err()
	}
	return err
}

// failGuard drops what a function emits once the store under its state has
// failed: from then on its state reads found nothing and its writes were
// not made, so its output may be wrong. The task fails as soon as the
// function returns, before a record emitted after the failure could leave
// the operator.
type failGuard[T any] struct {
	out     Collector[T]
	failing state.Failing
}

func (g *failGuard[T]) Collect(v T) {
	if g.failing.Err() == nil {
		g.out.Collect(v)
	}
}

// CollectInKeyGroup takes a record from a keyed exchange with the key
// group and hash its sender computed: the key is not hashed a second time.
func (o *keyedProcessOperator[K, IN, OUT]) CollectInKeyGroup(v IN, kg int, hash uint32) {
	if o.hashed != nil {
		o.hashed.SetCurrentKeyHashed(o.keyFn(v), kg, hash)
	} else {
		o.backend.SetCurrentKeyAndGroup(o.keyFn(v), kg)
	}
	if err := o.fn.ProcessElement(&o.ctx, v, o.out); err != nil {
		fail(o.name, err)
	}
	if o.failing != nil {
		o.failIfStateFailed()
	}
}

// PrefetchKey warms the state tables for a record further down the input
// (see runInput).
func (o *keyedProcessOperator[K, IN, OUT]) PrefetchKey(v IN, kg int, hash uint32) {
	if o.prefetch != nil {
		o.prefetch.Prefetch(kg, hash)
	} else if o.keyWarm != nil {
		// The key selector runs twice per record on this path: a few ns
		// for a field or the record itself, against a cache miss of
		// ~100 ns saved (and for nothing when the operator has only map
		// state or timers, which PrefetchKey does not warm).
		o.keyWarm.PrefetchKey(o.keyFn(v), kg)
	}
}

func (o *keyedProcessOperator[K, IN, OUT]) open(ctx *opContext) error {
	t := ctx.t
	o.subtask, o.parallelism, o.clock = t.subtask, t.v.parallelism, t.svc.clock
	kgr := state.RangeForSubtask(ctx.maxPar, t.v.parallelism, t.subtask)
	o.backends, o.uid, o.attempt = t.svc.backends, ctx.uid, t.svc.attempt
	var native []restore.NativeRestore
	if ctx.restore != nil {
		native = ctx.restore.Native
	}
	backend, err := newKeyedBackend(o.backends, o.keySer, keyedBackendOptions{maxPar: ctx.maxPar, keyGroups: kgr, uid: ctx.uid,
		subtask: t.subtask, attempt: t.svc.attempt, fs: ctx.blocks.FS, snapshotDir: ctx.blocks.Dir, native: native})
	if err != nil {
		return err
	}
	if f, ok := backend.(state.Failing); ok {
		o.failing = f
		o.out = &failGuard[OUT]{out: o.out, failing: f}
	}
	replay := ctx.restore != nil && len(ctx.restore.Changelog) > 0
	o.backend = withChangelog(backend, o.backends.changelogConfig(), o.keySer, t, ctx.uid, replay, t.svc.log)
	o.changelog, _ = o.backend.(*state.ChangelogBackend[K])
	o.hashed, _ = o.backend.(state.HashedKeys[K])
	if o.changelog != nil {
		// Over the hashmap, records set their key on it directly (the
		// changelog's records read it there).
		if d := o.changelog.KeysDirect(); d != nil {
			o.hashed = d
		}
	}
	o.prefetch, o.keyWarm = state.Prefetchers(o.backend)
	if err := o.openState(ctx); err != nil {
		// close is not called for an operator that failed to open.
		o.backend.Dispose()
		return err
	}
	return nil
}

func (o *keyedProcessOperator[K, IN, OUT]) openState(ctx *opContext) error {
	var err error
	if ctx.restore != nil {
		blocks := make([]state.KeyGroupBlock, 0, len(ctx.restore.KeyGroups))
		for _, kg := range ctx.restore.KeyGroups {
			block, err := ctx.blocks.Read(kg.Stream, kg.Offset, kg.Length)
			if err != nil {
				return fmt.Errorf("restore key group %d of operator %s: %w", kg.KeyGroup, ctx.uid, err)
			}
			blocks = append(blocks, state.KeyGroupBlock{KeyGroup: kg.KeyGroup, Block: block})
		}
		// Key groups decode independently: on every core the machine has.
		if err := o.backend.RestoreKeyGroups(blocks, runtime.GOMAXPROCS(0)); err != nil {
			return fmt.Errorf("restore operator %s: %w", ctx.uid, err)
		}
		// Then the changelog since the materialization, replayed as each
		// state registers (timers just below, the function's in Open).
		if err := restoreChangelog(o.backend, ctx.blocks.FS, o.backends.changelogMemory, ctx.restore.Changelog); err != nil {
			return fmt.Errorf("restore operator %s: %w", ctx.uid, err)
		}
	}
	if o.ptimers, err = state.TimersFor(o.backend, state.KindProcessingTime); err != nil {
		return err
	}
	if o.etimers, err = state.TimersFor(o.backend, state.KindEventTime); err != nil {
		return err
	}
	if op, ok := o.fn.(Opener[K]); ok {
		if err := op.Open(&o.ctx); err != nil {
			return err
		}
	}
	return o.stateErr(nil)
}

func (o *keyedProcessOperator[K, IN, OUT]) snapshot(req snapshotRequest) (*opCapture, error) {
	c, err := o.takeSnapshot(req)
	if err != nil {
		return nil, err
	}
	// The LSM counts entries while encoding; countEntries fills them in.
	_, counted := c.keyed.(state.EntryCounter)
	for _, s := range o.backend.States() {
		if (s.Kind == state.KindProcessingTime || s.Kind == state.KindEventTime) && s.Entries == 0 && !counted {
			continue // a timer service with no timers is not worth listing
		}
		c.states = append(c.states, savepoint.StateDescriptor{Name: s.Name, Kind: s.Kind.String(), Type: s.Type, Entries: int64(s.Entries)})
	}
	return c, nil
}

// takeSnapshot asks the backend for a snapshot: native files for
// checkpoints and native savepoints written to a directory (the backend
// decides whether it has a native format), canonical blocks otherwise.
func (o *keyedProcessOperator[K, IN, OUT]) takeSnapshot(req snapshotRequest) (*opCapture, error) {
	if err := o.stateErr(o.clErr); err != nil {
		return nil, err
	}
	// A checkpoint written to a directory may be the changelog's tail; a
	// savepoint, or checkpoint --full, is the wrapped backend's own.
	opts := state.SnapshotOptions{ID: req.id, Changelog: req.files && req.typ.Kind == savepoint.KindCheckpoint && !req.typ.Full}
	if sb := o.backends; req.files && req.typ.Format == savepoint.FormatNative && sb != nil && sb.dir != nil {
		opts.Native, opts.RemoveDir = true, os.RemoveAll
		opts.LocalDir = sb.dir.SnapshotDir(o.uid, o.subtask, o.attempt, req.id)
		// checkpoint --full (REST FULL) refers to nothing earlier.
		opts.Incremental = sb.incremental && req.typ.Kind == savepoint.KindCheckpoint && !req.typ.Full
	}
	snap, err := o.backend.TakeSnapshot(opts)
	if err != nil {
		return nil, err
	}
	return &opCapture{keyed: snap}, nil
}

// nextTimer is the earliest processing-time timer, or the changelog's next
// materialization if that is sooner.
func (o *keyedProcessOperator[K, IN, OUT]) nextTimer() (int64, bool) {
	ts, ok := o.ptimers.Next()
	if o.changelog != nil {
		// Rounded up: a wake-up before the due time would find nothing to
		// do and ask to be woken again at once.
		if due := o.changelog.MaterializationDue(); !due.IsZero() {
			if ms := (due.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond); !ok || ms < ts {
				return ms, true
			}
		}
	}
	return ts, ok
}

// tickChangelog persists buffered changes and runs materializations; an
// error (materialization failed too often) fails the task at its next
// timer or checkpoint.
func (o *keyedProcessOperator[K, IN, OUT]) tickChangelog() error {
	if o.changelog != nil && o.clErr == nil {
		o.clErr = o.changelog.Tick()
	}
	return o.clErr
}

func (o *keyedProcessOperator[K, IN, OUT]) fireTimers(now int64) error {
	if err := o.tickChangelog(); err != nil {
		return err
	}
	th, ok := o.fn.(TimerHandler[K, OUT])
	if !ok {
		// Timers without a handler are dropped, as Flink's default OnTimer
		// does nothing.
		return o.stateErr(o.ptimers.FireDue(now, func(int64) error { return nil }))
	}
	o.ctx.domain = ProcessingTime
	return o.stateErr(o.ptimers.FireDue(now, func(ts int64) error { return th.OnTimer(&o.ctx, ts, o.out) }))
}

func (o *keyedProcessOperator[K, IN, OUT]) advanceWatermark(wm int64) error {
	if wm <= o.watermark {
		return nil
	}
	o.watermark = wm
	th, ok := o.fn.(TimerHandler[K, OUT])
	o.ctx.domain = EventTime
	return o.stateErr(o.etimers.FireDue(wm, func(ts int64) error {
		if !ok {
			return nil
		}
		return th.OnTimer(&o.ctx, ts, o.out)
	}))
}

// endInput: with all input processed, event time reaches its end, so every
// event-time timer fires (Flink emits MAX_WATERMARK at the end of bounded
// input). Processing-time timers do not fire.
func (o *keyedProcessOperator[K, IN, OUT]) endInput() error {
	o.ended = true
	return o.advanceWatermark(math.MaxInt64)
}

func (o *keyedProcessOperator[K, IN, OUT]) close() error {
	var err error
	if c, ok := o.fn.(Closer); ok {
		err = c.Close()
	}
	// The LSM's working directory goes now, or when the last snapshot being
	// written is released.
	return errors.Join(err, o.backend.Dispose())
}

func (o *keyedProcessOperator[K, IN, OUT]) prepareSnapshot(int64) error { return nil }
func (o *keyedProcessOperator[K, IN, OUT]) notifyComplete(id int64) error {
	o.backend.CheckpointComplete(id)
	if !o.ended {
		// A due materialization starts now, between checkpoints (not
		// once the input has ended: the task is about to close, and
		// nothing would refer to it).
		o.tickChangelog()
	}
	return nil
}

func (o *keyedProcessOperator[K, IN, OUT]) notifyAborted(id int64) { o.backend.CheckpointAborted(id) }

func (o *keyedProcessOperator[K, IN, OUT]) idle() { o.tickChangelog() }

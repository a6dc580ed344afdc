package task

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

// Operator is the runtime view of one operator in a chain. The task calls
// these from its own goroutine only.
type Operator interface {
	open(ctx *OpContext) error
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
	// processWatermark takes the chain's watermark (watermark.go) and
	// returns the one to pass on, if any.
	processWatermark(wm int64) (int64, bool, error)
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

// OpContext is what an operator gets when it opens.
type OpContext struct {
	Task           *Task
	UID            string
	MaxParallelism int
	// Index is the operator's place in the task's chain (0: the head).
	Index   int
	Restore *restore.SubtaskRestore // nil: fresh start
	Blocks  *savepoint.BlockReader
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

// CloneFunction gives each subtask its own copy of a function object, as
// Flink gives each parallel instance its own deserialized copy: a pointer
// to a struct is copied shallowly, so fields set in Open (state handles)
// belong to one subtask. Other values are shared as they are.
func CloneFunction[F any](fn F) F { return api.CloneFunction(fn) }

// Fail unwinds a failing user function through the chain's plain calls as
// a panic carrying a userError, which the task recovers into its failure
// (records are pushed by Collect, which has no error result).
func Fail(op string, err error) {
	panic(&userError{op: op, err: err})
}

type baseOperator struct{}

func (baseOperator) open(*OpContext) error                        { return nil }
func (baseOperator) prepareSnapshot(int64) error                  { return nil }
func (baseOperator) snapshot(snapshotRequest) (*opCapture, error) { return nil, nil }
func (baseOperator) notifyComplete(int64) error                   { return nil }
func (baseOperator) notifyAborted(int64)                          {}
func (baseOperator) endInput() error                              { return nil }
func (baseOperator) idle()                                        {}
func (baseOperator) close() error                                 { return nil }
func (baseOperator) nextTimer() (int64, bool)                     { return 0, false }
func (baseOperator) fireTimers(int64) error                       { return nil }
func (baseOperator) processWatermark(wm int64) (int64, bool, error) {
	return wm, true, nil
}

// MapOperator applies F to every record (Map).
type MapOperator[IN, OUT any] struct {
	baseOperator
	F   func(IN) OUT
	Out api.Collector[OUT]
}

func (o *MapOperator[IN, OUT]) Collect(v IN) { o.Out.Collect(o.F(v)) }

// FlatMapOperator calls F for every record (FlatMap).
type FlatMapOperator[IN, OUT any] struct {
	baseOperator
	F   func(IN, api.Collector[OUT])
	Out api.Collector[OUT]
}

func (o *FlatMapOperator[IN, OUT]) Collect(v IN) { o.F(v, o.Out) }

// FilterOperator passes the records F keeps (Filter).
type FilterOperator[T any] struct {
	baseOperator
	F   func(T) bool
	Out api.Collector[T]
}

func (o *FilterOperator[T]) Collect(v T) {
	if o.F(v) {
		o.Out.Collect(v)
	}
}

// MapErrOperator is MapOperator for a function that may fail (MapErr).
type MapErrOperator[IN, OUT any] struct {
	baseOperator
	F    func(IN) (OUT, error)
	Out  api.Collector[OUT]
	Name string
}

func (o *MapErrOperator[IN, OUT]) Collect(v IN) {
	r, err := o.F(v)
	if err != nil {
		Fail(o.Name, err)
	}
	o.Out.Collect(r)
}

// FlatMapErrOperator is FlatMapOperator for a function that may fail.
type FlatMapErrOperator[IN, OUT any] struct {
	baseOperator
	F    func(IN, api.Collector[OUT]) error
	Out  api.Collector[OUT]
	Name string
}

func (o *FlatMapErrOperator[IN, OUT]) Collect(v IN) {
	if err := o.F(v, o.Out); err != nil {
		Fail(o.Name, err)
	}
}

// FilterErrOperator is FilterOperator for a function that may fail.
type FilterErrOperator[T any] struct {
	baseOperator
	F    func(T) (bool, error)
	Out  api.Collector[T]
	Name string
}

func (o *FilterErrOperator[T]) Collect(v T) {
	keep, err := o.F(v)
	if err != nil {
		Fail(o.Name, err)
	}
	if keep {
		o.Out.Collect(v)
	}
}

// UnionOperator passes on the records of all its inputs (Union).
type UnionOperator[T any] struct {
	baseOperator
	Out api.Collector[T]
}

func (o *UnionOperator[T]) Collect(v T) { o.Out.Collect(v) }

// keyedProcessOperatorCore is the key-typed part of a keyed operator: the
// backend and the timers, shared with the Context.
type keyedProcessOperatorCore[K comparable] struct {
	backend     state.Backend[K]
	backends    *StateBackends
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

// HasEventTimers reports whether any key has an event-time timer
// (api.HasEventTimers).
func (c *keyedProcessOperatorCore[K]) HasEventTimers() bool {
	_, ok := c.etimers.Next()
	return ok
}

type keyedProcessOperator[K comparable, IN, OUT any] struct {
	keyedProcessOperatorCore[K]
	// opStates is the function's operator state, if it is an
	// api.OperatorStateOpener (a keyed broadcast function's broadcast
	// state).
	opStates opStateStore
	// bcast is the function if it reads a broadcast input too.
	bcast     api.BroadcastInput[K, IN, OUT]
	changelog *state.ChangelogBackend[K] // nil without the changelog
	// hashed is the backend if it takes the key's hash (hashmap, with or
	// without the changelog).
	hashed state.HashedKeys[K]
	// prefetch and keyWarm warm the backend's tables for keys to come
	// (state.Prefetchers: hashmap from the hash, rocksdb from the key).
	prefetch state.Prefetcher
	keyWarm  state.KeyPrefetcher[K]
	// failed is the failure flag of the store under the state if its
	// accessors can fail (state.Failing: the LSM's), checked after every
	// call into the function; nil for the hashmap, so that its record path
	// pays nothing.
	failed *state.FailureFlag
	clErr  error
	// ts is the task's current record's timestamp: a timer's output
	// carries the timer's time (event time) or none (processing time).
	ts     *int64
	ended  bool // endInput was called: all input is processed
	name   string
	fn     api.KeyedProcessFunction[K, IN, OUT]
	keyFn  func(IN) K
	keySer state.KeySerializer[K]
	out    api.Collector[OUT]
	ctx    api.Context[K]
	sides  map[string]any // side outputs read downstream, by tag id
}

// NewKeyedProcessOperator makes the operator that runs a
// KeyedProcessFunction with keyed state and timers (Process).
func NewKeyedProcessOperator[K comparable, IN, OUT any](rt *BuildContext, fn api.KeyedProcessFunction[K, IN, OUT], keyFn func(IN) K, keySer state.KeySerializer[K], out api.Collector[OUT]) *keyedProcessOperator[K, IN, OUT] {
	op := &keyedProcessOperator[K, IN, OUT]{fn: CloneFunction(fn), keyFn: keyFn, keySer: keySer, out: out, name: rt.Name, sides: rt.SideOutputs}
	op.watermark = math.MinInt64
	op.bcast, _ = op.fn.(api.BroadcastInput[K, IN, OUT])
	return op
}

func (o *keyedProcessOperator[K, IN, OUT]) Collect(v IN) {
	// A broadcast exchange is not keyed, so its records come this way.
	if o.bcast != nil && o.bcast.IsBroadcast(v) {
		if err := o.stateErr(o.bcast.ProcessBroadcast(&o.ctx, v, o.out)); err != nil {
			Fail(o.name, err)
		}
		return
	}
	o.backend.SetCurrentKey(o.keyFn(v))
	if err := o.stateErr(o.fn.ProcessElement(&o.ctx, v, o.out)); err != nil {
		Fail(o.name, err)
	}
}

// stateErr is err, or else the failure of the store under the state, if
// any: state accessors have no error result (state.Failing), so the
// operator asks after every call into the function. What the function
// emitted after the failure was dropped by failGuard.
func (o *keyedProcessOperator[K, IN, OUT]) stateErr(err error) error {
	if err == nil && o.failed != nil {
		err = o.failed.Err()
	}
	return err
}

// failGuard drops what a function emits once the store under its state has
// failed: from then on its state reads found nothing and its writes were
// not made, so its output may be wrong. The task fails as soon as the
// function returns, before a record emitted after the failure could leave
// the operator.
type failGuard[T any] struct {
	out    api.Collector[T]
	failed *state.FailureFlag
}

func (g *failGuard[T]) Collect(v T) {
	if g.failed.Err() == nil {
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
	if err := o.stateErr(o.fn.ProcessElement(&o.ctx, v, o.out)); err != nil {
		Fail(o.name, err)
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

func (o *keyedProcessOperator[K, IN, OUT]) open(ctx *OpContext) error {
	t := ctx.Task
	o.subtask, o.parallelism, o.clock = t.Subtask, t.Parallelism, t.svc.Clock
	kgr := state.RangeForSubtask(ctx.MaxParallelism, t.Parallelism, t.Subtask)
	o.backends, o.uid, o.attempt = t.svc.Backends, ctx.UID, t.svc.Attempt
	var native []restore.NativeRestore
	if ctx.Restore != nil {
		native = ctx.Restore.Native
	}
	backend, err := newKeyedBackend(o.backends, o.keySer, keyedBackendOptions{maxPar: ctx.MaxParallelism, keyGroups: kgr, uid: ctx.UID,
		subtask: t.Subtask, attempt: t.svc.Attempt, fs: ctx.Blocks.FS, snapshotDir: ctx.Blocks.Dir, native: native})
	if err != nil {
		return err
	}
	if f, ok := backend.(state.Failing); ok {
		o.failed = f.Failure()
		o.out = &failGuard[OUT]{out: o.out, failed: o.failed}
	}
	replay := ctx.Restore != nil && len(ctx.Restore.Changelog) > 0
	o.backend = withChangelog(backend, o.backends.changelogConfig(), o.keySer, t, ctx.UID, replay, t.svc.Log)
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
	o.ctx = api.NewContext(o.backend, api.TimerService(&o.keyedProcessOperatorCore), o.subtask, o.parallelism)
	o.ts = &ctx.Task.ts
	api.SetTimestampSource(&o.ctx, o.ts)
	api.SetSideOutputs(&o.ctx, o.sides, func() bool { return o.failed == nil || o.failed.Err() == nil })
	if err := o.openState(ctx); err != nil {
		// close is not called for an operator that failed to open.
		o.backend.Dispose()
		return err
	}
	return nil
}

func (o *keyedProcessOperator[K, IN, OUT]) openState(ctx *OpContext) error {
	var err error
	if ctx.Restore != nil {
		blocks := make([]state.KeyGroupBlock, 0, len(ctx.Restore.KeyGroups))
		for _, kg := range ctx.Restore.KeyGroups {
			block, err := ctx.Blocks.Read(kg.Stream, kg.Offset, kg.Length)
			if err != nil {
				return fmt.Errorf("restore key group %d of operator %s: %w", kg.KeyGroup, ctx.UID, err)
			}
			blocks = append(blocks, state.KeyGroupBlock{KeyGroup: kg.KeyGroup, Block: block})
		}
		// Key groups decode independently: on every core the machine has.
		if err := o.backend.RestoreKeyGroups(blocks, runtime.GOMAXPROCS(0)); err != nil {
			return fmt.Errorf("restore operator %s: %w", ctx.UID, err)
		}
		// Then the changelog since the materialization, replayed as each
		// state registers (timers just below, the function's in Open).
		if err := restoreChangelog(o.backend, ctx.Blocks.FS, o.backends.ChangelogMemory, ctx.Restore.Changelog); err != nil {
			return fmt.Errorf("restore operator %s: %w", ctx.UID, err)
		}
	}
	if o.ptimers, err = state.TimersFor(o.backend, state.KindProcessingTime); err != nil {
		return err
	}
	if o.etimers, err = state.TimersFor(o.backend, state.KindEventTime); err != nil {
		return err
	}
	if op, ok := o.fn.(api.OperatorStateOpener); ok {
		if err := o.opStates.openFunction(ctx, op.OpenOperatorState, o.name); err != nil {
			return err
		}
	}
	if op, ok := o.fn.(api.Opener[K]); ok {
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
	o.opStates.capture(c)
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
		// checkpoint --full (REST FULL) refers to nothing earlier; the
		// checkpoints after it refer to its files.
		opts.Incremental = sb.incremental && req.typ.Kind == savepoint.KindCheckpoint
		opts.Full = req.typ.Full
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
	th, ok := o.fn.(api.TimerHandler[K, OUT])
	if !ok {
		// Timers without a handler are dropped, as Flink's default OnTimer
		// does nothing.
		return o.stateErr(o.ptimers.FireDue(now, func(int64) error { return nil }))
	}
	api.SetTimeDomain(&o.ctx, api.ProcessingTime)
	return o.stateErr(o.ptimers.FireDue(now, func(ts int64) error {
		*o.ts = api.NoTimestamp
		return th.OnTimer(&o.ctx, ts, o.out)
	}))
}

func (o *keyedProcessOperator[K, IN, OUT]) advanceWatermark(wm int64) error {
	if wm <= o.watermark {
		return nil
	}
	o.watermark = wm
	th, ok := o.fn.(api.TimerHandler[K, OUT])
	api.SetTimeDomain(&o.ctx, api.EventTime)
	err := o.stateErr(o.etimers.FireDue(wm, func(ts int64) error {
		if !ok {
			return nil
		}
		*o.ts = ts
		return th.OnTimer(&o.ctx, ts, o.out)
	}))
	if wh, ok := o.fn.(api.WatermarkHandler[K, OUT]); ok && err == nil {
		err = o.stateErr(wh.OnWatermark(&o.ctx, wm, o.out))
	}
	return err
}

// processWatermark fires the event-time timers the watermark passed, then
// passes it on: what they emit goes down the chain before it.
func (o *keyedProcessOperator[K, IN, OUT]) processWatermark(wm int64) (int64, bool, error) {
	if err := o.advanceWatermark(wm); err != nil {
		return 0, false, err
	}
	return wm, true, nil
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
	if c, ok := o.fn.(api.Closer); ok {
		err = c.Close()
	}
	// The LSM's working directory goes now, or when the last snapshot being
	// written is released.
	return errors.Join(err, o.backend.Dispose())
}

// stateInMemory: the keyed state lives in the Go heap (hashmap, with or
// without the changelog), so a snapshot of it stays readable after the
// task has closed and is encoded only if asked for.
func (o *keyedProcessOperator[K, IN, OUT]) stateInMemory() bool {
	b := o.backend
	if o.changelog != nil {
		b = o.changelog.Inner()
	}
	_, heap := b.(*state.KeyedBackend[K])
	return heap
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

// BuildContext is what a node's build function may know.
type BuildContext struct {
	Name string
	// SideOutputs are the collectors (api.Collector of each tag's type)
	// of the node's side outputs that something reads, by tag id.
	SideOutputs map[string]any
}

package task

import (
	"math"
	"time"

	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/internal/api"
)

// Watermarks flow through a task's chain and out to the next tasks:
//
//   - A task fed by a gate combines its channels' watermarks in a valve
//     (Flink's StatusWatermarkValve): its input watermark is the minimum
//     over the active channels, and it moves only forward.
//   - The chain's operators see a watermark in order (forwardWatermark):
//     a keyed process operator fires its event-time timers up to it, whose
//     output goes down the chain first; an operator that generates
//     watermarks of its own (AssignTimestampsAndWatermarks) holds back
//     those from upstream.
//   - The writers broadcast it to every channel, after the records before
//     it.
//
// Watermarks are not part of a snapshot: after a restore, event time
// starts again from the watermarks the generators emit (as in Flink); the
// event-time timers, which are keyed state, fire once it passes them.

// channelWatermark is one input channel's state in the valve.
type channelWatermark struct {
	wm   int64
	idle bool
	// aligned: the channel counts in the minimum (it is active and its
	// watermark has caught up with the valve's output).
	aligned bool
}

// valve is Flink's StatusWatermarkValve over a gate's channels.
type valve struct {
	chans  []channelWatermark
	lastWM int64
	idle   bool // every channel is idle, and so is the valve's output
}

func newValve(n int) *valve {
	v := &valve{chans: make([]channelWatermark, n), lastWM: math.MinInt64}
	for i := range v.chans {
		v.chans[i] = channelWatermark{wm: math.MinInt64, aligned: true}
	}
	return v
}

// watermark takes a channel's watermark and returns the valve's new one,
// if it advanced.
func (v *valve) watermark(ch int, wm int64) (int64, bool) {
	c := &v.chans[ch]
	if v.idle || c.idle || wm <= c.wm {
		return 0, false
	}
	c.wm = wm
	if !c.aligned && wm >= v.lastWM {
		c.aligned = true
	}
	return v.newMin()
}

// status takes a channel's change to idle or active. It returns the
// valve's new watermark (when the channel that held it back went idle),
// and its new status (changed reports whether the valve turned idle or
// active).
func (v *valve) status(ch int, idle bool) (wm int64, advanced, changed bool) {
	c := &v.chans[ch]
	switch {
	case idle && !c.idle:
		c.idle, c.aligned = true, false
		if !v.anyActive() {
			// No channel advances any more: flush to the largest watermark
			// of all, and the valve is idle.
			if c.wm == v.lastWM {
				wm, advanced = v.newMax()
			}
			v.idle = true
			return wm, advanced, true
		}
		if c.wm == v.lastWM {
			// It may have held the minimum back.
			wm, advanced = v.newMin()
		}
		return wm, advanced, false
	case !idle && c.idle:
		c.idle = false
		if c.wm >= v.lastWM {
			c.aligned = true
		}
		if v.idle {
			v.idle = false
			return 0, false, true
		}
	}
	return 0, false, false
}

func (v *valve) anyActive() bool {
	for _, c := range v.chans {
		if !c.idle {
			return true
		}
	}
	return false
}

func (v *valve) newMin() (int64, bool) {
	m, any := int64(math.MaxInt64), false
	for _, c := range v.chans {
		if c.aligned {
			m, any = min(m, c.wm), true
		}
	}
	if any && m > v.lastWM {
		v.lastWM = m
		return m, true
	}
	return 0, false
}

func (v *valve) newMax() (int64, bool) {
	m := int64(math.MinInt64)
	for _, c := range v.chans {
		m = max(m, c.wm)
	}
	if m > v.lastWM {
		v.lastWM = m
		return m, true
	}
	return 0, false
}

// watermarks is what a task tracks of event time: its input's valve, and
// the watermark and status it last sent downstream.
type watermarks struct {
	// ts is the timestamp of the record being processed (api.NoTimestamp
	// if it has none): records carry it across the network, operators
	// pass it on with what they emit, and writers send it along.
	ts      int64
	valve   *valve
	outWM   int64
	outIdle bool
	// interval is pipeline.auto-watermark-interval (0: no periodic
	// watermarks).
	interval time.Duration
}

// onWatermarkEvent feeds an input channel's watermark or status to the
// valve and passes what comes out down the chain.
func (t *Task) onWatermarkEvent(ch int32, ev *network.Event) error {
	if ch < 0 || t.valve == nil {
		return nil
	}
	if ev.Kind == network.EventWatermark {
		if wm, ok := t.valve.watermark(int(ch), ev.Watermark); ok {
			t.M.InputWatermark.Store(wm)
			return t.forwardWatermark(0, wm)
		}
		return nil
	}
	wm, advanced, changed := t.valve.status(int(ch), ev.Idle)
	if advanced {
		t.M.InputWatermark.Store(wm)
		if err := t.forwardWatermark(0, wm); err != nil {
			return err
		}
	}
	if changed {
		t.forwardStatus(0, t.valve.idle)
	}
	return nil
}

// forwardWatermark passes a watermark to the chain's operators from index
// from on, then to the writers, unless an operator holds it back.
func (t *Task) forwardWatermark(from int, wm int64) error {
	for _, op := range t.Ops[from:] {
		var ok bool
		var err error
		if wm, ok, err = op.processWatermark(wm); err != nil {
			return &userError{op: t.Name, err: err}
		} else if !ok {
			return nil
		}
	}
	if wm <= t.outWM {
		return nil
	}
	t.outWM = wm
	t.M.OutputWatermark.Store(wm)
	ev := &network.Event{Kind: network.EventWatermark, Watermark: wm}
	for _, w := range t.Writers {
		w.BroadcastEvent(ev)
	}
	return nil
}

// forwardStatus passes an idle or active status on to the writers, unless
// an operator from index from on generates watermarks of its own.
func (t *Task) forwardStatus(from int, idle bool) {
	for _, op := range t.Ops[from:] {
		if _, ok := op.(watermarkSource); ok {
			return
		}
	}
	if idle == t.outIdle {
		return
	}
	t.outIdle = idle
	ev := &network.Event{Kind: network.EventWatermarkStatus, Idle: idle}
	for _, w := range t.Writers {
		w.BroadcastEvent(ev)
	}
}

// watermarkSource is an operator that generates the watermarks of the
// operators after it.
type watermarkSource interface{ generatesWatermarks() }

// TimestampsAndWatermarksOperator assigns timestamps and generates
// watermarks with a WatermarkStrategy (Flink's
// TimestampsAndWatermarksOperator): records pass unchanged; watermarks come
// from the generator, on records (punctuated) and every
// pipeline.auto-watermark-interval (periodic). Watermarks from upstream
// are held back, but the one that ends event time.
type TimestampsAndWatermarksOperator[T any] struct {
	baseOperator
	Strategy api.WatermarkStrategy[T]
	Out      api.Collector[T]
	assign   api.TimestampAssigner[T]
	gen      api.WatermarkGenerator[T]
	task     *Task
	index    int   // in the chain
	next     int64 // the next periodic emit (Unix ms); 0: none
	lastWM   int64
	isIdle   bool
	// perSplit: the source's own strategy (FromSource with one), with a
	// generator per split (Flink's SourceOperator with split-local
	// watermarks): the output watermark is the minimum over the splits
	// that are not idle. A reader that names no splits has one, "".
	perSplit   bool
	splits     map[string]*splitGen[T]
	cur        *splitGen[T] // the split of the records being collected
	splitAware bool         // the reader has named a split
	// lastTS is the timestamp assigned to the last record (a source's
	// currentEmitEventTimeLag).
	lastTS int64
}

// splitGen is one split's generator and what it has emitted: its own
// WatermarkOutput.
type splitGen[T any] struct {
	op   *TimestampsAndWatermarksOperator[T]
	gen  api.WatermarkGenerator[T]
	wm   int64
	idle bool
}

func (g *splitGen[T]) EmitWatermark(wm int64) {
	changed := g.idle || wm > g.wm
	g.idle = false
	g.wm = max(g.wm, wm)
	if changed {
		g.op.combine()
	}
}

func (g *splitGen[T]) MarkIdle() {
	if !g.idle {
		g.idle = true
		g.op.combine()
	}
}

func (g *splitGen[T]) MarkActive() {
	if g.idle {
		g.idle = false
		g.op.combine()
	}
}

// split returns the generator of the split called id, made on first use.
func (o *TimestampsAndWatermarksOperator[T]) split(id string) *splitGen[T] {
	g := o.splits[id]
	if g == nil {
		g = &splitGen[T]{op: o, gen: o.Strategy.CreateGenerator(o.task.svc.Clock), wm: math.MinInt64}
		o.splits[id] = g
	}
	return g
}

// SelectSplit makes the records collected next those of the split a
// handle from SplitHandle names.
func (o *TimestampsAndWatermarksOperator[T]) SelectSplit(h any) { o.cur = h.(*splitGen[T]) }

// SplitHandle names a split of the source's reader, which then holds the
// watermark back until it emits one or goes idle.
func (o *TimestampsAndWatermarksOperator[T]) SplitHandle(id string) any {
	o.splitAware = true
	return o.split(id)
}

// ReleaseSplit drops a finished split's generator: it no longer holds the
// watermark back.
func (o *TimestampsAndWatermarksOperator[T]) ReleaseSplit(id string) {
	if g := o.splits[id]; g != nil {
		delete(o.splits, id)
		if o.cur == g {
			o.cur = nil
		}
		o.combine()
	}
}

// combine emits the minimum watermark of the splits that are not idle, or
// marks the output idle when all are (or, for a reader that names its
// splits, when it has none).
func (o *TimestampsAndWatermarksOperator[T]) combine() {
	wm, active := int64(math.MaxInt64), false
	for _, g := range o.splits {
		if !g.idle {
			wm, active = min(wm, g.wm), true
		}
	}
	if !active {
		// All idle: as the valve does when its last active channel goes
		// idle, event time first advances to the largest watermark any
		// split reached (else whichever split went idle last would decide
		// whether the others' progress is ever emitted).
		top := int64(math.MinInt64)
		for _, g := range o.splits {
			top = max(top, g.wm)
		}
		if top > math.MinInt64 {
			o.EmitWatermark(top)
		}
		if len(o.splits) > 0 || o.splitAware {
			o.MarkIdle()
		}
		return
	}
	o.MarkActive()
	if wm > math.MinInt64 {
		o.EmitWatermark(wm)
	}
}

func (o *TimestampsAndWatermarksOperator[T]) generatesWatermarks() {}

func (o *TimestampsAndWatermarksOperator[T]) open(ctx *OpContext) error {
	o.task, o.index, o.lastWM, o.lastTS = ctx.Task, ctx.Index, math.MinInt64, api.NoTimestamp
	o.assign = o.Strategy.TimestampAssigner()
	if o.perSplit {
		o.splits = map[string]*splitGen[T]{}
	} else {
		o.gen = o.Strategy.CreateGenerator(ctx.Task.svc.Clock)
	}
	if iv := ctx.Task.interval; iv > 0 {
		o.next = ctx.Task.svc.Clock().Add(iv).UnixMilli()
	}
	return nil
}

func (o *TimestampsAndWatermarksOperator[T]) Collect(v T) {
	ts := o.assign(v, o.task.ts)
	o.task.ts, o.lastTS = ts, ts
	o.Out.Collect(v)
	if !o.perSplit {
		o.gen.OnEvent(v, ts, o)
		return
	}
	g := o.cur
	if g == nil {
		g = o.split("")
	}
	g.gen.OnEvent(v, ts, g)
}

// EmitWatermark is the generator's output: a watermark goes to the
// operators after this one.
func (o *TimestampsAndWatermarksOperator[T]) EmitWatermark(wm int64) {
	if wm <= o.lastWM {
		return
	}
	o.lastWM = wm
	if o.isIdle {
		o.MarkActive()
	}
	if err := o.task.forwardWatermark(o.index+1, wm); err != nil {
		panic(err) // a userError from a timer downstream: the task fails with it
	}
}

func (o *TimestampsAndWatermarksOperator[T]) MarkIdle() {
	if !o.isIdle {
		o.isIdle = true
		o.task.forwardStatus(o.index+1, true)
	}
}

func (o *TimestampsAndWatermarksOperator[T]) MarkActive() {
	if o.isIdle {
		o.isIdle = false
		o.task.forwardStatus(o.index+1, false)
	}
}

// processWatermark holds upstream watermarks back but the last, which ends
// event time (the end of a bounded input, stop --drain).
func (o *TimestampsAndWatermarksOperator[T]) processWatermark(wm int64) (int64, bool, error) {
	if wm == math.MaxInt64 && o.lastWM < wm {
		o.lastWM = wm
		return wm, true, nil
	}
	return 0, false, nil
}

func (o *TimestampsAndWatermarksOperator[T]) nextTimer() (int64, bool) { return o.next, o.next != 0 }

func (o *TimestampsAndWatermarksOperator[T]) fireTimers(now int64) error {
	if o.next == 0 || now < o.next {
		return nil
	}
	if o.perSplit {
		for _, g := range o.splits {
			g.gen.OnPeriodicEmit(g)
		}
		if len(o.splits) == 0 && o.splitAware {
			o.MarkIdle() // a reader with no splits (more subtasks than partitions)
		}
	} else {
		o.gen.OnPeriodicEmit(o)
	}
	o.next = now + o.task.interval.Milliseconds()
	return nil
}

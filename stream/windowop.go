package stream

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/internal/api"
)

// windowOperator is Flink's WindowOperator as a keyed process function:
// per key, each open window's entry (contents, trigger timers and trigger
// state) in map state by the window's start, event-time or
// processing-time timers for its trigger and its cleanup.
type windowOperator[K comparable, T, ACC, OUT any] struct {
	a        WindowAssigner
	trigger  Trigger[T]
	lateness int64
	lateTag  *OutputTag[T]
	fns      func() windowFns[K, T, ACC, OUT]
	windowFns[K, T, ACC, OUT]

	entries windowMap[ACC]
	// record: the trigger is not a built-in one, so each window keeps the
	// timers its trigger registered and is handed only those. Built-in
	// triggers check a timer's time themselves.
	record bool
	// direct: the default trigger of a tumbling or sliding assigner: the
	// window a timer fires (or cleans up) is found from the timer's time.
	direct bool
	// swept: direct, in event time, without allowed lateness (see
	// Open). No timer is set: when the watermark passes a window's end,
	// the window is swept out of every key's entries in one pass over the
	// state (OnWatermark). accs are its windows, their accumulators alone
	// (entries is not declared then); ends the last milliseconds of the
	// windows that may have entries, ascending; lastEnd the one noted
	// last.
	swept   bool
	accs    state.MapState[int64, ACC]
	ends    []int64
	lastEnd int64
	// late counts the records dropped as late (Flink's
	// numLateRecordsDropped).
	late int64
	// pane is the start of the slide the last record of a swept operator
	// fell in (paneSet: there was one).
	pane    int64
	paneSet bool
	// upsert is accs when it reads and writes an entry in one lookup (the
	// hashmap backend's); addCur adds cur, the record being processed, to
	// an accumulator of the window ending at curEnd.
	upsert interface {
		Upsert(uk int64, f func(acc ACC, ok bool) ACC)
	}
	addCur func(acc ACC, ok bool) ACC
	cur    T
	curEnd int64
	tc     triggerCtx[K, ACC]
	buf    []TimeWindow
}

// winEntry is one window of a key: its end (for merged session windows),
// its contents, and its trigger's timers and state — kept apart, nil for
// the default triggers, so that an entry is small.
type winEntry[ACC any] struct {
	end  int64
	acc  ACC
	has  bool // acc holds records (not after a purge)
	meta *winMeta
}

// winMeta is what a trigger keeps with its window. Stored entries are not
// modified in place (a snapshot may be reading them): a trigger context
// copies it before its first change.
type winMeta struct {
	timers  []int64 // event-time timers a custom trigger registered
	ptimers []int64 // processing-time ones
	trig    []trigValue
}

func (m *winMeta) clone() *winMeta {
	if m == nil {
		return &winMeta{}
	}
	return &winMeta{timers: slices.Clone(m.timers), ptimers: slices.Clone(m.ptimers), trig: slices.Clone(m.trig)}
}

func (m *winMeta) empty() bool {
	return m == nil || len(m.timers) == 0 && len(m.ptimers) == 0 && len(m.trig) == 0
}

type trigValue struct {
	name string
	v    int64
}

func isBuiltin[T any](t Trigger[T]) bool {
	if p, ok := t.(purgingTrigger[T]); ok {
		return isBuiltin(p.t)
	}
	_, ok := t.(builtinTrigger)
	return ok
}

func (o *windowOperator[K, T, ACC, OUT]) Open(ctx *Context[K]) (err error) {
	if err := o.a.check(); err != nil {
		return err
	}
	o.windowFns = o.fns()
	if o.a.merging() {
		if _, ok := o.trigger.(MergingTrigger); !ok {
			return fmt.Errorf("trigger %v cannot be used with session windows: it must implement OnMerge (MergingTrigger)", o.trigger)
		}
	}
	o.record = !isBuiltin(o.trigger)
	switch o.trigger.(type) {
	case eventTimeTrigger[T], processingTimeTrigger[T]:
		o.direct = !o.a.merging() && !o.a.global
	}
	o.tc.record = o.record
	// Restored event-time timers mean the state comes from an operator
	// that set them (one that allowed lateness, or an older gflink): its
	// windows that fired but were kept for the lateness are told from
	// pending ones only by their timers, so this run goes on setting
	// timers. A swept operator sets none, and keeps no fired window.
	timed := api.HasEventTimers(ctx)
	o.swept = o.direct && !o.a.processing && o.lateness == 0 && !timed
	o.ends, o.lastEnd = nil, math.MinInt64
	if o.swept {
		return o.openSwept(ctx)
	}
	var size int64
	if o.direct {
		size = o.a.size
	}
	if o.entries, err = newWindowMap[ACC](ctx, windowContents, size); err != nil || !o.direct || o.a.processing || timed {
		return err
	}
	// Windows restored without timers come from a swept operator: all of
	// them are pending; they get the timers this operator sets.
	return api.ApplyToKeyedState(ctx, windowContents, func(K) error {
		o.entries.All(func(start int64, e winEntry[ACC]) bool {
			w := TimeWindow{start, e.end}
			ctx.TimerService().RegisterEventTimeTimer(w.MaxTimestamp())
			o.registerCleanup(ctx.TimerService(), w)
			return true
		})
		return nil
	})
}

// openSwept declares a swept operator's state and notes the ends of the
// windows restored into it.
func (o *windowOperator[K, T, ACC, OUT]) openSwept(ctx *Context[K]) (err error) {
	o.accs, err = api.GetSlicedMapStateWith[int64, ACC](ctx, windowContents, state.SerializerFor[int64](),
		sweptSerializer[ACC]{state.SerializerFor[ACC]()})
	if err != nil {
		return err
	}
	o.upsert, _ = o.accs.(interface {
		Upsert(uk int64, f func(acc ACC, ok bool) ACC)
	})
	o.addCur = func(acc ACC, ok bool) ACC {
		if !ok {
			o.noteEnd(o.curEnd)
		}
		return o.add(acc, ok, o.cur)
	}
	if u, ok := o.accs.(interface{ UserKeys(func(int64)) }); ok {
		// A table per window: its windows are its user keys.
		u.UserKeys(func(start int64) { o.noteEnd(start + o.a.size - 1) })
		return nil
	}
	return api.ApplyToKeyedState(ctx, windowContents, func(K) error {
		o.accs.All(func(start int64, _ ACC) bool {
			o.noteEnd(start + o.a.size - 1)
			return true
		})
		return nil
	})
}

// windowContents names the window operator's map state.
const windowContents = "window-contents"

// noteEnd notes that a window ending at t (its last millisecond) has
// entries. Records mostly fall in the window noted last.
func (o *windowOperator[K, T, ACC, OUT]) noteEnd(t int64) {
	if t == o.lastEnd {
		return
	}
	o.lastEnd = t
	if i, found := slices.BinarySearch(o.ends, t); !found {
		o.ends = slices.Insert(o.ends, i, t)
	}
}

// OnWatermark fires, in the order of their ends, the windows of a swept
// operator that the watermark passed: each key's entry for the window is
// handed to the window's function and removed, as the default trigger's
// timer and the cleanup would have done for each key.
func (o *windowOperator[K, T, ACC, OUT]) OnWatermark(ctx *Context[K], wm int64, out Collector[OUT]) error {
	if !o.swept || len(o.ends) == 0 || o.ends[0] > wm {
		return nil
	}
	saved := ctx.Timestamp()
	defer api.SetOutputTimestamp(ctx, saved)
	for len(o.ends) > 0 && o.ends[0] <= wm {
		t := o.ends[0]
		o.ends = o.ends[1:]
		start := t + 1 - o.a.size
		api.SetOutputTimestamp(ctx, t)
		err := api.SweepMapEntry(ctx, windowContents, o.accs, start, func(key K, acc ACC) error {
			return o.fire(key, TimeWindow{start, start + o.a.size}, acc, out)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// cleanupTime is when a window's state goes: its end plus the allowed
// lateness in event time (the end of time if that overflows, as in
// Flink), its end in processing time.
func (o *windowOperator[K, T, ACC, OUT]) cleanupTime(w TimeWindow) int64 {
	c := w.MaxTimestamp() + o.lateness
	if c < w.MaxTimestamp() {
		return math.MaxInt64
	}
	return c
}

func (o *windowOperator[K, T, ACC, OUT]) registerCleanup(timers TimerService, w TimeWindow) {
	c := o.cleanupTime(w)
	if c == math.MaxInt64 || w == globalWindow {
		return // the end of time: the state stays (Flink sets no timer)
	}
	if c == w.MaxTimestamp() && o.direct {
		return // the default trigger registered this very timer
	}
	if o.a.processing {
		timers.RegisterProcessingTimeTimer(c)
	} else {
		timers.RegisterEventTimeTimer(c)
	}
}

func (o *windowOperator[K, T, ACC, OUT]) isLate(w TimeWindow, wm int64) bool {
	return !o.a.processing && o.cleanupTime(w) <= wm
}

func (o *windowOperator[K, T, ACC, OUT]) ProcessElement(ctx *Context[K], in T, out Collector[OUT]) error {
	timers := ctx.TimerService()
	ts := ctx.Timestamp()
	if o.a.processing {
		ts = timers.CurrentProcessingTime()
	} else if ts == NoTimestamp && !o.a.global {
		return fmt.Errorf("a record without a timestamp reached an event-time window: assign timestamps upstream with AssignTimestampsAndWatermarks")
	}
	wm := timers.CurrentWatermark()
	if o.swept {
		o.processSwept(ctx, ts, wm, in)
		return nil
	}
	o.buf = o.a.windows(ts, o.buf[:0])
	if o.a.merging() {
		merged, err := o.mergeSession(ctx, o.buf[0], wm)
		if err != nil {
			return err
		}
		o.buf = o.buf[:0]
		if merged != nil {
			o.buf = append(o.buf, *merged)
		}
	}
	skipped := true
	for _, w := range o.buf {
		if o.isLate(w, wm) {
			continue
		}
		skipped = false
		e, ok := o.entries.Get(w.Start)
		if ok && o.direct && (o.a.processing || w.MaxTimestamp() > wm) {
			// The default trigger's timer (and the cleanup timer) were
			// registered with the window's first record: nothing but the
			// contents changes (and the default trigger never purges).
			e.acc = o.add(e.acc, true, in)
			o.entries.Put(w.Start, e)
			continue
		}
		if !ok {
			e.end = w.End
		}
		e.acc = o.add(e.acc, e.has, in)
		e.has = true
		o.tc.on(ctx, &e)
		res := o.trigger.OnElement(in, ts, w, &o.tc)
		if err := o.emit(ctx, &e, w, res, out); err != nil {
			return err
		}
		o.entries.Put(w.Start, e)
		o.registerCleanup(timers, w)
	}
	if skipped && !o.a.processing && ctx.Timestamp()+o.lateness <= wm {
		o.dropLate(ctx, in)
	}
	return nil
}

// dropLate sends a record no window took to the late side output, or
// counts it.
func (o *windowOperator[K, T, ACC, OUT]) dropLate(ctx *Context[K], in T) {
	if o.lateTag != nil {
		Output(ctx, *o.lateTag, in)
	} else {
		o.late++
	}
}

// processSwept is ProcessElement for a swept operator: the record is added
// to the accumulator of each of its windows the watermark has not passed.
// Its windows start at the start of the slide it falls in (kept from the
// record before: records mostly fall in the same one, and a division per
// record was 7 % of a tumbling count) and every slide before, back to
// size; they are late from the first one whose end the watermark passed.
func (o *windowOperator[K, T, ACC, OUT]) processSwept(ctx *Context[K], ts, wm int64, in T) {
	a := &o.a
	if !o.paneSet || ts < o.pane || uint64(ts-o.pane) >= uint64(a.slide) {
		o.pane, o.paneSet = ts-mod(ts-a.offset, a.slide), true
	}
	skipped := true
	for start := o.pane; start > ts-a.size; start -= a.slide {
		end := start + a.size - 1
		if end < start {
			continue // past the end of time (as windows skips it)
		}
		if end <= wm {
			break
		}
		skipped = false
		if o.upsert != nil {
			o.cur, o.curEnd = in, end
			o.upsert.Upsert(start, o.addCur)
			continue
		}
		acc, ok := o.accs.Get(start)
		if !ok {
			o.noteEnd(end)
		}
		o.accs.Put(start, o.add(acc, ok, in))
	}
	var zero T
	o.cur = zero // not kept past the record
	if skipped && ts <= wm {
		o.dropLate(ctx, in)
	}
}

// emit acts on what the trigger decided for window w: the window's
// function runs, stamped with the window's last millisecond (as Flink's
// TimestampedCollector does), and its contents may go.
func (o *windowOperator[K, T, ACC, OUT]) emit(ctx *Context[K], e *winEntry[ACC], w TimeWindow, res TriggerResult, out Collector[OUT]) error {
	if res.fires() && e.has {
		saved := ctx.Timestamp()
		api.SetOutputTimestamp(ctx, w.MaxTimestamp())
		err := o.fire(ctx.CurrentKey(), w, e.acc, out)
		api.SetOutputTimestamp(ctx, saved)
		if err != nil {
			return err
		}
	}
	if res.purges() {
		var zero ACC
		e.acc, e.has = zero, false
	}
	return nil
}

// mergeSession adds the session window w of a new record to the key's
// sessions: the sessions it touches merge into one window, with their
// contents merged (Flink's MergingWindowSet). It returns the window the
// record goes to, nil if it is late.
func (o *windowOperator[K, T, ACC, OUT]) mergeSession(ctx *Context[K], w TimeWindow, wm int64) (*TimeWindow, error) {
	type old struct {
		w TimeWindow
		e winEntry[ACC]
	}
	var hit []old
	o.entries.All(func(start int64, e winEntry[ACC]) bool {
		if ow := (TimeWindow{start, e.end}); ow.Intersects(w) {
			hit = append(hit, old{ow, e})
		}
		return true
	})
	if len(hit) == 0 {
		if o.isLate(w, wm) {
			return nil, nil
		}
		return &w, nil
	}
	merged := w
	for _, h := range hit {
		merged = merged.Cover(h.w)
	}
	if len(hit) == 1 && hit[0].w == merged {
		return &merged, nil // the record falls in a session as it is
	}
	// Sessions merge: the new window gets their contents, then their
	// trigger state through OnMerge; they go.
	slices.SortFunc(hit, func(a, b old) int { return cmp.Compare(a.w.Start, b.w.Start) })
	e := winEntry[ACC]{end: merged.End}
	var states [][]trigValue
	for _, h := range hit {
		if h.e.has {
			if e.has {
				e.acc = o.merge(e.acc, h.e.acc)
			} else {
				e.acc, e.has = h.e.acc, true
			}
		}
		if h.e.meta != nil {
			states = append(states, h.e.meta.trig)
		}
		he := h.e
		o.tc.on(ctx, &he)
		o.trigger.Clear(h.w, &o.tc)
		o.entries.Remove(h.w.Start)
	}
	mc := mergeCtx[K, ACC]{triggerCtx: o.tc, merged: states}
	mc.on(ctx, &e)
	o.trigger.(MergingTrigger).OnMerge(merged, &mc)
	o.entries.Put(merged.Start, e)
	return &merged, nil
}

// OnTimer hands the timer to the trigger of each window of the key it
// belongs to, and drops the windows whose cleanup time it is.
func (o *windowOperator[K, T, ACC, OUT]) OnTimer(ctx *Context[K], ts int64, out Collector[OUT]) error {
	eventTime := ctx.TimeDomain() == EventTime
	type cand struct {
		start int64
		e     winEntry[ACC]
	}
	var cands []cand
	if o.direct {
		size := o.a.size
		starts := []int64{ts + 1 - size}
		if o.lateness > 0 && !o.a.processing {
			starts = append(starts, ts+1-o.lateness-size)
		}
		for _, s := range starts {
			if e, ok := o.entries.Get(s); ok {
				cands = append(cands, cand{s, e})
			}
		}
	} else {
		o.entries.All(func(s int64, e winEntry[ACC]) bool {
			cands = append(cands, cand{s, e})
			return true
		})
	}
	for _, c := range cands {
		w := TimeWindow{c.start, c.e.end}
		e := c.e
		deliver := true
		if o.record {
			list := e.meta.ptimersOf()
			if eventTime {
				list = e.meta.timersOf()
			}
			if deliver = slices.Contains(list, ts); deliver {
				e.meta = e.meta.clone()
				if eventTime {
					e.meta.timers = slices.DeleteFunc(e.meta.timers, func(t int64) bool { return t == ts })
				} else {
					e.meta.ptimers = slices.DeleteFunc(e.meta.ptimers, func(t int64) bool { return t == ts })
				}
			}
		}
		if deliver {
			o.tc.on(ctx, &e)
			var res TriggerResult
			if eventTime {
				res = o.trigger.OnEventTime(ts, w, &o.tc)
			} else {
				res = o.trigger.OnProcessingTime(ts, w, &o.tc)
			}
			if err := o.emit(ctx, &e, w, res, out); err != nil {
				return err
			}
		}
		if eventTime != o.a.processing && ts == o.cleanupTime(w) && w != globalWindow {
			o.tc.on(ctx, &e)
			o.trigger.Clear(w, &o.tc)
			o.entries.Remove(c.start)
			continue
		}
		if deliver {
			o.entries.Put(c.start, e)
		}
	}
	return nil
}

// triggerCtx is the TriggerContext of one window: on points it at the
// window's entry.
type triggerCtx[K comparable, ACC any] struct {
	ctx    *Context[K]
	e      *winEntry[ACC]
	record bool
	copied bool // e.meta is the context's own copy
}

func (c *triggerCtx[K, ACC]) on(ctx *Context[K], e *winEntry[ACC]) {
	c.ctx, c.e, c.copied = ctx, e, false
}

// meta is the window's meta for a change: copied first (see winMeta).
func (c *triggerCtx[K, ACC]) meta() *winMeta {
	if !c.copied {
		c.e.meta, c.copied = c.e.meta.clone(), true
	}
	return c.e.meta
}

func (m *winMeta) timersOf() []int64 {
	if m == nil {
		return nil
	}
	return m.timers
}

func (m *winMeta) ptimersOf() []int64 {
	if m == nil {
		return nil
	}
	return m.ptimers
}

func (m *winMeta) trigOf() []trigValue {
	if m == nil {
		return nil
	}
	return m.trig
}

func (c *triggerCtx[K, ACC]) CurrentWatermark() int64 {
	return c.ctx.TimerService().CurrentWatermark()
}
func (c *triggerCtx[K, ACC]) CurrentProcessingTime() int64 {
	return c.ctx.TimerService().CurrentProcessingTime()
}
func (c *triggerCtx[K, ACC]) RegisterEventTimeTimer(ts int64) {
	c.ctx.TimerService().RegisterEventTimeTimer(ts)
	if c.record && !slices.Contains(c.e.meta.timersOf(), ts) {
		m := c.meta()
		m.timers = append(m.timers, ts)
	}
}
func (c *triggerCtx[K, ACC]) RegisterProcessingTimeTimer(ts int64) {
	c.ctx.TimerService().RegisterProcessingTimeTimer(ts)
	if c.record && !slices.Contains(c.e.meta.ptimersOf(), ts) {
		m := c.meta()
		m.ptimers = append(m.ptimers, ts)
	}
}

// A deleted timer stays in the timer service, which is shared by all of
// the key's windows (another may have registered the same time): it only
// stops being the window's.
func (c *triggerCtx[K, ACC]) DeleteEventTimeTimer(ts int64) {
	if slices.Contains(c.e.meta.timersOf(), ts) {
		m := c.meta()
		m.timers = slices.DeleteFunc(m.timers, func(t int64) bool { return t == ts })
	}
}
func (c *triggerCtx[K, ACC]) DeleteProcessingTimeTimer(ts int64) {
	if slices.Contains(c.e.meta.ptimersOf(), ts) {
		m := c.meta()
		m.ptimers = slices.DeleteFunc(m.ptimers, func(t int64) bool { return t == ts })
	}
}
func (c *triggerCtx[K, ACC]) State(name string) (int64, bool) {
	for _, v := range c.e.meta.trigOf() {
		if v.name == name {
			return v.v, true
		}
	}
	return 0, false
}
func (c *triggerCtx[K, ACC]) SetState(name string, v int64) {
	m := c.meta()
	for i := range m.trig {
		if m.trig[i].name == name {
			m.trig[i].v = v
			return
		}
	}
	m.trig = append(m.trig, trigValue{name, v})
}
func (c *triggerCtx[K, ACC]) ClearState(name string) {
	if _, ok := c.State(name); ok {
		m := c.meta()
		m.trig = slices.DeleteFunc(m.trig, func(v trigValue) bool { return v.name == name })
	}
}

// mergeCtx is the OnMergeContext of a merged session window.
type mergeCtx[K comparable, ACC any] struct {
	triggerCtx[K, ACC]
	merged [][]trigValue
}

func (c *mergeCtx[K, ACC]) MergedStates(name string) []int64 {
	var out []int64
	for _, vs := range c.merged {
		for _, v := range vs {
			if v.name == name {
				out = append(out, v.v)
			}
		}
	}
	return out
}

// winEntrySerializer encodes a window's entry: end, contents, then the
// trigger's timers and values (empty for the built-in triggers but the
// count and continuous ones).
type winEntrySerializer[ACC any] struct{ acc state.Serializer[ACC] }

func (s winEntrySerializer[ACC]) Append(dst []byte, e winEntry[ACC]) []byte {
	dst = binary.AppendVarint(dst, e.end)
	var flags byte
	if e.has {
		flags |= 1
	}
	if !e.meta.empty() {
		flags |= 2
	}
	dst = append(dst, flags)
	if e.has {
		dst = s.acc.Append(dst, e.acc)
	}
	if flags&2 == 0 {
		return dst
	}
	m := e.meta
	for _, l := range [][]int64{m.timers, m.ptimers} {
		dst = binary.AppendUvarint(dst, uint64(len(l)))
		for _, t := range l {
			dst = binary.AppendVarint(dst, t)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.trig)))
	for _, v := range m.trig {
		dst = binary.AppendUvarint(dst, uint64(len(v.name)))
		dst = append(dst, v.name...)
		dst = binary.AppendVarint(dst, v.v)
	}
	return dst
}

func (s winEntrySerializer[ACC]) Decode(src []byte) (e winEntry[ACC], rest []byte, err error) {
	var k int
	bad := func(what string) (winEntry[ACC], []byte, error) {
		return e, nil, fmt.Errorf("window entry: cut or corrupt %s", what)
	}
	if e.end, k = binary.Varint(src); k <= 0 || len(src) < k+1 {
		return bad("end")
	}
	flags := src[k]
	src = src[k+1:]
	if flags&^3 != 0 {
		return bad("flags")
	}
	if flags&1 != 0 {
		e.has = true
		if e.acc, src, err = s.acc.Decode(src); err != nil {
			return e, nil, fmt.Errorf("window contents: %w", err)
		}
	}
	if flags&2 == 0 {
		return e, src, nil
	}
	m := &winMeta{}
	e.meta = m
	for _, l := range []*[]int64{&m.timers, &m.ptimers} {
		n, k := binary.Uvarint(src)
		if k <= 0 || n > uint64(len(src)) {
			return bad("timers")
		}
		src = src[k:]
		for range n {
			t, k := binary.Varint(src)
			if k <= 0 {
				return bad("timer")
			}
			*l = append(*l, t)
			src = src[k:]
		}
	}
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)) {
		return bad("trigger state")
	}
	src = src[k:]
	for range n {
		l, k := binary.Uvarint(src)
		if k <= 0 || uint64(len(src)-k) < l {
			return bad("trigger state name")
		}
		name := string(src[k : k+int(l)])
		src = src[k+int(l):]
		v, k := binary.Varint(src)
		if k <= 0 {
			return bad("trigger state value")
		}
		m.trig = append(m.trig, trigValue{name, v})
		src = src[k:]
	}
	return e, src, nil
}

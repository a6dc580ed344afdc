package stream

import (
	"fmt"
	"time"
)

// TriggerResult is what a Trigger decides (Flink's TriggerResult): whether
// the window's function runs now (fire) and whether its contents go
// (purge; the window's trigger state and timers stay).
type TriggerResult uint8

// What a trigger decides.
const (
	Continue     TriggerResult = iota // nothing happens
	Fire                              // the window's function runs; its contents stay
	Purge                             // the window's contents go
	FireAndPurge                      // both
)

func (r TriggerResult) fires() bool  { return r == Fire || r == FireAndPurge }
func (r TriggerResult) purges() bool { return r == Purge || r == FireAndPurge }

// Trigger decides when a window's function runs (Flink's Trigger). Each
// method is called for one window of the current key, whose trigger
// context keeps timers and state of that window only. A timer the trigger
// deletes may still wake the operator; it is not handed to the trigger.
type Trigger[T any] interface {
	// OnElement is called for every record added to the window.
	OnElement(element T, timestamp int64, w TimeWindow, ctx TriggerContext) TriggerResult
	// OnEventTime is called when an event-time timer the trigger
	// registered for the window fires.
	OnEventTime(time int64, w TimeWindow, ctx TriggerContext) TriggerResult
	// OnProcessingTime is called when a processing-time timer the trigger
	// registered for the window fires.
	OnProcessingTime(time int64, w TimeWindow, ctx TriggerContext) TriggerResult
	// Clear is called when the window goes; it removes the trigger's state.
	Clear(w TimeWindow, ctx TriggerContext)
}

// MergingTrigger is a Trigger that can be used with session windows: when
// windows merge, OnMerge sets up the merged window (its timers, and its
// state from MergedStates).
type MergingTrigger interface {
	OnMerge(w TimeWindow, ctx OnMergeContext)
}

// TriggerContext is a trigger's view of one window (Flink's
// Trigger.TriggerContext): the clocks, the window's timers, and small
// named int64 values kept with the window in keyed state.
type TriggerContext interface {
	CurrentWatermark() int64
	CurrentProcessingTime() int64
	RegisterEventTimeTimer(ts int64)
	DeleteEventTimeTimer(ts int64)
	RegisterProcessingTimeTimer(ts int64)
	DeleteProcessingTimeTimer(ts int64)
	// State is the window's value called name, if set.
	State(name string) (int64, bool)
	SetState(name string, v int64)
	ClearState(name string)
}

// OnMergeContext is a TriggerContext of the merged window that also gives
// the values the merged windows had.
type OnMergeContext interface {
	TriggerContext
	// MergedStates are the values called name of the windows merged.
	MergedStates(name string) []int64
}

// builtinTrigger marks the built-in triggers, which check a timer's time
// themselves: the operator hands them every timer of the key without
// keeping a list of each window's timers.
type builtinTrigger interface{ checksTimerTimes() }

// EventTimeTrigger fires a window once the watermark passes its end, and
// again for each late record within the allowed lateness (the default of
// event-time windows).
func EventTimeTrigger[T any]() Trigger[T] { return eventTimeTrigger[T]{} }

type eventTimeTrigger[T any] struct{}

func (eventTimeTrigger[T]) checksTimerTimes() {}
func (eventTimeTrigger[T]) String() string    { return "EventTimeTrigger" }
func (eventTimeTrigger[T]) OnElement(_ T, _ int64, w TimeWindow, ctx TriggerContext) TriggerResult {
	if w.MaxTimestamp() <= ctx.CurrentWatermark() {
		return Fire // late, within the allowed lateness
	}
	ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	return Continue
}
func (eventTimeTrigger[T]) OnEventTime(time int64, w TimeWindow, _ TriggerContext) TriggerResult {
	if time == w.MaxTimestamp() {
		return Fire
	}
	return Continue
}
func (eventTimeTrigger[T]) OnProcessingTime(int64, TimeWindow, TriggerContext) TriggerResult {
	return Continue
}
func (eventTimeTrigger[T]) Clear(w TimeWindow, ctx TriggerContext) {
	ctx.DeleteEventTimeTimer(w.MaxTimestamp())
}
func (eventTimeTrigger[T]) OnMerge(w TimeWindow, ctx OnMergeContext) {
	if w.MaxTimestamp() > ctx.CurrentWatermark() {
		ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	}
}

// ProcessingTimeTrigger fires a window when the clock passes its end (the
// default of processing-time windows).
func ProcessingTimeTrigger[T any]() Trigger[T] { return processingTimeTrigger[T]{} }

type processingTimeTrigger[T any] struct{}

func (processingTimeTrigger[T]) checksTimerTimes() {}
func (processingTimeTrigger[T]) String() string    { return "ProcessingTimeTrigger" }
func (processingTimeTrigger[T]) OnElement(_ T, _ int64, w TimeWindow, ctx TriggerContext) TriggerResult {
	ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
	return Continue
}
func (processingTimeTrigger[T]) OnEventTime(int64, TimeWindow, TriggerContext) TriggerResult {
	return Continue
}
func (processingTimeTrigger[T]) OnProcessingTime(time int64, w TimeWindow, _ TriggerContext) TriggerResult {
	if time == w.MaxTimestamp() {
		return Fire
	}
	return Continue
}
func (processingTimeTrigger[T]) Clear(w TimeWindow, ctx TriggerContext) {
	ctx.DeleteProcessingTimeTimer(w.MaxTimestamp())
}
func (processingTimeTrigger[T]) OnMerge(w TimeWindow, ctx OnMergeContext) {
	if w.MaxTimestamp() > ctx.CurrentProcessingTime() {
		ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
	}
}

// CountTrigger fires a window every n records added to it (Flink's
// CountTrigger.of); the window still goes at its end, without firing.
func CountTrigger[T any](n int64) Trigger[T] { return countTrigger[T]{n: n} }

type countTrigger[T any] struct{ n int64 }

func (countTrigger[T]) checksTimerTimes() {}
func (t countTrigger[T]) String() string  { return fmt.Sprintf("CountTrigger(%d)", t.n) }
func (t countTrigger[T]) OnElement(_ T, _ int64, _ TimeWindow, ctx TriggerContext) TriggerResult {
	c, _ := ctx.State("count")
	if c+1 >= t.n {
		ctx.ClearState("count")
		return Fire
	}
	ctx.SetState("count", c+1)
	return Continue
}
func (countTrigger[T]) OnEventTime(int64, TimeWindow, TriggerContext) TriggerResult { return Continue }
func (countTrigger[T]) OnProcessingTime(int64, TimeWindow, TriggerContext) TriggerResult {
	return Continue
}
func (countTrigger[T]) Clear(_ TimeWindow, ctx TriggerContext) { ctx.ClearState("count") }
func (countTrigger[T]) OnMerge(_ TimeWindow, ctx OnMergeContext) {
	var sum int64
	for _, c := range ctx.MergedStates("count") {
		sum += c
	}
	if sum > 0 {
		ctx.SetState("count", sum)
	}
}

// ContinuousEventTimeTrigger fires a window every interval of event time
// and at its end (Flink's ContinuousEventTimeTrigger.of).
func ContinuousEventTimeTrigger[T any](interval time.Duration) Trigger[T] {
	return continuousEventTimeTrigger[T]{interval: interval.Milliseconds()}
}

type continuousEventTimeTrigger[T any] struct{ interval int64 }

func (continuousEventTimeTrigger[T]) checksTimerTimes() {}
func (t continuousEventTimeTrigger[T]) String() string {
	return fmt.Sprintf("ContinuousEventTimeTrigger(%d)", t.interval)
}
func (t continuousEventTimeTrigger[T]) OnElement(_ T, ts int64, w TimeWindow, ctx TriggerContext) TriggerResult {
	if w.MaxTimestamp() <= ctx.CurrentWatermark() {
		return Fire
	}
	ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	if _, ok := ctx.State("fire"); !ok {
		t.next(ts-ts%t.interval, w, ctx)
	}
	return Continue
}

func (t continuousEventTimeTrigger[T]) next(time int64, w TimeWindow, ctx TriggerContext) {
	next := min(time+t.interval, w.MaxTimestamp())
	if cur, ok := ctx.State("fire"); ok && cur < next {
		next = cur
	}
	ctx.SetState("fire", next)
	ctx.RegisterEventTimeTimer(next)
}

func (t continuousEventTimeTrigger[T]) OnEventTime(time int64, w TimeWindow, ctx TriggerContext) TriggerResult {
	if time == w.MaxTimestamp() {
		return Fire
	}
	if f, ok := ctx.State("fire"); ok && f == time {
		ctx.ClearState("fire")
		t.next(time, w, ctx)
		return Fire
	}
	return Continue
}
func (continuousEventTimeTrigger[T]) OnProcessingTime(int64, TimeWindow, TriggerContext) TriggerResult {
	return Continue
}
func (continuousEventTimeTrigger[T]) Clear(_ TimeWindow, ctx TriggerContext) {
	if f, ok := ctx.State("fire"); ok {
		ctx.DeleteEventTimeTimer(f)
	}
	ctx.ClearState("fire")
}
func (continuousEventTimeTrigger[T]) OnMerge(w TimeWindow, ctx OnMergeContext) {
	fires := ctx.MergedStates("fire")
	if len(fires) == 0 {
		return
	}
	next := fires[0]
	for _, f := range fires[1:] {
		next = min(next, f)
	}
	ctx.SetState("fire", next)
	ctx.RegisterEventTimeTimer(next)
}

// PurgingTrigger makes another trigger purge the window's contents each
// time it fires (Flink's PurgingTrigger.of).
func PurgingTrigger[T any](t Trigger[T]) Trigger[T] { return purgingTrigger[T]{t} }

type purgingTrigger[T any] struct{ t Trigger[T] }

func (p purgingTrigger[T]) checksTimerTimes() {}
func (p purgingTrigger[T]) String() string    { return fmt.Sprintf("PurgingTrigger(%v)", p.t) }
func purge(r TriggerResult) TriggerResult {
	if r.fires() {
		return FireAndPurge
	}
	return r
}
func (p purgingTrigger[T]) OnElement(e T, ts int64, w TimeWindow, ctx TriggerContext) TriggerResult {
	return purge(p.t.OnElement(e, ts, w, ctx))
}
func (p purgingTrigger[T]) OnEventTime(time int64, w TimeWindow, ctx TriggerContext) TriggerResult {
	return purge(p.t.OnEventTime(time, w, ctx))
}
func (p purgingTrigger[T]) OnProcessingTime(time int64, w TimeWindow, ctx TriggerContext) TriggerResult {
	return purge(p.t.OnProcessingTime(time, w, ctx))
}
func (p purgingTrigger[T]) Clear(w TimeWindow, ctx TriggerContext) { p.t.Clear(w, ctx) }
func (p purgingTrigger[T]) OnMerge(w TimeWindow, ctx OnMergeContext) {
	if m, ok := p.t.(MergingTrigger); ok {
		m.OnMerge(w, ctx)
	}
}

package stream

import (
	"fmt"
	"math"
	"time"

	"github.com/gflink/gflink/internal/api"
)

// JoinedStreams are two streams to join on equal keys (Flink's
// a.join(b).where(keyA).equalTo(keyB)); give them a window with Window.
type JoinedStreams[A, B any, K comparable] struct {
	c    KeyedConnectedStreams[A, B, K]
	keyA func(A) K
	keyB func(B) K
}

// Join joins a and b where keyA of a record of a equals keyB of one of b.
func Join[A, B any, K comparable](a DataStream[A], b DataStream[B], keyA func(A) K, keyB func(B) K) JoinedStreams[A, B, K] {
	return JoinedStreams[A, B, K]{KeyConnected(Connect(a, b), keyA, keyB), keyA, keyB}
}

// WindowedJoin is a join within windows: records of both sides meet when
// their keys are equal and they fall in the same window.
type WindowedJoin[A, B any, K comparable] struct {
	w WindowedStream[Either[A, B], K]
}

// Window joins within the windows of assigner (Flink's window join: the
// join of both sides' records in each window fires with the window).
func (j JoinedStreams[A, B, K]) Window(a WindowAssigner) WindowedJoin[A, B, K] {
	return WindowedJoin[A, B, K]{Window(j.c.ks, a)}
}

// AllowedLateness is WindowedStream.AllowedLateness.
func (j WindowedJoin[A, B, K]) AllowedLateness(d time.Duration) WindowedJoin[A, B, K] {
	return WindowedJoin[A, B, K]{j.w.AllowedLateness(d)}
}

// CoGroupFunction gets both sides' records of a key in a window (Flink's
// CoGroupFunction); one side may be empty.
type CoGroupFunction[A, B any, K comparable, OUT any] func(key K, w TimeWindow, first []A, second []B, out Collector[OUT]) error

// CoGroup calls f with each window's records of both sides, per key.
func CoGroup[A, B any, K comparable, OUT any](j WindowedJoin[A, B, K], f CoGroupFunction[A, B, K, OUT]) DataStream[OUT] {
	return WindowProcess(j.w, ProcessWindowFunc[Either[A, B], K, OUT](func(key K, w TimeWindow, elements []Either[A, B], out Collector[OUT]) error {
		var as []A
		var bs []B
		for _, e := range elements {
			if e.Second {
				bs = append(bs, e.Other)
			} else {
				as = append(as, e.First)
			}
		}
		return f(key, w, as, bs, out)
	})).Name("CoGroup")
}

// JoinApply emits f of every pair of records, one of each side, with equal
// keys in the same window (Flink's inner window join).
func JoinApply[A, B any, K comparable, OUT any](j WindowedJoin[A, B, K], f func(a A, b B) OUT) DataStream[OUT] {
	return CoGroup(j, func(_ K, _ TimeWindow, as []A, bs []B, out Collector[OUT]) error {
		for _, a := range as {
			for _, b := range bs {
				out.Collect(f(a, b))
			}
		}
		return nil
	}).Name("Join")
}

// IntervalJoined is an interval join of two keyed streams (Flink's
// KeyedStream.intervalJoin): a record a of the first joins each record b
// of the second with its key and a timestamp in [a+lower, a+upper].
type IntervalJoined[A, B any, K comparable] struct {
	c                    KeyedConnectedStreams[A, B, K]
	lower, upper         int64
	lowerExcl, upperExcl bool
	set                  bool
}

// IntervalJoin joins two keyed streams by time; give the bounds with
// Between.
func IntervalJoin[A, B any, K comparable](a KeyedStream[A, K], b KeyedStream[B, K]) IntervalJoined[A, B, K] {
	return IntervalJoined[A, B, K]{c: KeyConnected(Connect(DataStream[A]{a.ks.Stream()}, DataStream[B]{b.ks.Stream()}), a.ks.Key(), b.ks.Key())}
}

// Between sets the interval: b's timestamp in [a's+lower, a's+upper],
// bounds included.
func (j IntervalJoined[A, B, K]) Between(lower, upper time.Duration) IntervalJoined[A, B, K] {
	j.lower, j.upper, j.set = lower.Milliseconds(), upper.Milliseconds(), true
	return j
}

// LowerBoundExclusive excludes the lower bound.
func (j IntervalJoined[A, B, K]) LowerBoundExclusive() IntervalJoined[A, B, K] {
	j.lowerExcl = true
	return j
}

// UpperBoundExclusive excludes the upper bound.
func (j IntervalJoined[A, B, K]) UpperBoundExclusive() IntervalJoined[A, B, K] {
	j.upperExcl = true
	return j
}

// JoinContext gives a joined pair's timestamps; the result is stamped with
// the larger.
type JoinContext struct{ LeftTimestamp, RightTimestamp int64 }

// ProcessJoinFunction handles a joined pair (Flink's ProcessJoinFunction).
type ProcessJoinFunction[A, B, OUT any] func(left A, right B, ctx JoinContext, out Collector[OUT]) error

// IntervalJoinProcess calls f with each pair the interval join finds.
// Each side's records are kept in keyed state until the watermark passes
// the last time a record of the other side could join them; a record
// behind the watermark is late and joins nothing (as in Flink).
func IntervalJoinProcess[A, B any, K comparable, OUT any](j IntervalJoined[A, B, K], f ProcessJoinFunction[A, B, OUT]) DataStream[OUT] {
	op := &intervalJoin[K, A, B, OUT]{lower: j.lower, upper: j.upper, f: f, set: j.set}
	if j.lowerExcl {
		op.lower++
	}
	if j.upperExcl {
		op.upper--
	}
	return KeyedCoProcess(j.c, KeyedCoProcessFunction[K, A, B, OUT](op)).Name(fmt.Sprintf("IntervalJoin(%d, %d)", op.lower, op.upper))
}

// intervalJoin is Flink's IntervalJoinOperator: per key, each side's
// records by timestamp in map state; a cleanup timer per record's
// timestamp drops it once no record of the other side can join it.
type intervalJoin[K comparable, A, B, OUT any] struct {
	lower, upper int64
	set          bool
	f            ProcessJoinFunction[A, B, OUT]
	left         MapState[int64, []A]
	right        MapState[int64, []B]
	// late counts the records behind the watermark, which join nothing.
	late int64
}

func (j *intervalJoin[K, A, B, OUT]) Open(ctx *Context[K]) (err error) {
	if !j.set {
		return fmt.Errorf("an interval join needs its bounds: call Between")
	}
	if j.lower > j.upper {
		return fmt.Errorf("interval join bounds [%d ms, %d ms]: the lower bound must not be above the upper one", j.lower, j.upper)
	}
	if j.left, err = GetMapState[int64, []A](ctx, "interval-join-left"); err != nil {
		return err
	}
	j.right, err = GetMapState[int64, []B](ctx, "interval-join-right")
	return err
}

func (j *intervalJoin[K, A, B, OUT]) ProcessElement1(ctx *Context[K], in A, out Collector[OUT]) error {
	ts, ok, err := j.admit(ctx)
	if !ok {
		return err
	}
	l, _ := j.left.Get(ts)
	j.left.Put(ts, append(l, in))
	j.right.All(func(rts int64, bs []B) bool {
		if rts < ts+j.lower || rts > ts+j.upper {
			return true
		}
		for _, b := range bs {
			if err = j.emit(ctx, in, b, ts, rts, out); err != nil {
				return false
			}
		}
		return true
	})
	j.cleanupAt(ctx, ts, j.upper)
	return err
}

func (j *intervalJoin[K, A, B, OUT]) ProcessElement2(ctx *Context[K], in B, out Collector[OUT]) error {
	ts, ok, err := j.admit(ctx)
	if !ok {
		return err
	}
	r, _ := j.right.Get(ts)
	j.right.Put(ts, append(r, in))
	j.left.All(func(lts int64, as []A) bool {
		if ts < lts+j.lower || ts > lts+j.upper {
			return true
		}
		for _, a := range as {
			if err = j.emit(ctx, a, in, lts, ts, out); err != nil {
				return false
			}
		}
		return true
	})
	j.cleanupAt(ctx, ts, -j.lower)
	return err
}

// admit returns the record's timestamp, and false for a late record.
func (j *intervalJoin[K, A, B, OUT]) admit(ctx *Context[K]) (int64, bool, error) {
	ts := ctx.Timestamp()
	if ts == NoTimestamp {
		return ts, false, fmt.Errorf("a record without a timestamp reached an interval join: assign timestamps upstream with AssignTimestampsAndWatermarks")
	}
	if wm := ctx.TimerService().CurrentWatermark(); wm != math.MinInt64 && ts < wm {
		j.late++
		return ts, false, nil
	}
	return ts, true, nil
}

func (j *intervalJoin[K, A, B, OUT]) emit(ctx *Context[K], a A, b B, lts, rts int64, out Collector[OUT]) error {
	saved := ctx.Timestamp()
	api.SetOutputTimestamp(ctx, max(lts, rts))
	err := j.f(a, b, JoinContext{lts, rts}, out)
	api.SetOutputTimestamp(ctx, saved)
	return err
}

// cleanupAt registers the timer that drops a record of timestamp ts once
// the other side's records within reach (up to ts+reach) are all in.
func (j *intervalJoin[K, A, B, OUT]) cleanupAt(ctx *Context[K], ts, reach int64) {
	if reach > 0 {
		ts += reach
	}
	ctx.TimerService().RegisterEventTimeTimer(ts)
}

// OnTimer drops each side's records whose cleanup time this is (Flink
// keeps a timer namespace per side; both removals here are due at ts).
func (j *intervalJoin[K, A, B, OUT]) OnTimer(_ *Context[K], ts int64, _ Collector[OUT]) error {
	if j.upper > 0 {
		j.left.Remove(ts - j.upper)
	} else {
		j.left.Remove(ts)
	}
	if j.lower < 0 {
		j.right.Remove(ts + j.lower)
	} else {
		j.right.Remove(ts)
	}
	return nil
}

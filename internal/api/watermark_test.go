package api

import (
	"math"
	"testing"
	"time"
)

// recorder is a WatermarkOutput that records what a generator emitted.
type recorder struct {
	wms  []int64
	idle []bool
}

func (r *recorder) EmitWatermark(ts int64) { r.wms = append(r.wms, ts) }
func (r *recorder) MarkIdle()              { r.idle = append(r.idle, true) }
func (r *recorder) MarkActive()            { r.idle = append(r.idle, false) }

// Flink's BoundedOutOfOrdernessWatermarks: the watermark is the largest
// timestamp seen, less the bound, less 1 ms; before any record it is
// Long.MIN_VALUE (no overflow).
func TestBoundedOutOfOrderness(t *testing.T) {
	g := ForBoundedOutOfOrderness[string](50 * time.Millisecond).CreateGenerator(time.Now)
	out := &recorder{}
	g.OnPeriodicEmit(out)
	for _, ts := range []int64{1000, 900, 1200, 1100} {
		g.OnEvent("x", ts, out)
	}
	g.OnPeriodicEmit(out)
	if want := []int64{math.MinInt64, 1149}; len(out.wms) != 2 || out.wms[0] != want[0] || out.wms[1] != want[1] {
		t.Fatalf("watermarks %v, want %v", out.wms, want)
	}
	m := ForMonotonousTimestamps[string]().CreateGenerator(time.Now)
	m.OnEvent("x", 7, out)
	m.OnPeriodicEmit(out)
	if got := out.wms[len(out.wms)-1]; got != 6 {
		t.Fatalf("monotonous: watermark %d after timestamp 7, want 6", got)
	}
}

// WithIdleness marks the input idle once no record came for the timeout
// (checked at periodic emits, emitting nothing then), and active again on
// the next record.
func TestWithIdleness(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	g := ForMonotonousTimestamps[int]().WithIdleness(time.Second).CreateGenerator(clock)
	out := &recorder{}
	g.OnEvent(1, 10, out)
	g.OnPeriodicEmit(out) // starts the idle clock
	now = now.Add(999 * time.Millisecond)
	g.OnPeriodicEmit(out)
	if len(out.idle) != 0 || len(out.wms) != 2 {
		t.Fatalf("before the timeout: idle %v, watermarks %v", out.idle, out.wms)
	}
	now = now.Add(time.Millisecond)
	g.OnPeriodicEmit(out)
	g.OnPeriodicEmit(out)
	if len(out.idle) != 1 || !out.idle[0] || len(out.wms) != 2 {
		t.Fatalf("after the timeout: idle %v, watermarks %v; want one MarkIdle and no watermark", out.idle, out.wms)
	}
	g.OnEvent(2, 20, out)
	g.OnPeriodicEmit(out)
	if len(out.idle) != 2 || out.idle[1] || out.wms[len(out.wms)-1] != 19 {
		t.Fatalf("after a record: idle %v, watermarks %v; want MarkActive and watermark 19", out.idle, out.wms)
	}
}

// The assigner defaults to the record's own timestamp.
func TestTimestampAssigner(t *testing.T) {
	if got := NoWatermarks[int]().TimestampAssigner()(5, 42); got != 42 {
		t.Fatalf("default assigner: %d, want the record's 42", got)
	}
	s := NoWatermarks[int]().WithTimestampAssigner(func(v int, _ int64) int64 { return int64(v) * 10 })
	if got := s.TimestampAssigner()(5, 42); got != 50 {
		t.Fatalf("assigner: %d, want 50", got)
	}
}

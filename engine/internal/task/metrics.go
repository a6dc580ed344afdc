package task

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/gflink/gflink/engine/internal/network"
)

// Metrics are a task's counters, read by the job master's metric
// readers (the REST endpoint, the Prometheus reporter) on other
// goroutines. The task adds to them once per batch of records or once per
// wait, never per record: a batch is hundreds of records, so an atomic add
// there costs nothing measurable, and nothing on the record path locks.
type Metrics struct {
	// RecordsIn counts the records the task's head operator took from its
	// input gate (0 for a source task); RecordsOut the records its writers
	// sent downstream (a broadcast record once, as Flink counts it; 0 for a
	// task that ends in a sink). SourceEmitted counts what a source task's
	// reader emitted (its source operator's numRecordsIn).
	RecordsIn, RecordsOut, SourceEmitted atomic.Int64
	// Chain holds, for each edge inside the task's chain, the records the
	// operator before it emitted (numRecordsOut of operator k, numRecordsIn
	// of k+1), as published after each batch (publishCounts).
	Chain []atomic.Int64
	// Idle times the waits for input with nothing to do, BackPressured
	// the waits for room downstream (credits): Flink's idle and
	// back-pressured time. The rest of the task's life is busy.
	Idle, BackPressured network.WaitTimer
	// InputWatermark is the task's input watermark (the minimum over its
	// active input channels), OutputWatermark the last it emitted;
	// math.MinInt64 before the first.
	InputWatermark, OutputWatermark atomic.Int64
	// PendingRecords is a source reader's FLIP-33 pendingRecords (-1: it
	// does not say), stored after each poll.
	PendingRecords atomic.Int64
	// SourceBytesIn is a source reader's numBytesIn (api.BytesInReader),
	// SinkBytesSend a sink writer's numBytesSend (api.BytesSendWriter):
	// -1 while they do not say.
	SourceBytesIn, SinkBytesSend atomic.Int64
	// EmitEventTimeLag is FLIP-33's currentEmitEventTimeLag: when a source
	// last emitted records with timestamps, the wall clock then minus the
	// last one's event time (math.MinInt64 before any).
	EmitEventTimeLag atomic.Int64
	// CheckpointStartDelayNanos is how long the latest checkpoint's first
	// barrier (a source's trigger) took to reach the task after the
	// checkpoint was triggered, at the trigger time's millisecond
	// resolution, as Flink measures it.
	CheckpointStartDelayNanos atomic.Int64
	// Started is when the task was created; Ended is set when it has
	// returned (finished, failed or cancelled): it is then neither busy,
	// idle nor back-pressured.
	Started time.Time
	Ended   atomic.Bool
}

func (m *Metrics) noteStartDelay(now time.Time, triggered int64) {
	m.CheckpointStartDelayNanos.Store(max(0, now.UnixMilli()-triggered) * int64(time.Millisecond))
}

// publishCounts makes the chain's counts and its sink's bytes visible to
// the metric readers: once per batch of input, per source poll, when idle
// and at the end.
func (t *Task) publishCounts() {
	for i, n := range t.ChainCounts {
		if n != nil {
			t.M.Chain[i].Store(*n)
		}
	}
	if t.sinkBytes != nil {
		t.M.SinkBytesSend.Store(t.sinkBytes.NumBytesSend())
	}
}

func (m *Metrics) init() {
	m.Started = time.Now()
	m.PendingRecords.Store(-1)
	m.SourceBytesIn.Store(-1)
	m.SinkBytesSend.Store(-1)
	m.EmitEventTimeLag.Store(math.MinInt64)
	m.InputWatermark.Store(math.MinInt64)
	m.OutputWatermark.Store(math.MinInt64)
}

// waitClock measures one wait: start it before a select that may block,
// stop it after. A zero clock measures nothing (the wait was not expected
// to block).
type waitClock struct {
	w     *network.WaitTimer
	start int64
}

func startWait(w *network.WaitTimer, blocking bool) waitClock {
	if !blocking {
		return waitClock{}
	}
	return waitClock{w, w.Start()}
}

func (c waitClock) stop() {
	if c.w != nil {
		c.w.Stop(c.start)
	}
}

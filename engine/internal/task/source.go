package task

import (
	"fmt"
	"time"

	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/savepoint"
)

// UnionSplits reports whether a source wants every subtask to get all
// splits on restore (UnionSplitSource).
func UnionSplits(src any) bool {
	u, ok := src.(api.UnionSplitSource)
	return ok && u.UnionSplits()
}

// sourceReaderStateName is the operator state holding a reader's splits
// (Flink's SourceOperator uses the same name).
const SourceReaderStateName = "SourceReaderState"

// SourceOperator runs a source's reader in a source task (FromSource).
type SourceOperator[T any] struct {
	baseOperator
	Src api.Source[T]
	Out api.Collector[T]
	// Watermarks, if set, is the source's own strategy: timestamps are
	// assigned and watermarks generated per split (FromSource with a
	// WatermarkStrategy, as Flink's fromSource).
	Watermarks *api.WatermarkStrategy[T]
	wm         *TimestampsAndWatermarksOperator[T]
	counted    countingCollector[T]
	reader     api.SourceReader[T]
	// pending and bytes are the reader, if it reports FLIP-33's
	// pendingRecords and numBytesIn (asked after every poll).
	pending api.PendingRecordsReader
	bytes   api.BytesInReader
}

// countingCollector counts the records a source emits, for fault
// injection and metrics.
// A record a source emits has no timestamp (or the one the reader gives
// it with CollectWithTimestamp): the task's current timestamp is reset
// with each, so that none carries the one its predecessor was assigned.
type countingCollector[T any] struct {
	out api.Collector[T]
	n   int64
	ts  *int64 // the task's current timestamp
	// lastTS is the timestamp of the last record emitted
	// (currentEmitEventTimeLag), api.NoTimestamp if it had none.
	lastTS int64
	wm     *TimestampsAndWatermarksOperator[T]
}

// ForSplit is the collector of one split's records
// (api.SplitCollector): with the source's own watermark strategy, each
// split has its own generator.
func (c *countingCollector[T]) ForSplit(id string) api.Collector[T] {
	if c.wm == nil {
		return c
	}
	return &splitCollector[T]{c: c, h: c.wm.SplitHandle(id)}
}

// ReleaseSplit says that a split has ended.
func (c *countingCollector[T]) ReleaseSplit(id string) {
	if c.wm != nil {
		c.wm.ReleaseSplit(id)
	}
}

// splitCollector collects a split's records.
type splitCollector[T any] struct {
	c *countingCollector[T]
	h any
}

func (s *splitCollector[T]) Collect(v T) {
	s.c.wm.SelectSplit(s.h)
	s.c.Collect(v)
}

func (s *splitCollector[T]) CollectWithTimestamp(v T, ts int64) {
	s.c.wm.SelectSplit(s.h)
	s.c.CollectWithTimestamp(v, ts)
}

func (c *countingCollector[T]) Collect(v T) {
	c.n++
	*c.ts, c.lastTS = api.NoTimestamp, api.NoTimestamp
	c.out.Collect(v)
}

// CollectWithTimestamp emits a record with the timestamp the source gives
// it (a Kafka record's), which a timestamp assigner downstream gets as
// its recordTimestamp (api.TimestampedCollector).
func (c *countingCollector[T]) CollectWithTimestamp(v T, ts int64) {
	c.n++
	*c.ts, c.lastTS = ts, ts
	c.out.Collect(v)
}

func (o *SourceOperator[T]) open(ctx *OpContext) error {
	t := ctx.Task
	r, err := o.Src.CreateReader(api.SourceContext{Subtask: t.Subtask, Parallelism: t.Parallelism})
	if err != nil {
		return err
	}
	o.reader = r
	o.pending, _ = r.(api.PendingRecordsReader)
	o.bytes, _ = r.(api.BytesInReader)
	o.counted.out, o.counted.ts, o.counted.lastTS = o.Out, &t.ts, api.NoTimestamp
	if o.Watermarks != nil {
		o.wm = &TimestampsAndWatermarksOperator[T]{Strategy: *o.Watermarks, Out: o.Out, perSplit: true}
		if err := o.wm.open(ctx); err != nil {
			return err
		}
		o.counted.out, o.counted.wm = o.wm, o.wm
	}
	var splits [][]byte
	if ctx.Restore != nil {
		for _, s := range ctx.Restore.OperatorState {
			if s.Name == SourceReaderStateName {
				splits = append(splits, s.Items...)
			}
		}
	}
	return r.AddSplits(splits)
}

func (o *SourceOperator[T]) snapshot(req snapshotRequest) (*opCapture, error) {
	splits, err := o.reader.SnapshotState(req.id)
	if err != nil {
		return nil, fmt.Errorf("snapshot source reader: %w", err)
	}
	mode := savepoint.SplitDistribute
	if UnionSplits(o.Src) {
		mode = savepoint.Union
	}
	return &opCapture{
		opState: []savepoint.OperatorListState{{Name: SourceReaderStateName, Mode: mode, Items: splits}},
		states:  []savepoint.StateDescriptor{{Name: SourceReaderStateName, Kind: mode.String(), Entries: int64(len(splits))}},
	}, nil
}

func (o *SourceOperator[T]) notifyComplete(id int64) error {
	if l, ok := o.reader.(api.SourceCheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

func (o *SourceOperator[T]) close() error {
	if o.reader != nil {
		return o.reader.Close()
	}
	return nil
}

// poll reads the next records and returns how many were emitted.
func (o *SourceOperator[T]) poll() (api.InputStatus, int64, error) {
	before := o.counted.n
	st, err := o.reader.PollNext(&o.counted)
	return st, o.counted.n - before, err
}

// OutputCounter is an operator that counts the records it emits, so that
// the chain edge after it needs no counter of its own.
type OutputCounter interface {
	OutputCount() *int64
}

// OutputCount implements OutputCounter: what the reader emitted.
func (o *SourceOperator[T]) OutputCount() *int64 { return &o.counted.n }

// pendingRecords is the reader's FLIP-33 pendingRecords, if it knows.
func (o *SourceOperator[T]) pendingRecords() (int64, bool) {
	if o.pending != nil {
		return o.pending.PendingRecords()
	}
	return 0, false
}

// bytesIn is the reader's FLIP-33 numBytesIn, if it counts.
func (o *SourceOperator[T]) bytesIn() (int64, bool) {
	if o.bytes != nil {
		return o.bytes.NumBytesIn(), true
	}
	return 0, false
}

// lastTimestamp is the event time of the last record the source emitted,
// as its own watermark strategy assigned it or its reader gave it; false
// if that record had none.
func (o *SourceOperator[T]) lastTimestamp() (int64, bool) {
	ts := o.counted.lastTS
	if o.wm != nil {
		ts = o.wm.lastTS
	}
	return ts, ts != api.NoTimestamp
}

// nextPollTime says when to poll a reader that had nothing available.
func (o *SourceOperator[T]) nextPollTime(now time.Time) time.Time {
	if w, ok := o.reader.(api.AvailabilityWaiter); ok {
		return w.NextPollTime()
	}
	return now.Add(time.Millisecond)
}

// SourceRunner is the type-independent view of a source operator that the
// task loop drives.
type SourceRunner interface {
	poll() (api.InputStatus, int64, error)
	nextPollTime(now time.Time) time.Time
	pendingRecords() (int64, bool)
	bytesIn() (int64, bool)
	lastTimestamp() (int64, bool)
}

// The source's own watermark generation runs on the task's timers, and
// the operators after it take their watermarks from it.
func (o *SourceOperator[T]) nextTimer() (int64, bool) {
	if o.wm == nil {
		return 0, false
	}
	return o.wm.nextTimer()
}

func (o *SourceOperator[T]) fireTimers(now int64) error {
	if o.wm == nil {
		return nil
	}
	return o.wm.fireTimers(now)
}

package stream

import (
	"time"

	"github.com/gflink/gflink/internal/api"
)

// WatermarkStrategy says how a stream's records get their event time and
// how its watermarks are generated (Flink's WatermarkStrategy): start from
// ForBoundedOutOfOrderness, ForMonotonousTimestamps, NoWatermarks or
// ForGenerator, then add WithTimestampAssigner(func(event T, recordTimestamp
// int64) int64) and WithIdleness(d).
type WatermarkStrategy[T any] = api.WatermarkStrategy[T]

// WatermarkGenerator generates watermarks: OnEvent for each record with its
// timestamp (punctuated), OnPeriodicEmit every
// pipeline.auto-watermark-interval (periodic).
type WatermarkGenerator[T any] = api.WatermarkGenerator[T]

// WatermarkOutput is where a generator emits watermarks (EmitWatermark(ms))
// and marks its input idle (MarkIdle) or active (MarkActive).
type WatermarkOutput = api.WatermarkOutput

// TimestampAssigner gives a record its event time in milliseconds.
type TimestampAssigner[T any] = api.TimestampAssigner[T]

// NoTimestamp is the timestamp of a record that has none.
const NoTimestamp = api.NoTimestamp

// ForBoundedOutOfOrderness expects records at most d out of order: the
// watermark trails the largest timestamp seen by d (and 1 ms).
func ForBoundedOutOfOrderness[T any](d time.Duration) WatermarkStrategy[T] {
	return api.ForBoundedOutOfOrderness[T](d)
}

// ForMonotonousTimestamps expects ascending timestamps: the watermark is
// the largest timestamp seen (less 1 ms).
func ForMonotonousTimestamps[T any]() WatermarkStrategy[T] { return api.ForMonotonousTimestamps[T]() }

// NoWatermarks generates no watermarks: event time stays at its start
// until the input ends.
func NoWatermarks[T any]() WatermarkStrategy[T] { return api.NoWatermarks[T]() }

// ForGenerator uses a generator of one's own; make is called once per
// subtask.
func ForGenerator[T any](make func() WatermarkGenerator[T]) WatermarkStrategy[T] {
	return api.ForGenerator(make)
}

// TimestampedCollector is implemented by the collector a source reader
// gets: CollectWithTimestamp(v, ts) emits a record with the timestamp its
// source holds (a Kafka record's), which a TimestampAssigner gets as its
// recordTimestamp.
type TimestampedCollector[T any] = api.TimestampedCollector[T]

// SplitCollector is implemented by the collector a source reader gets:
// ForSplit(id) is the collector of one split's records, which, with a
// watermark strategy on the source (FromSourceWithWatermarks), has its
// own watermark generator; ReleaseSplit(id) says a split has ended.
type SplitCollector[T any] = api.SplitCollector[T]

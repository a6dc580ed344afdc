package stream

import (
	"github.com/gflink/gflink/internal/api"
)

// Source is a replayable input, split into splits that subtasks read by
// position (Flink's FLIP-27 source):
//
//	Splits(parallelism int) ([][]byte, error)              // a fresh start's splits
//	CreateReader(ctx SourceContext) (SourceReader[T], error) // one per subtask
//
// Splits are the source's own encoding; gflink stores them with their
// positions in checkpoints and hands them back on restore, redistributed
// when the parallelism changed. Optional: RestoredSplitsChecker,
// UnionSplitSource, NonReplayableSource.
type Source[T any] = api.Source[T]

// SourceContext describes the subtask a reader runs in.
type SourceContext = api.SourceContext

// SourceReader reads the splits assigned to one subtask:
//
//	AddSplits(splits [][]byte) error   // fresh or restored, with positions
//	PollNext(out Collector[T]) (InputStatus, error) // a few hundred records at most
//	SnapshotState(checkpointID int64) ([][]byte, error) // splits with positions
//	Close() error
//
// The task calls it from one goroutine, between checkpoints: what
// SnapshotState returns must be exactly the position after the records
// emitted so far. Optional: AvailabilityWaiter, SourceCheckpointListener.
type SourceReader[T any] = api.SourceReader[T]

// InputStatus is what PollNext reports.
type InputStatus = api.InputStatus

// What PollNext reports.
const (
	MoreAvailable    = api.MoreAvailable    // call PollNext again
	NothingAvailable = api.NothingAvailable // nothing now; see AvailabilityWaiter
	EndOfInput       = api.EndOfInput       // every split is read to its end
)

// AvailabilityWaiter is implemented by readers that can say when to poll
// after NothingAvailable: NextPollTime() time.Time.
type AvailabilityWaiter = api.AvailabilityWaiter

// RestoredSplitsChecker is implemented by sources that can tell whether
// splits from a snapshot are theirs: CheckRestoredSplits(splits) error.
type RestoredSplitsChecker = api.RestoredSplitsChecker

// UnionSplitSource is implemented by sources whose readers each get every
// split and keep the ones they own (UnionSplits() bool).
type UnionSplitSource = api.UnionSplitSource

// SourceCheckpointListener is implemented by readers that act when a
// checkpoint completes: NotifyCheckpointComplete(checkpointID) error.
type SourceCheckpointListener = api.SourceCheckpointListener

// NonReplayableSource is implemented by sources that cannot rewind:
// NotReplayable() string says why, and the job logs it at start.
type NonReplayableSource = api.NonReplayableSource

// Sink is where a stream ends (Flink's Sink V2):
// CreateWriter(ctx SinkContext) (SinkWriter[T], error), one per subtask.
type Sink[T any] = api.Sink[T]

// SinkContext describes the subtask a writer runs in, the job, the
// attempt and, after a restore, the writer's state.
type SinkContext = api.SinkContext

// SinkWriter writes records: Write(v T) error; Flush(endOfInput bool)
// error before every checkpoint barrier is passed on; Close() error.
type SinkWriter[T any] = api.SinkWriter[T]

// StatefulSinkWriter is a writer with state of its own to checkpoint:
// SnapshotState(checkpointID) ([][]byte, error); it comes back in
// SinkContext.RestoredState.
type StatefulSinkWriter = api.StatefulSinkWriter

// TwoPhaseCommittingSink is a sink whose output becomes visible exactly
// once: its writers are CommittingSinkWriters and
// CreateCommitter(ctx SinkContext) (Committer, error) makes the committer
// of what they pre-committed.
type TwoPhaseCommittingSink[T any] = api.TwoPhaseCommittingSink[T]

// CommittingSinkWriter is the first phase of a two-phase commit: at each
// checkpoint, PrepareCommit() ([][]byte, error) pre-commits what was
// written and returns committables, which the checkpoint stores.
type CommittingSinkWriter[T any] = api.CommittingSinkWriter[T]

// Committer is the second phase: Commit(committables [][]byte) error once
// the checkpoint holding them is complete, and again after a restore, so
// it must be idempotent.
type Committer = api.Committer

// RecoveryCleaner is implemented by two-phase-commit sinks that remove
// what failed attempts left: CleanUp(ctx, committables) error.
type RecoveryCleaner = api.RecoveryCleaner

// UnionWriterStateSink is implemented by sinks whose writers each see
// every writer's state after a restore (UnionWriterState() bool).
type UnionWriterStateSink = api.UnionWriterStateSink

// CheckpointTimingChecker is implemented by connectors whose guarantee
// depends on how often checkpoints complete; what
// CheckCheckpointTiming(CheckpointTiming) []string returns is logged.
type CheckpointTimingChecker = api.CheckpointTimingChecker

// CheckpointTiming is what a CheckpointTimingChecker is told.
type CheckpointTiming = api.CheckpointTiming

// PrintSink writes records as text lines to W (what Print uses).
type PrintSink[T any] = api.PrintSink[T]

// Appender is implemented by records that render themselves as text by
// appending to a byte slice: AppendTo(dst []byte) []byte. The print and
// file sinks prefer it to String.
type Appender = api.Appender

// RecordText renders records of T as text as fmt's %v does, without fmt
// where T allows (Appender, fmt.Stringer, string).
type RecordText[T any] = api.RecordText[T]

// NewRecordText returns the renderer of T's records.
func NewRecordText[T any]() *RecordText[T] { return api.NewRecordText[T]() }

// CountedSource is implemented by bounded sources that can tell how many
// records they emit in all: TotalRecords() (n int64, ok bool). An attached
// run on a terminal shows progress from it.
type CountedSource = api.CountedSource

// PendingRecordsReader is implemented by source readers that know how many
// records wait in their splits: PendingRecords() (n int64, ok bool),
// FLIP-33's pendingRecords (a Kafka reader's consumer lag).
type PendingRecordsReader = api.PendingRecordsReader

// BytesInReader is implemented by source readers that know how many bytes
// of input they have read in all: NumBytesIn() int64, FLIP-33's numBytesIn.
type BytesInReader = api.BytesInReader

// BytesSendWriter is implemented by sink writers that know how many bytes
// they have sent in all: NumBytesSend() int64, FLIP-33's numBytesSend (the
// sink's numBytesOut).
type BytesSendWriter = api.BytesSendWriter

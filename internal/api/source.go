package api

import "time"

// Source is a replayable input, split into splits that subtasks read by
// position (Flink's FLIP-27 source). Splits are the source's own encoding;
// the engine stores them, with their positions, in checkpoints, and hands
// them back on restore — redistributed if the parallelism changed.
type Source[T any] interface {
	// Splits enumerates the splits of a fresh start (no restored state).
	Splits(parallelism int) ([][]byte, error)
	// CreateReader makes the reader of one subtask.
	CreateReader(ctx SourceContext) (SourceReader[T], error)
}

// RestoredSplitsChecker is implemented by sources that can tell whether
// splits from a snapshot are theirs. A restored source reads the splits in
// its snapshot, not fresh ones from its settings: without this check a job
// restarted with other input would silently read the old input, or read
// positions of one input in another.
type RestoredSplitsChecker interface {
	CheckRestoredSplits(splits [][]byte) error
}

// UnionSplitSource is a source whose readers keep their splits in union
// list state: after a restore, and on a fresh start, every reader is given
// every split and keeps the ones it owns (Flink's legacy Kafka consumer).
// A source that discovers splits while running needs it: a reader can
// tell a new split from one another reader owns only by seeing them all,
// at any parallelism.
type UnionSplitSource interface {
	UnionSplits() bool
}

// SourceCheckpointListener is implemented by readers that act when a
// checkpoint completes (a Kafka reader commits its offsets to the consumer
// group, for monitoring).
type SourceCheckpointListener interface {
	NotifyCheckpointComplete(checkpointID int64) error
}

// NonReplayableSource is a source that cannot rewind (a socket): the job
// master logs its reason when the job starts, because a failure loses
// what was in flight even with checkpointing on (at most once).
type NonReplayableSource interface {
	NotReplayable() string
}

// SourceContext describes the subtask a reader runs in.
type SourceContext struct {
	Subtask     int
	Parallelism int
}

// InputStatus is what a reader's PollNext reports.
type InputStatus int

const (
	// MoreAvailable: call PollNext again.
	MoreAvailable InputStatus = iota
	// NothingAvailable: nothing to read now; see AvailabilityWaiter.
	NothingAvailable
	// EndOfInput: every split is read to its end.
	EndOfInput
)

// SourceReader reads the splits assigned to one subtask.
type SourceReader[T any] interface {
	// AddSplits assigns splits (fresh, or restored with their positions).
	AddSplits(splits [][]byte) error
	// PollNext emits some records — a few hundred at most, so that the task
	// can handle checkpoints in between — and says what comes next.
	PollNext(out Collector[T]) (InputStatus, error)
	// SnapshotState returns the splits with their current positions.
	SnapshotState(checkpointID int64) ([][]byte, error)
	Close() error
}

// AvailabilityWaiter is implemented by readers that can say when data may
// be available after PollNext returned NothingAvailable (a rate limiter, a
// poll interval). Without it the task polls again after a millisecond.
type AvailabilityWaiter interface {
	NextPollTime() time.Time
}

// CountedSource is implemented by bounded sources that can tell how many
// records they emit in all, across their splits (the lines of a file or
// of generated text): an attached run on a terminal shows progress and
// an estimate of the time left from it. Counting may take a while (it may
// read the input once), so it is asked off the job's path.
type CountedSource interface {
	TotalRecords() (n int64, ok bool)
}

// PendingRecordsReader is implemented by readers that know how many
// records wait to be read in their splits (FLIP-33's pendingRecords: a
// Kafka reader's consumer lag). ok is false while they do not know. The
// task asks after each poll, on its own goroutine.
type PendingRecordsReader interface {
	PendingRecords() (n int64, ok bool)
}

// BytesInReader is implemented by readers that know how many bytes of
// input they have read in all (FLIP-33's numBytesIn: the text file
// source's lines, the Kafka source's record keys and values). The task
// asks after each poll, on its own goroutine.
type BytesInReader interface {
	NumBytesIn() int64
}

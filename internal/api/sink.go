package api

import "time"

// Sink is where a stream ends (Flink's Sink V2).
type Sink[T any] interface {
	CreateWriter(ctx SinkContext) (SinkWriter[T], error)
}

// SinkContext describes the subtask a sink writer runs in.
type SinkContext struct {
	Subtask     int
	Parallelism int
	JobID       string
	// Attempt counts the job's restarts, from 0.
	Attempt int
	// RestoredState is the writer state of the restored checkpoint, for
	// sinks whose writers implement StatefulSinkWriter.
	RestoredState [][]byte
	// Checkpointing reports whether periodic checkpoints are enabled.
	Checkpointing bool
	// RunID identifies this attempt of this job (8 random hex digits), for
	// naming files so that no two attempts ever write the same name.
	RunID string
	// PreviousRunIDs are the run ids of this job's earlier attempts in this
	// process: what a RecoveryCleaner may clean up after.
	PreviousRunIDs []string
}

// SinkWriter writes records.
type SinkWriter[T any] interface {
	Write(v T) error
	// Flush is called before every checkpoint barrier is passed on, and
	// with endOfInput at the end of bounded input.
	Flush(endOfInput bool) error
	Close() error
}

// BytesSendWriter is implemented by writers that know how many bytes they
// have sent to the external system in all (FLIP-33's numBytesSend, which
// Flink also reports as the sink's numBytesOut). The task asks after each
// batch of input, on its own goroutine.
type BytesSendWriter interface {
	NumBytesSend() int64
}

// StatefulSinkWriter is a writer with state of its own to checkpoint.
type StatefulSinkWriter interface {
	SnapshotState(checkpointID int64) ([][]byte, error)
}

// CommittingSinkWriter is the first phase of a two-phase commit: at each
// checkpoint it pre-commits what it wrote and hands over committables
// (for example the names of pending files), which the engine stores in the
// checkpoint.
type CommittingSinkWriter[T any] interface {
	SinkWriter[T]
	PrepareCommit() ([][]byte, error)
}

// Committer is the second phase: it commits committables once the
// checkpoint that holds them is complete. Commit must be idempotent:
// after a restore the committables of the restored checkpoint are committed
// again, whether or not that had happened before the failure.
type Committer interface {
	Commit(committables [][]byte) error
	Close() error
}

// TwoPhaseCommittingSink is a sink whose output becomes visible exactly
// once: only what a completed checkpoint covers is committed, and whatever
// was written after it is discarded on restore.
type TwoPhaseCommittingSink[T any] interface {
	Sink[T]
	CreateCommitter(ctx SinkContext) (Committer, error)
}

// RecoveryCleaner is implemented by two-phase-commit sinks that remove what
// failed attempts left behind. After a restore, subtask 0 calls CleanUp with
// every committable of the restored checkpoint (of all subtasks): anything
// an earlier attempt of this job wrote (ctx.PreviousRunIDs) that is not
// among them can never be committed. Files of other jobs, even in the same
// place, are not this job's to touch.
type RecoveryCleaner interface {
	CleanUp(ctx SinkContext, committables [][]byte) error
}

// UnionWriterStateSink is a sink whose writers' state is union state:
// after a restore every writer sees every writer's state (the Kafka sink's
// writers find the transactions of the old subtasks they take over).
type UnionWriterStateSink interface {
	UnionWriterState() bool
}

// CheckpointTimingChecker is a connector whose guarantee depends on how
// often checkpoints complete (the Kafka exactly-once sink's transactions
// must commit before the brokers abort them). The job master logs what it
// returns when the job starts.
type CheckpointTimingChecker interface {
	CheckCheckpointTiming(CheckpointTiming) []string
}

// CheckpointTiming is what a CheckpointTimingChecker is told.
type CheckpointTiming struct {
	Interval time.Duration // 0: periodic checkpoints are off
	Timeout  time.Duration // execution.checkpointing.timeout
	MinPause time.Duration // execution.checkpointing.min-pause
}

// IdleFlusher is implemented by sink writers that buffer records: Idle is
// called when the task has no input for now, so that a slow stream's
// records do not wait in the buffer for the next checkpoint barrier.
type IdleFlusher interface {
	Idle()
}

package task

import (
	"log/slog"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// Services is what the tasks of one attempt, and their operators, may
// use of the job (Flink's Environment of a task): facts about the attempt
// and the services a task needs — the file system, the checkpoint
// storage's task-side writer, the state backend factory, the log, the
// clock — and the gateway it reports through. Never the job master: a task
// that could reach it could change what the job master alone decides
// (the status, the pending checkpoints, the restart).
type Services struct {
	JobID   string
	Attempt int
	// RunID names this attempt's output files; previousRunIDs are those of
	// the job's earlier attempts in this process.
	RunID          string
	PreviousRunIDs []string
	// Checkpointing: periodic checkpoints are on.
	Checkpointing bool
	FS            vfs.FS
	Storage       checkpoint.Writer
	Backends      *StateBackends
	Log           *slog.Logger
	Clock         func() time.Time
	JobMaster     JobMasterGateway
}

// JobMasterGateway is how a task reports to the job master (Flink's
// messages from a task to its JobMaster). Each call sends an event to the
// job master's goroutine and returns; none waits for the job master.
type JobMasterGateway interface {
	// Ack acknowledges a checkpoint with the task's snapshot handles.
	Ack(t *Task, id int64, a *checkpoint.Ack)
	// Decline refuses a checkpoint (reason) because of cause.
	Decline(t *Task, id int64, reason, cause error)
	// Initialized: the task has restored its state and runs.
	Initialized(t *Task)
	// EndOfInput: the task has processed all its input.
	EndOfInput(t *Task)
	// TaskExited: the task's goroutine ends, with err if it failed.
	TaskExited(t *Task, err error)
	// SourceEmitted counts the records a source task emitted (fault
	// injection); it may fail the task by panicking as a user function
	// does.
	SourceEmitted(t *Task, n int64)
}

package engine

import (
	"log/slog"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// taskServices is what the tasks of one attempt, and their operators, may
// use of the job (Flink's Environment of a task): facts about the attempt
// and the services a task needs — the file system, the checkpoint
// storage's task-side writer, the state backend factory, the log, the
// clock — and the gateway it reports through. Never the job master: a task
// that could reach it could change what the job master alone decides
// (the status, the pending checkpoints, the restart).
type taskServices struct {
	jobID   string
	attempt int
	// runID names this attempt's output files; previousRunIDs are those of
	// the job's earlier attempts in this process.
	runID          string
	previousRunIDs []string
	// checkpointing: periodic checkpoints are on.
	checkpointing bool
	fs            vfs.FS
	storage       checkpoint.Writer
	backends      *stateBackends
	log           *slog.Logger
	clock         func() time.Time
	jm            jobMasterGateway
}

// jobMasterGateway is how a task reports to the job master (Flink's
// messages from a task to its JobMaster). Each call sends an event to the
// job master's goroutine and returns; none waits for the job master.
type jobMasterGateway interface {
	// ack acknowledges a checkpoint with the task's snapshot handles.
	ack(t *task, id int64, a *checkpoint.Ack)
	// decline refuses a checkpoint (reason) because of cause.
	decline(t *task, id int64, reason, cause error)
	// initialized: the task has restored its state and runs.
	initialized(t *task)
	// endOfInput: the task has processed all its input.
	endOfInput(t *task)
	// taskExited: the task's goroutine ends, with err if it failed.
	taskExited(t *task, err error)
	// sourceEmitted counts the records a source task emitted (fault
	// injection); it may fail the task by panicking as a user function
	// does.
	sourceEmitted(t *task, n int64)
}

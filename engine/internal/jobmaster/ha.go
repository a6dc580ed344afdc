package jobmaster

import (
	"fmt"

	"github.com/gflink/gflink/engine/checkpoint"
)

// HighAvailability is what the job master asks of JobManager high
// availability (high-availability.type: ZOOKEEPER): Flink's checkpoint id
// counter, completed-checkpoint store and job result store. Every write is
// conditional on this process still leading, so a leader that lost its
// session — killed, cut off, paused — can neither take a checkpoint id
// another leader uses, nor register a checkpoint, nor let its sinks commit
// one: a sink commits a checkpoint only after AddCheckpoint returned nil.
type HighAvailability interface {
	// ReserveCheckpointID records that id is taken, before anything is
	// written for it, so that ids never repeat across leaders and no two
	// leaders write into the same chk-<id> directory.
	ReserveCheckpointID(id int64) error
	// AddCheckpoint registers a completed checkpoint or savepoint (its
	// directory holds _metadata); sinks commit both. An error leaves the outcome unknown — the write may have
	// reached ZooKeeper — so the checkpoint's files are kept.
	AddCheckpoint(id int64, dir string, savepoint bool) error
	// Leading reports nil while this process still leads, as far as it
	// knows without asking ZooKeeper: checked again before the sinks are
	// told to commit a registered checkpoint, so that a leader that lost
	// its session in between leaves the commit to its successor (which
	// commits the restored checkpoint's transactions itself).
	Leading() error
	// RemoveCheckpoint unregisters a subsumed checkpoint; its files are
	// deleted only after this succeeded.
	RemoveCheckpoint(id int64) error
	// MarkTerminal records the job's globally terminal status (Flink's job
	// result store) before its checkpoints are cleaned up, so that no new
	// leader runs the job again or restores a checkpoint being deleted.
	MarkTerminal(status string) error
}

// LeadershipLostError says why a job was suspended: this process lost, or
// gave up, the leadership.
type LeadershipLostError struct{ Cause error }

func (e *LeadershipLostError) Error() string {
	return fmt.Sprintf("Job suspended in this process (%v): nothing more is committed here, and the leader that takes over recovers the job from its latest registered checkpoint.", e.Cause)
}

func (e *LeadershipLostError) Unwrap() error { return e.Cause }

// Suspend stops the job without ending it (Flink's SUSPENDED): the tasks
// are cancelled, nothing further is committed, and the job's checkpoints
// and HA data stay for the leader that takes over. It is what a process
// does when it loses leadership.
func (j *Job) Suspend(cause error) {
	_ = j.jm.call(func() { j.jm.suspend(cause) })
}

func (jm *jobMaster) suspend(cause error) {
	if jm.statusNow().IsGloballyTerminal() || jm.statusNow() == StatusSuspended {
		return
	}
	err := &LeadershipLostError{Cause: cause}
	jm.log.Warn(err.Error())
	jm.stopAttempt(checkpoint.ErrSuspending)
	jm.result.Err = err
	jm.transition(StatusSuspended)
}

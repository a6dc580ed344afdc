package jobmaster

import "fmt"

// JobStatus is a job's state, with Flink's names (CANCELLING has two Ls,
// CANCELED one).
type JobStatus string

// The job statuses gflink uses, in Flink's order.
const (
	StatusInitializing JobStatus = "INITIALIZING"
	StatusCreated      JobStatus = "CREATED"
	StatusRunning      JobStatus = "RUNNING"
	StatusFailing      JobStatus = "FAILING"
	StatusFailed       JobStatus = "FAILED"
	StatusCancelling   JobStatus = "CANCELLING"
	StatusCanceled     JobStatus = "CANCELED"
	StatusFinished     JobStatus = "FINISHED"
	StatusRestarting   JobStatus = "RESTARTING"
	StatusSuspended    JobStatus = "SUSPENDED"
	StatusReconciling  JobStatus = "RECONCILING"
)

// AllStatuses lists every status in Flink's order.
var AllStatuses = []JobStatus{StatusInitializing, StatusCreated, StatusRunning, StatusFailing, StatusFailed,
	StatusCancelling, StatusCanceled, StatusFinished, StatusRestarting, StatusSuspended, StatusReconciling}

// IsGloballyTerminal reports whether the job will never run again.
func (s JobStatus) IsGloballyTerminal() bool {
	return s == StatusFailed || s == StatusCanceled || s == StatusFinished
}

// transitions lists every allowed status change, in one place (after
// Flink's JobStatus documentation and the dispatcher).
var transitions = map[JobStatus][]JobStatus{
	StatusInitializing: {StatusCreated, StatusFailed, StatusCanceled},
	// A job stays CREATED while its tasks load their restored state, and
	// can fail then.
	// Any status that is not terminal can become SUSPENDED: the process
	// lost leadership (high availability).
	StatusCreated:    {StatusRunning, StatusFailing, StatusRestarting, StatusFailed, StatusCancelling, StatusCanceled, StatusSuspended},
	StatusRunning:    {StatusFinished, StatusFailing, StatusRestarting, StatusCancelling, StatusFailed, StatusSuspended},
	StatusFailing:    {StatusFailed, StatusRestarting, StatusCancelling, StatusSuspended},
	StatusRestarting: {StatusCreated, StatusRunning, StatusFailed, StatusCancelling, StatusCanceled, StatusSuspended},
	StatusCancelling: {StatusCanceled, StatusFailed, StatusFinished, StatusSuspended},
}

// canTransition reports whether from → to is allowed.
func canTransition(from, to JobStatus) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

func checkTransition(from, to JobStatus) error {
	if !canTransition(from, to) {
		return fmt.Errorf("illegal job status transition %s -> %s", from, to)
	}
	return nil
}

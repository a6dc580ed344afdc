package engine

import (
	"context"
	"log/slog"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/internal/jobmaster"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint/vfs"
)

// The job master runs in engine/internal/jobmaster; these are the names
// the command line, the REST server and the job API use of it: submit a
// job graph, control and watch the running job.

// The states of a job (Flink's JobStatus).
const (
	StatusInitializing = jobmaster.StatusInitializing
	StatusCreated      = jobmaster.StatusCreated
	StatusRunning      = jobmaster.StatusRunning
	StatusFailing      = jobmaster.StatusFailing
	StatusFailed       = jobmaster.StatusFailed
	StatusCancelling   = jobmaster.StatusCancelling
	StatusCanceled     = jobmaster.StatusCanceled
	StatusFinished     = jobmaster.StatusFinished
	StatusRestarting   = jobmaster.StatusRestarting
	StatusSuspended    = jobmaster.StatusSuspended
	StatusReconciling  = jobmaster.StatusReconciling
)

// ExecutionState is the state of a subtask's execution (Flink's
// ExecutionState).
type ExecutionState = jobmaster.ExecutionState

// The states of a subtask's execution.
const (
	ExecCreated      = jobmaster.ExecCreated
	ExecDeploying    = jobmaster.ExecDeploying
	ExecInitializing = jobmaster.ExecInitializing
	ExecRunning      = jobmaster.ExecRunning
	ExecFinished     = jobmaster.ExecFinished
	ExecCanceling    = jobmaster.ExecCanceling
	ExecCanceled     = jobmaster.ExecCanceled
	ExecFailed       = jobmaster.ExecFailed
)

// StateBackendKind names a state backend (state.backend.type).
type StateBackendKind = task.StateBackendKind

// The state backends: Go maps in memory, and an embedded LSM tree (Pebble)
// under Flink's name for its LSM backend.
const (
	StateBackendHashMap = task.StateBackendHashMap
	StateBackendRocksDB = task.StateBackendRocksDB
)

// The claim modes of a restore (execution.state-recovery.claim-mode).
const (
	ClaimModeClaim   = jobmaster.ClaimModeClaim
	ClaimModeNoClaim = jobmaster.ClaimModeNoClaim
	ClaimModeLegacy  = jobmaster.ClaimModeLegacy
)

// The job master's options, and what the job master's results carry.
var (
	ErrNoSavepointDir     = jobmaster.ErrNoSavepointDir
	Parallelism           = jobmaster.Parallelism
	MaxParallelism        = jobmaster.MaxParallelism
	PipelineName          = jobmaster.PipelineName
	FaultFailAfterRecords = jobmaster.FaultFailAfterRecords
	FaultMaxFailures      = jobmaster.FaultMaxFailures
	FaultAfterCheckpoints = jobmaster.FaultAfterCheckpoints
	StateRecoveryPath     = jobmaster.StateRecoveryPath
	IgnoreUnclaimedState  = jobmaster.IgnoreUnclaimedState
	ClaimMode             = jobmaster.ClaimMode
)

// NewJobID returns a random 32-hex job id.
func NewJobID() string { return jobmaster.NewJobID() }

// Submit validates a job's configuration and restore, then starts it. An
// error means the job did not start: nothing ran and nothing was written.
func Submit(ctx context.Context, g *JobGraph, o JobOptions) (*Job, error) {
	return jobmaster.Submit(ctx, g, o)
}

// PlanRestore matches a snapshot against a job graph, as a job restored
// from it would — for `run --check`, which reports the plan without
// running anything.
func PlanRestore(g *JobGraph, fsys vfs.FS, r *restore.Resolved, allowNonRestoredState bool, backend StateBackendKind) (*restore.Plan, error) {
	return jobmaster.PlanRestore(g, fsys, r, allowNonRestoredState, backend)
}

// MapRestore is PlanRestore without the check of restored source splits:
// how the snapshot's state maps onto the job's operators.
func MapRestore(g *JobGraph, fsys vfs.FS, r *restore.Resolved, allowNonRestoredState bool, backend StateBackendKind) (*restore.Plan, error) {
	return jobmaster.MapRestore(g, fsys, r, allowNonRestoredState, backend)
}

// RestoredSourceMismatch says why the splits plan restores into the source
// with this uid are not that source's, or returns nil (also for operators
// that are not sources or cannot tell).
func RestoredSourceMismatch(g *JobGraph, plan *restore.Plan, uid string) error {
	return jobmaster.RestoredSourceMismatch(g, plan, uid)
}

// EngineOptions lists the engine's own options.
func EngineOptions() []config.AnyOption { return jobmaster.EngineOptions() }

// Options lists every option gflink's engine honours, for validation up
// front and for documentation.
func Options() []config.AnyOption { return jobmaster.Options() }

// RecoveryOptions lists the state recovery options.
func RecoveryOptions() []config.AnyOption { return jobmaster.RecoveryOptions() }

// ResolveRestore finds the snapshot execution.state-recovery.path (-s)
// names and reads every state block it references, so that a lost or
// damaged file stops the run before the job starts rather than in its
// first restore. It returns nil (and no error) when there is nothing to
// restore. Why checkpoints of a job directory were skipped goes to the log.
func ResolveRestore(fsys vfs.FS, conf *config.Configuration, log *slog.Logger) (*RestoreSource, error) {
	return jobmaster.ResolveRestore(fsys, conf, log)
}

// NotRunningError refuses an operation on a job that is not running.
type NotRunningError = jobmaster.NotRunningError

// JobInfo is what the REST API reports about a job.
type JobInfo = jobmaster.JobInfo

// VertexInfo describes one vertex (a chain of operators) of a running job.
type VertexInfo = jobmaster.VertexInfo

// FaultInjector fails a job's attempts on purpose, to show and test that a
// job recovers exactly: JobOptions.Faults, or by default the
// fault-injection.* keys. Source tasks call it, concurrently, as they emit.
type FaultInjector = jobmaster.FaultInjector

// HighAvailability is what the job master asks of JobManager high
// availability (high-availability.type: ZOOKEEPER): Flink's checkpoint id
// counter, completed-checkpoint store and job result store. Every write is
// conditional on this process still leading, so a leader that lost its
// session — killed, cut off, paused — can neither take a checkpoint id
// another leader uses, nor register a checkpoint, nor let its sinks commit
// one: a sink commits a checkpoint only after AddCheckpoint returned nil.
type HighAvailability = jobmaster.HighAvailability

// LeadershipLostError says why a job was suspended: this process lost, or
// gave up, the leadership.
type LeadershipLostError = jobmaster.LeadershipLostError

// JobOptions configure a job submission.
type JobOptions = jobmaster.JobOptions

// JobResult is how a job ended.
type JobResult = jobmaster.JobResult

// Job is a submitted job.
type Job = jobmaster.Job

// RetainedSnapshot is a checkpoint or savepoint the job keeps or took, and
// whether the job owns it (may delete it).
type RetainedSnapshot = jobmaster.RetainedSnapshot

// SnapshotResult is the outcome of a requested checkpoint or savepoint.
type SnapshotResult = jobmaster.SnapshotResult

// RecoveryClaimMode says who owns a restored snapshot
// (execution.state-recovery.claim-mode, Flink's RecoveryClaimMode).
type RecoveryClaimMode = jobmaster.RecoveryClaimMode

// RestoreSource is the snapshot -s names, found and checked, with the
// user's restore settings.
type RestoreSource = jobmaster.RestoreSource

// CheckpointStats describes one checkpoint or savepoint, as Flink's REST
// API reports it.
type CheckpointStats = jobmaster.CheckpointStats

// RestoredStats describes the snapshot the job was restored from.
type RestoredStats = jobmaster.RestoredStats

// CheckpointingStats is Flink's CheckpointingStatistics.
type CheckpointingStats = jobmaster.CheckpointingStats

// ExceptionInfo is one failure of the job.
type ExceptionInfo = jobmaster.ExceptionInfo

// JobStatus is a job's state, with Flink's names (CANCELLING has two Ls,
// CANCELED one).
type JobStatus = jobmaster.JobStatus

// AllStatuses lists every JobStatus, in Flink's order.
var AllStatuses = jobmaster.AllStatuses

// JobMetrics are a reading of a job's metrics, with Flink's names and
// scopes (Job.Metrics).
type JobMetrics = jobmaster.JobMetrics

// VertexMetrics, SubtaskMetrics and OperatorMetrics are a vertex's, a
// subtask's and an operator's part of a reading.
type (
	VertexMetrics   = jobmaster.VertexMetrics
	SubtaskMetrics  = jobmaster.SubtaskMetrics
	OperatorMetrics = jobmaster.OperatorMetrics
)

// Metric is one metric's value at a reading.
type Metric = jobmaster.Metric

// BackPressureLevel is Flink's level (ok, low, high) for a back-pressured
// ratio.
func BackPressureLevel(ratio float64) string { return jobmaster.BackPressureLevel(ratio) }

// GetMetric returns the metric named name of ms.
func GetMetric(ms []Metric, name string) (Metric, bool) { return jobmaster.Get(ms, name) }

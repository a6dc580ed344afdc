package jobmaster

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/internal/graph"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/savepoint"
)

// ErrNoSavepointDir is Flink's message for a savepoint without a target
// directory and without a configured default.
var ErrNoSavepointDir = errors.New("Config key [execution.checkpointing.savepoint-dir] is not set. Property [target-directory] must be provided.")

// NotRunningError refuses an operation on a job that is not running.
type NotRunningError struct {
	JobID  string
	Status JobStatus
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("Job %s is not running: it is %s.", e.JobID, e.Status)
}

// call runs f on the job master's goroutine and waits for it. It fails once
// the job has ended.
func (jm *jobMaster) call(f func()) error {
	done := make(chan struct{})
	select {
	case jm.requests <- func() { defer close(done); f() }:
		<-done
		return nil
	case <-jm.done:
		return &NotRunningError{JobID: jm.jobID, Status: jm.statusNow()}
	}
}

func (jm *jobMaster) statusNow() JobStatus {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return jm.status
}

func (jm *jobMaster) savepointTarget(dir string) (string, error) {
	if dir == "" {
		dir = jm.cpCfg.SavepointDir
	}
	if dir == "" {
		return "", ErrNoSavepointDir
	}
	return savepoint.LocalPath(dir)
}

func parseFormat(format string) (savepoint.Format, error) {
	switch format {
	case "", string(savepoint.FormatCanonical), "canonical":
		return savepoint.FormatCanonical, nil
	case string(savepoint.FormatNative), "native":
		return savepoint.FormatNative, nil
	}
	return "", fmt.Errorf("Could not parse value for enum class org.apache.flink.core.execution.SavepointFormatType. Expected one of: [[CANONICAL, NATIVE]] (got %q)", format)
}

// TriggerSavepoint takes a savepoint into targetDir (or the configured
// default) in the given format (CANONICAL or NATIVE, default CANONICAL).
// The error is immediate (no directory, job not running); the outcome
// arrives on the channel.
func (j *Job) TriggerSavepoint(targetDir, format string) (<-chan SnapshotResult, error) {
	return j.jm.request(checkpoint.SnapshotType{Kind: savepoint.KindSavepoint}, targetDir, format, false)
}

// StopWithSavepoint stops the job with a savepoint: sources emit nothing
// after its barrier, two-phase-commit sinks commit it, and the job ends
// FINISHED. With drain, the input is ended first (operators finish, event
// time reaches its end). The channel receives the savepoint's location once
// the job has FINISHED, or why it could not stop.
func (j *Job) StopWithSavepoint(targetDir, format string, drain bool) (<-chan SnapshotResult, error) {
	return j.jm.request(checkpoint.SnapshotType{Kind: savepoint.KindSyncSavepoint, Drain: drain}, targetDir, format, true)
}

// TriggerCheckpoint takes a checkpoint now (full is accepted for Flink's
// API: the hashmap backend's checkpoints are always full).
func (j *Job) TriggerCheckpoint(full bool) (<-chan SnapshotResult, error) {
	res := make(chan SnapshotResult, 1)
	var err error
	cerr := j.jm.call(func() {
		if st := j.jm.statusNow(); st != StatusRunning {
			err = &NotRunningError{JobID: j.jm.jobID, Status: st}
			return
		}
		var acts []checkpoint.Action
		acts, err = j.jm.coord.Trigger(j.jm.clock(), &checkpoint.Request{
			Type: checkpoint.SnapshotType{Kind: savepoint.KindCheckpoint, Format: savepoint.FormatNative, Full: full},
			Tag:  (chan<- SnapshotResult)(res)})
		j.jm.apply(acts)
	})
	if cerr != nil {
		return nil, cerr
	}
	return res, err
}

func (jm *jobMaster) request(typ checkpoint.SnapshotType, targetDir, format string, stop bool) (<-chan SnapshotResult, error) {
	f, err := parseFormat(format)
	if err != nil {
		return nil, err
	}
	typ.Format = f
	res := make(chan SnapshotResult, 1)
	cerr := jm.call(func() {
		if st := jm.statusNow(); st != StatusRunning {
			err = &NotRunningError{JobID: jm.jobID, Status: st}
			return
		}
		var dir string
		if dir, err = jm.savepointTarget(targetDir); err != nil {
			if stop && errors.Is(err, ErrNoSavepointDir) {
				err = errors.New("No savepoint directory configured. You can either specify a directory via configure a cluster-wide default via key 'execution.checkpointing.savepoint-dir' or specify a directory in the command line, like -s :targetDirectory for cancelling, -p :targetDirectory for stopping or :targetDirectory for purely taking savepoint.")
			}
			return
		}
		req := &checkpoint.Request{Type: typ, TargetDir: dir, Tag: (chan<- SnapshotResult)(res)}
		var acts []checkpoint.Action
		if stop {
			acts, err = jm.coord.Stop(jm.clock(), req)
			if err == nil {
				jm.stop = &stopOp{result: res}
				// Completion of the savepoint is reported when the job ends.
				req.Tag = jm.stop
			}
		} else {
			acts, err = jm.coord.Trigger(jm.clock(), req)
		}
		jm.apply(acts)
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// stopOp is a stop-with-savepoint in progress: its savepoint completes
// first, and the answer is given when the job has ended.
type stopOp struct {
	result chan SnapshotResult
	id     int64
	path   string
}

// finishStop answers a stop-with-savepoint when the job ends.
func (jm *jobMaster) finishStop(final JobStatus) {
	s := jm.stop
	if s == nil {
		return
	}
	jm.stop = nil
	switch {
	case final == StatusFinished && s.path != "":
		s.result <- SnapshotResult{ID: s.id, Path: s.path}
	case s.path != "":
		s.result <- SnapshotResult{ID: s.id, Path: s.path, Err: fmt.Errorf("A savepoint has been created at: %s, but the corresponding job %s failed during stopping. The savepoint is consistent, but might have uncommitted transactions. If you want to commit the transaction please restart a job from this savepoint.", s.path, jm.jobID)}
	default:
		s.result <- SnapshotResult{Err: fmt.Errorf("the job ended %s before its savepoint completed", final)}
	}
}

// JobInfo is what the REST API reports about a job.
type JobInfo struct {
	ID         string
	Name       string
	Status     JobStatus
	StartTime  int64
	EndTime    int64 // -1 while not globally terminal
	Timestamps map[JobStatus]int64
	Vertices   []VertexInfo
	// Checkpoints are the checkpoint statistics; CheckpointConfig the
	// checkpointing settings.
	Checkpoints      CheckpointingStats
	CheckpointConfig checkpoint.Config
	// StateBackend is hashmap or rocksdb; Incremental says whether its
	// checkpoints are incremental.
	StateBackend task.StateBackendKind
	Incremental  bool
	// Changelog is the changelog's configuration (Enabled: in use).
	Changelog      task.ChangelogInfo
	Exceptions     []ExceptionInfo
	MaxParallelism int
	// Retained lists the checkpoints the job keeps (which it owns, and the
	// restored snapshot, owned only in CLAIM mode) and the savepoints it
	// took (never its own).
	Retained []RetainedSnapshot
}

// VertexInfo describes one vertex (a chain of operators) of a running job.
type VertexInfo struct {
	ID             string
	Name           string
	Parallelism    int
	MaxParallelism int
	// Tasks counts subtasks by execution state (RUNNING, FINISHED, …).
	Tasks     map[string]int
	StartTime int64
	EndTime   int64
	// Inputs are the vertex's input edges, in order.
	Inputs []VertexInput
}

// VertexInput is an edge into a vertex: the vertex it comes from and how
// records are shipped (FORWARD, HASH, REBALANCE, SHUFFLE, BROADCAST).
type VertexInput struct {
	ID   string
	Ship string
}

// Info reports the job's state, vertices, checkpoints and failures. It works
// after the job has ended too.
func (j *Job) Info() JobInfo {
	jm := j.jm
	jm.mu.Lock()
	defer jm.mu.Unlock()
	info := JobInfo{ID: jm.jobID, Name: jm.graph.Name, Status: jm.status, EndTime: -1,
		Timestamps: map[JobStatus]int64{}, Checkpoints: jm.stats.snapshot(), CheckpointConfig: jm.cpCfg,
		StateBackend: jm.backends.Name(), Incremental: jm.backends.IsIncremental(), Changelog: jm.clInfo,
		Exceptions: append([]ExceptionInfo(nil), jm.exceptions...), Retained: slices.Clone(jm.retained)}
	for k, v := range jm.timestamps {
		info.Timestamps[k] = v
	}
	info.StartTime = jm.timestamps[StatusInitializing]
	if jm.status.IsGloballyTerminal() {
		info.EndTime = jm.timestamps[jm.status]
	}
	for _, v := range jm.graph.Vertices {
		vi := VertexInfo{ID: graph.OperatorID(v.Head()), Name: v.Name, Parallelism: v.Parallelism,
			MaxParallelism: v.Head().MaxParallelism, Tasks: map[string]int{}, StartTime: info.StartTime, EndTime: -1}
		for i := 0; i < v.Parallelism; i++ {
			vi.Tasks[string(jm.taskStates[taskKey{v.ID, i}])]++
		}
		for _, e := range v.Inputs {
			for _, from := range jm.graph.Vertices {
				if slices.Contains(from.Nodes, e.From) {
					vi.Inputs = append(vi.Inputs, VertexInput{ID: graph.OperatorID(from.Head()), Ship: e.Ship.String()})
				}
			}
		}
		info.MaxParallelism = max(info.MaxParallelism, vi.MaxParallelism)
		info.Vertices = append(info.Vertices, vi)
	}
	return info
}

// CheckpointStats returns one checkpoint's statistics.
func (j *Job) CheckpointStats(id int64) (CheckpointStats, bool) {
	j.jm.mu.Lock()
	defer j.jm.mu.Unlock()
	return j.jm.stats.checkpoint(id)
}

type taskKey struct{ vertex, subtask int }

// ExecutionState is the state of a subtask's execution (Flink's
// ExecutionState).
type ExecutionState string

// Execution states of subtasks, with Flink's names.
const (
	ExecCreated   ExecutionState = "CREATED"
	ExecDeploying ExecutionState = "DEPLOYING"
	// ExecInitializing: deployed, loading its restored state (Flink 1.12+).
	ExecInitializing ExecutionState = "INITIALIZING"
	ExecRunning      ExecutionState = "RUNNING"
	ExecFinished     ExecutionState = "FINISHED"
	ExecCanceling    ExecutionState = "CANCELING"
	ExecCanceled     ExecutionState = "CANCELED"
	ExecFailed       ExecutionState = "FAILED"
)

func (jm *jobMaster) setTaskState(t *task.Task, state ExecutionState) {
	jm.mu.Lock()
	jm.taskStates[taskKey{t.Vertex, t.Subtask}] = state
	jm.mu.Unlock()
}

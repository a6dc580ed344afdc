package jobmaster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gflink/gflink/engine/internal/gcpace"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/internal/graph"
	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/restart"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// JobOptions configure a job submission.
type JobOptions struct {
	// JobID is 32 hex digits; a random one if empty.
	JobID  string
	Config *config.Configuration
	// FS is the filesystem for checkpoints (vfs.Default if nil).
	FS     vfs.FS
	Logger *slog.Logger
	// Restore is the snapshot to start from (-s); nil for a fresh start.
	Restore               *restore.Resolved
	AllowNonRestoredState bool
	// ClaimMode says who owns the restored snapshot: NO_CLAIM (default)
	// and LEGACY leave it alone; CLAIM makes it the job's own checkpoint,
	// deleted when subsumed or when the job ends under the retention policy.
	ClaimMode RecoveryClaimMode
	// Clock and Rand are for tests; real time and randomness if nil.
	Clock func() time.Time
	Rand  *mrand.Rand
	// OnStatus is called (on the job master's goroutine) at every status
	// change, with the time it happened, just before Job.Status and the
	// REST endpoint report the new status.
	OnStatus func(status JobStatus, at time.Time)
	// OnSavepoint is called (on the job master's goroutine) when a
	// savepoint has completed, with its file: URI, before the client that
	// asked for it is answered.
	OnSavepoint func(path string)
	// OnAccepted is called once the job is validated and its restore
	// mapped, before any task is deployed: what a client says about the
	// submission then comes before anything the job itself prints.
	OnAccepted func(*Job)
	// HA is JobManager high availability, or nil: checkpoint ids, completed
	// checkpoints and the job's end are recorded there, each only while
	// this process leads.
	HA HighAvailability
	// Faults fails attempts on purpose; nil: the fault-injection.* keys
	// decide.
	Faults FaultInjector
	// FirstCheckpointID is the least id the job's next checkpoint may take
	// (a new leader continues the shared counter); 0 for no bound.
	FirstCheckpointID int64
}

// JobResult is how a job ended.
type JobResult struct {
	JobID  string
	Name   string
	Status JobStatus
	// Err is why the job FAILED.
	Err        error
	Start, End time.Time
	// Retained lists the checkpoints left on disk by the retention policy,
	// newest last, as file: URIs.
	Retained []string
}

// Job is a submitted job.
type Job struct {
	jm *jobMaster
}

// NewJobID returns a random 32-hex job id.
func NewJobID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Submit validates a job's configuration and restore, then starts it. An
// error means the job did not start: nothing ran and nothing was written.
func Submit(ctx context.Context, g *graph.JobGraph, o JobOptions) (*Job, error) {
	jm, err := newJobMaster(ctx, g, o)
	if err != nil {
		return nil, err
	}
	j := &Job{jm: jm}
	if o.OnAccepted != nil {
		o.OnAccepted(j)
	}
	// The collector's headroom follows the state while the job runs.
	release := gcpace.Acquire()
	go func() {
		defer release()
		jm.run()
	}()
	return j, nil
}

// ID is the job's id.
func (j *Job) ID() string { return j.jm.jobID }

// Done is closed when the job has reached a terminal status.
func (j *Job) Done() <-chan struct{} { return j.jm.done }

// Wait blocks until the job ends.
func (j *Job) Wait() JobResult {
	<-j.jm.done
	return j.jm.result
}

// Cancel cancels the job (it ends CANCELED).
func (j *Job) Cancel() { j.jm.cancelJob() }

// Status returns the job's current status.
func (j *Job) Status() JobStatus {
	j.jm.mu.Lock()
	defer j.jm.mu.Unlock()
	return j.jm.status
}

// StatusTimestamps returns when the job entered each status (Unix ms).
func (j *Job) StatusTimestamps() map[JobStatus]int64 {
	j.jm.mu.Lock()
	defer j.jm.mu.Unlock()
	out := make(map[JobStatus]int64, len(j.jm.timestamps))
	for k, v := range j.jm.timestamps {
		out[k] = v
	}
	return out
}

type taskEventKind int

const (
	evAck taskEventKind = iota
	evDecline
	evInitialized
	evEndOfInput
	evFinished
	evFailed
)

type taskEvent struct {
	attempt int
	task    checkpoint.TaskID
	kind    taskEventKind
	id      int64
	ack     *checkpoint.Ack
	reason  error
	err     error
	final   []checkpoint.OperatorSnapshot
}

type jobMaster struct {
	jobSetup
	loop
	observed
	attempts
}

// jobSetup is what the job master is given and builds before the job
// starts, fixed from then on.
type jobSetup struct {
	jobID        string
	graph        *graph.JobGraph
	conf         *config.Configuration
	cpCfg        checkpoint.Config
	clInfo       task.ChangelogInfo
	strat        restart.Strategy
	fs           vfs.FS
	storage      *checkpoint.Storage
	coord        *checkpoint.Coordinator
	backends     *task.StateBackends
	log          *slog.Logger
	clock        func() time.Time
	ctx          context.Context
	ha           HighAvailability // nil without high availability
	onStatus     func(JobStatus, time.Time)
	onSavepoint  func(path string)
	plan         *restore.Plan // initial restore
	allowNonRest bool
	faults       FaultInjector // nil: none
}

// loop is how the job master's goroutine is reached: tasks' events,
// requests from other goroutines (Info, savepoints, stop), cancellation,
// and the end of the job.
type loop struct {
	events   chan taskEvent
	requests chan func()
	cancelCh chan struct{}
	cancelMu sync.Once
	done     chan struct{}
}

// observed is what other goroutines read of the job (Info, Status, the
// REST API), guarded by mu.
type observed struct {
	mu         sync.Mutex
	status     JobStatus
	timestamps map[JobStatus]int64
	result     JobResult
	stats      statsTracker
	exceptions []ExceptionInfo
	taskStates map[taskKey]ExecutionState
	// retained mirrors the coordinator's retained checkpoints, plus the
	// savepoints taken.
	retained []RetainedSnapshot
	restored *RetainedSnapshot
	// live is the attempt whose tasks' metrics are read; meters keeps
	// their samples for rates.
	live   atomic.Pointer[liveAttempt]
	meters meters
}

// attempts is the job master goroutine's own: the running execution
// attempt and what carries over from one attempt to the next.
type attempts struct {
	exec         *execution
	attempt      int
	runIDs       []string // of every attempt so far
	restartAt    time.Time
	failureCause error
	stop         *stopOp // a stop-with-savepoint in progress
	// resume is where sources continue after a restart when checkpointing
	// is off: their positions at the failure, and no other state.
	resume *restore.Plan
}

func newJobMaster(ctx context.Context, g *graph.JobGraph, o JobOptions) (*jobMaster, error) {
	c := o.Config
	if c == nil {
		c = config.New()
	}
	if err := config.Validate(c, Options()); err != nil {
		return nil, err
	}
	if err := graph.CheckExchangeMemory(g, graph.PhysicalMemory()); err != nil {
		return nil, err
	}
	jm := &jobMaster{
		jobSetup: jobSetup{jobID: o.JobID, graph: g, conf: c, fs: o.FS, log: o.Logger, clock: o.Clock, ctx: ctx,
			allowNonRest: o.AllowNonRestoredState, onStatus: o.OnStatus, onSavepoint: o.OnSavepoint, ha: o.HA},
		loop: loop{events: make(chan taskEvent, 1024), requests: make(chan func()), cancelCh: make(chan struct{}),
			done: make(chan struct{})},
		observed: observed{status: StatusInitializing, timestamps: map[JobStatus]int64{}, taskStates: map[taskKey]ExecutionState{}},
	}
	if jm.jobID == "" {
		jm.jobID = NewJobID()
	}
	if jm.fs == nil {
		jm.fs = vfs.Default
	}
	if jm.log == nil {
		jm.log = slog.New(slog.DiscardHandler)
	}
	if jm.clock == nil {
		jm.clock = time.Now
	}
	jm.timestamps[StatusInitializing] = jm.clock().UnixMilli()
	if _, err := AutoWatermarkInterval.Get(c); err != nil {
		return nil, err
	}
	if err := jm.configureCheckpointing(c); err != nil {
		return nil, err
	}
	cl, err := jm.configureChangelog(c)
	if err != nil {
		return nil, err
	}
	if err := jm.configureFailover(c, o); err != nil {
		return nil, err
	}
	nextID, err := jm.planRestore(c, o)
	if err != nil {
		return nil, err
	}
	if err := jm.startCoordinator(o, nextID); err != nil {
		return nil, err
	}
	// Last, as it creates the rocksdb backend's working directory, which
	// run removes when the job ends.
	if err := jm.openStateBackends(c, o, cl); err != nil {
		return nil, err
	}
	return jm, nil
}

// configureCheckpointing reads the checkpointing options and the checkpoint
// storage, and logs what endangers the connectors' guarantees.
func (jm *jobMaster) configureCheckpointing(c *config.Configuration) error {
	cfg, warnings, err := checkpoint.ConfigFrom(c)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		jm.log.Warn(w)
	}
	if cfg.Enabled() && !cfg.AfterTasksFinish {
		jm.log.Warn("execution.checkpointing.checkpoints-after-tasks-finish is false: once a task has finished, no checkpoint completes, so two-phase-commit sinks never commit what they wrote after the last checkpoint before the input ended (the file sink leaves it in hidden pending files), and a failure after that restarts from that older checkpoint.")
	}
	jm.cpCfg = cfg
	for _, n := range jm.graph.Nodes {
		if nr, ok := n.Source.(api.NonReplayableSource); ok {
			jm.log.Warn(nr.NotReplayable())
		}
		for _, c := range []any{n.Source, n.Sink} {
			if tc, ok := c.(api.CheckpointTimingChecker); ok {
				for _, w := range tc.CheckCheckpointTiming(api.CheckpointTiming{Interval: cfg.Interval, Timeout: cfg.Timeout, MinPause: cfg.MinPause}) {
					jm.log.Warn(w)
				}
			}
		}
	}
	jobDir := ""
	if cfg.Storage == checkpoint.StorageFilesystem {
		jobDir = savepoint.JobCheckpointDir(cfg.Dir, jm.jobID)
	}
	jm.storage = &checkpoint.Storage{StorageWorker: checkpoint.StorageWorker{FS: jm.fs, JobDir: jobDir, JobID: jm.jobID, InlineThreshold: cfg.InlineThreshold}}
	return nil
}

// configureChangelog reads the changelog's options (nil when it is off).
func (jm *jobMaster) configureChangelog(c *config.Configuration) (*task.ChangelogConfig, error) {
	cl, warnings, err := task.ChangelogFrom(c, jm.cpCfg, jm.jobID)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		jm.log.Warn(w)
	}
	jm.clInfo = task.NewChangelogInfo(c, cl)
	if cl != nil {
		jm.storage.ChangelogDir = cl.Dir
	}
	return cl, nil
}

// configureFailover sets up the restart strategy and fault injection.
func (jm *jobMaster) configureFailover(c *config.Configuration, o JobOptions) error {
	rng := o.Rand
	if rng == nil {
		rng = mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	}
	var err error
	if jm.strat, err = restart.FromConfig(c, jm.cpCfg.Enabled(), rng); err != nil {
		return err
	}
	jm.faults = o.Faults
	if jm.faults == nil {
		jm.faults = faultsFromConfig(c, jm.log)
	}
	return nil
}

// planRestore maps the snapshot to restore (if any) onto the job and
// returns the id its first checkpoint takes.
func (jm *jobMaster) planRestore(c *config.Configuration, o JobOptions) (int64, error) {
	nextID := int64(1)
	if o.Restore != nil {
		backend, err := task.StateBackend.Get(c)
		if err != nil {
			return 0, err
		}
		plan, err := PlanRestore(jm.graph, jm.fs, o.Restore, o.AllowNonRestoredState, backend)
		if err != nil {
			return 0, err
		}
		jm.plan = plan
		nextID = o.Restore.Metadata.CheckpointID + 1
	}
	return max(nextID, o.FirstCheckpointID), nil
}

// startCoordinator makes the checkpoint coordinator, hands it the restored
// snapshot (owned by the job under CLAIM), and creates the checkpoint
// directory.
func (jm *jobMaster) startCoordinator(o JobOptions, nextID int64) error {
	for _, v := range jm.graph.Vertices {
		for i := 0; i < v.Parallelism; i++ {
			jm.taskStates[taskKey{v.ID, i}] = ExecCreated
		}
	}
	jm.coord = checkpoint.NewCoordinator(jm.cpCfg, nextID)
	if jm.plan != nil {
		md := jm.plan.Meta
		jm.stats.restored(md, jm.plan.Dir, jm.clock())
		h := &checkpoint.Handle{Loc: &checkpoint.Location{ID: md.CheckpointID, Dir: jm.plan.Dir}, Meta: md}
		claimed := o.ClaimMode == ClaimModeClaim
		jm.coord.AddRestored(&checkpoint.Completed{ID: md.CheckpointID, Owned: claimed,
			Type: checkpoint.SnapshotType{Kind: md.Kind, Format: md.Format}, Handle: h})
		if claimed && md.Kind == savepoint.KindCheckpoint {
			// Its shared files are the job's now: deleted once no
			// retained checkpoint refers to them.
			jm.storage.Register(md.CheckpointID, h.Loc, md)
		}
	}
	if jm.cpCfg.Enabled() {
		if err := jm.storage.Init(); err != nil {
			return err
		}
	}
	jm.refreshRetained()
	return nil
}

// openStateBackends makes the job's state backends (and the changelog's
// storage when it is on).
func (jm *jobMaster) openStateBackends(c *config.Configuration, o JobOptions, cl *task.ChangelogConfig) error {
	restored := ""
	if jm.plan != nil {
		restored = jm.plan.Pointer
	}
	keyed := 0
	for _, n := range jm.graph.Nodes {
		if n.Keyed {
			keyed += n.Parallelism
		}
	}
	var err error
	if jm.backends, err = task.NewStateBackends(c, task.BackendsOptions{JobID: jm.jobID, JobDir: jm.storage.JobDir, Restored: restored,
		Claim: o.ClaimMode == ClaimModeClaim, KeyedSubtasks: keyed, Log: jm.log,
		TmpDir: filepath.Join(jobregistry.Home(os.Getenv), "tmp")}); err != nil {
		return err
	}
	jm.storage.ChangelogMemory = jm.backends.ChangelogMemory
	if cl == nil {
		return nil
	}
	if err := cl.Init(jm.fs); err != nil {
		jm.backends.Close()
		return err
	}
	jm.backends.Changelog = cl
	every := "never (state.changelog.periodic-materialize.enabled: false)"
	if cl.Interval > 0 {
		every = "every " + config.FormatDuration(cl.Interval)
	}
	jm.log.Info("Using the changelog state backend over "+string(jm.backends.Name()), "log", cl.Where(), "materialization", every)
	if restored != "" {
		jm.log.Info("The changelog materializes the state restored from " + restored + " before the first checkpoint: no checkpoint of this job refers to the restored snapshot, whatever the claim mode.")
	}
	return nil
}

// RetainedSnapshot is a checkpoint or savepoint the job keeps or took, and
// whether the job owns it (may delete it).
type RetainedSnapshot struct {
	ID                  int64
	Kind                savepoint.Kind // CHECKPOINT, SAVEPOINT, SYNC_SAVEPOINT
	Format              savepoint.Format
	Path                string // file: URI; "" for checkpoints in memory
	CompletionTimestamp int64
	Size                int64
	// Added is what the snapshot wrote itself (checkpointed size); with
	// Incremental it refers to shared files of earlier checkpoints.
	Added       int64
	Incremental bool
	Changelog   *savepoint.ChangelogSummary
	Owned       bool
	Restored    bool // the snapshot the job was started from
}

// refreshRetained updates the mirror of the retained checkpoints; it runs
// on the job master's goroutine.
func (jm *jobMaster) refreshRetained() {
	var out []RetainedSnapshot
	for _, cp := range jm.coord.Retained() {
		h := cp.Handle
		r := RetainedSnapshot{ID: cp.ID, Kind: cp.Type.Kind, Format: cp.Type.Format, Owned: cp.Owned,
			CompletionTimestamp: h.Meta.CompletionTimestamp, Size: h.Meta.StateSize(),
			Added: h.Meta.CheckpointedSize(), Incremental: len(h.Meta.SharedFiles()) > 0 && !h.Meta.Full, Changelog: h.Meta.Changelog()}
		if h.Loc.Dir != "" {
			r.Path = savepoint.URI(h.Loc.Dir)
		}
		if jm.plan != nil && h.Loc.Dir == jm.plan.Dir {
			r.Restored = true
		}
		out = append(out, r)
	}
	jm.mu.Lock()
	for _, sp := range jm.retained {
		if sp.Kind != savepoint.KindCheckpoint && !sp.Restored {
			out = append(out, sp) // savepoints taken: the user's
		}
	}
	jm.retained = out
	jm.mu.Unlock()
}

// sourcePositions collects the read positions the source tasks of an
// ended attempt kept, as a restore plan holding only those.
func sourcePositions(e *execution) *restore.Plan {
	plan := &restore.Plan{Operators: map[string]*restore.OperatorPlan{}}
	incomplete := map[string]bool{}
	for _, t := range e.tasks {
		if t.Source == nil {
			continue
		}
		uid := t.UIDs[0]
		if t.Positions == nil {
			// This subtask never knew its position (it failed while
			// opening): the source starts over rather than drop its splits.
			incomplete[uid] = true
			continue
		}
		op := plan.Operators[uid]
		if op == nil {
			op = &restore.OperatorPlan{UID: uid, MaxParallelism: e.maxPar[uid], Subtasks: make([]restore.SubtaskRestore, t.Parallelism)}
			plan.Operators[uid] = op
		}
		op.Subtasks[t.Subtask].OperatorState = t.Positions
	}
	for uid := range incomplete {
		delete(plan.Operators, uid)
	}
	if len(plan.Operators) == 0 {
		return nil
	}
	return plan
}

// PlanRestore matches a snapshot against a job graph, as a job restored
// from it would — for `run --check`, which reports the plan without
// running anything.
func PlanRestore(g *graph.JobGraph, fsys vfs.FS, r *restore.Resolved, allowNonRestoredState bool, backend task.StateBackendKind) (*restore.Plan, error) {
	plan, err := MapRestore(g, fsys, r, allowNonRestoredState, backend)
	if err != nil {
		return nil, err
	}
	if lost := restore.UnmatchedInFlight(plan.Meta, g.Exchanges()); len(lost) > 0 && !allowNonRestoredState {
		return nil, fmt.Errorf("Failed to rollback to checkpoint/savepoint %s. It is an unaligned checkpoint that holds records in flight on exchanges the new program does not have (%s): they cannot be restored. Restore a changed program from a savepoint (savepoints are aligned and hold no records in flight), or set the --allowNonRestoredState option to drop them.",
			plan.Pointer, strings.Join(lost, ", "))
	}
	for _, n := range g.Nodes {
		if err := sourceMismatch(n, plan); err != nil {
			return nil, fmt.Errorf("Failed to rollback to checkpoint/savepoint %s. The source state of operator %s does not fit the new program: %w. A restored source continues from the positions in its snapshot; start without -s to read this job's input from the beginning.", plan.Pointer, n.UID, err)
		}
	}
	return plan, nil
}

// MapRestore is PlanRestore without the check of restored source splits:
// how the snapshot's state maps onto the job's operators.
func MapRestore(g *graph.JobGraph, fsys vfs.FS, r *restore.Resolved, allowNonRestoredState bool, backend task.StateBackendKind) (*restore.Plan, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	return restore.NewPlan(fsys, r, g.Description(), restore.Options{
		AllowNonRestoredState: allowNonRestoredState, StateBackend: string(backend)})
}

// RestoredSourceMismatch says why the splits plan restores into the source
// with this uid are not that source's, or returns nil (also for operators
// that are not sources or cannot tell).
func RestoredSourceMismatch(g *graph.JobGraph, plan *restore.Plan, uid string) error {
	for _, n := range g.Nodes {
		if n.UID == uid {
			return sourceMismatch(n, plan)
		}
	}
	return nil
}

func sourceMismatch(n *graph.Node, plan *restore.Plan) error {
	checker, ok := n.Source.(api.RestoredSplitsChecker)
	op := plan.Operators[n.UID]
	if !ok || op == nil || op.Finished {
		return nil // not a checking source, no state, or finished: reads nothing more
	}
	var splits [][]byte
	for _, st := range op.Subtasks {
		for _, l := range st.OperatorState {
			if l.Name == task.SourceReaderStateName {
				splits = append(splits, l.Items...)
			}
		}
	}
	if len(splits) == 0 {
		return nil
	}
	return checker.CheckRestoredSplits(splits)
}

// RestorePlan returns the plan the job was restored with, or nil.
func (j *Job) RestorePlan() *restore.Plan { return j.jm.plan }

func (jm *jobMaster) transition(to JobStatus) {
	from := jm.statusNow()
	if err := checkTransition(from, to); err != nil {
		panic(err) // a bug in the job master, not a user error
	}
	at := jm.clock()
	// OnStatus runs before the status is published, so that what it
	// records (the job's registry entry, which `gflink list` reads) is
	// never behind what the REST endpoint says: a script whose `cancel`
	// saw CANCELED must find CANCELED in `list`. Only this goroutine
	// changes the status, so nothing moves it in between.
	if jm.onStatus != nil {
		jm.onStatus(to, at)
	}
	jm.mu.Lock()
	jm.status = to
	jm.timestamps[to] = at.UnixMilli()
	jm.mu.Unlock()
	msg := fmt.Sprintf("Job %s (%s) switched from state %s to %s.", jm.graph.Name, jm.jobID, from, to)
	switch to {
	case StatusCreated, StatusRunning, StatusFinished:
		// The normal course of a job: not news on a terminal.
		jm.log.Debug(msg)
	default:
		jm.log.Info(msg)
	}
}

func (jm *jobMaster) cancelJob() {
	jm.cancelMu.Do(func() { close(jm.cancelCh) })
}

func (jm *jobMaster) run() {
	start := jm.clock()
	jm.result = JobResult{JobID: jm.jobID, Name: jm.graph.Name, Start: start}
	defer func() {
		jm.result.End = jm.clock()
		jm.mu.Lock()
		jm.result.Status = jm.status
		jm.mu.Unlock()
		jm.finishStop(jm.result.Status)
		// Every task has ended (and closed its backend): the LSM working
		// directories go.
		if err := jm.backends.Close(); err != nil {
			jm.log.Warn("Could not remove the state backend's working directory: " + err.Error())
		}
		close(jm.done)
	}()
	jm.transition(StatusCreated)
	if err := jm.deploy(jm.plan); err != nil {
		jm.result.Err = fmt.Errorf("Job failed (JobID: %s): %w", jm.jobID, fmt.Errorf("Could not start the job: %w", err))
		jm.endCheckpoints(StatusFailed)
		jm.transition(StatusFailed)
		return
	}
	// RUNNING comes when every task has loaded its state (evInitialized).

	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	ctxDone := jm.ctx.Done()
	for {
		jm.mu.Lock()
		st := jm.status
		jm.mu.Unlock()
		if st.IsGloballyTerminal() || st == StatusSuspended {
			return
		}
		now := jm.clock()
		var wakeC <-chan time.Time
		next, ok := jm.coord.NextWakeup()
		if st == StatusRestarting && (!ok || jm.restartAt.Before(next)) {
			next, ok = jm.restartAt, true
		}
		if ok {
			wake.Reset(max(next.Sub(now), 0))
			wakeC = wake.C
		}
		select {
		case ev := <-jm.events:
			jm.onEvent(ev)
		case <-wakeC:
			if st == StatusRestarting && !jm.clock().Before(jm.restartAt) {
				jm.restartNow()
			} else {
				jm.apply(jm.coord.Tick(jm.clock()))
			}
		case f := <-jm.requests:
			f()
		case <-jm.cancelCh:
			jm.cancelNow()
		case <-ctxDone:
			ctxDone = nil
			jm.cancelNow()
		}
		if !wake.Stop() {
			select {
			case <-wake.C:
			default:
			}
		}
	}
}

func (jm *jobMaster) onEvent(ev taskEvent) {
	if jm.exec == nil || ev.attempt != jm.exec.attempt {
		return // from an attempt that is gone
	}
	now := jm.clock()
	switch ev.kind {
	case evAck:
		jm.mu.Lock()
		jm.stats.acked(ev.id, now, ev.ack)
		jm.mu.Unlock()
		jm.apply(jm.coord.Ack(now, ev.id, ev.task, ev.ack))
	case evDecline:
		jm.apply(jm.coord.Decline(now, ev.id, ev.task, ev.reason, ev.err))
	case evInitialized:
		jm.setTaskState(jm.exec.tasks[ev.task], ExecRunning)
		jm.exec.numInitialized++
		// A task reports this before it can finish or fail, so the job is
		// RUNNING before any attempt can end.
		if jm.exec.numInitialized == len(jm.exec.tasks) {
			jm.transition(StatusRunning)
		}
	case evEndOfInput:
		jm.apply(jm.coord.EndOfInput(now, ev.task))
	case evFinished:
		var final *checkpoint.Ack
		if ev.final != nil {
			final = &checkpoint.Ack{Final: ev.final}
		}
		jm.exec.finished++
		jm.setTaskState(jm.exec.tasks[ev.task], ExecFinished)
		jm.apply(jm.coord.TaskFinished(now, ev.task, final))
		if jm.exec != nil && jm.exec.finished == len(jm.exec.tasks) {
			jm.finishJob()
		}
	case evFailed:
		t := jm.exec.tasks[ev.task]
		jm.setTaskState(t, ExecFailed)
		jm.mu.Lock()
		jm.exceptions = append(jm.exceptions, ExceptionInfo{Timestamp: now.UnixMilli(), Message: ev.err.Error(), TaskName: t.Name})
		jm.mu.Unlock()
		jm.failover(fmt.Errorf("%s failed: %w", t.Name, ev.err))
	}
}

// apply carries out the coordinator's decisions.
func (jm *jobMaster) apply(actions []checkpoint.Action) {
	now := jm.clock()
	for _, a := range actions {
		switch a := a.(type) {
		case checkpoint.TriggerTasks:
			jm.trigger(a)
		case checkpoint.Finalize:
			jm.finalize(a.Pending)
		case checkpoint.Abort:
			jm.abortCheckpoint(a)
		case checkpoint.Complete:
			jm.completeCheckpoint(now, a)
		case checkpoint.FailJob:
			jm.mu.Lock()
			jm.exceptions = append(jm.exceptions, ExceptionInfo{Timestamp: now.UnixMilli(), Message: a.Err.Error()})
			jm.mu.Unlock()
			jm.failover(a.Err)
		case checkpoint.EndInput:
			if jm.exec != nil {
				for _, t := range a.Tasks {
					jm.exec.tasks[t].Mail.Put(network.Mail{Kind: network.MailDrain})
				}
			}
		case checkpoint.RequestFailed:
			jm.reply(a.Request, SnapshotResult{Err: a.Err})
		}
	}
}

func (jm *jobMaster) trigger(a checkpoint.TriggerTasks) {
	p := a.Pending
	if p.Location == nil && jm.ha != nil {
		// Before anything is written: a new leader never reuses the id,
		// nor the chk-<id> directory a lost leader may still be writing.
		if err := jm.ha.ReserveCheckpointID(p.ID); err != nil {
			jm.apply(jm.coord.Decline(jm.clock(), p.ID, -1, checkpoint.ErrIOProblem, fmt.Errorf("reserve checkpoint id %d in the high-availability store: %w", p.ID, err)))
			return
		}
	}
	if p.Location == nil {
		target := jm.cpCfg.SavepointDir
		if p.Request != nil && p.Request.TargetDir != "" {
			target = p.Request.TargetDir
		}
		loc, err := jm.storage.Location(p.ID, p.Type, target)
		if err != nil {
			jm.apply(jm.coord.Decline(jm.clock(), p.ID, -1, checkpoint.ErrIOProblem, err))
			return
		}
		p.Location = loc
		if jm.exec != nil {
			jm.mu.Lock()
			jm.stats.triggered(p, len(jm.exec.tasks))
			jm.mu.Unlock()
		}
	}
	if jm.exec == nil {
		return
	}
	b := network.Barrier{ID: p.ID, Timestamp: p.Triggered.UnixMilli(), Type: p.Type, Location: p.Location, Unaligned: p.Unaligned}
	if b.Unaligned && jm.cpCfg.AlignedTimeout > 0 {
		b.AlignedUntil = b.Timestamp + max(1, jm.cpCfg.AlignedTimeout.Milliseconds())
	}
	for _, t := range a.Tasks {
		jm.exec.tasks[t].Mail.Put(network.Mail{Kind: network.MailTrigger, Barrier: b})
	}
}

func (jm *jobMaster) finalize(p *checkpoint.Pending) {
	if jm.exec == nil {
		return // the attempt failed over in the same batch of decisions
	}
	loc := p.Location
	md := &savepoint.Metadata{JobID: jm.jobID, JobName: jm.graph.Name,
		CheckpointID: p.ID, Kind: p.Type.Kind, Full: p.Type.Full, Format: p.Type.Format, Backend: string(jm.backends.Name()),
		TriggerTimestamp: p.Triggered.UnixMilli()}
	var acks []checkpoint.Ack
	var finals []bool
	var werr error
	for _, a := range p.Acks {
		ack := *a
		final := ack.Final != nil
		if final {
			h, err := jm.storage.WriteSubtask(loc, ack.Final)
			if err != nil {
				werr = err
				break
			}
			ack.Handles, ack.Descs = h, checkpoint.Descriptors(ack.Final)
		}
		acks, finals = append(acks, ack), append(finals, final)
	}
	var ops []checkpoint.OperatorInfo
	for _, n := range jm.graph.Nodes {
		ops = append(ops, checkpoint.OperatorInfo{UID: n.UID, OperatorID: graph.OperatorID(n), Name: graph.DisplayName(n),
			Parallelism: n.Parallelism, MaxParallelism: jm.exec.maxPar[n.UID]})
	}
	md.Operators = checkpoint.AssembleOperators(ops, acks, finals)
	md.CompletionTimestamp = jm.clock().UnixMilli()
	err := werr
	if err == nil {
		err = jm.storage.Finalize(loc, md)
	}
	if err == nil && jm.ha != nil {
		// Fencing: only a checkpoint registered while this process leads
		// completes, and only a completed one is committed by the sinks.
		if err = jm.ha.AddCheckpoint(p.ID, loc.Dir, p.Type.IsSavepoint()); err != nil {
			err = fmt.Errorf("register checkpoint %d in the high-availability store: %w", p.ID, err)
			// The write may have reached ZooKeeper, and a new leader may
			// restore it: its files stay.
			p.Location = nil
		}
	}
	jm.apply(jm.coord.Finalized(jm.clock(), p.ID, &checkpoint.Handle{Loc: loc, Meta: md}, err))
}

func (jm *jobMaster) abortCheckpoint(a checkpoint.Abort) {
	p := a.Pending
	if loc := p.Location; loc != nil {
		if err := jm.storage.Discard(loc, nil); err != nil {
			jm.log.Warn(fmt.Sprintf("Could not discard checkpoint %d: %v", p.ID, err))
		}
	}
	if jm.exec != nil {
		for _, t := range a.Tasks {
			jm.exec.tasks[t].Mail.Put(network.Mail{Kind: network.MailAbort, ID: p.ID})
		}
	}
	jm.mu.Lock()
	jm.stats.failed(p.ID, jm.clock(), a.Err.Error())
	jm.mu.Unlock()
	if !errors.Is(a.Err, checkpoint.ErrSubsumed) && !errors.Is(a.Err, checkpoint.ErrSuspending) {
		what := "Checkpoint"
		if p.Type.IsSavepoint() {
			what = "Savepoint"
		}
		jm.log.Warn(fmt.Sprintf("%s %d of job %s failed: %v", what, p.ID, jm.jobID, a.Err))
	}
	if p.Request != nil {
		jm.reply(p.Request, SnapshotResult{ID: p.ID, Err: a.Err})
	}
}

// reply answers a user's request. A stop-with-savepoint that failed before
// its savepoint completed is answered now (the job goes on); one whose
// savepoint completed is answered when the job ends.
func (jm *jobMaster) reply(req *checkpoint.Request, r SnapshotResult) {
	switch tag := req.Tag.(type) {
	case chan<- SnapshotResult:
		tag <- r
	case *stopOp:
		if r.Err != nil {
			if jm.stop == tag {
				jm.stop = nil
			}
			tag.result <- r
			return
		}
		tag.id, tag.path = r.ID, r.Path
	}
}

// SnapshotResult is the outcome of a requested checkpoint or savepoint.
type SnapshotResult struct {
	ID int64
	// Path is the snapshot's directory as a file: URI ("" for checkpoints
	// kept in memory).
	Path string
	Err  error
}

func (jm *jobMaster) completeCheckpoint(now time.Time, a checkpoint.Complete) {
	h := a.Checkpoint.Handle
	dur := a.Checkpoint.Completed.Sub(a.Checkpoint.Triggered).Milliseconds()
	fin := now.UnixMilli() - h.Meta.CompletionTimestamp
	what := "checkpoint"
	if a.Checkpoint.Type.IsSavepoint() {
		what = "savepoint"
	}
	// Flink's line; an unaligned checkpoint adds its type and the bytes of
	// records in flight it stored.
	extra := ""
	jm.mu.Lock()
	if c := jm.stats.entry(a.Checkpoint.ID); c != nil && c.Unaligned {
		extra = fmt.Sprintf(", type=UNALIGNED_CHECKPOINT, persistedData=%d bytes", c.PersistedData)
	}
	jm.mu.Unlock()
	jm.log.Info(fmt.Sprintf("Completed %s %d for job %s (%d bytes, checkpointDuration=%d ms, finalizationTime=%d ms%s).",
		what, a.Checkpoint.ID, jm.jobID, h.Meta.StateSize(), dur, max(fin, 0), extra))
	notify := jm.exec != nil
	if notify && jm.ha != nil {
		if err := jm.ha.Leading(); err != nil {
			notify = false
			jm.log.Warn(fmt.Sprintf("Not committing checkpoint %d here: %v; the leader that takes over commits it when it restores it.", a.Checkpoint.ID, err))
		}
	}
	if notify {
		for _, t := range a.Notify {
			jm.exec.tasks[t].Mail.Put(network.Mail{Kind: network.MailComplete, ID: a.Checkpoint.ID})
		}
	}
	if jm.exec != nil && !a.Checkpoint.Type.IsSavepoint() {
		jm.exec.completed.Add(1)
	}
	path := ""
	if h.Loc.Dir != "" {
		path = savepoint.URI(h.Loc.Dir)
	}
	jm.mu.Lock()
	jm.stats.completed(a.Checkpoint.ID, now, path, h.Meta.StateSize(), h.Meta.CheckpointedSize())
	if a.Checkpoint.Type.IsSavepoint() {
		jm.retained = append(jm.retained, RetainedSnapshot{ID: a.Checkpoint.ID, Kind: a.Checkpoint.Type.Kind,
			Format: a.Checkpoint.Type.Format, Path: path, CompletionTimestamp: h.Meta.CompletionTimestamp, Size: h.Meta.StateSize(),
			Added: h.Meta.CheckpointedSize()}) // as read back from disk once the job ends
	}
	jm.mu.Unlock()
	defer jm.refreshRetained()
	if !a.Checkpoint.Type.IsSavepoint() {
		jm.storage.Register(a.Checkpoint.ID, h.Loc, h.Meta)
	}
	for _, old := range a.Subsumed {
		jm.discard(old)
	}
	if a.Checkpoint.Type.IsSavepoint() && path != "" && jm.onSavepoint != nil {
		// Before the reply: whoever asked for the savepoint finds it
		// recorded once it has the path.
		jm.onSavepoint(path)
	}
	if a.Request != nil {
		jm.reply(a.Request, SnapshotResult{ID: a.Checkpoint.ID, Path: path})
	}
}

func (jm *jobMaster) discard(cp *checkpoint.Completed) {
	if !cp.Owned {
		return
	}
	jm.mu.Lock()
	jm.stats.discarded(cp.ID)
	jm.mu.Unlock()
	h := cp.Handle
	if jm.ha != nil {
		if err := jm.ha.RemoveCheckpoint(cp.ID); err != nil {
			// A new leader may still restore it: its files stay.
			jm.log.Warn(fmt.Sprintf("Could not remove checkpoint %d from the high-availability store, so its files are kept: %v", cp.ID, err))
			return
		}
	}
	if err := jm.storage.Discard(h.Loc, h.Meta); err != nil {
		jm.log.Warn(fmt.Sprintf("Could not discard checkpoint %d: %v", cp.ID, err))
	}
	if err := jm.storage.Release(cp.ID); err != nil {
		jm.log.Warn(fmt.Sprintf("Could not delete the shared files of checkpoint %d: %v", cp.ID, err))
	}
}

// failover handles a task failure or a checkpointing failure: the attempt
// is stopped, and the restart strategy decides between RESTARTING and
// FAILED.
func (jm *jobMaster) failover(cause error) {
	if jm.exec == nil {
		return // this attempt's failure is being handled already
	}
	jm.handleFailure(cause)
}

func (jm *jobMaster) handleFailure(cause error) {
	jm.log.Warn(fmt.Sprintf("Job %s (%s) failed: %v", jm.graph.Name, jm.jobID, cause))
	jm.stopAttempt(checkpoint.ErrTaskFailure)
	ok, delay := jm.strat.OnFailure(jm.clock())
	suppressedBy := fmt.Sprint(jm.strat)
	if restartsSuppressed(cause) {
		ok, suppressedBy = false, "the failure: no restart could succeed"
	}
	jm.mu.Lock()
	restarting := jm.status == StatusRestarting
	jm.mu.Unlock()
	if !ok {
		if !restarting {
			jm.transition(StatusFailing)
		}
		jm.result.Err = fmt.Errorf("Job failed (JobID: %s): %w", jm.jobID, fmt.Errorf("Recovery is suppressed by %s: %w", suppressedBy, cause))
		jm.endCheckpoints(StatusFailed)
		jm.transition(StatusFailed)
		return
	}
	if !restarting {
		jm.transition(StatusRestarting)
	}
	jm.restartAt = jm.clock().Add(delay)
	jm.failureCause = cause
}

func (jm *jobMaster) restartNow() {
	var plan *restore.Plan
	if latest := jm.coord.Latest(); latest != nil {
		h := latest.Handle
		r := &restore.Resolved{Dir: h.Loc.Dir, MetadataFile: filepath.Join(h.Loc.Dir, savepoint.MetadataFileName), Metadata: h.Meta}
		// The same planning as a start with -s: one restore path.
		p, err := PlanRestore(jm.graph, jm.fs, r, jm.allowNonRest, jm.backends.Name())
		if err != nil {
			jm.handleFailure(fmt.Errorf("restore checkpoint %d: %w", latest.ID, err))
			return
		}
		plan = p
		jm.log.Info(fmt.Sprintf("Restoring job %s from checkpoint %d.", jm.jobID, latest.ID))
	} else if jm.resume != nil {
		// Checkpointing is off: at most once. The sources go on from where
		// they were; every other state starts empty, and what was in flight
		// is lost.
		plan = jm.resume
		jm.log.Warn(fmt.Sprintf("Restarting job %s without state, as checkpointing is disabled: sources resume where they were; counts and other state so far, and records in flight, are lost (at most once).", jm.jobID))
	} else {
		jm.log.Info(fmt.Sprintf("Restarting job %s without state: no checkpoint has completed.", jm.jobID))
	}
	// As Flink's legacy scheduler: RESTARTING → CREATED, then RUNNING once
	// every task has restored its state.
	jm.transition(StatusCreated)
	if err := jm.deploy(plan); err != nil {
		jm.handleFailure(err)
		return
	}
}

func (jm *jobMaster) cancelNow() {
	jm.mu.Lock()
	st := jm.status
	jm.mu.Unlock()
	if st.IsGloballyTerminal() {
		return
	}
	jm.transition(StatusCancelling)
	jm.stopAttempt(checkpoint.ErrShutdown)
	jm.endCheckpoints(StatusCanceled)
	jm.transition(StatusCanceled)
}

func (jm *jobMaster) finishJob() {
	jm.stopAttempt(checkpoint.ErrShutdown)
	jm.endCheckpoints(StatusFinished)
	jm.transition(StatusFinished)
}

// stopAttempt cancels every task of the current attempt, waits for them to
// end, and aborts the checkpoints in progress.
func (jm *jobMaster) stopAttempt(reason error) {
	if e := jm.exec; e != nil && e.cancel != nil {
		e.cancel()
		e.wg.Wait()
		if !jm.cpCfg.Enabled() {
			jm.resume = sourcePositions(e)
		}
		jm.mu.Lock()
		for k, st := range jm.taskStates {
			if st != ExecFinished && st != ExecFailed {
				jm.taskStates[k] = ExecCanceled
			}
		}
		jm.mu.Unlock()
	}
	jm.exec = nil
	jm.apply(jm.coord.Suspend(reason))
}

// endCheckpoints applies the retention policy when the job ends (reference
// §3): FINISHED deletes every checkpoint the job owns; CANCELED keeps them
// under RETAIN_ON_CANCELLATION; FAILED keeps them unless the policy is
// NO_EXTERNALIZED_CHECKPOINTS. Incomplete chk-N directories are removed
// either way. It runs before the terminal status is published: whoever
// sees CANCELED, FINISHED or FAILED (`gflink cancel` polling the status, a
// script listing the checkpoint directory next) must find the policy
// applied, not files still being deleted.
func (jm *jobMaster) endCheckpoints(final JobStatus) {
	if jm.ha != nil {
		if err := jm.ha.MarkTerminal(string(final)); err != nil {
			// Another leader will run the job again from its latest
			// registered checkpoint: none may be deleted.
			jm.log.Warn(fmt.Sprintf("Could not record that job %s is %s in the job result store, so its checkpoints are kept for the leader that takes over: %v", jm.jobID, final, err))
			return
		}
	}
	keep := checkpoint.KeepOnEnd(final == StatusFailed, final == StatusCanceled, jm.cpCfg.Retention)
	kept := map[string]bool{}
	defer jm.refreshRetained()
	for _, cp := range jm.coord.Retire() {
		h := cp.Handle
		if cp.Owned && !keep {
			jm.discard(cp)
			continue
		}
		if h.Loc.Dir != "" {
			kept[h.Loc.Dir] = true
			if cp.Owned {
				jm.result.Retained = append(jm.result.Retained, savepoint.URI(h.Loc.Dir))
			}
		}
	}
	if err := jm.storage.CleanUp(kept); err != nil {
		jm.log.Warn(fmt.Sprintf("Could not delete unreferenced shared files: %v", err))
	}
}

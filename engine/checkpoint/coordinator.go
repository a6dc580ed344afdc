package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gflink/gflink/savepoint"
)

// TaskID identifies a task (one subtask of a chain) within an attempt.
type TaskID int

// SnapshotType says what a checkpoint is for.
type SnapshotType struct {
	// Kind is savepoint.KindCheckpoint, KindSavepoint or KindSyncSavepoint.
	Kind savepoint.Kind
	// Format is savepoint.FormatNative for checkpoints, CANONICAL or NATIVE
	// for savepoints.
	Format savepoint.Format
	// Drain marks a stop-with-savepoint that first finishes the job's input.
	Drain bool
	// Full marks a manually triggered full checkpoint.
	Full bool
}

// IsSavepoint reports whether the snapshot is a savepoint of either kind.
func (t SnapshotType) IsSavepoint() bool { return t.Kind != savepoint.KindCheckpoint }

// IsSynchronous reports whether the job stops after this snapshot.
func (t SnapshotType) IsSynchronous() bool { return t.Kind == savepoint.KindSyncSavepoint }

// Request is a checkpoint or savepoint asked for by a user.
type Request struct {
	Type      SnapshotType
	TargetDir string // for savepoints
	// Tag is the edge's own reference (a REST trigger id, a reply channel).
	Tag any
}

// Pending is a checkpoint in progress.
type Pending struct {
	ID        int64
	Type      SnapshotType
	Request   *Request // nil for periodic checkpoints
	Triggered time.Time
	// Unaligned: its barriers overtake the records in flight (unaligned
	// checkpoints are on, and it is not a savepoint nor taken while an
	// older savepoint is in progress). Decided once, when it is triggered,
	// so that every task gets the same kind of barrier.
	Unaligned bool
	// Acks holds each task's acknowledgement (what it wrote).
	Acks     map[TaskID]*Ack
	awaiting map[TaskID]bool
	sentTo   map[TaskID]bool
	// Location is the edge's handle on where the checkpoint is written.
	Location *Location
}

// Awaiting returns the tasks that have not acknowledged yet.
func (p *Pending) Awaiting() []TaskID {
	var out []TaskID
	for t := range p.awaiting {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Completed is a completed checkpoint or savepoint.
type Completed struct {
	ID        int64
	Type      SnapshotType
	Triggered time.Time
	Completed time.Time
	// Owned is false for snapshots the job must never delete: savepoints,
	// and snapshots restored in NO_CLAIM or LEGACY mode.
	Owned bool
	// Handle is the edge's reference (directory, metadata, size).
	Handle *Handle
}

// Failure is why a checkpoint failed, with Flink's reason texts.
type Failure struct {
	Reason error
	Cause  error
}

func (f *Failure) Error() string {
	if f.Cause != nil {
		return f.Reason.Error() + " " + f.Cause.Error()
	}
	return f.Reason.Error()
}

func (f *Failure) Unwrap() []error { return []error{f.Reason, f.Cause} }

// Flink's CheckpointFailureReason texts.
var (
	ErrExpired         = errors.New("Checkpoint expired before completing.")
	ErrNotAllRunning   = errors.New("Not all required tasks are currently running.")
	ErrDeclined        = errors.New("Checkpoint was declined.")
	ErrSubsumed        = errors.New("Checkpoint has been subsumed.")
	ErrAsyncFailed     = errors.New("Asynchronous task checkpoint failed.")
	ErrTaskFailure     = errors.New("Task has failed.")
	ErrFinalize        = errors.New("Failure to finalize checkpoint.")
	ErrSuspending      = errors.New("Checkpoint Coordinator is suspending.")
	ErrShutdown        = errors.New("CheckpointCoordinator shutdown.")
	ErrTriggerFailure  = errors.New("Trigger checkpoint failure.")
	ErrPeriodicStopped = errors.New("Periodic checkpoint scheduler is shut down.")
	ErrIOProblem       = errors.New("An Exception occurred while triggering the checkpoint. IO-problem detected.")
	ErrDeclinedClosing = errors.New("Checkpoint was declined (task is closing)")
)

// counts reports whether a failure counts against
// tolerable-failed-checkpoints: as in Flink, expiry, failed asynchronous
// snapshots and storage errors do; declines and subsumption do not.
func counts(reason error) bool {
	return reason == ErrExpired || reason == ErrAsyncFailed || reason == ErrFinalize || reason == ErrIOProblem
}

// Action is a decision for the edge to carry out.
type Action interface{ isAction() }

// TriggerTasks: send checkpoint Pending.ID to these tasks (sources, and
// tasks whose inputs have all ended). The others receive barriers in-band.
type TriggerTasks struct {
	Pending *Pending
	Tasks   []TaskID
}

// Finalize: every task has acknowledged; write the metadata and report
// back with Finalized.
type Finalize struct{ Pending *Pending }

// Abort: the checkpoint failed. Clean up its location, tell the tasks, and
// fail the request, if any.
type Abort struct {
	Pending *Pending
	Err     *Failure
	Tasks   []TaskID
}

// Complete: the checkpoint is complete. Notify the tasks (two-phase-commit
// sinks commit now) and discard the subsumed checkpoints the job owns.
type Complete struct {
	Checkpoint *Completed
	Request    *Request
	Notify     []TaskID
	Subsumed   []*Completed
}

// FailJob: too many checkpoints failed in a row.
type FailJob struct{ Err error }

// EndInput: make these sources end their input now (stop --drain).
type EndInput struct{ Tasks []TaskID }

// RequestFailed: a request failed before any checkpoint was triggered for
// it (a drain interrupted by a failure).
type RequestFailed struct {
	Request *Request
	Err     *Failure
}

func (TriggerTasks) isAction()  {}
func (Finalize) isAction()      {}
func (Abort) isAction()         {}
func (Complete) isAction()      {}
func (FailJob) isAction()       {}
func (EndInput) isAction()      {}
func (RequestFailed) isAction() {}

type taskState int

const (
	taskRunning taskState = iota
	taskEndedInput
	taskFinished
)

// TaskInfo describes a task of the current attempt.
type TaskInfo struct {
	ID     TaskID
	Source bool
	// Upstream are the tasks it reads from.
	Upstream []TaskID
}

// Coordinator decides when checkpoints are triggered, completed, aborted
// and subsumed. It does no I/O and reads no clock: time comes in with each
// event, and decisions go out as Actions.
type Coordinator struct {
	cfg Config

	nextID   int64
	pending  map[int64]*Pending
	retained []*Completed

	tasks    map[TaskID]taskState
	sources  map[TaskID]bool
	upstream map[TaskID][]TaskID
	// finals holds the last snapshot of each finished task. Later
	// checkpoints include it, so that restoring never re-runs finished work
	// (a finished source subtask's split stays at its end).
	finals map[TaskID]*Ack

	running        bool
	nextPeriodic   time.Time
	lastCompletion time.Time
	lastCompleted  int64     // id of the last completed checkpoint (not savepoint)
	lastEndInput   time.Time // when the last task ended its input
	// finalFrom is the first id that can be the final checkpoint: the next
	// id at the moment every task had ended its input (0 until then).
	finalFrom int64
	// finalRetryAt is when a final checkpoint may be tried again after one
	// failed: the first goes right away, but a retry must wait like any
	// periodic checkpoint, or a final checkpoint that keeps failing (a full
	// disk, a sink that declines) is retried in a tight loop.
	finalRetryAt time.Time
	failures     int // consecutive counted failures

	// drain is a stop-with-savepoint --drain waiting for every task to end
	// its input; drained is set once one was asked for, so that tasks that
	// ended their input for it get a final snapshot even without periodic
	// checkpointing.
	drain   *Request
	drained bool
	// stopping is the id of a synchronous savepoint in flight or completed
	// (-1 while a drain waits): no other checkpoint is triggered then.
	stopping int64
}

// NewCoordinator returns a coordinator; the first checkpoint id is nextID.
func NewCoordinator(cfg Config, nextID int64) *Coordinator {
	if nextID < 1 {
		nextID = 1
	}
	if cfg.MaxConcurrent < 1 {
		cfg.MaxConcurrent = 1
	}
	if cfg.NumRetained < 1 {
		cfg.NumRetained = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute // Flink's default; 0 would expire every checkpoint at once
	}
	return &Coordinator{cfg: cfg, nextID: nextID, pending: map[int64]*Pending{}}
}

// NextID is the id the next checkpoint will get.
func (c *Coordinator) NextID() int64 { return c.nextID }

// AddRestored registers the snapshot the job was restored from as the
// latest completed checkpoint, so that a failure before the first new
// checkpoint falls back to it. Owned says whether it may be deleted when
// subsumed (CLAIM mode).
func (c *Coordinator) AddRestored(cp *Completed) {
	c.retained = append(c.retained, cp)
	if cp.ID >= c.nextID {
		c.nextID = cp.ID + 1
	}
}

// Latest returns the newest completed checkpoint to recover from, or nil.
// Savepoints taken while running are not used for recovery (as in Flink
// since 1.15), but a restored savepoint is.
func (c *Coordinator) Latest() *Completed {
	if len(c.retained) == 0 {
		return nil
	}
	return c.retained[len(c.retained)-1]
}

// Retained returns the completed checkpoints kept, oldest first.
func (c *Coordinator) Retained() []*Completed { return slices.Clone(c.retained) }

// Pending returns the checkpoints in progress, oldest first.
func (c *Coordinator) Pending() []*Pending {
	out := make([]*Pending, 0, len(c.pending))
	for _, p := range c.pending {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Pending) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Start begins an attempt with the given tasks, all running.
func (c *Coordinator) Start(now time.Time, tasks []TaskInfo) {
	c.tasks = map[TaskID]taskState{}
	c.sources = map[TaskID]bool{}
	c.upstream = map[TaskID][]TaskID{}
	c.finals = map[TaskID]*Ack{}
	for _, t := range tasks {
		c.tasks[t.ID] = taskRunning
		if t.Source {
			c.sources[t.ID] = true
		}
		c.upstream[t.ID] = t.Upstream
	}
	c.running = true
	c.lastEndInput = time.Time{}
	c.finalFrom = 0
	c.finalRetryAt = time.Time{}
	c.drain, c.drained, c.stopping = nil, false, 0
	c.nextPeriodic = now.Add(c.cfg.Interval)
}

// Suspend aborts every pending checkpoint (the attempt failed, or the job
// is ending) and stops triggering until the next Start.
func (c *Coordinator) Suspend(reason error) []Action {
	c.running = false
	var out []Action
	if c.drain != nil {
		out = append(out, RequestFailed{Request: c.drain, Err: &Failure{Reason: reason}})
		c.drain = nil
	}
	for _, p := range c.Pending() {
		delete(c.pending, p.ID)
		out = append(out, Abort{Pending: p, Err: &Failure{Reason: reason}})
	}
	return out
}

func (c *Coordinator) allTasksRunning() bool {
	for _, s := range c.tasks {
		if s != taskRunning {
			return false
		}
	}
	return true
}

// triggerSet is the tasks that get a trigger directly: running sources and
// tasks whose inputs have all ended (no barrier can reach them in-band).
func (c *Coordinator) triggerSet(unaligned bool) (trigger []TaskID, awaiting map[TaskID]bool) {
	awaiting = map[TaskID]bool{}
	for id, s := range c.tasks {
		if s == taskFinished {
			continue
		}
		awaiting[id] = true
		if c.sources[id] || s == taskEndedInput || unaligned && c.upstreamFinished(id) {
			trigger = append(trigger, id)
		}
	}
	slices.Sort(trigger)
	return trigger, awaiting
}

// upstreamFinished reports whether every task that task reads from has
// finished: no barrier will reach it in-band. An unaligned checkpoint
// triggers it directly (Flink's FLIP-147 triggers the first tasks that
// have not finished), and it stores what those tasks sent, still queued up
// to their ends of partition, as records in flight at once. An aligned one
// would have to wait for those ends anyway: it triggers the task when its
// input ends (EndOfInput), as before, so that two aligned checkpoints (a
// savepoint and a periodic one) never wait on the same drain, where the
// newer would abort the older.
func (c *Coordinator) upstreamFinished(task TaskID) bool {
	up := c.upstream[task]
	for _, u := range up {
		if c.tasks[u] != taskFinished {
			return false
		}
	}
	return len(up) > 0
}

func (c *Coordinator) anyFinished() bool {
	for _, s := range c.tasks {
		if s == taskFinished {
			return true
		}
	}
	return false
}

func (c *Coordinator) hasLive() bool {
	for _, s := range c.tasks {
		if s != taskFinished {
			return true
		}
	}
	return false
}

// noteAllEnded records the moment every live task has ended its input:
// from then on the final checkpoint is due.
func (c *Coordinator) noteAllEnded(now time.Time) bool {
	if c.finalFrom != 0 || !c.allEndedInput() {
		return false
	}
	c.finalFrom = c.nextID
	c.lastEndInput = now
	return true
}

func (c *Coordinator) allEndedInput() bool {
	live := false
	for _, s := range c.tasks {
		if s == taskRunning {
			return false
		}
		if s == taskEndedInput {
			live = true
		}
	}
	return live
}

func (c *Coordinator) numPendingCheckpoints() int {
	n := 0
	for _, p := range c.pending {
		if !p.Type.IsSavepoint() {
			n++
		}
	}
	return n
}

func (c *Coordinator) trigger(now time.Time, typ SnapshotType, req *Request) []Action {
	// Savepoints stay aligned, as in Flink: they are meant to be moved and
	// rescaled, and are taken rarely. A checkpoint taken while an older
	// savepoint is in progress is aligned too: its barriers would overtake
	// the savepoint's, and a task takes no checkpoint older than one it has
	// taken, so the savepoint would fail.
	unaligned := c.cfg.Unaligned && !typ.IsSavepoint()
	for _, p := range c.pending {
		if p.Type.IsSavepoint() {
			unaligned = false
		}
	}
	tasks, awaiting := c.triggerSet(unaligned)
	p := &Pending{ID: c.nextID, Type: typ, Request: req, Triggered: now, Unaligned: unaligned,
		Acks: map[TaskID]*Ack{}, awaiting: awaiting, sentTo: map[TaskID]bool{}}
	for t, final := range c.finals {
		p.Acks[t] = final
	}
	for _, t := range tasks {
		p.sentTo[t] = true
	}
	c.nextID++
	c.pending[p.ID] = p
	return []Action{TriggerTasks{Pending: p, Tasks: tasks}}
}

// Tick advances time: it expires checkpoints past their timeout and
// triggers the next periodic checkpoint, or the final one once every task
// has ended its input.
func (c *Coordinator) Tick(now time.Time) []Action {
	var out []Action
	failed := false
	for _, p := range c.Pending() {
		if now.Sub(p.Triggered) >= c.cfg.Timeout {
			for _, a := range c.fail(now, p, &Failure{Reason: ErrExpired}) {
				if _, ok := a.(FailJob); ok {
					failed = true
				}
				out = append(out, a)
			}
		}
	}
	if failed {
		// The edge fails over on FailJob; a checkpoint triggered now would
		// be aborted right away and leave its location behind.
		return out
	}
	at, ok := c.nextTrigger()
	if !ok || now.Before(at) {
		return out
	}
	if !c.finalDue() {
		c.nextPeriodic = now.Add(c.cfg.Interval)
	}
	// The final checkpoint goes right away, without waiting for the
	// interval or the min-pause (Flink 1.18+); only a retry waits.
	return append(out, c.trigger(now, SnapshotType{Kind: savepoint.KindCheckpoint, Format: savepoint.FormatNative}, nil)...)
}

// nextTrigger returns when Tick will next trigger a checkpoint by itself,
// and false if it will not until some other event (an ack, a completion,
// an abort, a new attempt) changes the state.
func (c *Coordinator) nextTrigger() (time.Time, bool) {
	if !c.running || !c.hasLive() || c.stopping != 0 || c.numPendingCheckpoints() >= c.cfg.MaxConcurrent {
		return time.Time{}, false
	}
	if c.finalDue() {
		if c.finalRetryAt.After(c.lastEndInput) {
			return c.finalRetryAt, true
		}
		return c.lastEndInput, true
	}
	if !c.cfg.Enabled() {
		return time.Time{}, false
	}
	if c.anyFinished() && !c.cfg.AfterTasksFinish {
		return time.Time{}, false
	}
	next := c.nextPeriodic
	if c.cfg.MinPause > 0 && !c.lastCompletion.IsZero() {
		if earliest := c.lastCompletion.Add(c.cfg.MinPause); earliest.After(next) {
			next = earliest
		}
	}
	return next, true
}

// finalDue reports whether every task has ended its input and no
// checkpoint triggered since has completed or is on its way: then the
// final checkpoint is due, so that tasks can finish.
func (c *Coordinator) finalDue() bool {
	wanted := c.cfg.AfterTasksFinish && c.cfg.Enabled() || c.drained
	if !wanted || c.finalFrom == 0 || !c.allEndedInput() || c.lastCompleted >= c.finalFrom {
		return false
	}
	for _, p := range c.pending {
		if p.ID >= c.finalFrom && !p.Type.IsSavepoint() {
			return false
		}
	}
	return true
}

// NextWakeup says when Tick next has something to do: a checkpoint to
// expire or one to trigger. A time in the past means Tick has work now.
func (c *Coordinator) NextWakeup() (time.Time, bool) {
	var t time.Time
	set := false
	consider := func(x time.Time) {
		if !set || x.Before(t) {
			t, set = x, true
		}
	}
	for _, p := range c.pending {
		consider(p.Triggered.Add(c.cfg.Timeout))
	}
	if next, ok := c.nextTrigger(); ok {
		consider(next)
	}
	return t, set
}

// ErrNoRunningJob is returned for triggers while no attempt is running.
var ErrNoRunningJob = errors.New("the job is not running")

// ErrStopInProgress refuses a second stop-with-savepoint.
var ErrStopInProgress = errors.New("a stop-with-savepoint is already in progress")

// Stop starts a stop-with-savepoint (req.Type is a synchronous savepoint).
// Without drain the savepoint is triggered now; sources emit nothing after
// its barrier, and once it completes (and two-phase-commit sinks have
// committed it) the job finishes. With drain the sources first end their
// input (EndInput): operators finish and event time reaches its end, and
// the savepoint is triggered once every task has ended its input, as the
// job's final snapshot. No periodic checkpoint is triggered meanwhile.
func (c *Coordinator) Stop(now time.Time, req *Request) ([]Action, error) {
	if c.stopping != 0 {
		return nil, ErrStopInProgress
	}
	if err := c.canTrigger(); err != nil {
		return nil, err
	}
	if !req.Type.Drain {
		c.stopping = c.nextID
		return c.trigger(now, req.Type, req), nil
	}
	c.drain, c.drained, c.stopping = req, true, -1
	if c.allEndedInput() {
		return c.afterAllEnded(now), nil // nothing left to drain
	}
	var sources []TaskID
	for id := range c.sources {
		if c.tasks[id] == taskRunning {
			sources = append(sources, id)
		}
	}
	slices.Sort(sources)
	return []Action{EndInput{Tasks: sources}}, nil
}

// afterAllEnded runs when the last task has ended its input: a waiting
// drain's savepoint is triggered, else the final checkpoint, if due.
func (c *Coordinator) afterAllEnded(now time.Time) []Action {
	if c.drain != nil {
		req := c.drain
		c.drain = nil
		c.stopping = c.nextID
		return c.trigger(now, req.Type, req)
	}
	return c.Tick(now)
}

// Trigger starts a user-requested checkpoint or savepoint now. Like
// Flink's, it ignores the interval, min-pause and max-concurrent limits, but
// needs every task to be running.
func (c *Coordinator) Trigger(now time.Time, req *Request) ([]Action, error) {
	if err := c.canTrigger(); err != nil {
		return nil, err
	}
	return c.trigger(now, req.Type, req), nil
}

// canTrigger says whether a user-requested snapshot can be taken now. With
// checkpoints-after-tasks-finish (the default) finished tasks contribute
// their final snapshots; without it, as in Flink before FLIP-147, a job
// with finished tasks cannot be checkpointed.
func (c *Coordinator) canTrigger() error {
	if !c.running || !c.hasLive() {
		return ErrNoRunningJob
	}
	if !c.cfg.AfterTasksFinish && !c.allTasksRunning() {
		return &Failure{Reason: ErrNotAllRunning}
	}
	return nil
}

// Ack records a task's snapshot for checkpoint id.
func (c *Coordinator) Ack(now time.Time, id int64, task TaskID, snapshot *Ack) []Action {
	p, ok := c.pending[id]
	if !ok || !p.awaiting[task] {
		return nil // late ack of an aborted checkpoint, or a duplicate
	}
	delete(p.awaiting, task)
	p.Acks[task] = snapshot
	if len(p.awaiting) == 0 {
		return []Action{Finalize{Pending: p}}
	}
	return nil
}

// Decline records a task's refusal of checkpoint id.
func (c *Coordinator) Decline(now time.Time, id int64, task TaskID, reason, cause error) []Action {
	p, ok := c.pending[id]
	if !ok {
		return nil
	}
	return c.fail(now, p, &Failure{Reason: reason, Cause: cause})
}

// finalRetryPause is how long a failed final checkpoint waits before the
// next try: the interval, or the min-pause if longer. Without periodic
// checkpointing (a final checkpoint after a failed stop --drain)
// defaultFinalRetryPause stands in for both.
func (c *Coordinator) finalRetryPause() time.Duration {
	if d := max(c.cfg.Interval, c.cfg.MinPause); d > 0 {
		return d
	}
	return defaultFinalRetryPause
}

const defaultFinalRetryPause = time.Second

func (c *Coordinator) fail(now time.Time, p *Pending, f *Failure) []Action {
	delete(c.pending, p.ID)
	if c.stopping == p.ID {
		c.stopping = 0 // the stop failed; the job goes on
	}
	if c.finalFrom != 0 && p.ID >= c.finalFrom && !p.Type.IsSavepoint() {
		c.finalRetryAt = now.Add(c.finalRetryPause())
	}
	out := []Action{Abort{Pending: p, Err: f, Tasks: c.liveTasks()}}
	if counts(f.Reason) && !p.Type.IsSavepoint() {
		c.failures++
		if c.failures > c.cfg.TolerableFailed {
			// As Flink's CheckpointFailureManager: the count starts over
			// once the job is failed, and the message names the reason only.
			c.failures = 0
			out = append(out, FailJob{Err: fmt.Errorf("Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to %s, view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed.", f.Reason.Error())})
		}
	}
	return out
}

func (c *Coordinator) liveTasks() []TaskID {
	var out []TaskID
	for id, s := range c.tasks {
		if s != taskFinished {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Finalized reports the outcome of writing a checkpoint's metadata.
func (c *Coordinator) Finalized(now time.Time, id int64, handle *Handle, err error) []Action {
	p, ok := c.pending[id]
	if !ok {
		return nil
	}
	if err != nil {
		return c.fail(now, p, &Failure{Reason: ErrFinalize, Cause: err})
	}
	delete(c.pending, id)
	cp := &Completed{ID: id, Type: p.Type, Triggered: p.Triggered, Completed: now, Handle: handle,
		Owned: !p.Type.IsSavepoint()}
	done := Complete{Checkpoint: cp, Request: p.Request}
	var out []Action
	if !p.Type.IsSavepoint() {
		c.failures = 0
		c.lastCompletion = now
		c.lastCompleted = max(c.lastCompleted, id)
		c.retained = append(c.retained, cp)
		for len(c.retained) > c.cfg.NumRetained {
			done.Subsumed = append(done.Subsumed, c.retained[0])
			c.retained = c.retained[1:]
		}
		// Older checkpoints still in progress are subsumed by this one.
		for _, old := range c.Pending() {
			if old.ID < id && !old.Type.IsSavepoint() {
				delete(c.pending, old.ID)
				out = append(out, Abort{Pending: old, Err: &Failure{Reason: ErrSubsumed}, Tasks: c.liveTasks()})
			}
		}
	}
	// Tasks learn of completed checkpoints, not of intermediate savepoints:
	// since Flink 1.15 those commit no side effects. The synchronous
	// savepoint of stop-with-savepoint does.
	if !p.Type.IsSavepoint() || p.Type.IsSynchronous() {
		done.Notify = c.liveTasks()
	}
	return append([]Action{done}, out...)
}

// EndOfInput records that a task has processed all its input (it then waits
// for a final checkpoint before finishing). A checkpoint in progress that
// the task has not acknowledged can no longer reach it in-band, so it is
// triggered directly.
func (c *Coordinator) EndOfInput(now time.Time, task TaskID) (out []Action) {
	if s, ok := c.tasks[task]; !ok || s != taskRunning {
		return nil // unknown task, or its input ended already
	}
	c.tasks[task] = taskEndedInput
	if c.noteAllEnded(now) {
		defer func() { out = append(out, c.afterAllEnded(now)...) }()
	}
	for _, p := range c.Pending() {
		// One past its timeout is left for Tick to abort.
		if p.awaiting[task] && !p.sentTo[task] && now.Sub(p.Triggered) < c.cfg.Timeout {
			p.sentTo[task] = true
			out = append(out, TriggerTasks{Pending: p, Tasks: []TaskID{task}})
		}
	}
	return out
}

// TaskFinished records that a task has finished, with the snapshot it took
// last (after its input ended). Pending and later checkpoints take that
// snapshot as the task's state: a finished task changes no more.
func (c *Coordinator) TaskFinished(now time.Time, task TaskID, final *Ack) []Action {
	if s, ok := c.tasks[task]; !ok || s == taskFinished {
		return nil // unknown task, or a duplicate
	}
	c.tasks[task] = taskFinished
	c.noteAllEnded(now)
	if final != nil {
		c.finals[task] = final
	}
	var out []Action
	for _, p := range c.Pending() {
		if p.awaiting[task] {
			if final == nil {
				// A task that stops without a final snapshot (after a
				// stop-with-savepoint) cannot contribute its state.
				out = append(out, c.fail(now, p, &Failure{Reason: ErrDeclinedClosing})...)
				continue
			}
			delete(p.awaiting, task)
			p.Acks[task] = final
			if len(p.awaiting) == 0 {
				out = append(out, Finalize{Pending: p})
				continue
			}
		}
		if !p.Unaligned || now.Sub(p.Triggered) >= c.cfg.Timeout {
			continue
		}
		// Tasks that read from it may now have no unfinished task
		// upstream: a barrier it did not send will not come.
		var direct []TaskID
		for id := range p.awaiting {
			if !p.sentTo[id] && c.tasks[id] == taskRunning && c.upstreamFinished(id) {
				p.sentTo[id] = true
				direct = append(direct, id)
			}
		}
		if len(direct) > 0 {
			slices.Sort(direct)
			out = append(out, TriggerTasks{Pending: p, Tasks: direct})
		}
	}
	return out
}

// Retire removes a completed checkpoint from the retained list (used when
// the job ends and the edge discards what the retention policy says).
func (c *Coordinator) Retire() []*Completed {
	out := c.retained
	c.retained = nil
	return out
}

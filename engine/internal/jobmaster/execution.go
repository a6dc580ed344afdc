package jobmaster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/internal/graph"
	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

// execution is one attempt of a job: its tasks and channels.
type execution struct {
	jm       *jobMaster
	attempt  int
	cancel   context.CancelFunc
	done     <-chan struct{}
	tasks    []*task.Task
	wg       sync.WaitGroup
	finished int
	// numInitialized counts the tasks that have loaded their restored state
	// and run; the attempt is RUNNING when all have.
	numInitialized int
	clock          func() time.Time
	maxPar         map[string]int // per uid, for this attempt
	// runID names this attempt's output files; previousRunIDs are those of
	// the job's earlier attempts in this process.
	runID          string
	previousRunIDs []string

	emitted atomic.Int64 // source records in this attempt
	// completed counts the checkpoints completed in this attempt (for
	// fault-injection.after-checkpoints).
	completed atomic.Int64
}

func (e *execution) send(ev taskEvent) {
	ev.attempt = e.attempt
	select {
	case e.jm.events <- ev:
	case <-e.done:
	}
}

func (e *execution) Ack(t *task.Task, id int64, a *checkpoint.Ack) {
	e.send(taskEvent{task: t.ID, kind: evAck, id: id, ack: a})
}

func (e *execution) Decline(t *task.Task, id int64, reason, cause error) {
	e.send(taskEvent{task: t.ID, kind: evDecline, id: id, reason: reason, err: cause})
}

func (e *execution) Initialized(t *task.Task) {
	e.send(taskEvent{task: t.ID, kind: evInitialized})
}

func (e *execution) EndOfInput(t *task.Task) {
	e.send(taskEvent{task: t.ID, kind: evEndOfInput})
}

func (e *execution) TaskExited(t *task.Task, err error) {
	defer e.wg.Done()
	select {
	case <-e.done:
		return // cancelled: nobody is waiting for news
	default:
	}
	if err != nil {
		e.send(taskEvent{task: t.ID, kind: evFailed, err: err})
		return
	}
	t.FinalMu.Lock()
	final := t.Final
	t.FinalMu.Unlock()
	e.send(taskEvent{task: t.ID, kind: evFinished, final: final})
}

// SourceEmitted counts source records for fault injection, which may fail
// the task (as a failing user function does).
func (e *execution) SourceEmitted(t *task.Task, n int64) {
	if e.jm.faults == nil {
		return
	}
	if err := e.jm.faults.SourceEmitted(e.attempt, e.emitted.Add(n), e.completed.Load()); err != nil {
		task.Fail("", err)
	}
}

// deploy builds and starts an attempt, restoring state from plan (nil for
// a fresh start).
func (jm *jobMaster) deploy(plan *restore.Plan) error {
	ctx, cancel := context.WithCancel(context.Background())
	d := &deployment{jm: jm, plan: plan, e: jm.newExecution(cancel, ctx.Done(), plan),
		tasksOf: map[*graph.Vertex][]*task.Task{}, vertexOf: map[*graph.Node]*graph.Vertex{}}
	d.createTasks()
	d.connectChannels()
	if plan != nil && plan.Meta != nil && plan.Meta.HasChannelState() {
		if err := d.e.planInFlight(plan, d.tasksOf); err != nil {
			cancel()
			return err
		}
	}
	d.buildChains()
	if err := d.assignFreshSplits(); err != nil {
		cancel()
		return err
	}
	jm.exec = d.e
	d.start()
	return nil
}

// deployment is an attempt being built: its tasks by vertex, and the
// channels between them.
type deployment struct {
	jm       *jobMaster
	plan     *restore.Plan
	e        *execution
	tasksOf  map[*graph.Vertex][]*task.Task
	vertexOf map[*graph.Node]*graph.Vertex
	// targets[edge][sender] lists the channels a sending subtask writes
	// to, indexed by receiving subtask (one for forward edges).
	targets map[*graph.Edge][][]any
}

// newExecution starts the bookkeeping of a new attempt: its number, run id
// and the max parallelism of each operator (the restored snapshot's, for
// operators it has state of).
func (jm *jobMaster) newExecution(cancel context.CancelFunc, done <-chan struct{}, plan *restore.Plan) *execution {
	e := &execution{jm: jm, attempt: jm.attempt, cancel: cancel, done: done, clock: jm.clock,
		maxPar: map[string]int{}, runID: NewJobID()[:8], previousRunIDs: slices.Clone(jm.runIDs)}
	jm.runIDs = append(jm.runIDs, e.runID)
	jm.attempt++
	for _, n := range jm.graph.Nodes {
		e.maxPar[n.UID] = n.MaxParallelism
		if plan != nil {
			if op := plan.Operators[n.UID]; op != nil {
				e.maxPar[n.UID] = op.MaxParallelism
			}
		}
	}
	return e
}

// createTasks makes every subtask of every vertex, with its input gate.
func (d *deployment) createTasks() {
	jm, e := d.jm, d.e
	svc := &task.Services{JobID: jm.jobID, Attempt: e.attempt, RunID: e.runID, PreviousRunIDs: e.previousRunIDs,
		Checkpointing: jm.cpCfg.Enabled(), FS: jm.fs, Storage: jm.storage.Worker(), Backends: jm.backends,
		Log: jm.log, Clock: e.clock, JobMaster: e}
	exactlyOnce := jm.cpCfg.Mode == checkpoint.ExactlyOnce
	waitFinal := jm.cpCfg.Enabled() && jm.cpCfg.AfterTasksFinish
	wmInterval, _ := AutoWatermarkInterval.Get(jm.conf) // validated at submission
	for _, v := range jm.graph.Vertices {
		for _, n := range v.Nodes {
			d.vertexOf[n] = v
		}
		numCh := 0
		for _, in := range v.Inputs {
			if in.Ship == network.ShipForward {
				numCh++
			} else {
				numCh += in.From.Parallelism
			}
		}
		for i := 0; i < v.Parallelism; i++ {
			t := task.New(task.Options{ID: checkpoint.TaskID(len(e.tasks)), Services: svc, Vertex: v.ID, VertexID: graph.OperatorID(v.Head()),
				Parallelism: v.Parallelism, Subtask: i, Name: fmt.Sprintf("%s (%d/%d)", v.Name, i+1, v.Parallelism),
				Done: e.done, ExactlyOnce: exactlyOnce, WaitFinal: waitFinal, WatermarkInterval: wmInterval})
			for _, in := range v.Inputs {
				t.InPeers = append(t.InPeers, in.From.UID)
			}
			for _, oe := range v.Outputs {
				t.OutPeers = append(t.OutPeers, oe.To.UID)
			}
			if len(v.Inputs) > 0 {
				v.Inputs[0].Type().ConnectInput(t, numCh)
			}
			e.tasks = append(e.tasks, t)
			d.tasksOf[v] = append(d.tasksOf[v], t)
		}
	}
}

// connectChannels makes the channels of every edge: one per sending and
// receiving subtask (one per subtask for forward edges).
func (d *deployment) connectChannels() {
	d.targets = map[*graph.Edge][][]any{}
	for _, v := range d.jm.graph.Vertices {
		for k, in := range v.Inputs {
			up := d.vertexOf[in.From]
			per := make([][]any, up.Parallelism)
			for i, recv := range d.tasksOf[v] {
				for j := range up.Parallelism {
					if in.Ship == network.ShipForward && i != j {
						continue
					}
					per[j] = append(per[j], in.Type().AddChannel(recv.Gate))
					recv.ChanInfo = append(recv.ChanInfo, task.ChanInfo{Edge: k, Sender: j})
				}
			}
			d.targets[in] = per
		}
	}
}

// buildChains builds each task's chain of operators, tail first, with the
// writers of its outputs and each operator's restore context.
func (d *deployment) buildChains() {
	for _, v := range d.jm.graph.Vertices {
		for i, t := range d.tasksOf[v] {
			var outs []any
			sides := map[string][]any{}
			for _, oe := range v.Outputs {
				c, w := oe.Type().NewWriter(t, d.targets[oe][i], oe.Ship, oe.Hash, d.e.maxPar[oe.To.UID],
					network.DefaultBatchSize, i, oe.From.Stamped)
				if oe.Side != "" {
					sides[oe.Side] = append(sides[oe.Side], c)
				} else {
					outs = append(outs, c)
				}
				t.Writers = append(t.Writers, w)
			}
			var out any
			if len(outs) > 0 || len(sides) > 0 {
				// A node whose only consumers read its side outputs
				// still gets a collector for its main output.
				out = v.Tail().Out.NewFanout(outs)
			}
			sideOuts := map[string]any{}
			for _, oe := range v.Outputs {
				if oe.Side != "" && sideOuts[oe.Side] == nil {
					sideOuts[oe.Side] = oe.To.Out.NewFanout(sides[oe.Side])
				}
			}
			t.Ops = make([]task.Operator, len(v.Nodes))
			t.UIDs = make([]string, len(v.Nodes))
			t.Restore = make([]*task.OpContext, len(v.Nodes))
			blocks := &savepoint.BlockReader{FS: d.jm.fs}
			if d.plan != nil {
				blocks.Dir = d.plan.Dir
			}
			t.ChainCounts = make([]*int64, len(v.Nodes)-1)
			t.M.Chain = make([]atomic.Int64, len(v.Nodes)-1)
			var next task.Operator
			for k := len(v.Nodes) - 1; k >= 0; k-- {
				n := v.Nodes[k]
				rt := &task.BuildContext{Name: graph.DisplayName(n)}
				if k == len(v.Nodes)-1 {
					rt.SideOutputs = sideOuts
				} else {
					t.ChainCounts[k] = chainCounter(n, next, &out)
				}
				in, op := n.Build(rt, out)
				if c, ok := op.(task.OutputCounter); ok && k < len(v.Nodes)-1 {
					t.ChainCounts[k] = c.OutputCount()
				}
				next = op
				out = in
				t.Ops[k], t.UIDs[k] = op, n.UID
				oc := &task.OpContext{Task: t, UID: n.UID, MaxParallelism: d.e.maxPar[n.UID], Index: k, Blocks: blocks}
				if d.plan != nil {
					if p := d.plan.Operators[n.UID]; p != nil {
						oc.Restore = &p.Subtasks[i]
					}
				}
				if n.Kind == graph.KindSource {
					t.Source = op.(task.SourceRunner)
				}
				t.Restore[k] = oc
			}
			t.Head = out
		}
	}
}

// chainCounter returns the counter of the chain edge from n to the
// operator next, wrapping *out in one if it must: a source counts what it
// emits itself (task.OutputCounter, taken once it is built: nil here), and
// a sink what it takes (task.InputCounter), so that word count's chains
// add nothing per record; other edges cost one call per record.
func chainCounter(n *graph.Node, next task.Operator, out *any) *int64 {
	if n.Kind == graph.KindSource {
		return nil
	}
	if c, ok := next.(task.InputCounter); ok {
		return c.InputCount()
	}
	c := new(int64)
	*out = n.Out.NewCounter(*out, c)
	return c
}

// assignFreshSplits gives the sources that restore nothing their splits,
// round-robin (every split to every reader of a union source).
func (d *deployment) assignFreshSplits() error {
	for _, n := range d.jm.graph.Nodes {
		if n.Kind != graph.KindSource || (d.plan != nil && d.plan.Operators[n.UID] != nil) {
			continue
		}
		splits, err := n.Enumerate(n.Parallelism)
		if err != nil {
			return fmt.Errorf("enumerate splits of %s: %w", graph.DisplayName(n), err)
		}
		union := task.UnionSplits(n.Source)
		for i, t := range d.tasksOf[d.vertexOf[n]] {
			mine := splits // a union source's readers pick their own
			if !union {
				mine = nil
				for j := i; j < len(splits); j += n.Parallelism {
					mine = append(mine, splits[j])
				}
			}
			t.Restore[0].Restore = &restore.SubtaskRestore{OperatorState: []savepoint.OperatorListState{
				{Name: task.SourceReaderStateName, Mode: savepoint.SplitDistribute, Items: mine}}}
		}
	}
	return nil
}

// start tells the coordinator the attempt's tasks and their upstream tasks,
// and starts their goroutines.
func (d *deployment) start() {
	jm, e := d.jm, d.e
	infos := make([]checkpoint.TaskInfo, len(e.tasks))
	for i, t := range e.tasks {
		infos[i] = checkpoint.TaskInfo{ID: t.ID, Source: t.Source != nil}
		for _, ci := range t.ChanInfo {
			infos[i].Upstream = append(infos[i].Upstream, d.tasksOf[d.vertexOf[jm.graph.Vertices[t.Vertex].Inputs[ci.Edge].From]][ci.Sender].ID)
		}
	}
	jm.coord.Start(jm.clock(), infos)
	jm.mu.Lock()
	for _, t := range e.tasks {
		jm.taskStates[taskKey{t.Vertex, t.Subtask}] = ExecInitializing
	}
	jm.mu.Unlock()
	jm.live.Store(&liveAttempt{attempt: e.attempt, tasks: e.tasks})
	jm.meters.forget(e.tasks)
	for _, t := range e.tasks {
		e.wg.Add(1)
		go t.Run()
	}
}

// planInFlight gives each receiving task the records in flight of the
// unaligned checkpoint it restores from, per input edge.
func (e *execution) planInFlight(plan *restore.Plan, tasksOf map[*graph.Vertex][]*task.Task) error {
	for v, tasks := range tasksOf {
		for k, in := range v.Inputs {
			per, err := restore.InFlightFor(plan.Meta, graph.ExchangeOf(v, in, e.maxPar[in.To.UID]))
			if err != nil {
				return fmt.Errorf("snapshot %s: %w", plan.Pointer, err)
			}
			for i, pieces := range per {
				for _, p := range pieces {
					p.Edge = k
					tasks[i].InFlight = append(tasks[i].InFlight, p)
				}
				tasks[i].InFlightDir = plan.Dir
			}
		}
	}
	return nil
}

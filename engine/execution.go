package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

// buildContext is what a node's build function may know.
type buildContext struct {
	name string
}

// execution is one attempt of a job: its tasks and channels.
type execution struct {
	jm       *jobMaster
	attempt  int
	cancel   context.CancelFunc
	done     <-chan struct{}
	tasks    []*task
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

func (e *execution) ack(t *task, id int64, a *checkpoint.Ack) {
	e.send(taskEvent{task: t.id, kind: evAck, id: id, ack: a})
}

func (e *execution) decline(t *task, id int64, reason, cause error) {
	e.send(taskEvent{task: t.id, kind: evDecline, id: id, reason: reason, err: cause})
}

func (e *execution) initialized(t *task) {
	e.send(taskEvent{task: t.id, kind: evInitialized})
}

func (e *execution) endOfInput(t *task) {
	e.send(taskEvent{task: t.id, kind: evEndOfInput})
}

func (e *execution) taskExited(t *task, err error) {
	defer e.wg.Done()
	select {
	case <-e.done:
		return // cancelled: nobody is waiting for news
	default:
	}
	if err != nil {
		e.send(taskEvent{task: t.id, kind: evFailed, err: err})
		return
	}
	t.finalMu.Lock()
	final := t.final
	t.finalMu.Unlock()
	e.send(taskEvent{task: t.id, kind: evFinished, final: final})
}

// sourceEmitted counts source records for fault injection, which may fail
// the task (as a failing user function does).
func (e *execution) sourceEmitted(t *task, n int64) {
	if e.jm.faults == nil {
		return
	}
	if err := e.jm.faults.SourceEmitted(e.attempt, e.emitted.Add(n), e.completed.Load()); err != nil {
		fail("", err)
	}
}

// deploy builds and starts an attempt, restoring state from plan (nil for
// a fresh start).
func (jm *jobMaster) deploy(plan *restore.Plan) error {
	ctx, cancel := context.WithCancel(context.Background())
	d := &deployment{jm: jm, plan: plan, e: jm.newExecution(cancel, ctx.Done(), plan),
		tasksOf: map[*vertex][]*task{}, vertexOf: map[*node]*vertex{}}
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
	tasksOf  map[*vertex][]*task
	vertexOf map[*node]*vertex
	// targets[edge][sender] lists the channels a sending subtask writes
	// to, indexed by receiving subtask (one for forward edges).
	targets map[*edge][][]any
}

// newExecution starts the bookkeeping of a new attempt: its number, run id
// and the max parallelism of each operator (the restored snapshot's, for
// operators it has state of).
func (jm *jobMaster) newExecution(cancel context.CancelFunc, done <-chan struct{}, plan *restore.Plan) *execution {
	e := &execution{jm: jm, attempt: jm.attempt, cancel: cancel, done: done, clock: jm.clock,
		maxPar: map[string]int{}, runID: NewJobID()[:8], previousRunIDs: slices.Clone(jm.runIDs)}
	jm.runIDs = append(jm.runIDs, e.runID)
	jm.attempt++
	for _, n := range jm.graph.nodes {
		e.maxPar[n.uid] = n.maxParallelism
		if plan != nil {
			if op := plan.Operators[n.uid]; op != nil {
				e.maxPar[n.uid] = op.MaxParallelism
			}
		}
	}
	return e
}

// createTasks makes every subtask of every vertex, with its input gate.
func (d *deployment) createTasks() {
	jm, e := d.jm, d.e
	svc := &taskServices{jobID: jm.jobID, attempt: e.attempt, runID: e.runID, previousRunIDs: e.previousRunIDs,
		checkpointing: jm.cpCfg.Enabled(), fs: jm.fs, storage: jm.storage.Worker(), backends: jm.backends,
		log: jm.log, clock: e.clock, jm: e}
	exactlyOnce := jm.cpCfg.Mode == checkpoint.ExactlyOnce
	waitFinal := jm.cpCfg.Enabled() && jm.cpCfg.AfterTasksFinish
	for _, v := range jm.graph.vertices {
		for _, n := range v.nodes {
			d.vertexOf[n] = v
		}
		numCh := 0
		for _, in := range v.inputs {
			if in.part == network.ShipForward {
				numCh++
			} else {
				numCh += in.from.parallelism
			}
		}
		for i := 0; i < v.parallelism; i++ {
			t := &task{id: checkpoint.TaskID(len(e.tasks)), svc: svc, v: v, subtask: i,
				name: fmt.Sprintf("%s (%d/%d)", v.name, i+1, v.parallelism),
				mail: network.NewMailbox(), done: e.done, exactlyOnce: exactlyOnce, waitFinal: waitFinal,
				wake: make(chan struct{}, 1)}
			for _, in := range v.inputs {
				t.inPeers = append(t.inPeers, in.from.uid)
			}
			for _, oe := range v.outputs {
				t.outPeers = append(t.outPeers, oe.to.uid)
			}
			if len(v.inputs) > 0 {
				t.inOps = v.inputs[0].from.out
				t.gate = t.inOps.newGate(numCh, network.BuffersPerChannel(numCh), t.mail)
				t.numIn = numCh
				t.al = newAligner(numCh, exactlyOnce)
			}
			e.tasks = append(e.tasks, t)
			d.tasksOf[v] = append(d.tasksOf[v], t)
		}
	}
}

// connectChannels makes the channels of every edge: one per sending and
// receiving subtask (one per subtask for forward edges).
func (d *deployment) connectChannels() {
	d.targets = map[*edge][][]any{}
	for _, v := range d.jm.graph.vertices {
		for k, in := range v.inputs {
			up := d.vertexOf[in.from]
			per := make([][]any, up.parallelism)
			for i, recv := range d.tasksOf[v] {
				for j := range up.parallelism {
					if in.part == network.ShipForward && i != j {
						continue
					}
					per[j] = append(per[j], in.from.out.addChannel(recv.gate))
					recv.chanInfo = append(recv.chanInfo, chanInfo{edge: k, sender: j})
				}
			}
			d.targets[in] = per
		}
	}
}

// buildChains builds each task's chain of operators, tail first, with the
// writers of its outputs and each operator's restore context.
func (d *deployment) buildChains() {
	for _, v := range d.jm.graph.vertices {
		for i, t := range d.tasksOf[v] {
			var outs []any
			for _, oe := range v.outputs {
				c, w := oe.from.out.newWriter(d.targets[oe][i], oe.part, oe.hash, d.e.maxPar[oe.to.uid],
					network.DefaultBatchSize, i, t)
				outs = append(outs, c)
				t.writers = append(t.writers, w)
			}
			var out any
			if len(outs) > 0 {
				out = v.tail().out.newFanout(outs)
			}
			t.ops = make([]operator, len(v.nodes))
			t.uids = make([]string, len(v.nodes))
			t.restore = make([]*opContext, len(v.nodes))
			blocks := &savepoint.BlockReader{FS: d.jm.fs}
			if d.plan != nil {
				blocks.Dir = d.plan.Dir
			}
			for k := len(v.nodes) - 1; k >= 0; k-- {
				n := v.nodes[k]
				in, op := n.build(&buildContext{name: displayName(n)}, out)
				out = in
				t.ops[k], t.uids[k] = op, n.uid
				oc := &opContext{t: t, uid: n.uid, maxPar: d.e.maxPar[n.uid], blocks: blocks}
				if d.plan != nil {
					if p := d.plan.Operators[n.uid]; p != nil {
						oc.restore = &p.Subtasks[i]
					}
				}
				if n.kind == kindSource {
					t.source = op.(sourceRunner)
				}
				t.restore[k] = oc
			}
			t.head = out
		}
	}
}

// assignFreshSplits gives the sources that restore nothing their splits,
// round-robin (every split to every reader of a union source).
func (d *deployment) assignFreshSplits() error {
	for _, n := range d.jm.graph.nodes {
		if n.kind != kindSource || (d.plan != nil && d.plan.Operators[n.uid] != nil) {
			continue
		}
		splits, err := n.enumerate(n.parallelism)
		if err != nil {
			return fmt.Errorf("enumerate splits of %s: %w", displayName(n), err)
		}
		union := unionSplits(n.source)
		for i, t := range d.tasksOf[d.vertexOf[n]] {
			mine := splits // a union source's readers pick their own
			if !union {
				mine = nil
				for j := i; j < len(splits); j += n.parallelism {
					mine = append(mine, splits[j])
				}
			}
			t.restore[0].restore = &restore.SubtaskRestore{OperatorState: []savepoint.OperatorListState{
				{Name: sourceReaderStateName, Mode: savepoint.SplitDistribute, Items: mine}}}
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
		infos[i] = checkpoint.TaskInfo{ID: t.id, Source: t.source != nil}
		for _, ci := range t.chanInfo {
			infos[i].Upstream = append(infos[i].Upstream, d.tasksOf[d.vertexOf[t.v.inputs[ci.edge].from]][ci.sender].id)
		}
	}
	jm.coord.Start(jm.clock(), infos)
	jm.mu.Lock()
	for _, t := range e.tasks {
		jm.taskStates[taskKey{t.v.id, t.subtask}] = ExecInitializing
	}
	jm.mu.Unlock()
	for _, t := range e.tasks {
		e.wg.Add(1)
		go t.run()
	}
}

// exchanges lists the job's data exchanges between chains, for the records
// in flight of unaligned checkpoints.
func (g *JobGraph) exchanges() []restore.Exchange {
	var out []restore.Exchange
	for _, v := range g.vertices {
		for _, in := range v.inputs {
			out = append(out, exchangeOf(v, in, in.to.maxParallelism))
		}
	}
	return out
}

func exchangeOf(v *vertex, in *edge, maxPar int) restore.Exchange {
	return restore.Exchange{From: in.from.uid, To: in.to.uid, Keyed: in.part == network.ShipHash, Broadcast: in.part == network.ShipBroadcast,
		Parallelism: v.parallelism, MaxParallelism: maxPar}
}

// planInFlight gives each receiving task the records in flight of the
// unaligned checkpoint it restores from, per input edge.
func (e *execution) planInFlight(plan *restore.Plan, tasksOf map[*vertex][]*task) error {
	for v, tasks := range tasksOf {
		for k, in := range v.inputs {
			per, err := restore.InFlightFor(plan.Meta, exchangeOf(v, in, e.maxPar[in.to.uid]))
			if err != nil {
				return fmt.Errorf("snapshot %s: %w", plan.Pointer, err)
			}
			for i, pieces := range per {
				for _, p := range pieces {
					p.Edge = k
					tasks[i].inFlight = append(tasks[i].inFlight, p)
				}
				tasks[i].inFlightDir = plan.Dir
			}
		}
	}
	return nil
}

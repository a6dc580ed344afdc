package task

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

// bufferTimeout bounds how long a record may wait in a partly filled batch
// while a task is busy (Flink's execution.buffer-timeout, 100 ms).
const bufferTimeout = 100 * time.Millisecond

// asyncJob is the asynchronous part of one snapshot.
type asyncJob struct {
	b         network.Barrier
	unaligned bool // taken unaligned (else aligned, maybe turned unaligned at the output)
	caps      []namedCapture
	// alignment and sync are the aligned alignment's and the synchronous
	// part's durations, for statistics.
	alignment, sync time.Duration
	// channels is the channel state of an unaligned checkpoint: the async
	// writer waits until it is complete.
	channels *channelCapture
	// keep: the task's input has ended, so this snapshot is its final
	// state; keep it encoded for checkpoints taken after the task finishes
	// (state outside the heap only: see Task.checkpoint).
	keep bool
}

type namedCapture struct {
	uid string
	c   *opCapture
}

// lifecycle is where a task is in its life, after it has opened its
// operators. The transitions, all on the task's goroutine:
//
//	lifeRunning    → lifePaused      a source took the synchronous savepoint of a stop without drain
//	lifePaused     → lifeRunning     that savepoint was aborted: the job goes on
//	lifePaused     → lifeSuspended   that savepoint completed: the source stops
//	lifeRunning    → lifeSuspended   every input ended by a stop without drain
//	lifeRunning    → lifeEndedInput  the input is exhausted, drained, or every input ended
//	lifePaused     → lifeEndedInput  drained while paused
//	lifeEndedInput → lifeFinished    a checkpoint taken after the input ended completed
//
// A task exits in lifeEndedInput (no final checkpoint wanted), lifeFinished
// or lifeSuspended (once every snapshot it took has completed), or at any
// point when it fails or is cancelled.
type lifecycle uint8

const (
	// lifeRunning: reading input, emitting.
	lifeRunning lifecycle = iota
	// lifePaused: a source emits nothing after the barrier of a
	// stop-with-savepoint (suspendFor) until the savepoint's fate is known.
	lifePaused
	// lifeEndedInput: operators have finished their input (end-of-input
	// timers fired); the task waits for a final checkpoint if waitFinal.
	lifeEndedInput
	// lifeSuspended: stopped by a stop-with-savepoint without drain;
	// operators were not finished.
	lifeSuspended
	// lifeFinished: a checkpoint after the end of input has completed, so
	// two-phase-commit sinks have committed everything.
	lifeFinished
)

var lifecycleNames = [...]string{"RUNNING", "PAUSED", "ENDED_INPUT", "SUSPENDED", "FINISHED"}

func (l lifecycle) String() string { return lifecycleNames[l] }

var lifecycleTransitions = map[lifecycle][]lifecycle{
	lifeRunning:    {lifePaused, lifeSuspended, lifeEndedInput},
	lifePaused:     {lifeRunning, lifeSuspended, lifeEndedInput},
	lifeEndedInput: {lifeFinished},
}

// inputOpen reports whether the task may still read input and emit.
func (t *Task) inputOpen() bool { return t.state == lifeRunning || t.state == lifePaused }

// setState moves the task to a new state; an illegal transition is a bug in
// the task, reported as the task's failure rather than a crash.
func (t *Task) setState(to lifecycle) error {
	for _, ok := range lifecycleTransitions[t.state] {
		if ok == to {
			t.state = to
			return nil
		}
	}
	return fmt.Errorf("%s: illegal task state transition %s -> %s", t.Name, t.state, to)
}

// Options describe a task to New.
type Options struct {
	ID       checkpoint.TaskID
	Services *Services
	// Vertex is the index of the task's vertex in the job graph, VertexID
	// the id of its head operator; Parallelism is the vertex's.
	Vertex      int
	VertexID    string
	Parallelism int
	Subtask     int
	Name        string
	// Done is closed when the attempt is cancelled.
	Done <-chan struct{}
	// ExactlyOnce: barriers are aligned (else at-least-once); WaitFinal:
	// the task waits for a checkpoint after its input ends.
	ExactlyOnce, WaitFinal bool
	// WatermarkInterval is pipeline.auto-watermark-interval.
	WatermarkInterval time.Duration
}

// New makes a task; a task with inputs gets them with ConnectInput.
func New(o Options) *Task {
	t := &Task{ID: o.ID, svc: o.Services, Vertex: o.Vertex, vertexID: o.VertexID, Parallelism: o.Parallelism,
		Subtask: o.Subtask, Name: o.Name, Mail: network.NewMailbox(), done: o.Done, exactlyOnce: o.ExactlyOnce,
		waitFinal: o.WaitFinal, wake: make(chan struct{}, 1),
		watermarks: watermarks{ts: math.MinInt64, outWM: math.MinInt64, interval: o.WatermarkInterval}}
	t.M.init()
	return t
}

// Task runs one subtask of a vertex: a chain of operators fed by a source
// or by an input gate, in one goroutine.
type Task struct {
	ID  checkpoint.TaskID
	svc *Services
	// Vertex is the index of the task's vertex in the job graph,
	// vertexID the id of its head operator (what Flink's REST API calls
	// the vertex's id); Parallelism is the vertex's.
	Vertex      int
	vertexID    string
	Parallelism int
	Subtask     int
	Name        string
	Mail        *network.Mailbox
	done        <-chan struct{}
	// M are the task's metrics.
	M Metrics
	// sinkBytes is the chain's sink writer if it counts its bytes
	// (publishCounts reads it).
	sinkBytes api.BytesSendWriter

	exactlyOnce bool
	waitFinal   bool // wait for a checkpoint after the input ends
	// wake is signalled when a credit comes back to one of the task's
	// writers.
	wake chan struct{}

	Wiring
	life
	watermarks
	inputState
	asyncState
	flushTimer
}

// Wiring is what deployment gives a task before it runs: its chain of
// operators and their uids and restore contexts, its writers, its source
// or input, and what its unaligned checkpoints record of its channels.
type Wiring struct {
	Ops     []Operator
	UIDs    []string
	Restore []*OpContext
	Writers []network.OutputWriter
	Source  SourceRunner // for source tasks
	Gate    any          // for other tasks (ConnectInput)
	Head    any          // the head operator's input collector
	// ChanInfo says, per gate channel, which input edge and sending
	// subtask it is; InPeers names each input edge's sending operator and
	// OutPeers each writer's receiving operator, for _metadata.
	ChanInfo []ChanInfo
	InPeers  []string
	OutPeers []string
	// InFlight is the channel state restored into this subtask's input.
	InFlight    []restore.InFlight
	InFlightDir string
	// ChainCounts are the counters on the edges inside the chain:
	// ChainCounts[k] counts the records operator k passed to operator k+1
	// (nil after a source, whose output is SourceEmitted).
	// Only the task's goroutine touches them (a plain increment per
	// record); publishCounts copies them into M.Chain for the readers.
	ChainCounts []*int64
}

// life is where the task is in its life (see lifecycle) and the
// checkpoints that move it on.
type life struct {
	state lifecycle
	// inputEnd is how the inputs that have ended so far ended; the
	// strongest mode wins (a stop without drain on any input suspends).
	inputEnd network.EOPMode
	// snapshotAfterEOI is the first checkpoint taken after the input
	// ended: once it completes, the task is lifeFinished.
	snapshotAfterEOI int64
	lastSnapshot     int64
	lastCompleted    int64 // the newest checkpoint notified complete
	// suspendFor is the synchronous savepoint a lifePaused source waits for.
	suspendFor int64
	// Positions is a source's read position when the task ended (kept
	// only when checkpointing is off).
	Positions []savepoint.OperatorListState
}

// inputState is the task's input: its barrier alignment and, for
// unaligned checkpoints, the input queue and the captures of channel state
// being recorded, oldest first.
type inputState struct {
	al    *aligner
	runIn func() error // runs the input gate into Head
	numIn int
	input unalignedInput
	// lastUnaligned is the newest unaligned checkpoint started here;
	// announced the newest timeoutable barrier announced on an input.
	lastUnaligned int64
	announced     network.Barrier
	captures      []*channelCapture
	// alignID is the checkpoint whose first barrier came at alignStart.
	alignID    int64
	alignStart time.Time
}

// asyncState is the asynchronous part of the task's snapshots: the
// writer's queue, and the final snapshot a finished task keeps.
type asyncState struct {
	async     chan asyncJob
	asyncDone chan struct{}
	FinalMu   sync.Mutex
	Final     []checkpoint.OperatorSnapshot
	// aborted holds the checkpoints aborted while their snapshot may still
	// be queued or being written: the asynchronous writer stops encoding
	// them, so that an aborted snapshot does not keep its key groups pinned
	// (and the next snapshot's overlays growing) for nothing.
	abortMu sync.Mutex
	aborted map[int64]bool
}

// flushTimer is when the task next flushes its writers or polls its source.
type flushTimer struct {
	timer     *time.Timer
	timerC    <-chan time.Time
	timerAt   int64
	lastFlush time.Time
	polls     int
}

// Run is the task's goroutine.
func (t *Task) Run() {
	err := t.invoke()
	t.publishCounts()
	t.M.Ended.Store(true)
	t.svc.JobMaster.TaskExited(t, err)
}

func (t *Task) invoke() (err error) {
	t.async = make(chan asyncJob, 4)
	t.asyncDone = make(chan struct{})
	go t.asyncLoop()
	defer func() {
		for _, c := range t.captures {
			c.stop()
		}
		close(t.async)
		<-t.asyncDone
	}()
	// Operators open tail first; firstOpen is the lowest index opened, so
	// ops[firstOpen:] are the ones to close.
	firstOpen := len(t.Ops)
	defer func() {
		if t.Source != nil && firstOpen == 0 && !t.svc.Checkpointing {
			// Without checkpointing, a restart resumes sources where they
			// were (like a Kafka source's committed offsets): keep the
			// position before the reader closes.
			protect(func() error {
				c, err := t.Ops[0].snapshot(canonicalRequest)
				if err == nil && c != nil {
					t.Positions = c.opState
				}
				return err
			})
		}
		for i := firstOpen; i < len(t.Ops); i++ {
			if cerr := protect(t.Ops[i].close); cerr != nil && err == nil {
				err = fmt.Errorf("close %s: %w", t.Name, cerr)
			}
		}
		if t.timer != nil {
			t.timer.Stop()
		}
	}()
	if len(t.Restore) > 0 && t.Restore[0].Blocks != nil {
		defer t.Restore[0].Blocks.Close()
	}
	// Open tail first, so that each operator's output is ready before it
	// is fed.
	for i := len(t.Ops) - 1; i >= 0; i-- {
		op, ctx := t.Ops[i], t.Restore[i]
		if err := protect(func() error { return op.open(ctx) }); err != nil {
			return err
		}
		firstOpen = i
	}
	if len(t.Restore) > 0 && t.Restore[0].Blocks != nil {
		t.Restore[0].Blocks.Close() // all restored state is loaded
	}
	// INITIALIZING → RUNNING: every operator has opened with its restored
	// state. The job is RUNNING once all its tasks are.
	t.svc.JobMaster.Initialized(t)
	t.lastFlush = t.svc.Clock()
	if t.Source != nil {
		err = protect(t.runSource)
	} else {
		err = protect(t.runIn)
	}
	if err == nil && (t.state == lifeEndedInput && t.snapshotAfterEOI == 0 || t.state == lifeFinished && t.stateInMemory()) {
		// Finished without a checkpoint after its input ended (checkpointing
		// is off), or with its state in memory: keep the final state, so
		// that savepoints and checkpoints taken while the rest of the job
		// runs hold it — a finished source's splits stay finished, a
		// finished operator's state is not lost. (A final checkpoint of
		// other state kept its snapshot already.)
		err = protect(t.keepFinalState)
	}
	return err
}

// stateInMemory: no operator of the task keeps its state outside the Go
// heap, so a snapshot of it outlives the task (see keepFinalState).
func (t *Task) stateInMemory() bool {
	for _, op := range t.Ops {
		if s, ok := op.(interface{ stateInMemory() bool }); ok && !s.stateInMemory() {
			return false
		}
	}
	return true
}

func (t *Task) keepFinalState() error {
	caps := make([]namedCapture, 0, len(t.Ops))
	inMemory := true
	for i, op := range t.Ops {
		c, err := op.snapshot(canonicalRequest)
		if err != nil {
			return fmt.Errorf("final snapshot: %w", err)
		}
		if c != nil {
			caps = append(caps, namedCapture{uid: t.UIDs[i], c: c})
			if _, ok := c.keyed.(*state.KeyedSnapshot); c.keyed != nil && !ok {
				inMemory = false
			}
		}
	}
	var snaps []checkpoint.OperatorSnapshot
	if inMemory {
		// hashmap state stays readable after the task has ended: it is
		// encoded only if a savepoint asks for it (a job without
		// checkpoints mostly ends without one), not here.
		snaps = streamCaptures(t.Subtask, caps)
		for i := range snaps {
			if snaps[i].Encoder != nil {
				snaps[i].Encoder = &finalEncoder{snap: caps[i].c.keyed, start: snaps[i].Start, end: snaps[i].End}
			}
		}
	} else {
		// A store's snapshot (rocksdb's) is closed with the task.
		var err error
		if snaps, err = encodeCaptures(t.Subtask, caps); err != nil {
			return fmt.Errorf("final snapshot: %w", err)
		}
	}
	t.FinalMu.Lock()
	t.Final = snaps
	t.FinalMu.Unlock()
	return nil
}

// finalEncoder is a finished task's keyed state snapshot, encoded whole
// the first time a snapshot of the job asks for one of its key groups and
// kept for every later one (a state snapshot encodes each key group once).
type finalEncoder struct {
	once       sync.Once
	snap       state.Snapshot
	start, end int
	blocks     map[int][]byte
	err        error
}

func (f *finalEncoder) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	f.once.Do(func() {
		defer func() { f.snap.Release(); f.snap = nil }() // the blocks are what is kept
		f.blocks = map[int][]byte{}
		for k := f.start; k <= f.end; k++ {
			b, err := f.snap.EncodeKeyGroup(nil, k)
			if err != nil {
				f.err = err
				return
			}
			f.blocks[k] = b
		}
	})
	if f.err != nil {
		return dst, f.err
	}
	if b, ok := f.blocks[kg]; ok {
		return append(dst, b...), nil
	}
	return append(dst, 0), nil // outside the range: no state
}

// protect runs f, turning a panic (from user code, or a userError raised
// deep in a chain) into an error with a stack trace.
func protect(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			switch e := r.(type) {
			case *userError:
				err = e
			case error:
				if errors.Is(e, network.ErrTaskCanceled) {
					err = network.ErrTaskCanceled
					return
				}
				err = fmt.Errorf("panic: %w\n%s", e, debug.Stack())
			default:
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}
	}()
	return f()
}

func (t *Task) canceled() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// runSource drives a source task: poll the reader, handle mail in between.
func (t *Task) runSource() error {
	for t.inputOpen() {
		select {
		case <-t.Mail.Notify:
			if err := t.handleMail(); err != nil {
				return err
			}
			continue
		case <-t.done:
			return network.ErrTaskCanceled
		default:
		}
		if blocked, err := t.waitOutput(); err != nil {
			return err
		} else if blocked {
			continue // no new records while output is held back
		}
		if t.state == lifePaused {
			// Paused by a stop-with-savepoint: nothing is emitted after its
			// barrier. Stop once it has completed; resume if it failed.
			if t.lastCompleted >= t.suspendFor {
				if err := t.endSuspended(); err != nil {
					return err
				}
				break
			}
			t.onIdle()
			if err := t.awaitMail(); err != nil {
				return err
			}
			continue
		}
		st, n, err := t.Source.poll()
		if err != nil {
			return err
		}
		if n > 0 {
			t.M.SourceEmitted.Add(n)
			t.publishCounts()
			t.svc.JobMaster.SourceEmitted(t, n)
		}
		if p, ok := t.Source.pendingRecords(); ok {
			t.M.PendingRecords.Store(p)
		}
		if b, ok := t.Source.bytesIn(); ok {
			t.M.SourceBytesIn.Store(b)
		}
		if ts, ok := t.Source.lastTimestamp(); n > 0 && ok {
			t.M.EmitEventTimeLag.Store(t.svc.Clock().UnixMilli() - ts)
		}
		if err := t.fireDueTimers(); err != nil {
			return err
		}
		switch st {
		case api.MoreAvailable:
			t.maybeFlushOnTimeout()
		case api.NothingAvailable:
			t.onIdle()
			now := t.svc.Clock()
			wait := time.NewTimer(max(t.Source.nextPollTime(now).Sub(now), 0))
			var err error
			idle := startWait(&t.M.Idle, true)
			select {
			case <-t.Mail.Notify:
				idle.stop() // what the mail does is work
				err = t.handleMail()
			case <-wait.C:
				idle.stop()
			case <-t.timerC:
				// A periodic watermark (or an operator's timer) is due while
				// the source has nothing.
				idle.stop()
				t.timerC, t.timerAt = nil, 0
				err = t.fireTimers()
			case <-t.done:
				idle.stop()
				err = network.ErrTaskCanceled
			}
			wait.Stop()
			if err != nil {
				return err
			}
		case api.EndOfInput:
			if err := t.endOfInput(network.EOPEnd); err != nil {
				return err
			}
		}
	}
	return t.afterInput()
}

func (t *Task) onEvent(ch int32, ev *network.Event) error {
	switch ev.Kind {
	case network.EventBarrier:
		if id := ev.Barrier.ID; id > t.alignID {
			t.alignID, t.alignStart = id, t.svc.Clock()
			t.M.noteStartDelay(t.alignStart, ev.Barrier.Timestamp)
		}
		return t.onAlignment(t.al.onBarrier(ch, ev.Barrier))
	case network.EventWatermark, network.EventWatermarkStatus:
		return t.onWatermarkEvent(ch, ev)
	case network.EventEndOfPartition:
		t.inputEnd = max(t.inputEnd, ev.EOP)
		if ev.EOP == network.EOPDrain {
			t.waitFinal = true
		}
		res := t.al.onEndOfPartition(ch)
		if s := res.snapshot; s != nil && s.ID == t.al.directID && t.al.allFinished() && t.inputEnd == network.EOPEnd && t.waitFinal {
			// A direct trigger's alignment ends with the input: the
			// snapshot is taken after the input ended, the task's final
			// one, as a trigger sent then would have been.
			res.snapshot = nil
			if err := t.onAlignment(res); err != nil {
				return err
			}
			if err := t.endOfInput(t.inputEnd); err != nil {
				return err
			}
			return t.checkpoint(*s, false)
		}
		if err := t.onAlignment(res); err != nil {
			return err
		}
		if t.al.allFinished() {
			if t.inputEnd == network.EOPSuspend {
				return t.endSuspended()
			}
			return t.endOfInput(t.inputEnd)
		}
	}
	return nil
}

// triggeredWhileOpen handles a checkpoint triggered directly at a task
// whose input is open: every task it reads from has finished (the
// coordinator triggers such tasks, since no barrier can reach them), and
// what they sent is queued here up to their ends of partition. Unaligned,
// the snapshot is taken now and the queued records are its input channel
// state; aligned, it is taken when the last end has been processed, or
// turns unaligned at the alignment timeout.
func (t *Task) triggeredWhileOpen(b network.Barrier) error {
	if b.UnalignedFromStart() {
		if b.ID <= t.lastUnaligned || b.ID <= t.al.lastDone || b.ID <= t.lastSnapshot || t.isAborted(b.ID) {
			return nil
		}
		return t.checkpoint(b, true)
	}
	if b.ID > t.alignID {
		t.alignID, t.alignStart = b.ID, t.svc.Clock()
	}
	return t.onAlignment(t.al.startDirect(b))
}

func (t *Task) onAlignment(res alignResult) error {
	if res.aborted != 0 {
		t.svc.JobMaster.Decline(t, res.aborted, checkpoint.ErrDeclined,
			errors.New("(alignment was aborted by the barrier of a newer checkpoint)"))
	}
	if res.snapshot != nil {
		return t.checkpoint(*res.snapshot, false)
	}
	return nil
}

// handleMail handles the control messages that have arrived; an error
// fails the task.
func (t *Task) handleMail() error {
	for _, m := range t.Mail.Take() {
		if err := t.handle(m); err != nil {
			return err
		}
	}
	return nil
}

func (t *Task) handle(m network.Mail) error {
	switch m.Kind {
	case network.MailTrigger:
		t.M.noteStartDelay(t.svc.Clock(), m.Barrier.Timestamp)
		if t.al != nil && t.inputOpen() {
			return t.triggeredWhileOpen(m.Barrier)
		}
		if m.Barrier.ID <= t.lastSnapshot {
			return nil // taken already (an alignment that timed out, say)
		}
		if t.al != nil && !t.al.direct(m.Barrier.ID) {
			return nil
		}
		return t.checkpoint(m.Barrier, m.Barrier.UnalignedFromStart())
	case network.MailComplete:
		for _, op := range t.Ops {
			if err := op.notifyComplete(m.ID); err != nil {
				return &userError{op: t.Name, err: err}
			}
		}
		t.lastCompleted = max(t.lastCompleted, m.ID)
		if t.state == lifeEndedInput && t.snapshotAfterEOI != 0 && m.ID >= t.snapshotAfterEOI {
			return t.setState(lifeFinished)
		}
	case network.MailAbort:
		t.abortMu.Lock()
		if t.aborted == nil {
			t.aborted = map[int64]bool{}
		}
		t.aborted[m.ID] = true
		t.abortMu.Unlock()
		if t.al != nil {
			t.al.abort(m.ID)
		}
		t.abortCapture(m.ID)
		for _, op := range t.Ops {
			op.notifyAborted(m.ID)
		}
		if t.state == lifePaused && t.suspendFor == m.ID {
			t.suspendFor = 0
			return t.setState(lifeRunning) // the stop failed: go on
		}
	case network.MailUnalignedBarrier:
		return t.onUnalignedBarrier(m)
	case network.MailAlignmentTimeout:
		if len(t.captures) > 0 {
			t.checkOutputBarriers(t.svc.Clock())
		}
		return t.alignmentTimedOut(m.ID)
	case network.MailBarrierAnnounce:
		if m.Barrier.ID > t.announced.ID {
			t.announced = m.Barrier
		}
	case network.MailDrain:
		if t.Source != nil && t.inputOpen() {
			t.waitFinal = true
			return t.endOfInput(network.EOPDrain)
		}
	}
	return nil
}

// checkpoint takes checkpoint b: sinks pre-commit, the barrier goes
// downstream right after the records that precede it, state is captured
// synchronously, and the capture is handed to the asynchronous writer.
func (t *Task) checkpoint(b network.Barrier, unaligned bool) error {
	start := t.svc.Clock()
	var alignment time.Duration
	if t.alignID == b.ID {
		alignment = start.Sub(t.alignStart)
	}
	for _, op := range t.Ops {
		if err := op.prepareSnapshot(b.ID); err != nil {
			return &userError{op: t.Name, err: fmt.Errorf("prepare checkpoint %d: %w", b.ID, err)}
		}
	}
	var channels *channelCapture
	if unaligned {
		channels = t.startUnaligned(b)
	} else if t.inputOpen() {
		ev := &network.Event{Kind: network.EventBarrier, Barrier: b}
		for _, w := range t.Writers {
			w.BroadcastEvent(ev)
		}
		if b.Timeoutable() {
			// The barrier may be held back behind backpressure: it
			// turns unaligned there if still held back at the timeout.
			channels = t.watchOutputBarrier(b)
		}
	} else if b.Timeoutable() {
		// The input ended, but the output may still be held back, its end
		// of partition last: the barrier goes in band before that end, and
		// turns unaligned at the timeout like any other.
		for _, w := range t.Writers {
			w.BarrierBeforeEnd(b)
		}
		channels = t.watchOutputBarrier(b)
	}
	caps := make([]namedCapture, 0, len(t.Ops))
	release := func() {
		for _, c := range caps {
			if c.c.keyed != nil {
				c.c.keyed.Release()
			}
		}
	}
	// A snapshot taken after the input ended is the task's final state,
	// which checkpoints taken after the task has finished hold too. State
	// in memory is kept as it is when the task exits (keepFinalState) and
	// encoded only if one asks for it, so this checkpoint is written like
	// any other — the changelog's tail, say. Other state (rocksdb's store
	// closes with the task) is encoded whole here and kept.
	keep := !t.inputOpen() && !t.stateInMemory()
	req := snapshotRequest{id: b.ID, typ: b.Type, files: !keep && b.Location != nil && b.Location.Dir != ""}
	for i, op := range t.Ops {
		c, err := op.snapshot(req)
		if err != nil {
			release()
			return &userError{op: t.Name, err: fmt.Errorf("snapshot for checkpoint %d: %w", b.ID, err)}
		}
		if c != nil {
			caps = append(caps, namedCapture{uid: t.UIDs[i], c: c})
		}
	}
	t.lastSnapshot = b.ID
	if t.state == lifeEndedInput && t.snapshotAfterEOI == 0 {
		t.snapshotAfterEOI = b.ID
	}
	if b.Type.IsSynchronous() && !b.Type.Drain && t.Source != nil && t.state == lifeRunning {
		t.suspendFor = b.ID
		if err := t.setState(lifePaused); err != nil {
			release()
			return err
		}
	}
	select {
	case t.async <- asyncJob{b: b, unaligned: unaligned, caps: caps, keep: keep, channels: channels,
		alignment: alignment, sync: t.svc.Clock().Sub(start)}:
		return nil
	case <-t.done:
		release()
		return network.ErrTaskCanceled
	}
}

// asyncLoop encodes and writes snapshots, one at a time, in order.
func (t *Task) asyncLoop() {
	defer close(t.asyncDone)
	for j := range t.async {
		var snaps []checkpoint.OperatorSnapshot
		var handles map[string]savepoint.SubtaskState
		// A serializer that panics while encoding declines the checkpoint
		// instead of taking the process down.
		// A snapshot kept as the task's final state is written whole even
		// if its checkpoint was aborted: later checkpoints need it.
		aborted := func() bool { return !j.keep && t.isAborted(j.b.ID) }
		if j.channels != nil {
			// The input channel state completes on the task's goroutine
			// as the channels' barriers come in. Whether the checkpoint was
			// aborted is asked of the abort set (under its lock), not of
			// the capture: after a cancellation the task's goroutine may
			// still be aborting it.
			select {
			case <-j.channels.done:
			case <-t.done:
			}
			if t.canceled() || t.isAborted(j.b.ID) {
				releaseCaptures(j.caps)
				t.forgetAborted(j.b.ID)
				continue
			}
		}
		asyncStart := t.svc.Clock()
		err := protect(func() (err error) {
			if j.keep {
				// Kept in memory for later checkpoints: encode it whole.
				if snaps, err = encodeCaptures(t.Subtask, j.caps); err != nil {
					return err
				}
			} else {
				snaps = streamCaptures(t.Subtask, j.caps)
				for i := range snaps {
					if snaps[i].Encoder != nil {
						snaps[i].Encoder = abortableEncoder{snaps[i].Encoder, aborted}
					}
				}
			}
			if j.channels != nil {
				snaps = t.addChannelState(snaps, j.channels)
			}
			if t.canceled() {
				return nil
			}
			handles, err = t.svc.Storage.WriteSubtask(j.b.Location, snaps)
			if !j.keep {
				countEntries(snaps, j.caps)
			}
			return err
		})
		releaseCaptures(j.caps)
		t.forgetAborted(j.b.ID)
		if t.canceled() || aborted() {
			continue
		}
		if err != nil {
			t.svc.JobMaster.Decline(t, j.b.ID, checkpoint.ErrAsyncFailed, err)
			continue
		}
		if j.keep {
			// Later checkpoints take this snapshot for the task once it
			// has finished — and it finishes only when everything it sent
			// has reached its receivers, where it is their input or their
			// state by then. Records in flight it stored (what its
			// writers held back when it was taken) are not part of those
			// checkpoints: restored, they would come twice.
			final := slices.Clone(snaps)
			for i := range final {
				final[i].InputChannels, final[i].OutputChannels = nil, nil
			}
			t.FinalMu.Lock()
			t.Final = final
			t.FinalMu.Unlock()
		}
		t.svc.JobMaster.Ack(t, j.b.ID, &checkpoint.Ack{Handles: handles, Descs: checkpoint.Descriptors(snaps),
			Stats: t.subtaskStats(j, handles, t.svc.Clock().Sub(asyncStart))})
	}
}

func (t *Task) isAborted(id int64) bool {
	t.abortMu.Lock()
	defer t.abortMu.Unlock()
	return t.aborted[id]
}

// forgetAborted drops the aborts of checkpoints up to id, whose snapshots
// are written (or were never taken).
func (t *Task) forgetAborted(id int64) {
	t.abortMu.Lock()
	defer t.abortMu.Unlock()
	for a := range t.aborted {
		if a <= id {
			delete(t.aborted, a)
		}
	}
}

// abortableEncoder stops encoding once its checkpoint is aborted: the
// remaining key groups are written as empty, and the result is never
// acknowledged; the snapshot is released at once.
type abortableEncoder struct {
	enc     checkpoint.KeyGroupEncoder
	aborted func() bool
}

func (e abortableEncoder) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	if e.aborted() {
		return append(dst, 0), nil // no state: skipped
	}
	dst, err := e.enc.EncodeKeyGroup(dst, kg)
	// Give the processor back between key groups. The encoder runs beside
	// the task and its sources; with more runnable goroutines than cores the
	// runtime preempts only every 10 ms, which the task then spends waiting
	// for a core (measured: ~10 ms stalls at 1 M keys on 2 cores). A key
	// group is ~1 ms of encoding at 1 M keys, so this bounds the wait to that.
	runtime.Gosched()
	return dst, err
}

// streamCaptures describes captures for WriteSubtask, which encodes their
// keyed state one key group at a time straight into the state file; the
// captures are released (releaseCaptures) once it has.
func streamCaptures(subtask int, caps []namedCapture) []checkpoint.OperatorSnapshot {
	snaps := make([]checkpoint.OperatorSnapshot, 0, len(caps))
	for _, nc := range caps {
		c := nc.c
		s := checkpoint.OperatorSnapshot{UID: nc.uid, Subtask: subtask, States: c.states}
		if cl, ok := c.keyed.(*state.ChangelogSnapshot); ok {
			r := cl.KeyGroupRange()
			s.Keyed, s.Start, s.End, s.Changelog = true, r.Start, r.End, changelogCapture(cl)
		} else if n, ok := c.keyed.(*state.NativeSnapshot); ok {
			r := n.KeyGroupRange()
			s.Keyed, s.Start, s.End = true, r.Start, r.End
			s.Native = &checkpoint.NativeFiles{Wait: n.Wait, Dir: n.Dir, BackendID: n.BackendID,
				Incremental: n.Incremental, Shared: n.Shared, Uploaded: n.Uploaded}
		} else if c.keyed != nil {
			r := c.keyed.KeyGroupRange()
			s.Keyed, s.Start, s.End, s.Encoder = true, r.Start, r.End, c.keyed
		}
		if c.opState != nil {
			s.OperatorState = savepoint.EncodeOperatorState(c.opState)
		}
		snaps = append(snaps, s)
	}
	return snaps
}

// releaseCaptures tells the state backends their captures are no longer
// read (Release is idempotent).
func releaseCaptures(caps []namedCapture) {
	for _, nc := range caps {
		if nc.c.keyed != nil {
			nc.c.keyed.Release()
		}
	}
}

// encodeCaptures turns captures into snapshots encoded whole, in memory
// (for one kept after the task finished), and releases them.
func encodeCaptures(subtask int, caps []namedCapture) ([]checkpoint.OperatorSnapshot, error) {
	defer releaseCaptures(caps)
	snaps := streamCaptures(subtask, caps)
	for i := range snaps {
		s := &snaps[i]
		if s.Encoder == nil {
			continue
		}
		for kg := s.Start; kg <= s.End; kg++ {
			data, err := s.Encoder.EncodeKeyGroup(nil, kg)
			if err != nil {
				return nil, fmt.Errorf("operator %s key group %d: %w", s.UID, kg, err)
			}
			if len(data) == 1 && data[0] == 0 {
				continue // no state in this key group
			}
			s.KeyGroups = append(s.KeyGroups, checkpoint.KeyGroupData{KeyGroup: kg, Data: data})
		}
		s.Encoder = nil
	}
	countEntries(snaps, caps)
	return snaps, nil
}

// countEntries fills in the entries of states whose backend counted them
// only while encoding (the LSM's); snaps are streamCaptures(caps), encoded.
func countEntries(snaps []checkpoint.OperatorSnapshot, caps []namedCapture) {
	for i, nc := range caps {
		ec, ok := nc.c.keyed.(state.EntryCounter)
		if !ok {
			continue
		}
		counts := ec.EntryCounts()
		var states []savepoint.StateDescriptor
		for _, d := range snaps[i].States {
			d.Entries = counts[d.Name]
			if d.Entries == 0 && (d.Kind == state.KindProcessingTime.String() || d.Kind == state.KindEventTime.String()) {
				continue // a timer service with no timers is not worth listing
			}
			states = append(states, d)
		}
		snaps[i].States = states
	}
}

// endOfInput: every input has ended (or the source is exhausted, or
// drained). Operators finish head first, then the end is passed downstream.
func (t *Task) endOfInput(mode network.EOPMode) error {
	if err := t.setState(lifeEndedInput); err != nil {
		return err
	}
	for _, op := range t.Ops {
		if err := op.endInput(); err != nil {
			return &userError{op: t.Name, err: err}
		}
	}
	if t.outWM < math.MaxInt64 {
		// Event time ends with the input (Flink's MAX_WATERMARK): the
		// operators fired their timers in endInput; the next tasks'
		// watermarks no longer wait for this one.
		t.outWM = math.MaxInt64
		t.M.OutputWatermark.Store(math.MaxInt64)
		if t.valve != nil {
			t.M.InputWatermark.Store(math.MaxInt64)
		}
		wm := &network.Event{Kind: network.EventWatermark, Watermark: math.MaxInt64}
		for _, w := range t.Writers {
			w.BroadcastEvent(wm)
		}
	}
	eop := &network.Event{Kind: network.EventEndOfPartition, EOP: mode}
	for _, w := range t.Writers {
		w.BroadcastEvent(eop)
	}
	t.svc.JobMaster.EndOfInput(t)
	return nil
}

// endSuspended stops the task after a stop-with-savepoint without drain:
// operators are not finished (Flink's "suspend" savepoint), the stop is
// passed downstream, and the task waits until it has been told that the
// savepoint completed, so that its two-phase-commit sinks have committed.
func (t *Task) endSuspended() error {
	if err := t.setState(lifeSuspended); err != nil {
		return err
	}
	eop := &network.Event{Kind: network.EventEndOfPartition, EOP: network.EOPSuspend}
	for _, w := range t.Writers {
		w.BroadcastEvent(eop)
	}
	return nil
}

// afterInput waits, when checkpointing is on, for a checkpoint taken after
// the input ended to complete, so that two-phase-commit sinks commit the
// tail of their output before the task finishes (FLIP-147).
func (t *Task) afterInput() error {
	// What the writers hold back (the end of input last) goes out first.
	for {
		blocked, err := t.waitOutput()
		if err != nil {
			return err
		}
		if !blocked {
			break
		}
	}
	wait := func() bool {
		if t.state == lifeSuspended {
			return t.lastCompleted < t.lastSnapshot
		}
		return t.waitFinal && t.state != lifeFinished
	}
	for wait() {
		if err := t.awaitMail(); err != nil {
			return err
		}
	}
	return nil
}

// awaitMail waits for the task's mail and handles it, or reports that the
// task was cancelled.
func (t *Task) awaitMail() error {
	idle := startWait(&t.M.Idle, true)
	select {
	case <-t.Mail.Notify:
		idle.stop()
		return t.handleMail()
	case <-t.done:
		idle.stop()
		return network.ErrTaskCanceled
	}
}

func (t *Task) onIdle() {
	for _, w := range t.Writers {
		w.Flush()
	}
	for _, op := range t.Ops {
		op.idle()
	}
	t.publishCounts() // after the sinks' idle flushes, whose bytes count
	t.lastFlush = time.Time{}
}

func (t *Task) maybeFlushOnTimeout() {
	t.polls++
	if t.polls&63 != 0 {
		return
	}
	now := t.svc.Clock()
	if t.lastFlush.IsZero() {
		t.lastFlush = now
		return
	}
	if now.Sub(t.lastFlush) >= bufferTimeout {
		t.onIdle()
		t.lastFlush = now
	}
}

// armTimer makes the task wake up for its earliest processing-time timer.
func (t *Task) armTimer() {
	next, ok := int64(0), false
	for _, op := range t.Ops {
		if ts, has := op.nextTimer(); has && (!ok || ts < next) {
			next, ok = ts, true
		}
	}
	if !ok || (t.timerC != nil && t.timerAt == next) {
		return
	}
	d := time.Duration(next-t.svc.Clock().UnixMilli()) * time.Millisecond
	if d < 0 {
		d = 0
	}
	if t.timer == nil {
		t.timer = time.NewTimer(d)
	} else {
		t.timer.Reset(d)
	}
	t.timerC, t.timerAt = t.timer.C, next
}

// fireDueTimers fires the chain's timers if the earliest is due, without
// waiting: a source task checks between polls.
func (t *Task) fireDueTimers() error {
	t.armTimer()
	if t.timerC == nil {
		return nil
	}
	select {
	case <-t.timerC:
		t.timerC, t.timerAt = nil, 0
		return t.fireTimers()
	default:
		return nil
	}
}

func (t *Task) fireTimers() error {
	now := t.svc.Clock().UnixMilli()
	for _, op := range t.Ops {
		if err := op.fireTimers(now); err != nil {
			return &userError{op: t.Name, err: err}
		}
	}
	return nil
}

package engine

import (
	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/state"
)

// Records travel between tasks in batches. Each channel (one sending
// subtask to one receiving subtask) owns a fixed pool of buffers: the sender
// fills a free buffer and sends it; the receiver hands it back once
// processed. A sender with no free buffer blocks — that is backpressure, and
// it is also what bounds alignment: a receiver holding back a channel's
// batches holds at most that channel's buffers.
const (
	defaultBatchSize         = 512
	defaultBuffersPerChannel = 4
)

type eventKind uint8

const (
	evBarrier eventKind = iota + 1
	evEndOfPartition
	evWatermark
)

type barrier struct {
	id        int64
	timestamp int64 // Unix ms of the trigger
	typ       checkpoint.SnapshotType
	loc       *checkpoint.Location // where tasks write their state
}

// eopMode says how an input ended.
type eopMode uint8

const (
	// eopEnd: the input is exhausted; operators finish.
	eopEnd eopMode = iota
	// eopDrain: stop --drain ended the input; operators finish, and tasks
	// wait for the final savepoint even without periodic checkpointing.
	eopDrain
	// eopSuspend: stop without drain; the job stops after its savepoint
	// without finishing operators (no end-of-input timers fire).
	eopSuspend
)

// event travels in-band, after the records of its batch.
type event struct {
	kind      eventKind
	barrier   barrier
	watermark int64
	eop       eopMode
}

type netBatch[T any] struct {
	recs []T
	ev   *event
	ch   int32 // the channel's index in the receiving gate
}

type channel[T any] struct {
	free  chan []T
	gate  *inputGate[T]
	index int32
}

// inputGate is a receiving task's input: all channels into it share one Go
// channel, which never blocks a sender because each channel has at most
// buffersPerChannel batches in flight.
type inputGate[T any] struct {
	in       chan netBatch[T]
	channels []*channel[T]
	perChan  int
}

func newInputGate[T any](numChannels, perChannel int) *inputGate[T] {
	return &inputGate[T]{in: make(chan netBatch[T], numChannels*perChannel), perChan: perChannel}
}

func (g *inputGate[T]) addChannel() *channel[T] {
	c := &channel[T]{free: make(chan []T, g.perChan), gate: g, index: int32(len(g.channels))}
	for i := 0; i < g.perChan; i++ {
		c.free <- nil // allocated on first use
	}
	g.channels = append(g.channels, c)
	return c
}

// recycle gives a processed batch's buffer back to its sender.
func (g *inputGate[T]) recycle(b netBatch[T]) {
	clear(b.recs) // drop references so that records can be collected
	g.channels[b.ch].free <- b.recs[:0]
}

// outputWriter is the type-independent view of a recordWriter.
type outputWriter interface {
	flush()
	broadcastEvent(ev *event)
}

// recordWriter partitions a task's output over the channels to the next
// vertex's subtasks and batches it.
type recordWriter[T any] struct {
	targets []*channel[T]
	bufs    [][]T
	part    partitionKind
	hash    func(T) uint64
	maxPar  int // of the receiving operator, for key groups
	next    int // round-robin position
	batch   int
	done    <-chan struct{}
}

func (w *recordWriter[T]) Collect(v T) {
	i := 0
	switch w.part {
	case partitionHash:
		i = state.SubtaskForKeyGroup(w.maxPar, len(w.targets), state.KeyGroupForHash(w.hash(v), w.maxPar))
	case partitionRebalance:
		i = w.next
		if w.next++; w.next == len(w.targets) {
			w.next = 0
		}
	}
	b := w.bufs[i]
	if b == nil {
		b = w.acquire(i)
	}
	b = append(b, v)
	if len(b) >= w.batch {
		w.send(i, b, nil)
		b = nil
	}
	w.bufs[i] = b
}

// acquire takes a free buffer of channel i, blocking while the receiver
// holds them all (backpressure). A cancelled task unwinds from here.
func (w *recordWriter[T]) acquire(i int) []T {
	var b []T
	select {
	case b = <-w.targets[i].free:
	default:
		select {
		case b = <-w.targets[i].free:
		case <-w.done:
			panic(errTaskCanceled)
		}
	}
	if b == nil {
		b = make([]T, 0, w.batch)
	}
	return b
}

func (w *recordWriter[T]) send(i int, b []T, ev *event) {
	c := w.targets[i]
	c.gate.in <- netBatch[T]{recs: b, ev: ev, ch: c.index}
}

func (w *recordWriter[T]) flush() {
	for i, b := range w.bufs {
		if len(b) > 0 {
			w.send(i, b, nil)
			w.bufs[i] = nil
		}
	}
}

// broadcastEvent sends ev on every channel, after the records buffered so
// far: a barrier must follow exactly the records that precede it.
func (w *recordWriter[T]) broadcastEvent(ev *event) {
	for i, b := range w.bufs {
		if b == nil {
			b = w.acquire(i)
		}
		w.send(i, b, ev)
		w.bufs[i] = nil
	}
}

// fanout sends each record to several outputs.
type fanout[T any] struct{ outs []Collector[T] }

func (f *fanout[T]) Collect(v T) {
	for _, o := range f.outs {
		o.Collect(v)
	}
}

// typeOps creates the typed runtime pieces for records of one type.
type typeOps interface {
	newGate(numChannels, perChannel int) any
	addChannel(gate any) any
	newWriter(targets []any, part partitionKind, hash any, maxPar, batch, start int, done <-chan struct{}) (any, outputWriter)
	newFanout(outs []any) any
	runInput(t *task, gate any, head any) error
}

type typeOpsFor[T any] struct{}

func newTypeOps[T any]() typeOps { return typeOpsFor[T]{} }

func (typeOpsFor[T]) newGate(n, per int) any { return newInputGate[T](n, per) }

func (typeOpsFor[T]) addChannel(gate any) any { return gate.(*inputGate[T]).addChannel() }

func (typeOpsFor[T]) newWriter(targets []any, part partitionKind, hash any, maxPar, batch, start int, done <-chan struct{}) (any, outputWriter) {
	w := &recordWriter[T]{part: part, maxPar: maxPar, batch: batch, done: done,
		bufs: make([][]T, len(targets)), next: start % len(targets)}
	for _, t := range targets {
		w.targets = append(w.targets, t.(*channel[T]))
	}
	if hash != nil {
		w.hash = hash.(func(T) uint64)
	}
	return Collector[T](w), w
}

func (typeOpsFor[T]) newFanout(outs []any) any {
	if len(outs) == 1 {
		return outs[0]
	}
	f := &fanout[T]{}
	for _, o := range outs {
		f.outs = append(f.outs, o.(Collector[T]))
	}
	return Collector[T](f)
}

func (typeOpsFor[T]) runInput(t *task, gate any, head any) error {
	return runInput(t, gate.(*inputGate[T]), head.(Collector[T]))
}

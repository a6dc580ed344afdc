package task

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/savepoint"
)

// inputQueue is a task's input side: the batches it has taken from its
// gate but not processed (queue: restored in-flight records first, a batch
// cut short by a barrier back at the front), the batches held back for
// alignment (stash), and the recording of unaligned checkpoints' input
// channel state.
type inputQueue[T any] struct {
	t     *Task
	g     *network.InputGate[T]
	queue []network.Batch[T]
	stash []network.Batch[T]
	// received is, per channel, the number of the last batch taken from
	// the gate.
	received []uint32
	ser      state.Serializer[T]
	// head is the task's first operator; keyed is head if it takes the
	// key groups of a keyed exchange.
	head  api.Collector[T]
	keyed keyGroupCollector[T]
	// alignTimer fires at the aligned-checkpoint timeout of alignFor, the
	// checkpoint whose alignment is in progress (armAlignTimer).
	alignTimer *time.Timer
	alignFor   int64
}

// receive takes b from the gate: it is recorded by the unaligned
// checkpoints whose channel state is open.
func (q *inputQueue[T]) receive(b network.Batch[T]) {
	q.received[b.Ch] = b.Seq
	for _, c := range q.t.captures {
		offer(c, q.ser, &b)
	}
	q.t.completeCaptures()
}

// receiveAvailable takes every batch the gate holds, without waiting: while
// an unaligned checkpoint records its channel state, what was sent before
// its barriers is recorded as soon as it arrives, not when the task gets
// to it (the task may be slow: that is why the checkpoint is unaligned).
func (q *inputQueue[T]) receiveAvailable() {
	for {
		select {
		case b := <-q.g.In:
			q.receive(b)
			q.queue = append(q.queue, b)
		default:
			return
		}
	}
}

// startCapture records, for a snapshot taken now, the batches received and
// not processed — held back for alignment first, they are the older.
func (q *inputQueue[T]) startCapture(c *channelCapture) {
	for i := range q.stash {
		offer(c, q.ser, &q.stash[i])
	}
	for i := range q.queue {
		offer(c, q.ser, &q.queue[i])
	}
	for ch, ended := range q.t.al.finished {
		if ended {
			c.close(int32(ch))
		}
	}
}

// unstash puts the held-back batches whose channel alignment released back
// at the front of the queue, in the order they came: they are older than
// any batch of their channel in the queue. (Processing them here instead
// would skip the loop's mailbox check: a barrier arriving meanwhile would
// cut a batch short and send it to the front, ahead of older ones.)
func (q *inputQueue[T]) unstash() {
	var released, kept []network.Batch[T]
	for _, b := range q.stash {
		if q.t.al.blocked(b.Ch) {
			kept = append(kept, b)
		} else {
			released = append(released, b)
		}
	}
	if len(released) > 0 {
		q.queue = append(released, q.queue...)
		q.stash = kept
	}
}

func (q *inputQueue[T]) notify(c *channelCapture, ch int32, seq uint32) {
	c.notify(ch, seq, q.received[ch])
}

// unalignedInput is the type-independent view of an inputQueue.
type unalignedInput interface {
	startCapture(c *channelCapture)
	notify(c *channelCapture, ch int32, seq uint32)
}

// runInput drives a task fed by an input gate: batches (restored in-flight
// records first), mail and timers, until the input ends.
func runInput[T any](t *Task, g *network.InputGate[T], head api.Collector[T]) error {
	q := &inputQueue[T]{t: t, g: g, received: make([]uint32, len(g.Channels)), ser: state.SerializerFor[T](), head: head}
	q.keyed, _ = head.(keyGroupCollector[T])
	t.input = q
	if len(t.InFlight) > 0 {
		restored, err := readInFlight[T](t, q.ser)
		if err != nil {
			return err
		}
		q.queue = restored
	}
	defer q.stopAlignTimer()
	epoch := t.al.epoch
	for t.inputOpen() {
		q.armAlignTimer()
		if err := q.step(); err != nil {
			return err
		}
		if t.al.epoch != epoch {
			q.unstash()
			epoch = t.al.epoch
		}
		if len(g.In) == 0 && len(q.queue) == 0 {
			t.onIdle()
		}
		t.armTimer()
	}
	return t.afterInput()
}

// step does one thing: handles priority mail, waits once for held-back
// output, or processes one batch (the queue's first, else the gate's next),
// mail or a due timer.
func (q *inputQueue[T]) step() error {
	t := q.t
	if t.Mail.Priority.Load() {
		return t.handleMail()
	}
	if blocked, err := t.waitOutput(); blocked || err != nil {
		// Output held back: no input until it is sent (backpressure),
		// but mail is handled meanwhile.
		return err
	}
	if len(t.captures) > 0 {
		q.receiveAvailable()
	}
	if len(q.queue) > 0 {
		b := q.queue[0]
		q.queue[0] = network.Batch[T]{}
		q.queue = q.queue[1:]
		err := q.process(b)
		t.maybeFlushOnTimeout()
		return err
	}
	// Nothing queued: the select below is likely to wait, and that wait
	// is the task's idle time.
	idle := startWait(&t.M.Idle, len(q.g.In) == 0)
	select {
	case b := <-q.g.In:
		idle.stop()
		q.receive(b)
		err := q.process(b)
		t.maybeFlushOnTimeout()
		return err
	case <-t.Mail.Notify:
		idle.stop()
		return t.handleMail()
	case <-t.timerC:
		idle.stop()
		t.timerC, t.timerAt = nil, 0
		return t.fireTimers()
	case <-t.done:
		idle.stop()
		return network.ErrTaskCanceled
	}
}

// armAlignTimer puts a priority mail at the aligned-checkpoint timeout of
// the alignment in progress: through the mailbox, so that it cuts the
// input batch in progress short like a barrier, however slow its records
// are.
func (q *inputQueue[T]) armAlignTimer() {
	t := q.t
	id, until := t.alignmentDeadline()
	if id == q.alignFor {
		return
	}
	q.alignFor = id
	q.stopAlignTimer()
	if id != 0 {
		d := time.Duration(until-t.svc.Clock().UnixMilli()) * time.Millisecond
		q.alignTimer = time.AfterFunc(max(d, 0), func() { t.Mail.Put(network.Mail{Kind: network.MailAlignmentTimeout, ID: id}) })
	}
}

func (q *inputQueue[T]) stopAlignTimer() {
	if q.alignTimer != nil {
		q.alignTimer.Stop()
		q.alignTimer = nil
	}
}

// process hands a batch's records to the task's head operator, then its
// event to the task. A batch of a channel blocked for alignment is held
// back; a batch cut short by a barrier waiting in the mailbox goes back to
// the front of the queue with the rest.
func (q *inputQueue[T]) process(b network.Batch[T]) error {
	if b.Ch >= 0 && q.t.al.blocked(b.Ch) {
		q.stash = append(q.stash, b) // held back for alignment
		return nil
	}
	priority := &q.t.Mail.Priority
	i := q.collect(b, priority)
	q.t.M.RecordsIn.Add(int64(i - b.Off))
	q.t.publishCounts()
	if i < len(b.Recs) || b.Ev != nil && priority.Load() {
		// Cut short, or an event that must wait for the barrier (the end
		// of an input could complete an alignment the barrier turned
		// unaligned).
		b.Off = i
		q.queue = append(q.queue, network.Batch[T]{})
		copy(q.queue[1:], q.queue)
		q.queue[0] = b
		return nil
	}
	ev, ch := b.Ev, b.Ch
	q.g.Recycle(b)
	if ev != nil {
		return q.t.onEvent(ch, ev)
	}
	return nil
}

// collect hands b's records from b.off on to the head operator until a
// barrier waits in the mailbox (priority), and returns where it stopped.
// A keyed operator fed by a keyed exchange takes each record with its key
// group and hash, and is told of the records prefetchAhead ahead.
func (q *inputQueue[T]) collect(b network.Batch[T], priority *atomic.Bool) int {
	i := b.Off
	if b.Stamped {
		return q.collectStamped(b, priority)
	}
	q.t.ts = api.NoTimestamp
	if keyed := q.keyed; b.Keyed && keyed != nil {
		for j := i; j < min(i+prefetchAhead, len(b.KGs)); j++ {
			keyed.PrefetchKey(b.Recs[j], int(uint16(b.KGs[j])), uint32(b.KGs[j]>>32))
		}
		for ; i < len(b.Recs) && !priority.Load(); i++ {
			if j := i + prefetchAhead; j < len(b.KGs) {
				keyed.PrefetchKey(b.Recs[j], int(uint16(b.KGs[j])), uint32(b.KGs[j]>>32))
			}
			kh := b.KGs[i]
			keyed.CollectInKeyGroup(b.Recs[i], int(uint16(kh)), uint32(kh>>32))
		}
		return i
	}
	head := q.head
	for ; i < len(b.Recs) && !priority.Load(); i++ {
		head.Collect(b.Recs[i])
	}
	return i
}

// collectStamped is collect for records that carry their timestamps: each
// is the task's current timestamp while the record is processed.
func (q *inputQueue[T]) collectStamped(b network.Batch[T], priority *atomic.Bool) int {
	i, t := b.Off, q.t
	stride := network.MetaStride(b.Keyed, true)
	if keyed := q.keyed; b.Keyed && keyed != nil {
		// As collect: the lookups of the records prefetchAhead ahead are
		// started before each record is processed.
		for j := i; j < min(i+prefetchAhead, len(b.Recs)); j++ {
			kh := b.KGs[j*stride]
			keyed.PrefetchKey(b.Recs[j], int(uint16(kh)), uint32(kh>>32))
		}
		for ; i < len(b.Recs) && !priority.Load(); i++ {
			if j := i + prefetchAhead; j < len(b.Recs) {
				kh := b.KGs[j*stride]
				keyed.PrefetchKey(b.Recs[j], int(uint16(kh)), uint32(kh>>32))
			}
			kh := b.KGs[i*stride]
			t.ts = int64(b.KGs[i*stride+1])
			keyed.CollectInKeyGroup(b.Recs[i], int(uint16(kh)), uint32(kh>>32))
		}
		return i
	}
	head := q.head
	for ; i < len(b.Recs) && !priority.Load(); i++ {
		t.ts = int64(b.KGs[i*stride+stride-1])
		head.Collect(b.Recs[i])
	}
	return i
}

// waitOutput sends what the task's writers hold back; if some is still
// held back, it waits once — for a credit, mail (handled) or cancellation —
// and reports blocked, so that the caller takes no input meanwhile.
func (t *Task) waitOutput() (blocked bool, err error) {
	pending, onQueue := false, false
	for _, w := range t.Writers {
		if w.DrainPending() {
			pending = true
			onQueue = onQueue || w.PendingOnQueue()
		}
	}
	var barrierDue int64
	if len(t.captures) > 0 {
		barrierDue = t.checkOutputBarriers(t.svc.Clock())
	}
	if !pending {
		return false, nil
	}
	var poll <-chan time.Time
	if onQueue || barrierDue != 0 {
		// Waiting for room in a receiver's queue, which nothing signals
		// (a gate of more than maxGateQueue/4 channels), or for a held-back
		// barrier's alignment timeout.
		d := time.Millisecond
		if !onQueue {
			d = time.Duration(barrierDue-t.svc.Clock().UnixMilli()) * time.Millisecond
		}
		tm := time.NewTimer(max(d, 0))
		defer tm.Stop()
		poll = tm.C
	}
	bp := startWait(&t.M.BackPressured, true)
	select {
	case <-t.wake:
		bp.stop()
	case <-poll:
		bp.stop()
	case <-t.Mail.Notify:
		bp.stop() // what the mail does is work
		err = t.handleMail()
	case <-t.done:
		bp.stop()
		err = network.ErrTaskCanceled
	}
	return true, err
}

// readInFlight decodes the in-flight records restored for this subtask
// into batches, input edge by input edge in the order restore gives them.
func readInFlight[T any](t *Task, ser state.Serializer[T]) ([]network.Batch[T], error) {
	br := &savepoint.BlockReader{FS: t.svc.FS, Dir: t.InFlightDir}
	defer br.Close()
	var out []network.Batch[T]
	for _, p := range t.InFlight {
		data, err := br.Read(p.Stream, p.Stream.Offset, p.Stream.Length)
		if err != nil {
			return nil, fmt.Errorf("restore in-flight records of %s: %w", t.Name, err)
		}
		ch := int32(-1 - p.Edge)
		var b network.Batch[T]
		for len(data) > 0 {
			var kh uint64
			var ts int64
			n, m := 0, 0
			if p.Keyed {
				kh, n = binary.Uvarint(data)
			}
			if p.Stamped && n >= 0 {
				ts, m = binary.Varint(data[max(n, 0):])
			}
			if n < 0 || m < 0 || p.Keyed && n == 0 || p.Stamped && m == 0 {
				return nil, fmt.Errorf("restore in-flight records of %s: %w", t.Name, savepoint.ErrCorrupt)
			}
			data = data[n+m:]
			var r T
			r, data, err = ser.Decode(data)
			if err != nil {
				return nil, fmt.Errorf("restore in-flight records of %s: %w: %w", t.Name, savepoint.ErrCorrupt, err)
			}
			if p.Keyed && !p.Owns(int(uint16(kh))) {
				continue // re-routed to another subtask by the rescale
			}
			if b.Recs == nil {
				b = network.Batch[T]{Ch: ch, Recs: make([]T, 0, network.DefaultBatchSize), Keyed: p.Keyed, Stamped: p.Stamped}
				if p.Keyed || p.Stamped {
					b.KGs = make([]uint64, 0, network.DefaultBatchSize*network.MetaStride(p.Keyed, p.Stamped))
				}
			}
			b.Recs = append(b.Recs, r)
			if p.Keyed {
				b.KGs = append(b.KGs, kh)
			}
			if p.Stamped {
				b.KGs = append(b.KGs, uint64(ts))
			}
			if len(b.Recs) == network.DefaultBatchSize {
				out = append(out, b)
				b = network.Batch[T]{}
			}
		}
		if len(b.Recs) > 0 {
			out = append(out, b)
		}
	}
	return out, nil
}

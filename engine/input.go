package engine

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/savepoint"
)

// inputQueue is a task's input side: the batches it has taken from its
// gate but not processed (queue: restored in-flight records first, a batch
// cut short by a barrier back at the front), the batches held back for
// alignment (stash), and the recording of unaligned checkpoints' input
// channel state.
type inputQueue[T any] struct {
	t     *task
	g     *inputGate[T]
	queue []netBatch[T]
	stash []netBatch[T]
	// received is, per channel, the number of the last batch taken from
	// the gate.
	received []uint32
	ser      state.Serializer[T]
}

// receive takes b from the gate: it is recorded by the unaligned
// checkpoints whose channel state is open.
func (q *inputQueue[T]) receive(b netBatch[T]) {
	q.received[b.ch] = b.seq
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
		case b := <-q.g.in:
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
	var released, kept []netBatch[T]
	for _, b := range q.stash {
		if q.t.al.blocked(b.ch) {
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

// runInput drives a task fed by an input gate.
func runInput[T any](t *task, g *inputGate[T], head Collector[T]) error {
	al := t.al
	keyed, _ := head.(keyGroupCollector[T])
	q := &inputQueue[T]{t: t, g: g, received: make([]uint32, len(g.channels)), ser: state.SerializerFor[T]()}
	t.input = q
	if len(t.inFlight) > 0 {
		restored, err := readInFlight[T](t, q.ser)
		if err != nil {
			return err
		}
		q.queue = restored
	}
	priority := &t.mail.priority
	process := func(b netBatch[T]) error {
		if b.ch >= 0 && al.blocked(b.ch) {
			q.stash = append(q.stash, b) // held back for alignment
			return nil
		}
		i := b.off
		// A barrier waiting in the mailbox stops the batch at the next
		// record: the rest goes back to the front of the queue.
		if b.kgs != nil && keyed != nil {
			for j := i; j < min(i+prefetchAhead, len(b.kgs)); j++ {
				keyed.PrefetchKey(b.recs[j], int(uint16(b.kgs[j])), uint32(b.kgs[j]>>32))
			}
			for ; i < len(b.recs) && !priority.Load(); i++ {
				if j := i + prefetchAhead; j < len(b.kgs) {
					keyed.PrefetchKey(b.recs[j], int(uint16(b.kgs[j])), uint32(b.kgs[j]>>32))
				}
				kh := b.kgs[i]
				keyed.CollectInKeyGroup(b.recs[i], int(uint16(kh)), uint32(kh>>32))
			}
		} else {
			for ; i < len(b.recs) && !priority.Load(); i++ {
				head.Collect(b.recs[i])
			}
		}
		if i < len(b.recs) || b.ev != nil && priority.Load() {
			// Cut short, or an event that must wait for the barrier
			// (the end of an input could complete an alignment the
			// barrier turned unaligned).
			b.off = i
			q.queue = append(q.queue, netBatch[T]{})
			copy(q.queue[1:], q.queue)
			q.queue[0] = b
			return nil
		}
		ev, ch := b.ev, b.ch
		g.recycle(b)
		if ev != nil {
			return t.onEvent(ch, ev)
		}
		return nil
	}
	epoch := al.epoch
	// alignTimer puts a priority mail at the aligned-checkpoint timeout of
	// the alignment in progress (alignFor's): through the mailbox, so that
	// it cuts the input batch in progress short like a barrier, however
	// slow its records are.
	var alignTimer *time.Timer
	var alignFor int64
	defer func() {
		if alignTimer != nil {
			alignTimer.Stop()
		}
	}()
	for t.inputOpen() {
		if id, until := t.alignmentDeadline(); id != alignFor {
			alignFor = id
			if alignTimer != nil {
				alignTimer.Stop()
			}
			if id != 0 {
				d := time.Duration(until-t.svc.clock().UnixMilli()) * time.Millisecond
				alignTimer = time.AfterFunc(max(d, 0), func() { t.mail.put(mail{kind: mailAlignmentTimeout, id: id}) })
			}
		}
		var err error
		if priority.Load() {
			err = t.handleMail()
		} else if blocked, werr := t.waitOutput(); blocked || werr != nil {
			// Output held back: no input until it is sent (backpressure),
			// but mail is handled meanwhile.
			err = werr
		} else {
			if len(t.captures) > 0 {
				q.receiveAvailable()
			}
			if len(q.queue) > 0 {
				b := q.queue[0]
				q.queue[0] = netBatch[T]{}
				q.queue = q.queue[1:]
				err = process(b)
				t.maybeFlushOnTimeout()
			} else {
				select {
				case b := <-g.in:
					q.receive(b)
					err = process(b)
					t.maybeFlushOnTimeout()
				case <-t.mail.notify:
					err = t.handleMail()
				case <-t.timerC:
					t.timerC, t.timerAt = nil, 0
					err = t.fireTimers()
				case <-t.done:
					return errTaskCanceled
				}
			}
		}
		if err != nil {
			return err
		}
		if al.epoch != epoch {
			q.unstash()
			epoch = al.epoch
		}
		if len(g.in) == 0 && len(q.queue) == 0 {
			t.onIdle()
		}
		t.armTimer()
	}
	return t.afterInput()
}

// waitOutput sends what the task's writers hold back; if some is still
// held back, it waits once — for a credit, mail (handled) or cancellation —
// and reports blocked, so that the caller takes no input meanwhile.
func (t *task) waitOutput() (blocked bool, err error) {
	pending, onQueue := false, false
	for _, w := range t.writers {
		if w.drainPending() {
			pending = true
			onQueue = onQueue || w.pendingOnQueue()
		}
	}
	var barrierDue int64
	if len(t.captures) > 0 {
		barrierDue = t.checkOutputBarriers(t.svc.clock())
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
			d = time.Duration(barrierDue-t.svc.clock().UnixMilli()) * time.Millisecond
		}
		tm := time.NewTimer(max(d, 0))
		defer tm.Stop()
		poll = tm.C
	}
	select {
	case <-t.wake:
	case <-poll:
	case <-t.mail.notify:
		err = t.handleMail()
	case <-t.done:
		err = errTaskCanceled
	}
	return true, err
}

// readInFlight decodes the in-flight records restored for this subtask
// into batches, input edge by input edge in the order restore gives them.
func readInFlight[T any](t *task, ser state.Serializer[T]) ([]netBatch[T], error) {
	br := &savepoint.BlockReader{FS: t.svc.fs, Dir: t.inFlightDir}
	defer br.Close()
	var out []netBatch[T]
	for _, p := range t.inFlight {
		data, err := br.Read(p.Stream, p.Stream.Offset, p.Stream.Length)
		if err != nil {
			return nil, fmt.Errorf("restore in-flight records of %s: %w", t.name, err)
		}
		ch := int32(-1 - p.Edge)
		var b netBatch[T]
		for len(data) > 0 {
			var kh uint64
			if p.Keyed {
				var n int
				kh, n = binary.Uvarint(data)
				if n <= 0 {
					return nil, fmt.Errorf("restore in-flight records of %s: %w", t.name, savepoint.ErrCorrupt)
				}
				data = data[n:]
			}
			var r T
			r, data, err = ser.Decode(data)
			if err != nil {
				return nil, fmt.Errorf("restore in-flight records of %s: %w: %w", t.name, savepoint.ErrCorrupt, err)
			}
			if p.Keyed && !p.Owns(int(uint16(kh))) {
				continue // re-routed to another subtask by the rescale
			}
			if b.recs == nil {
				b = netBatch[T]{ch: ch, recs: make([]T, 0, defaultBatchSize)}
				if p.Keyed {
					b.kgs = make([]uint64, 0, defaultBatchSize)
				}
			}
			b.recs = append(b.recs, r)
			if p.Keyed {
				b.kgs = append(b.kgs, kh)
			}
			if len(b.recs) == defaultBatchSize {
				out = append(out, b)
				b = netBatch[T]{}
			}
		}
		if len(b.recs) > 0 {
			out = append(out, b)
		}
	}
	return out, nil
}

package network

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/state"
)

// Records travel between tasks in batches. Each channel (one sending
// subtask to one receiving subtask) has a fixed number of buffer credits:
// the sender fills a buffer and sends it; the receiver hands the credit (and
// the buffer) back once processed. A sender with no credit blocks — that is
// backpressure, and it is also what bounds alignment: a receiver holding
// back a channel's batches holds at most that channel's buffers.
//
// A keyed exchange has p×p channels, so a channel must cost little until it
// carries records: its buffers are allocated on first use, and a barrier or
// end-of-input sent on a channel that carries no records takes a credit but
// no buffer. (Allocating a batch for every channel on the first barrier made
// p=1000 take 4.4 GB for a 35-line input.)
const (
	DefaultBatchSize         = 512
	DefaultBuffersPerChannel = 4
	// maxGateQueue bounds a receiving task's queue of batches; the credits
	// bound what each channel may have in flight, this bounds their sum, so
	// that the queue does not grow with the number of senders.
	maxGateQueue = 256
)

// EventKind says what an in-band event is.
type EventKind uint8

const (
	EventBarrier EventKind = iota + 1
	EventEndOfPartition
	// EventWatermark carries Event.Watermark: no record with a timestamp
	// at or below it follows on this channel.
	EventWatermark
	// EventWatermarkStatus says the channel turned idle (Event.Idle) or
	// active again (Flink's WatermarkStatus).
	EventWatermarkStatus
)

// Barrier is a checkpoint's barrier: it flows with the records, and a task
// snapshots its state when it has the barrier from every input channel
// (aligned) or at once, with the records it overtook (unaligned).
type Barrier struct {
	ID        int64
	Timestamp int64 // Unix ms of the trigger
	Type      checkpoint.SnapshotType
	Location  *checkpoint.Location // where tasks write their state
	// Unaligned: the checkpoint is unaligned: from the start if
	// AlignedUntil is 0, else it starts aligned and a task turns it
	// unaligned where its barrier is not through by AlignedUntil (Unix ms;
	// execution.checkpointing.aligned-checkpoint-timeout).
	Unaligned    bool
	AlignedUntil int64
}

// UnalignedFromStart reports whether tasks take b unaligned at once.
func (b Barrier) UnalignedFromStart() bool { return b.Unaligned && b.AlignedUntil == 0 }

// Timeoutable reports whether b starts aligned and may turn unaligned.
func (b Barrier) Timeoutable() bool { return b.Unaligned && b.AlignedUntil != 0 }

// EOPMode says how an input ended.
type EOPMode uint8

const (
	// EOPEnd: the input is exhausted; operators finish.
	EOPEnd EOPMode = iota
	// EOPDrain: stop --drain ended the input; operators finish, and tasks
	// wait for the final savepoint even without periodic checkpointing.
	EOPDrain
	// EOPSuspend: stop without drain; the job stops after its savepoint
	// without finishing operators (no end-of-input timers fire).
	EOPSuspend
)

// Event travels in-band, after the records of its batch.
type Event struct {
	Kind      EventKind
	Barrier   Barrier
	Watermark int64
	Idle      bool
	EOP       EOPMode
}

// Batch is what travels on a channel: records, an event after them, or both.
type Batch[T any] struct {
	Recs []T
	// Off is how many of recs were processed: a batch whose processing
	// stopped for a priority barrier goes back to the front of the task's
	// queue with the rest.
	Off int
	// Epoch is the newest unaligned checkpoint whose barrier the sender had
	// sent when it sent this batch, and seq the batch's number on its
	// channel (from 1): an unaligned barrier overtakes the batches queued
	// ahead of it, and these say which batches it overtook.
	Epoch int64
	Seq   uint32
	// KGs holds each record's metadata, nil if it has none: in a keyed
	// exchange (Keyed) its key group and key hash, packed by PackKeyHash
	// — the sender hashed the key to route the record, and the receiving
	// keyed operator takes the key group and the hash its state tables use
	// from here instead of hashing the key a second time — and, where
	// records carry their event time (Stamped), the timestamp after it.
	KGs []uint64
	// Keyed and Stamped say what KGs holds per record (MetaStride).
	Keyed, Stamped bool
	Ev             *Event
	// Ch is the channel's index in the receiving gate; negative for
	// in-flight records restored from an unaligned checkpoint (they came on
	// channels of the job's previous run and hold no credit).
	Ch int32
}

// MetaStride is the number of KGs entries per record.
func MetaStride(keyed, stamped bool) int { return b2i(keyed) + b2i(stamped) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// PackKeyHash packs a record's key group (low 16 bits; at most
// state.UpperBoundMaxParallelism) and the upper half of its key's hash,
// which string-keyed state tables index by (state.KeyedBackend.
// SetCurrentKeyHashed).
func PackKeyHash(kg int, hash uint64) uint64 { return uint64(kg) | hash&^(1<<32-1) }

// Channel is one sender's path into a receiving gate. It is small (no Go
// channel of its own) because there are p×p of them in a keyed exchange.
type Channel[T any] struct {
	gate *InputGate[T]
	// wake is the sending writer's, shared by all its channels: signalled
	// whenever one of them gets a credit back.
	wake chan struct{}
	mu   sync.Mutex
	// Credits is how many batches the sender may still send: buffers in
	// free, plus those not allocated yet or held by nobody.
	Credits int32
	index   int32
	// waiting is set when the sender found no credit; recycle wakes it
	// only once wakeAt credits are back (see recycle).
	waiting bool
	free    [][]T      // recycled buffers, at most credits of them
	freeKGs [][]uint64 // their key-group buffers, in a keyed exchange
}

// take takes a credit, with a recycled buffer (and its key-group buffer)
// if there is one; ok is false when the receiver holds all of them.
func (c *Channel[T]) take() (b []T, kgs []uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Credits == 0 {
		c.waiting = true
		return nil, nil, false
	}
	c.Credits--
	b, kgs = c.popFree()
	return b, kgs, true
}

// takeBuffer takes a recycled buffer without a credit, for an overdrawn
// batch; nil if there is none.
func (c *Channel[T]) takeBuffer() (b []T, kgs []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.popFree()
}

func (c *Channel[T]) popFree() (b []T, kgs []uint64) {
	if n := len(c.free); n > 0 {
		b = c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
	}
	if n := len(c.freeKGs); n > 0 {
		kgs = c.freeKGs[n-1]
		c.freeKGs[n-1] = nil
		c.freeKGs = c.freeKGs[:n-1]
	}
	return b, kgs
}

// putFree keeps a buffer for reuse, up to the channel's credits of them:
// overdrawn batches bring buffers of their own, and a pool that kept them
// all would grow with every overdraft (measured: +45% peak RSS).
func (c *Channel[T]) putFree(b []T, kgs []uint64, max int) {
	if cap(b) > 0 && len(c.free) < max {
		c.free = append(c.free, b[:0])
	}
	if cap(kgs) > 0 && len(c.freeKGs) < max {
		c.freeKGs = append(c.freeKGs, kgs[:0])
	}
}

// BuffersPerChannel gives a gate's channels an equal share of gateBuffers,
// but no fewer than defaultBuffersPerChannel each (as Flink's floating
// buffers serve a gate with few channels): one channel gets 16, two get 8,
// four or more get 4. A sender blocked for credit is woken once half of
// its channel's buffers are back, so more buffers on few channels mean
// fewer wake-ups: at p=1 word count's one channel gets 16 and its sender
// is woken every 4096 records, not every 1024.
func BuffersPerChannel(numChannels int) int {
	return max(DefaultBuffersPerChannel, gateBuffers/max(1, numChannels))
}

// gateBuffers is the number of buffers a gate with few channels shares
// among them.
const gateBuffers = 16

// InputGate is a receiving task's input: all channels into it share one Go
// channel of at most maxGateQueue batches.
type InputGate[T any] struct {
	In chan Batch[T]
	// mail is the receiving task's mailbox: unaligned barriers go there,
	// ahead of the batches queued in in.
	mail     *Mailbox
	Channels []*Channel[T]
	perChan  int
	// wakeAt is how many credits a channel's blocked sender waits for.
	wakeAt int32
}

// NewInputGate returns a gate for numChannels channels of perChannel
// buffers each, whose unaligned barriers go to mail.
func NewInputGate[T any](numChannels, perChannel int, mail *Mailbox) *InputGate[T] {
	return &InputGate[T]{
		mail:    mail,
		In:      make(chan Batch[T], min(numChannels*perChannel, maxGateQueue)),
		perChan: perChannel,
		wakeAt:  int32(max(1, perChannel/2)),
	}
}

// AddChannel adds the channel of the next sender.
func (g *InputGate[T]) AddChannel() *Channel[T] {
	c := &Channel[T]{gate: g, index: int32(len(g.Channels)), Credits: int32(g.perChan)}
	g.Channels = append(g.Channels, c)
	return c
}

// Recycle gives a processed batch's credit, and its buffer if it has one,
// back to its sender.
//
// A sender blocked for want of credit is woken only once half of its
// channel's credits are back, not at the first. A sender faster than its
// receiver is blocked most of the time, and waking it for every batch cost
// a futex call (a thread woken to run it) per batch: 7% of word count's CPU
// at p=1. Waiting for half refills several buffers per wake-up and cannot
// deadlock: a blocked sender has all its credits at the receiver, which
// hands every one back once it has processed (or, after alignment,
// released) that batch.
func (g *InputGate[T]) Recycle(b Batch[T]) {
	if b.Ch < 0 {
		return // restored in-flight records: no credit to return
	}
	clear(b.Recs) // drop references so that records can be collected
	c := g.Channels[b.Ch]
	c.mu.Lock()
	c.Credits++
	c.putFree(b.Recs, b.KGs, g.perChan)
	wake := c.waiting && c.Credits >= g.wakeAt
	if wake {
		c.waiting = false
	}
	c.mu.Unlock()
	if wake && c.wake != nil {
		select {
		case c.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// OutputWriter is the type-independent view of a RecordWriter.
type OutputWriter interface {
	Flush()
	// BroadcastEvent queues ev on every channel after the records buffered
	// so far.
	BroadcastEvent(ev *Event)
	// UnalignedBarrier encodes what the writer holds unsent — the output
	// channel state of checkpoint b — and sends b's barrier ahead of it.
	UnalignedBarrier(b Barrier) []ChannelData
	// DrainPending sends what credits allow of the batches held back and
	// reports whether some are still held back.
	DrainPending() bool
	// PendingOnQueue: a batch held back has its credit and waits only for
	// room in the receiver's queue, which frees up without a wake-up.
	PendingOnQueue() bool
	// BarrierPending and ConvertBarrier turn a held-back in-band barrier
	// unaligned (aligned-checkpoint timeout).
	BarrierPending(id int64) bool
	ConvertBarrier(b Barrier) []ChannelData
	// BarrierBeforeEnd places the barrier of b, taken after the input
	// ended, in band before the end of partition (see the method).
	BarrierBeforeEnd(b Barrier)
}

// PendingBatch is a batch the writer could not send yet: overdrawn (made
// without a credit) or behind one that was.
type PendingBatch[T any] struct {
	recs   []T
	kgs    []uint64
	ev     *Event
	credit bool // a credit of its channel is taken for it
}

// maxOverdraft bounds the batches a writer holds back before it blocks in
// the middle of a record, as Flink's overdraft buffers do (there, 5 per
// gate): a record that explodes into many (a flatMap, a window firing)
// must not grow them without bound (a task waits for its held-back output
// before it takes its next input, so only one input batch or poll adds to
// them). A barrier waiting for the task lifts
// the bound for the record in progress.
const MaxOverdraft = 8

// RecordWriter partitions a task's output over the channels to the next
// vertex's subtasks and batches it.
//
// A writer never waits for a credit in the middle of a record, unless it
// holds maxOverdraft batches back: a full batch without a credit is held
// back (overdraft), and the task sends it, waiting if it must, between
// input batches, where it can also take a checkpoint barrier. This is what
// lets an unaligned barrier reach a backpressured task at once.
type RecordWriter[T any] struct {
	targets []*Channel[T]
	bufs    [][]T
	KGs     [][]uint64 // per target, the key groups and hashes of bufs' records (keyed)
	// held: bufs[i] was started with a credit of channel i.
	held []bool
	// pending holds back, per channel, full batches (and events) in order.
	pending    [][]PendingBatch[T]
	NumPending int
	part       ShipStrategy
	hash       func(T) uint64
	maxPar     int // of the receiving operator, for key groups
	// route maps a key group to the subtask owning it, computed once: a
	// lookup per record instead of a multiplication and a division.
	route []uint16
	Next  int    // round-robin position
	rnd   uint64 // shuffle's random state, never 0
	batch int
	done  <-chan struct{}
	wake  chan struct{} // a credit came back on one of targets (shared by the task's writers)
	mail  *Mailbox      // the sending task's
	// epoch is the newest unaligned checkpoint whose barrier this writer
	// sent; sent counts the batches sent per channel.
	epoch int64
	sent  []uint32
	ser   state.Serializer[T] // for output channel state
	// ts is the sending task's current record's timestamp, which each
	// record carries along (nil: records carry none).
	ts *int64
	// out and bp are the task's numRecordsOut and back-pressured time,
	// added to once per batch and per wait.
	out *atomic.Int64
	bp  *WaitTimer
}

// Collect routes v to a channel by the writer's ship strategy.
func (w *RecordWriter[T]) Collect(v T) {
	if w.part == ShipHash {
		w.collectKeyed(v)
		return
	}
	i := 0
	switch w.part {
	case ShipRebalance:
		i = w.Next
		if w.Next++; w.Next == len(w.targets) {
			w.Next = 0
		}
	case ShipShuffle:
		// xorshift64: a few instructions per record and no lock, where
		// math/rand's global source would take one.
		x := w.rnd
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		w.rnd = x
		i = int((x >> 32) * uint64(len(w.targets)) >> 32)
	case ShipBroadcast:
		for i := range w.targets {
			w.collectTo(i, v)
		}
		return
	}
	w.collectTo(i, v)
}

// collectTo appends a record to channel i's batch and sends the batch when
// it is full.
func (w *RecordWriter[T]) collectTo(i int, v T) {
	if w.ts != nil {
		w.collectStamped(i, v)
		return
	}
	b := w.bufs[i]
	if b == nil {
		b, _ = w.acquire(i)
	}
	b = append(b, v)
	if len(b) >= w.batch {
		w.emit(i, b, nil, nil)
		b = nil
	}
	w.bufs[i] = b
}

// collectStamped is collectTo for records that carry their timestamp.
func (w *RecordWriter[T]) collectStamped(i int, v T) {
	b, kb := w.bufs[i], w.KGs[i]
	if b == nil {
		b, kb = w.acquire(i)
	}
	b, kb = append(b, v), append(kb, uint64(*w.ts))
	if len(b) >= w.batch {
		w.emit(i, b, kb, nil)
		b, kb = nil, nil
	}
	w.bufs[i], w.KGs[i] = b, kb
}

// collectKeyed routes a record by its key group and sends the key group
// along with it.
func (w *RecordWriter[T]) collectKeyed(v T) {
	h := w.hash(v)
	kg := state.KeyGroupForHash(h, w.maxPar)
	i := int(w.route[kg])
	b, kb := w.bufs[i], w.KGs[i]
	if b == nil {
		b, kb = w.acquire(i)
	}
	b, kb = append(b, v), append(kb, PackKeyHash(kg, h))
	if w.ts != nil {
		kb = append(kb, uint64(*w.ts))
	}
	if len(b) >= w.batch {
		w.emit(i, b, kb, nil)
		b, kb = nil, nil
	}
	w.bufs[i], w.KGs[i] = b, kb
}

// acquire starts a batch on channel i: with a credit and a recycled buffer
// if the channel has one to give, else overdrawn, with a new buffer that
// emit holds back until a credit comes.
func (w *RecordWriter[T]) acquire(i int) ([]T, []uint64) {
	var b []T
	var kb []uint64
	w.held[i] = false
	if len(w.pending[i]) == 0 {
		var ok bool
		b, kb, ok = w.targets[i].take()
		w.held[i] = ok
	}
	if !w.held[i] {
		b, kb = w.targets[i].takeBuffer()
	}
	if b == nil {
		b = make([]T, 0, w.batch)
	}
	if kb == nil && w.KGs != nil {
		kb = make([]uint64, 0, w.batch*MetaStride(w.part == ShipHash, w.ts != nil))
	}
	return b, kb
}

// emit sends a batch (records, an event, or both) on channel i, or holds it
// back behind the ones already held back or for want of a credit.
func (w *RecordWriter[T]) emit(i int, b []T, kb []uint64, ev *Event) {
	if len(b) > 0 && (i == 0 || w.part != ShipBroadcast) {
		w.out.Add(int64(len(b)))
	}
	credit := w.held[i]
	w.held[i] = false
	if len(w.pending[i]) == 0 {
		if !credit {
			credit = w.takeCredit(i)
		}
		if credit {
			if w.trySend(i, b, kb, ev) {
				return
			}
			if w.NumPending < MaxOverdraft && !w.mail.Priority.Load() {
				// The receiver's queue is full (a gate of many channels):
				// wait for room, as for a credit, unless a barrier waits.
				if w.sendBlocking(i, b, kb, ev) {
					return
				}
			}
		}
	}
	w.pending[i] = append(w.pending[i], PendingBatch[T]{recs: b, kgs: kb, ev: ev, credit: credit})
	w.NumPending++
	for w.NumPending > MaxOverdraft && !w.mail.Priority.Load() {
		// Wait only while still past the overdraft after draining: a
		// drain that sent the one batch too many must not wait for a
		// wake-up, which comes only for a channel whose take failed.
		if !w.DrainPending() || w.NumPending <= MaxOverdraft {
			return
		}
		if i := w.queueBlocked(); i >= 0 {
			// Its head has its credit and waits only for room in the
			// receiver's queue, which no recycle signals.
			p := w.pending[i][0]
			if w.sendBlocking(i, p.recs, p.kgs, p.ev) {
				w.popPending(i)
			}
			continue
		}
		start := w.bp.Start()
		select {
		case <-w.wake:
		case <-w.mail.priorityWake:
		case <-w.done:
			w.bp.Stop(start)
			panic(ErrTaskCanceled)
		}
		w.bp.Stop(start)
	}
}

// takeCredit takes a credit of channel i for a batch that has its buffer
// already; a recycled buffer that comes with the credit stays with the
// channel for a later batch.
func (w *RecordWriter[T]) takeCredit(i int) bool {
	c := w.targets[i]
	b, kb, ok := c.take()
	if ok && (b != nil || kb != nil) {
		c.mu.Lock()
		c.putFree(b, kb, c.gate.perChan)
		c.mu.Unlock()
	}
	return ok
}

func (w *RecordWriter[T]) batchFor(i int, b []T, kb []uint64, ev *Event) Batch[T] {
	return Batch[T]{Recs: b, KGs: kb, Keyed: w.part == ShipHash, Stamped: w.ts != nil, Ev: ev, Ch: w.targets[i].index, Epoch: w.epoch, Seq: w.sent[i] + 1}
}

func (w *RecordWriter[T]) trySend(i int, b []T, kb []uint64, ev *Event) bool {
	select {
	case w.targets[i].gate.In <- w.batchFor(i, b, kb, ev):
		w.sent[i]++
		w.announce(i, ev)
		return true
	default:
		return false
	}
}

// announce tells the receiver of channel i that a barrier that may turn
// unaligned is in its queue.
func (w *RecordWriter[T]) announce(i int, ev *Event) {
	if ev != nil && ev.Kind == EventBarrier && ev.Barrier.Timeoutable() {
		c := w.targets[i]
		c.gate.mail.Put(Mail{Kind: MailBarrierAnnounce, Barrier: ev.Barrier, Ch: c.index})
	}
}

// sendBlocking waits for room in the receiver's queue, but not past a
// cancellation (the receiver may be gone) or a barrier waiting for this
// task (false: not sent).
func (w *RecordWriter[T]) sendBlocking(i int, b []T, kb []uint64, ev *Event) bool {
	defer w.bp.Stop(w.bp.Start())
	select {
	case w.targets[i].gate.In <- w.batchFor(i, b, kb, ev):
		w.sent[i]++
		w.announce(i, ev)
		return true
	case <-w.mail.priorityWake:
		return false
	case <-w.done:
		panic(ErrTaskCanceled)
	}
}

// DrainPending is OutputWriter's.
func (w *RecordWriter[T]) DrainPending() bool {
	if w.NumPending == 0 {
		return false
	}
	for i := range w.pending {
		q := w.pending[i]
		for len(q) > 0 {
			p := &q[0]
			if !p.credit {
				if p.credit = w.takeCredit(i); !p.credit {
					break
				}
			}
			if !w.trySend(i, p.recs, p.kgs, p.ev) {
				break
			}
			w.popPending(i)
			q = w.pending[i]
		}
	}
	return w.NumPending > 0
}

// popPending removes channel i's first held-back batch, once sent.
func (w *RecordWriter[T]) popPending(i int) {
	q := w.pending[i]
	q[0] = PendingBatch[T]{}
	q = q[1:]
	if len(q) == 0 {
		q = w.pending[i][:0]
	}
	w.pending[i] = q
	w.NumPending--
}

// queueBlocked returns a channel whose first held-back batch has its
// credit (it waits only for room in the receiver's queue), or -1.
func (w *RecordWriter[T]) queueBlocked() int {
	for i, q := range w.pending {
		if len(q) > 0 && q[0].credit {
			return i
		}
	}
	return -1
}

// PendingOnQueue is OutputWriter's.
func (w *RecordWriter[T]) PendingOnQueue() bool { return w.queueBlocked() >= 0 }

// Flush sends the partly filled batches (the buffer timeout, an idle
// task); a batch without a credit is held back like a full one.
func (w *RecordWriter[T]) Flush() {
	for i, b := range w.bufs {
		if len(b) > 0 {
			w.emit(i, b, w.keyGroups(i), nil)
			w.bufs[i] = nil
			w.setKeyGroups(i, nil)
		}
	}
}

func (w *RecordWriter[T]) keyGroups(i int) []uint64 {
	if w.KGs == nil {
		return nil
	}
	return w.KGs[i]
}

func (w *RecordWriter[T]) setKeyGroups(i int, kb []uint64) {
	if w.KGs != nil {
		w.KGs[i] = kb
	}
}

// BroadcastEvent sends ev on every channel, after the records buffered so
// far: an aligned barrier or an end of input must follow exactly the
// records that precede it. An event needs a credit (the receiver counts
// batches) but no buffer.
func (w *RecordWriter[T]) BroadcastEvent(ev *Event) {
	for i, b := range w.bufs {
		w.emit(i, b, w.keyGroups(i), ev)
		w.bufs[i] = nil
		w.setKeyGroups(i, nil)
	}
}

// BarrierPending reports whether the in-band barrier of checkpoint id is
// still held back on some channel.
func (w *RecordWriter[T]) BarrierPending(id int64) bool {
	for _, q := range w.pending {
		for _, p := range q {
			if p.ev != nil && p.ev.Kind == EventBarrier && p.ev.Barrier.ID == id {
				return true
			}
		}
	}
	return false
}

// ConvertBarrier turns the in-band barrier of checkpoint b, held back past
// its aligned-checkpoint timeout, into an unaligned one: on each channel
// where it is still held back, the records ahead of it become output
// channel state and the barrier goes ahead of them; channels it has gone
// through keep it in band.
func (w *RecordWriter[T]) ConvertBarrier(b Barrier) []ChannelData {
	var out []ChannelData
	for i, c := range w.targets {
		q := w.pending[i]
		at := slices.IndexFunc(q, func(p PendingBatch[T]) bool {
			return p.ev != nil && p.ev.Kind == EventBarrier && p.ev.Barrier.ID == b.ID
		})
		if at < 0 {
			continue
		}
		cd := ChannelData{Channel: i, Keyed: w.part == ShipHash, Stamped: w.ts != nil}
		for _, p := range q[:at+1] {
			AppendRecords(&cd, w.ser, p.recs, p.kgs)
		}
		q[at].ev = nil
		if len(q[at].recs) == 0 && !q[at].credit {
			// Nothing left to send in it.
			w.pending[i] = slices.Delete(q, at, at+1)
			w.NumPending--
		}
		if cd.Records > 0 {
			out = append(out, cd)
		}
		c.gate.mail.Put(Mail{Kind: MailUnalignedBarrier, Barrier: b, Ch: c.index, Seq: w.sent[i]})
	}
	w.epoch = b.ID
	return out
}

// BarrierBeforeEnd places the barrier of checkpoint b — taken by a task
// whose input ended, so after all its output — in band just before the end
// of partition, on the channels that still hold that end back: there it
// aligns as any barrier, and turns unaligned at b's timeout if it is still
// held back (watchOutputBarrier). Where the end has gone out, the receiver
// counts it as aligned; it is told that b is coming, so that its alignment
// timeout runs even if no other barrier reaches it.
func (w *RecordWriter[T]) BarrierBeforeEnd(b Barrier) {
	ev := &Event{Kind: EventBarrier, Barrier: b}
	for i, c := range w.targets {
		q := w.pending[i]
		at := slices.IndexFunc(q, func(p PendingBatch[T]) bool { return p.ev != nil && p.ev.Kind == EventEndOfPartition })
		if at < 0 {
			c.gate.mail.Put(Mail{Kind: MailBarrierAnnounce, Barrier: b, Ch: c.index})
			continue
		}
		end := q[at].ev
		q[at].ev = ev
		w.pending[i] = slices.Insert(q, at+1, PendingBatch[T]{ev: end})
		w.NumPending++
	}
}

// UnalignedBarrier sends checkpoint b's barrier on every channel ahead of
// the records this writer holds (held-back batches, then the partly filled
// ones), and returns those records encoded: they were emitted before the
// snapshot, so they are the checkpoint's output channel state, and they are
// still sent afterwards, tagged as after the barrier.
func (w *RecordWriter[T]) UnalignedBarrier(b Barrier) []ChannelData {
	var out []ChannelData
	for i, c := range w.targets {
		cd := ChannelData{Channel: i, Keyed: w.part == ShipHash, Stamped: w.ts != nil}
		for _, p := range w.pending[i] {
			AppendRecords(&cd, w.ser, p.recs, p.kgs)
		}
		AppendRecords(&cd, w.ser, w.bufs[i], w.keyGroups(i))
		if cd.Records > 0 {
			out = append(out, cd)
		}
		c.gate.mail.Put(Mail{Kind: MailUnalignedBarrier, Barrier: b, Ch: c.index, Seq: w.sent[i]})
	}
	w.epoch = b.ID
	return out
}

// WriterOptions configure a RecordWriter.
type WriterOptions struct {
	Ship ShipStrategy
	// MaxParallelism is the receiving operator's, for key groups (ShipHash).
	MaxParallelism int
	// BatchSize is how many records a batch holds before it is sent.
	BatchSize int
	// Start is the sending subtask's index: where round-robin starts, and
	// the seed of shuffle's random state.
	Start int
	// Done is closed when the sending task is cancelled; Wake is signalled
	// when a credit comes back on one of the writer's channels (shared by
	// the task's writers); Mail is the sending task's mailbox.
	Done <-chan struct{}
	Wake chan struct{}
	Mail *Mailbox
	// Timestamp, if set, is where the sending task keeps the timestamp of
	// the record being processed: each record carries it to the receiver.
	Timestamp *int64
	// RecordsOut counts the records sent (a broadcast record once);
	// BackPressured times the waits for room downstream in the middle of
	// a record. Both may be nil.
	RecordsOut    *atomic.Int64
	BackPressured *WaitTimer
}

// NewRecordWriter returns a writer sending records of T over targets, one
// channel per receiving subtask. hash is the key selector's hash for
// ShipHash, nil otherwise.
func NewRecordWriter[T any](targets []*Channel[T], hash func(T) uint64, o WriterOptions) *RecordWriter[T] {
	n := len(targets)
	w := &RecordWriter[T]{part: o.Ship, maxPar: o.MaxParallelism, batch: o.BatchSize, done: o.Done, wake: o.Wake, mail: o.Mail,
		bufs: make([][]T, n), held: make([]bool, n), pending: make([][]PendingBatch[T], n), sent: make([]uint32, n),
		Next: o.Start % n, ser: state.SerializerFor[T](), rnd: uint64(o.Start+1) * 0x9E3779B97F4A7C15, hash: hash, targets: targets}
	for _, c := range targets {
		c.wake = w.wake // each channel has exactly one sender: this writer
	}
	w.ts = o.Timestamp
	w.out, w.bp = o.RecordsOut, o.BackPressured
	if w.out == nil {
		w.out = new(atomic.Int64)
	}
	if w.bp == nil {
		w.bp = new(WaitTimer)
	}
	if o.Ship == ShipHash || o.Timestamp != nil {
		w.KGs = make([][]uint64, n)
	}
	if o.Ship == ShipHash {
		w.route = make([]uint16, o.MaxParallelism)
		for kg := range w.route {
			w.route[kg] = uint16(state.SubtaskForKeyGroup(o.MaxParallelism, n, kg))
		}
	}
	return w
}

// WaitTimer adds up the time a task spends in one kind of wait (for
// input, for room downstream), with the wait in progress visible to
// readers on other goroutines: a task blocked for seconds is reported
// blocked now, not when the wait ends (as Flink's TimerGauge does).
type WaitTimer struct {
	// mu keeps the total and the wait in progress consistent for readers
	// (taken once per wait, never per record).
	mu           sync.Mutex
	total, since int64 // nanoseconds; since: the wait's start (Unix ns), 0 when not waiting
}

// Start marks the start of a wait. A wait started inside another (a
// writer waiting for credits while the task waited) is part of it.
func (w *WaitTimer) Start() int64 {
	now := time.Now().UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since != 0 {
		return 0 // nested: the outer wait counts it
	}
	w.since = now
	return now
}

// Stop ends the wait started at start (0: a nested one, counted by the
// outer).
func (w *WaitTimer) Stop(start int64) {
	if start == 0 {
		return
	}
	now := time.Now().UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.since = 0
	w.total += now - start
}

// Load returns the time spent waiting up to now, the wait in progress
// included.
func (w *WaitTimer) Load(now time.Time) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.total
	if w.since != 0 && now.UnixNano() > w.since {
		t += now.UnixNano() - w.since
	}
	return t
}

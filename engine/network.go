package engine

import (
	"slices"
	"sync"

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
	defaultBatchSize         = 512
	defaultBuffersPerChannel = 4
	// maxGateQueue bounds a receiving task's queue of batches; the credits
	// bound what each channel may have in flight, this bounds their sum, so
	// that the queue does not grow with the number of senders.
	maxGateQueue = 256
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
	// unaligned: the checkpoint is unaligned (see unaligned.go): from the
	// start if alignedUntil is 0, else it starts aligned and a task turns
	// it unaligned where its barrier is not through by alignedUntil (Unix
	// ms; execution.checkpointing.aligned-checkpoint-timeout).
	unaligned    bool
	alignedUntil int64
}

// unalignedFromStart reports whether tasks take b unaligned at once.
func (b barrier) unalignedFromStart() bool { return b.unaligned && b.alignedUntil == 0 }

// timeoutable reports whether b starts aligned and may turn unaligned.
func (b barrier) timeoutable() bool { return b.unaligned && b.alignedUntil != 0 }

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
	// off is how many of recs were processed: a batch whose processing
	// stopped for a priority barrier goes back to the front of the task's
	// queue with the rest.
	off int
	// epoch is the newest unaligned checkpoint whose barrier the sender had
	// sent when it sent this batch, and seq the batch's number on its
	// channel (from 1): an unaligned barrier overtakes the batches queued
	// ahead of it, and these say which batches it overtook.
	epoch int64
	seq   uint32
	// kgs holds each record's key group and key hash in a keyed exchange
	// (nil in others), packed by packKeyHash: the sender hashed the key to
	// route the record, and the receiving keyed operator takes the key
	// group and the hash its state tables use from here instead of hashing
	// the key a second time.
	kgs []uint64
	ev  *event
	// ch is the channel's index in the receiving gate; negative for
	// in-flight records restored from an unaligned checkpoint (they came on
	// channels of the job's previous run and hold no credit).
	ch int32
}

// keyGroupCollector is a keyed operator fed by a keyed exchange: it takes
// each record with the key group and the upper half of the key's hash its
// sender computed.
type keyGroupCollector[T any] interface {
	CollectInKeyGroup(v T, keyGroup int, hash uint32)
	// PrefetchKey is told about a record prefetchAhead records before
	// CollectInKeyGroup is, so that its state lookup's cache misses
	// overlap with the records in between (state.Prefetcher, from the key
	// group and hash; state.KeyPrefetcher, from the record's key).
	PrefetchKey(v T, keyGroup int, hash uint32)
}

// prefetchAhead is how many records ahead a keyed input prefetches: enough
// for several misses to be in flight at once, few enough that the lines
// are still cached when their records come (4, 8 and 16 measured alike on
// a 1 M-key table).
const prefetchAhead = 8

// packKeyHash packs a record's key group (low 16 bits; at most
// state.UpperBoundMaxParallelism) and the upper half of its key's hash,
// which string-keyed state tables index by (state.KeyedBackend.
// SetCurrentKeyHashed).
func packKeyHash(kg int, hash uint64) uint64 { return uint64(kg) | hash&^(1<<32-1) }

// channel is one sender's path into a receiving gate. It is small (no Go
// channel of its own) because there are p×p of them in a keyed exchange.
type channel[T any] struct {
	gate *inputGate[T]
	// wake is the sending writer's, shared by all its channels: signalled
	// whenever one of them gets a credit back.
	wake chan struct{}
	mu   sync.Mutex
	// credits is how many batches the sender may still send: buffers in
	// free, plus those not allocated yet or held by nobody.
	credits int32
	index   int32
	// waiting is set when the sender found no credit; recycle wakes it
	// only once wakeAt credits are back (see recycle).
	waiting bool
	free    [][]T      // recycled buffers, at most credits of them
	freeKGs [][]uint64 // their key-group buffers, in a keyed exchange
}

// take takes a credit, with a recycled buffer (and its key-group buffer)
// if there is one; ok is false when the receiver holds all of them.
func (c *channel[T]) take() (b []T, kgs []uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.credits == 0 {
		c.waiting = true
		return nil, nil, false
	}
	c.credits--
	b, kgs = c.popFree()
	return b, kgs, true
}

// takeBuffer takes a recycled buffer without a credit, for an overdrawn
// batch; nil if there is none.
func (c *channel[T]) takeBuffer() (b []T, kgs []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.popFree()
}

func (c *channel[T]) popFree() (b []T, kgs []uint64) {
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
func (c *channel[T]) putFree(b []T, kgs []uint64, max int) {
	if cap(b) > 0 && len(c.free) < max {
		c.free = append(c.free, b[:0])
	}
	if cap(kgs) > 0 && len(c.freeKGs) < max {
		c.freeKGs = append(c.freeKGs, kgs[:0])
	}
}

// buffersPerChannel gives a gate's channels an equal share of gateBuffers,
// but no fewer than defaultBuffersPerChannel each (as Flink's floating
// buffers serve a gate with few channels): one channel gets 16, two get 8,
// four or more get 4. A sender blocked for credit is woken once half of
// its channel's buffers are back, so more buffers on few channels mean
// fewer wake-ups: at p=1 word count's one channel gets 16 and its sender
// is woken every 4096 records, not every 1024.
func buffersPerChannel(numChannels int) int {
	return max(defaultBuffersPerChannel, gateBuffers/max(1, numChannels))
}

// gateBuffers is the number of buffers a gate with few channels shares
// among them.
const gateBuffers = 16

// inputGate is a receiving task's input: all channels into it share one Go
// channel of at most maxGateQueue batches.
type inputGate[T any] struct {
	in chan netBatch[T]
	// mail is the receiving task's mailbox: unaligned barriers go there,
	// ahead of the batches queued in in.
	mail     *mailbox
	channels []*channel[T]
	perChan  int
	// wakeAt is how many credits a channel's blocked sender waits for.
	wakeAt int32
}

func newInputGate[T any](numChannels, perChannel int, mail *mailbox) *inputGate[T] {
	return &inputGate[T]{
		mail:    mail,
		in:      make(chan netBatch[T], min(numChannels*perChannel, maxGateQueue)),
		perChan: perChannel,
		wakeAt:  int32(max(1, perChannel/2)),
	}
}

func (g *inputGate[T]) addChannel() *channel[T] {
	c := &channel[T]{gate: g, index: int32(len(g.channels)), credits: int32(g.perChan)}
	g.channels = append(g.channels, c)
	return c
}

// recycle gives a processed batch's credit, and its buffer if it has one,
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
func (g *inputGate[T]) recycle(b netBatch[T]) {
	if b.ch < 0 {
		return // restored in-flight records: no credit to return
	}
	clear(b.recs) // drop references so that records can be collected
	c := g.channels[b.ch]
	c.mu.Lock()
	c.credits++
	c.putFree(b.recs, b.kgs, g.perChan)
	wake := c.waiting && c.credits >= g.wakeAt
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

// outputWriter is the type-independent view of a recordWriter.
type outputWriter interface {
	flush()
	// broadcastEvent queues ev on every channel after the records buffered
	// so far.
	broadcastEvent(ev *event)
	// unalignedBarrier encodes what the writer holds unsent — the output
	// channel state of checkpoint b — and sends b's barrier ahead of it.
	unalignedBarrier(b barrier) []channelData
	// drainPending sends what credits allow of the batches held back and
	// reports whether some are still held back.
	drainPending() bool
	// pendingOnQueue: a batch held back has its credit and waits only for
	// room in the receiver's queue, which frees up without a wake-up.
	pendingOnQueue() bool
	// barrierPending and convertBarrier turn a held-back in-band barrier
	// unaligned (aligned-checkpoint timeout).
	barrierPending(id int64) bool
	convertBarrier(b barrier) []channelData
	// barrierBeforeEnd places the barrier of b, taken after the input
	// ended, in band before the end of partition (see the method).
	barrierBeforeEnd(b barrier)
}

// pendingBatch is a batch the writer could not send yet: overdrawn (made
// without a credit) or behind one that was.
type pendingBatch[T any] struct {
	recs   []T
	kgs    []uint64
	ev     *event
	credit bool // a credit of its channel is taken for it
}

// maxOverdraft bounds the batches a writer holds back before it blocks in
// the middle of a record, as Flink's overdraft buffers do (there, 5 per
// gate): a record that explodes into many (a flatMap, a window firing)
// must not grow them without bound (a task waits for its held-back output
// before it takes its next input, so only one input batch or poll adds to
// them). A barrier waiting for the task lifts
// the bound for the record in progress.
const maxOverdraft = 8

// recordWriter partitions a task's output over the channels to the next
// vertex's subtasks and batches it.
//
// A writer never waits for a credit in the middle of a record, unless it
// holds maxOverdraft batches back: a full batch without a credit is held
// back (overdraft), and the task sends it, waiting if it must, between
// input batches, where it can also take a checkpoint barrier. This is what
// lets an unaligned barrier reach a backpressured task at once.
type recordWriter[T any] struct {
	targets []*channel[T]
	bufs    [][]T
	kgs     [][]uint64 // per target, the key groups and hashes of bufs' records (keyed)
	// held: bufs[i] was started with a credit of channel i.
	held []bool
	// pending holds back, per channel, full batches (and events) in order.
	pending    [][]pendingBatch[T]
	numPending int
	part       partitionKind
	hash       func(T) uint64
	maxPar     int // of the receiving operator, for key groups
	// route maps a key group to the subtask owning it, computed once: a
	// lookup per record instead of a multiplication and a division.
	route []uint16
	next  int    // round-robin position
	rnd   uint64 // shuffle's random state, never 0
	batch int
	done  <-chan struct{}
	wake  chan struct{} // a credit came back on one of targets (shared by the task's writers)
	mail  *mailbox      // the sending task's
	// epoch is the newest unaligned checkpoint whose barrier this writer
	// sent; sent counts the batches sent per channel.
	epoch int64
	sent  []uint32
	ser   state.Serializer[T] // for output channel state
}

func (w *recordWriter[T]) Collect(v T) {
	if w.part == partitionHash {
		w.collectKeyed(v)
		return
	}
	i := 0
	switch w.part {
	case partitionRebalance:
		i = w.next
		if w.next++; w.next == len(w.targets) {
			w.next = 0
		}
	case partitionShuffle:
		// xorshift64: a few instructions per record and no lock, where
		// math/rand's global source would take one.
		x := w.rnd
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		w.rnd = x
		i = int((x >> 32) * uint64(len(w.targets)) >> 32)
	case partitionBroadcast:
		for i := range w.targets {
			w.collectTo(i, v)
		}
		return
	}
	w.collectTo(i, v)
}

// collectTo appends a record to channel i's batch and sends the batch when
// it is full.
func (w *recordWriter[T]) collectTo(i int, v T) {
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

// collectKeyed routes a record by its key group and sends the key group
// along with it.
func (w *recordWriter[T]) collectKeyed(v T) {
	h := w.hash(v)
	kg := state.KeyGroupForHash(h, w.maxPar)
	i := int(w.route[kg])
	b, kb := w.bufs[i], w.kgs[i]
	if b == nil {
		b, kb = w.acquire(i)
	}
	b, kb = append(b, v), append(kb, packKeyHash(kg, h))
	if len(b) >= w.batch {
		w.emit(i, b, kb, nil)
		b, kb = nil, nil
	}
	w.bufs[i], w.kgs[i] = b, kb
}

// acquire starts a batch on channel i: with a credit and a recycled buffer
// if the channel has one to give, else overdrawn, with a new buffer that
// emit holds back until a credit comes.
func (w *recordWriter[T]) acquire(i int) ([]T, []uint64) {
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
	if kb == nil && w.part == partitionHash {
		kb = make([]uint64, 0, w.batch)
	}
	return b, kb
}

// emit sends a batch (records, an event, or both) on channel i, or holds it
// back behind the ones already held back or for want of a credit.
func (w *recordWriter[T]) emit(i int, b []T, kb []uint64, ev *event) {
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
			if w.numPending < maxOverdraft && !w.mail.priority.Load() {
				// The receiver's queue is full (a gate of many channels):
				// wait for room, as for a credit, unless a barrier waits.
				if w.sendBlocking(i, b, kb, ev) {
					return
				}
			}
		}
	}
	w.pending[i] = append(w.pending[i], pendingBatch[T]{recs: b, kgs: kb, ev: ev, credit: credit})
	w.numPending++
	for w.numPending > maxOverdraft && !w.mail.priority.Load() {
		if !w.drainPending() {
			return
		}
		select {
		case <-w.wake:
		case <-w.mail.priorityWake:
		case <-w.done:
			panic(errTaskCanceled)
		}
	}
}

// takeCredit takes a credit of channel i for a batch that has its buffer
// already; a recycled buffer that comes with the credit stays with the
// channel for a later batch.
func (w *recordWriter[T]) takeCredit(i int) bool {
	c := w.targets[i]
	b, kb, ok := c.take()
	if ok && (b != nil || kb != nil) {
		c.mu.Lock()
		c.putFree(b, kb, c.gate.perChan)
		c.mu.Unlock()
	}
	return ok
}

func (w *recordWriter[T]) batchFor(i int, b []T, kb []uint64, ev *event) netBatch[T] {
	return netBatch[T]{recs: b, kgs: kb, ev: ev, ch: w.targets[i].index, epoch: w.epoch, seq: w.sent[i] + 1}
}

func (w *recordWriter[T]) trySend(i int, b []T, kb []uint64, ev *event) bool {
	select {
	case w.targets[i].gate.in <- w.batchFor(i, b, kb, ev):
		w.sent[i]++
		w.announce(i, ev)
		return true
	default:
		return false
	}
}

// announce tells the receiver of channel i that a barrier that may turn
// unaligned is in its queue.
func (w *recordWriter[T]) announce(i int, ev *event) {
	if ev != nil && ev.kind == evBarrier && ev.barrier.timeoutable() {
		c := w.targets[i]
		c.gate.mail.put(mail{kind: mailBarrierAnnounce, b: ev.barrier, ch: c.index})
	}
}

// sendBlocking waits for room in the receiver's queue, but not past a
// cancellation (the receiver may be gone) or a barrier waiting for this
// task (false: not sent).
func (w *recordWriter[T]) sendBlocking(i int, b []T, kb []uint64, ev *event) bool {
	select {
	case w.targets[i].gate.in <- w.batchFor(i, b, kb, ev):
		w.sent[i]++
		w.announce(i, ev)
		return true
	case <-w.mail.priorityWake:
		return false
	case <-w.done:
		panic(errTaskCanceled)
	}
}

func (w *recordWriter[T]) drainPending() bool {
	if w.numPending == 0 {
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
			*p = pendingBatch[T]{}
			q = q[1:]
			w.numPending--
		}
		if len(q) == 0 {
			q = w.pending[i][:0]
		}
		w.pending[i] = q
	}
	return w.numPending > 0
}

func (w *recordWriter[T]) pendingOnQueue() bool {
	for _, q := range w.pending {
		if len(q) > 0 && q[0].credit {
			return true
		}
	}
	return false
}

// flush sends the partly filled batches (the buffer timeout, an idle
// task); a batch without a credit is held back like a full one.
func (w *recordWriter[T]) flush() {
	for i, b := range w.bufs {
		if len(b) > 0 {
			w.emit(i, b, w.keyGroups(i), nil)
			w.bufs[i] = nil
			w.setKeyGroups(i, nil)
		}
	}
}

func (w *recordWriter[T]) keyGroups(i int) []uint64 {
	if w.kgs == nil {
		return nil
	}
	return w.kgs[i]
}

func (w *recordWriter[T]) setKeyGroups(i int, kb []uint64) {
	if w.kgs != nil {
		w.kgs[i] = kb
	}
}

// broadcastEvent sends ev on every channel, after the records buffered so
// far: an aligned barrier or an end of input must follow exactly the
// records that precede it. An event needs a credit (the receiver counts
// batches) but no buffer.
func (w *recordWriter[T]) broadcastEvent(ev *event) {
	for i, b := range w.bufs {
		w.emit(i, b, w.keyGroups(i), ev)
		w.bufs[i] = nil
		w.setKeyGroups(i, nil)
	}
}

// barrierPending reports whether the in-band barrier of checkpoint id is
// still held back on some channel.
func (w *recordWriter[T]) barrierPending(id int64) bool {
	for _, q := range w.pending {
		for _, p := range q {
			if p.ev != nil && p.ev.kind == evBarrier && p.ev.barrier.id == id {
				return true
			}
		}
	}
	return false
}

// convertBarrier turns the in-band barrier of checkpoint b, held back past
// its aligned-checkpoint timeout, into an unaligned one: on each channel
// where it is still held back, the records ahead of it become output
// channel state and the barrier goes ahead of them; channels it has gone
// through keep it in band.
func (w *recordWriter[T]) convertBarrier(b barrier) []channelData {
	var out []channelData
	for i, c := range w.targets {
		q := w.pending[i]
		at := slices.IndexFunc(q, func(p pendingBatch[T]) bool {
			return p.ev != nil && p.ev.kind == evBarrier && p.ev.barrier.id == b.id
		})
		if at < 0 {
			continue
		}
		cd := channelData{channel: i, keyed: w.part == partitionHash}
		for _, p := range q[:at+1] {
			appendRecords(&cd, w.ser, p.recs, p.kgs)
		}
		q[at].ev = nil
		if len(q[at].recs) == 0 && !q[at].credit {
			// Nothing left to send in it.
			w.pending[i] = slices.Delete(q, at, at+1)
			w.numPending--
		}
		if cd.records > 0 {
			out = append(out, cd)
		}
		c.gate.mail.put(mail{kind: mailUnalignedBarrier, b: b, ch: c.index, seq: w.sent[i]})
	}
	w.epoch = b.id
	return out
}

// barrierBeforeEnd places the barrier of checkpoint b — taken by a task
// whose input ended, so after all its output — in band just before the end
// of partition, on the channels that still hold that end back: there it
// aligns as any barrier, and turns unaligned at b's timeout if it is still
// held back (watchOutputBarrier). Where the end has gone out, the receiver
// counts it as aligned; it is told that b is coming, so that its alignment
// timeout runs even if no other barrier reaches it.
func (w *recordWriter[T]) barrierBeforeEnd(b barrier) {
	ev := &event{kind: evBarrier, barrier: b}
	for i, c := range w.targets {
		q := w.pending[i]
		at := slices.IndexFunc(q, func(p pendingBatch[T]) bool { return p.ev != nil && p.ev.kind == evEndOfPartition })
		if at < 0 {
			c.gate.mail.put(mail{kind: mailBarrierAnnounce, b: b, ch: c.index})
			continue
		}
		end := q[at].ev
		q[at].ev = ev
		w.pending[i] = slices.Insert(q, at+1, pendingBatch[T]{ev: end})
		w.numPending++
	}
}

// unalignedBarrier sends checkpoint b's barrier on every channel ahead of
// the records this writer holds (held-back batches, then the partly filled
// ones), and returns those records encoded: they were emitted before the
// snapshot, so they are the checkpoint's output channel state, and they are
// still sent afterwards, tagged as after the barrier.
func (w *recordWriter[T]) unalignedBarrier(b barrier) []channelData {
	var out []channelData
	for i, c := range w.targets {
		cd := channelData{channel: i, keyed: w.part == partitionHash}
		for _, p := range w.pending[i] {
			appendRecords(&cd, w.ser, p.recs, p.kgs)
		}
		appendRecords(&cd, w.ser, w.bufs[i], w.keyGroups(i))
		if cd.records > 0 {
			out = append(out, cd)
		}
		c.gate.mail.put(mail{kind: mailUnalignedBarrier, b: b, ch: c.index, seq: w.sent[i]})
	}
	w.epoch = b.id
	return out
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
	newGate(numChannels, perChannel int, mail *mailbox) any
	addChannel(gate any) any
	newWriter(targets []any, part partitionKind, hash any, maxPar, batch, start int, t *task) (any, outputWriter)
	newFanout(outs []any) any
	runInput(t *task, gate any, head any) error
}

type typeOpsFor[T any] struct{}

func newTypeOps[T any]() typeOps { return typeOpsFor[T]{} }

func (typeOpsFor[T]) newGate(n, per int, mail *mailbox) any { return newInputGate[T](n, per, mail) }

func (typeOpsFor[T]) addChannel(gate any) any { return gate.(*inputGate[T]).addChannel() }

func (typeOpsFor[T]) newWriter(targets []any, part partitionKind, hash any, maxPar, batch, start int, t *task) (any, outputWriter) {
	n := len(targets)
	w := &recordWriter[T]{part: part, maxPar: maxPar, batch: batch, done: t.done, wake: t.wake, mail: t.mail,
		bufs: make([][]T, n), held: make([]bool, n), pending: make([][]pendingBatch[T], n), sent: make([]uint32, n),
		next: start % n, ser: state.SerializerFor[T](), rnd: uint64(start+1) * 0x9E3779B97F4A7C15}
	w.targets = make([]*channel[T], 0, len(targets))
	for _, t := range targets {
		c := t.(*channel[T])
		c.wake = w.wake // each channel has exactly one sender: this writer
		w.targets = append(w.targets, c)
	}
	if hash != nil {
		w.hash = hash.(func(T) uint64)
	}
	if part == partitionHash {
		w.kgs = make([][]uint64, len(targets))
		w.route = make([]uint16, maxPar)
		for kg := range w.route {
			w.route[kg] = uint16(state.SubtaskForKeyGroup(maxPar, len(targets), kg))
		}
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

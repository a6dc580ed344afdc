package engine

import (
	"encoding/binary"
	"maps"
	"slices"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/savepoint"
)

// Unaligned checkpoints (FLIP-76). A task takes checkpoint n at the first
// barrier of n that reaches it, without waiting for the others, and stores
// the records in flight around its snapshot as channel state:
//
//   - output channel state: what its writers hold unsent when it snapshots
//     (they were emitted before the snapshot; they are still sent after
//     it, tagged as after the barrier);
//   - input channel state: what was sent to it before the upstream task's
//     barrier and not processed by it before its snapshot: batches queued
//     in the gate at the snapshot, and those that come on a channel until
//     that channel's barrier.
//
// A barrier overtakes the data: the sender puts it in the receiver's
// mailbox (mailUnalignedBarrier), with the number of the last batch it sent
// on the channel, and tags every later batch with the checkpoint's id
// (netBatch.epoch). The receiver records, per channel, batches tagged older
// than n until it has received the barrier's batch number. Nothing waits
// for alignment and no input is blocked; the channel state goes into the
// checkpoint next to the operator state (savepoint.ChannelStateHandle). On
// restore, in-flight records are fed to the receiving operators before
// their live input (restore.InFlight routes them, by key group when the
// job is rescaled).

// channelData is the encoded records of one channel: for output channel
// state, channel is the receiving subtask; for input channel state, the
// channel's index in the gate (negative for restored in-flight records not
// processed yet, -1-k for input edge k).
type channelData struct {
	channel int
	keyed   bool
	records int64
	data    []byte
}

// appendRecords encodes records into d: each record's key group and hash
// first (uvarint) in a keyed exchange, so that restore routes it without
// the key function, then the record.
func appendRecords[T any](d *channelData, ser state.Serializer[T], recs []T, kgs []uint64) {
	for i, r := range recs {
		if d.keyed {
			d.data = binary.AppendUvarint(d.data, kgs[i])
		}
		d.data = ser.Append(d.data, r)
	}
	d.records += int64(len(recs))
}

// channelCapture is a receiving task's input channel state of one
// unaligned checkpoint while it is being recorded. The task's goroutine
// writes it; done is closed, once, when every channel is complete (or the
// checkpoint was aborted), after which the asynchronous writer reads it.
type channelCapture struct {
	id       int64
	open     []bool // per gate channel: still recording
	numOpen  int
	notified []bool   // the channel's barrier came
	seqAt    []uint32 // after the channel's batch number seqAt
	input    map[int]*channelData
	output   [][]channelData // per writer
	aborted  bool
	done     chan struct{}
	// started is when the first barrier came; alignment, set when the
	// capture completes, how long until the last.
	started   time.Time
	alignment time.Duration
}

func newChannelCapture(id int64, numChannels int) *channelCapture {
	c := &channelCapture{id: id, open: make([]bool, numChannels), numOpen: numChannels,
		notified: make([]bool, numChannels), seqAt: make([]uint32, numChannels),
		input: map[int]*channelData{}, done: make(chan struct{})}
	for i := range c.open {
		c.open[i] = true
	}
	return c
}

func (c *channelCapture) channel(ch int, keyed bool) *channelData {
	d := c.input[ch]
	if d == nil {
		d = &channelData{channel: ch, keyed: keyed}
		c.input[ch] = d
	}
	return d
}

func (c *channelCapture) close(ch int32) {
	if c.open[ch] {
		c.open[ch] = false
		c.numOpen--
	}
}

func (c *channelCapture) complete() bool { return c.numOpen == 0 }

// offer records b if it came before the barrier of c's checkpoint on its
// channel, and closes the channel once its barrier is behind. b was
// received (taken from the gate) after the snapshot, or is queued unprocessed
// at the snapshot; b.off records of it are processed already.
func offer[T any](c *channelCapture, ser state.Serializer[T], b *netBatch[T]) {
	if b.ch < 0 {
		// Restored in flight and not processed yet: before every barrier.
		d := c.channel(int(b.ch), b.kgs != nil)
		appendRecords(d, ser, b.recs[b.off:], tail(b.kgs, b.off))
		return
	}
	ch := b.ch
	if !c.open[ch] {
		return
	}
	if b.epoch >= c.id {
		c.close(ch) // sent after the barrier: so is all that follows
		return
	}
	if len(b.recs) > b.off {
		d := c.channel(int(ch), b.kgs != nil)
		appendRecords(d, ser, b.recs[b.off:], tail(b.kgs, b.off))
	}
	if b.ev != nil && b.ev.kind == evEndOfPartition || c.notified[ch] && b.seq >= c.seqAt[ch] {
		c.close(ch)
	}
}

func tail(kgs []uint64, off int) []uint64 {
	if kgs == nil {
		return nil
	}
	return kgs[off:]
}

// notify records that the barrier of c's checkpoint came on channel ch
// after batch seq; received is the number of the last batch received on ch.
func (c *channelCapture) notify(ch int32, seq, received uint32) {
	c.notified[ch], c.seqAt[ch] = true, seq
	if received >= seq {
		c.close(ch)
	}
}

// chanInfo names a gate channel: its input edge and sending subtask.
type chanInfo struct {
	edge, sender int
}

// startUnaligned starts unaligned checkpoint b on the task's goroutine: the
// barrier goes out ahead of what the writers hold, which is kept as output
// channel state, and the input channel state starts recording. It returns
// the capture the asynchronous writer waits for.
func (t *task) startUnaligned(b barrier) *channelCapture {
	c := newChannelCapture(b.id, t.numIn)
	c.started = t.exec.clock()
	if !t.inputOpen() {
		// A task whose input ended has sent everything, and gets no more.
		c.numOpen = 0
		close(c.done)
		return c
	}
	c.output = make([][]channelData, len(t.writers))
	for i, w := range t.writers {
		c.output[i] = w.unalignedBarrier(b)
	}
	t.lastUnaligned = b.id
	if t.input != nil {
		t.input.startCapture(c)
	}
	if c.complete() {
		close(c.done)
	} else {
		t.captures = append(t.captures, c)
	}
	return c
}

// onUnalignedBarrier handles the barrier of an unaligned checkpoint that
// came on channel m.ch: the first one of its checkpoint takes the snapshot.
func (t *task) onUnalignedBarrier(m mail) error {
	id := m.b.id
	if id > t.lastUnaligned && !t.isAborted(id) && t.inputOpen() {
		if err := t.checkpoint(m.b); err != nil {
			return err
		}
	}
	for _, c := range t.captures {
		if c.id == id && t.input != nil {
			t.input.notify(c, m.ch, m.seq)
		}
	}
	t.completeCaptures()
	return nil
}

// completeCaptures hands the completed captures to the asynchronous writer.
func (t *task) completeCaptures() {
	if len(t.captures) == 0 {
		return
	}
	kept := t.captures[:0]
	for _, c := range t.captures {
		if c.complete() {
			c.alignment = t.exec.clock().Sub(c.started)
			close(c.done)
		} else {
			kept = append(kept, c)
		}
	}
	clear(t.captures[len(kept):])
	t.captures = kept
}

// abortCapture stops recording the channel state of an aborted checkpoint.
func (t *task) abortCapture(id int64) {
	for _, c := range t.captures {
		if c.id == id {
			c.aborted = true
			c.numOpen = 0
		}
	}
	t.completeCaptures()
}

// addChannelState adds an unaligned checkpoint's channel state to the
// task's snapshots: input channel state to the head operator's, output
// channel state to the tail operator's (Flink's inputChannelState and
// resultSubpartitionState).
func (t *task) addChannelState(snaps []checkpoint.OperatorSnapshot, c *channelCapture) []checkpoint.OperatorSnapshot {
	of := func(uid string) *checkpoint.OperatorSnapshot {
		for i := range snaps {
			if snaps[i].UID == uid {
				return &snaps[i]
			}
		}
		snaps = append(snaps, checkpoint.OperatorSnapshot{UID: uid, Subtask: t.subtask})
		return &snaps[len(snaps)-1]
	}
	for _, ch := range slices.Sorted(maps.Keys(c.input)) {
		d := c.input[ch]
		if d.records == 0 {
			continue
		}
		cs := checkpoint.ChannelState{Keyed: d.keyed, Records: d.records, Data: d.data}
		if ch < 0 {
			cs.Peer, cs.Channel = t.inPeers[-1-ch], -1
		} else {
			info := t.chanInfo[ch]
			cs.Peer, cs.Channel = t.inPeers[info.edge], info.sender
		}
		s := of(t.uids[0])
		s.InputChannels = append(s.InputChannels, cs)
	}
	for i, out := range c.output {
		for _, d := range out {
			s := of(t.uids[len(t.uids)-1])
			s.OutputChannels = append(s.OutputChannels, checkpoint.ChannelState{Peer: t.outPeers[i],
				Channel: d.channel, Keyed: d.keyed, Records: d.records, Data: d.data})
		}
	}
	return snaps
}

// subtaskStats describes the task's part in a checkpoint it wrote.
func (t *task) subtaskStats(j asyncJob, handles map[string]savepoint.SubtaskState, async time.Duration) checkpoint.SubtaskStats {
	s := checkpoint.SubtaskStats{VertexID: operatorID(t.v.head()), Subtask: t.subtask, Unaligned: j.b.unaligned,
		Alignment: j.alignment, Sync: j.sync, Async: async}
	if c := j.channels; c != nil {
		s.Alignment = c.alignment
	}
	for _, h := range handles {
		s.StateSize += h.Bytes
		s.Persisted += h.ChannelStateSize()
	}
	return s
}

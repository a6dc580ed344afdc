package task

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/internal/network"
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
// mailbox (network.MailUnalignedBarrier), with the number of the last batch it sent
// on the channel, and tags every later batch with the checkpoint's id
// (network.Batch.Epoch). The receiver records, per channel, batches tagged older
// than n until it has received the barrier's batch number. Nothing waits
// for alignment and no input is blocked; the channel state goes into the
// checkpoint next to the operator state (savepoint.ChannelStateHandle). On
// restore, in-flight records are fed to the receiving operators before
// their live input (restore.InFlight routes them, by key group when the
// job is rescaled).

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
	input    map[int]*network.ChannelData
	output   [][]network.ChannelData // per writer
	done     chan struct{}
	// started is when the first barrier came; alignment, set when the
	// capture completes, how long until the last.
	started   time.Time
	alignment time.Duration
	// For a checkpoint taken aligned whose barrier may turn unaligned at
	// the output (aligned-checkpoint timeout): b, and the writers whose
	// barrier is still held back; converted is set once one turned.
	b          network.Barrier
	outputWait []int
	converted  bool
	// timer puts a priority mail at b's timeout, so that a task blocked
	// for credit in the middle of a record comes back to turn its barrier.
	timer *time.Timer
}

// stop stops the capture's timer, if any.
func (c *channelCapture) stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

func newChannelCapture(id int64, numChannels int) *channelCapture {
	c := &channelCapture{id: id, open: make([]bool, numChannels), numOpen: numChannels,
		notified: make([]bool, numChannels), seqAt: make([]uint32, numChannels),
		input: map[int]*network.ChannelData{}, done: make(chan struct{})}
	for i := range c.open {
		c.open[i] = true
	}
	return c
}

func (c *channelCapture) channel(ch int, keyed, stamped bool) *network.ChannelData {
	d := c.input[ch]
	if d == nil {
		d = &network.ChannelData{Channel: ch, Keyed: keyed, Stamped: stamped}
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

func (c *channelCapture) complete() bool { return c.numOpen == 0 && len(c.outputWait) == 0 }

// offer records b if it came before the barrier of c's checkpoint on its
// channel, and closes the channel once its barrier is behind. b was
// received (taken from the gate) after the snapshot, or is queued unprocessed
// at the snapshot; b.off records of it are processed already.
func offer[T any](c *channelCapture, ser state.Serializer[T], b *network.Batch[T]) {
	if len(c.open) == 0 {
		return // a checkpoint taken aligned, watched at the output only
	}
	if b.Ch < 0 {
		// Restored in flight and not processed yet: before every barrier.
		d := c.channel(int(b.Ch), b.Keyed, b.Stamped)
		network.AppendRecords(d, ser, b.Recs[b.Off:], tail(b.KGs, b.Off*network.MetaStride(b.Keyed, b.Stamped)))
		return
	}
	ch := b.Ch
	if !c.open[ch] {
		return
	}
	if b.Epoch >= c.id {
		c.close(ch) // sent after the barrier: so is all that follows
		return
	}
	if len(b.Recs) > b.Off {
		d := c.channel(int(ch), b.Keyed, b.Stamped)
		network.AppendRecords(d, ser, b.Recs[b.Off:], tail(b.KGs, b.Off*network.MetaStride(b.Keyed, b.Stamped)))
	}
	if b.Ev != nil && (b.Ev.Kind == network.EventEndOfPartition || b.Ev.Kind == network.EventBarrier && b.Ev.Barrier.ID >= c.id) ||
		c.notified[ch] && b.Seq >= c.seqAt[ch] {
		// The end, the channel's in-band barrier (a checkpoint that
		// turned unaligned after its alignment timed out), or the last
		// batch sent before its unaligned barrier.
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

// ChanInfo names a gate channel: its input edge and sending subtask.
type ChanInfo struct {
	Edge, Sender int
}

// startUnaligned starts unaligned checkpoint b on the task's goroutine: the
// barrier goes out ahead of what the writers hold, which is kept as output
// channel state, and the input channel state starts recording. It returns
// the capture the asynchronous writer waits for.
func (t *Task) startUnaligned(b network.Barrier) *channelCapture {
	c := newChannelCapture(b.ID, t.numIn)
	c.started = t.svc.Clock()
	if !t.inputOpen() {
		// A task whose input ended gets no more, but what it sent may not
		// have arrived: held back by backpressure (a bounded source that
		// read all its input into its output), or queued unprocessed at the
		// receivers, with its end of partition last. The barrier overtakes
		// it as for a running task — the held-back batches are its output
		// channel state, the queued ones the receivers' input channel
		// state — so that the checkpoint does not wait for the receivers
		// to drain it.
		c.numOpen = 0
		c.output = make([][]network.ChannelData, len(t.Writers))
		for i, w := range t.Writers {
			c.output[i] = w.UnalignedBarrier(b)
		}
		t.lastUnaligned = b.ID
		close(c.done)
		return c
	}
	c.output = make([][]network.ChannelData, len(t.Writers))
	for i, w := range t.Writers {
		c.output[i] = w.UnalignedBarrier(b)
	}
	t.lastUnaligned = b.ID
	if al := t.al; al != nil {
		// An aligned checkpoint turns unaligned (its alignment timed out,
		// or an unaligned barrier of it came): the channels whose barrier
		// came are complete — what was held back after it is not
		// recorded — and the alignment is over; its in-band barriers
		// still to come only close their channels' recording. In-band
		// barriers of older checkpoints are stale from now on, as after
		// any snapshot (the job master takes checkpoints aligned while a
		// savepoint is in progress, so that these are never a savepoint's).
		switch {
		case al.current.ID == b.ID:
			for ch, blocked := range al.blockedCh {
				if blocked {
					c.close(int32(ch))
				}
			}
		case al.current.ID != 0:
			// An older alignment gives way, as to a newer barrier.
			t.svc.JobMaster.Decline(t, al.current.ID, checkpoint.ErrDeclined,
				errors.New("(alignment was aborted by the barrier of a newer checkpoint)"))
		}
		al.lastDone, al.current = max(al.lastDone, b.ID), network.Barrier{}
		al.releaseAll()
	}
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
func (t *Task) onUnalignedBarrier(m network.Mail) error {
	id := m.Barrier.ID
	takenAligned := t.al != nil && m.Barrier.Timeoutable() && id <= t.al.lastDone
	if id > t.lastUnaligned && !takenAligned && !t.isAborted(id) && t.inputOpen() {
		if err := t.checkpoint(m.Barrier, true); err != nil {
			return err
		}
	}
	for _, c := range t.captures {
		if c.id == id && t.input != nil && len(c.open) > 0 {
			t.input.notify(c, m.Ch, m.Seq)
		}
	}
	t.completeCaptures()
	return nil
}

// completeCaptures hands the completed captures to the asynchronous writer.
func (t *Task) completeCaptures() {
	if len(t.captures) == 0 {
		return
	}
	kept := t.captures[:0]
	for _, c := range t.captures {
		if c.complete() {
			c.alignment = t.svc.Clock().Sub(c.started)
			c.stop()
			close(c.done)
		} else {
			kept = append(kept, c)
		}
	}
	clear(t.captures[len(kept):])
	t.captures = kept
}

// abortCapture stops recording the channel state of an aborted checkpoint.
func (t *Task) abortCapture(id int64) {
	for _, c := range t.captures {
		if c.id == id {
			c.numOpen, c.outputWait = 0, nil
		}
	}
	t.completeCaptures()
}

// addChannelState adds an unaligned checkpoint's channel state to the
// task's snapshots: input channel state to the head operator's, output
// channel state to the tail operator's (Flink's inputChannelState and
// resultSubpartitionState).
func (t *Task) addChannelState(snaps []checkpoint.OperatorSnapshot, c *channelCapture) []checkpoint.OperatorSnapshot {
	of := func(uid string) *checkpoint.OperatorSnapshot {
		for i := range snaps {
			if snaps[i].UID == uid {
				return &snaps[i]
			}
		}
		snaps = append(snaps, checkpoint.OperatorSnapshot{UID: uid, Subtask: t.Subtask})
		return &snaps[len(snaps)-1]
	}
	for _, ch := range slices.Sorted(maps.Keys(c.input)) {
		d := c.input[ch]
		if d.Records == 0 {
			continue
		}
		cs := checkpoint.ChannelState{Keyed: d.Keyed, Stamped: d.Stamped, Records: d.Records, Data: d.Data}
		if ch < 0 {
			cs.Peer, cs.Channel = t.InPeers[-1-ch], -1
		} else {
			info := t.ChanInfo[ch]
			cs.Peer, cs.Channel = t.InPeers[info.Edge], info.Sender
		}
		s := of(t.UIDs[0])
		s.InputChannels = append(s.InputChannels, cs)
	}
	for i, out := range c.output {
		for _, d := range out {
			s := of(t.UIDs[len(t.UIDs)-1])
			s.OutputChannels = append(s.OutputChannels, checkpoint.ChannelState{Peer: t.OutPeers[i],
				Channel: d.Channel, Keyed: d.Keyed, Stamped: d.Stamped, Records: d.Records, Data: d.Data})
		}
	}
	return snaps
}

// subtaskStats describes the task's part in a checkpoint it wrote.
func (t *Task) subtaskStats(j asyncJob, handles map[string]savepoint.SubtaskState, async time.Duration) checkpoint.SubtaskStats {
	s := checkpoint.SubtaskStats{VertexID: t.vertexID, Subtask: t.Subtask, Unaligned: j.unaligned,
		Alignment: j.alignment, Sync: j.sync, Async: async}
	if c := j.channels; c != nil {
		s.Unaligned = j.unaligned || c.converted
		if j.unaligned {
			s.Alignment = c.alignment
		}
	}
	s.OperatorStateSize = make(map[string]int64, len(handles))
	for uid, h := range handles {
		s.StateSize += h.Bytes
		s.Persisted += h.ChannelStateSize()
		s.OperatorStateSize[uid] = h.Bytes - h.ChannelStateSize() // its state, not records in flight
	}
	return s
}

// watchOutputBarrier starts watching the barrier of checkpoint b, taken
// aligned, on the writers that hold it back: if it is still held back at
// b's aligned-checkpoint timeout, it turns unaligned there
// (checkOutputBarriers). It returns nil when the barrier went through.
func (t *Task) watchOutputBarrier(b network.Barrier) *channelCapture {
	c := newChannelCapture(b.ID, 0)
	c.started, c.b = t.svc.Clock(), b
	for i, w := range t.Writers {
		if w.BarrierPending(b.ID) {
			c.outputWait = append(c.outputWait, i)
		}
	}
	if len(c.outputWait) == 0 {
		return nil
	}
	c.output = make([][]network.ChannelData, len(t.Writers))
	d := time.Duration(b.AlignedUntil-t.svc.Clock().UnixMilli()) * time.Millisecond
	c.timer = time.AfterFunc(max(d, 0), func() { t.Mail.Put(network.Mail{Kind: network.MailAlignmentTimeout, ID: b.ID}) })
	t.captures = append(t.captures, c)
	return c
}

// checkOutputBarriers settles the barriers watched by watchOutputBarrier:
// gone through in band, or turned unaligned at their timeout. It returns
// the earliest timeout still ahead (0: none).
func (t *Task) checkOutputBarriers(now time.Time) (next int64) {
	for _, c := range t.captures {
		if len(c.outputWait) == 0 {
			continue
		}
		kept := c.outputWait[:0]
		for _, i := range c.outputWait {
			w := t.Writers[i]
			switch {
			case !w.BarrierPending(c.id):
			case now.UnixMilli() >= c.b.AlignedUntil:
				c.output[i] = w.ConvertBarrier(c.b)
				c.converted = true
			default:
				kept = append(kept, i)
				if next == 0 || c.b.AlignedUntil < next {
					next = c.b.AlignedUntil
				}
			}
		}
		c.outputWait = kept
	}
	t.completeCaptures()
	return next
}

// alignmentDeadline is when the checkpoint being aligned, or announced and
// not taken yet, turns unaligned (0: none, or it does not time out).
func (t *Task) alignmentDeadline() (id, until int64) {
	if b, ok := t.pendingAligned(); ok {
		return b.ID, b.AlignedUntil
	}
	return 0, 0
}

func (t *Task) pendingAligned() (network.Barrier, bool) {
	if t.al == nil {
		return network.Barrier{}, false
	}
	if c := t.al.current; c.ID != 0 {
		return c, c.Timeoutable()
	}
	if a := t.announced; a.ID > max(t.al.lastDone, t.lastUnaligned) && !t.isAborted(a.ID) {
		return a, true
	}
	return network.Barrier{}, false
}

// alignmentTimedOut takes checkpoint id unaligned if it is still being
// aligned, or announced and not taken.
func (t *Task) alignmentTimedOut(id int64) error {
	if b, ok := t.pendingAligned(); ok && b.ID == id {
		return t.checkpoint(b, true)
	}
	return nil
}

package task

import (
	"testing"
	"time"

	"github.com/gflink/gflink/engine/internal/network"
)

func b(id int64) network.Barrier { return network.Barrier{ID: id} }

func TestAlignerExactlyOnceBlocksUntilAllChannels(t *testing.T) {
	a := newAligner(3, true)
	if res := a.onBarrier(0, b(1)); res.snapshot != nil {
		t.Fatal("snapshot after one of three barriers")
	}
	if !a.blocked(0) || a.blocked(1) || a.blocked(2) {
		t.Fatal("only the channel whose barrier arrived is blocked")
	}
	a.onBarrier(2, b(1))
	if !a.blocked(2) {
		t.Fatal("channel 2 must be blocked")
	}
	res := a.onBarrier(1, b(1))
	if res.snapshot == nil || res.snapshot.ID != 1 {
		t.Fatalf("no snapshot after the last barrier: %+v", res)
	}
	for ch := int32(0); ch < 3; ch++ {
		if a.blocked(ch) {
			t.Fatalf("channel %d still blocked after alignment", ch)
		}
	}
	// A late duplicate of barrier 1 is ignored.
	if res := a.onBarrier(0, b(1)); res.snapshot != nil || a.blocked(0) {
		t.Fatal("a stale barrier must be ignored")
	}
}

func TestAlignerNewerBarrierAbortsOlder(t *testing.T) {
	a := newAligner(2, true)
	a.onBarrier(0, b(1))
	res := a.onBarrier(1, b(2))
	if res.aborted != 1 {
		t.Fatalf("aborted = %d; want 1", res.aborted)
	}
	if a.blocked(0) || !a.blocked(1) {
		t.Fatal("after the abort only the newer barrier's channel is blocked")
	}
	if res := a.onBarrier(1, b(1)); res.snapshot != nil {
		t.Fatal("the aborted checkpoint must not complete")
	}
	if res := a.onBarrier(0, b(2)); res.snapshot == nil || res.snapshot.ID != 2 {
		t.Fatal("checkpoint 2 must complete")
	}
}

func TestAlignerEndedChannelCountsAsAligned(t *testing.T) {
	a := newAligner(2, true)
	a.onBarrier(0, b(1))
	res := a.onEndOfPartition(1)
	if res.snapshot == nil || res.snapshot.ID != 1 {
		t.Fatal("the end of the other channel must complete the alignment")
	}
	if a.allFinished() {
		t.Fatal("channel 0 has not ended")
	}
	a.onEndOfPartition(0)
	if !a.allFinished() {
		t.Fatal("both channels ended")
	}
}

func TestAlignerAbortReleases(t *testing.T) {
	a := newAligner(2, true)
	a.onBarrier(0, b(3))
	if !a.abort(3) || a.blocked(0) {
		t.Fatal("abort must release the blocked channel")
	}
	if res := a.onBarrier(1, b(3)); res.snapshot != nil || a.blocked(1) {
		t.Fatal("barriers of an aborted checkpoint are stale")
	}
	if !a.direct(4) || a.direct(4) || a.direct(2) {
		t.Fatal("direct triggers are taken once, and never for old checkpoints")
	}
}

func TestAlignerAtLeastOnceNeverBlocks(t *testing.T) {
	a := newAligner(3, false)
	for _, ch := range []int32{0, 2} {
		if res := a.onBarrier(ch, b(1)); res.snapshot != nil {
			t.Fatal("snapshot before the last barrier")
		}
		if a.blocked(ch) {
			t.Fatal("at-least-once must not block a channel")
		}
	}
	if res := a.onBarrier(1, b(1)); res.snapshot == nil {
		t.Fatal("snapshot when the last barrier arrives")
	}
	// Barrier 2 on all channels but one, then 3 everywhere: 3 completes and
	// drops 2.
	a.onBarrier(0, b(2))
	a.onBarrier(0, b(3))
	a.onBarrier(1, b(3))
	if res := a.onBarrier(2, b(3)); res.snapshot == nil || res.snapshot.ID != 3 {
		t.Fatalf("checkpoint 3: %+v", res)
	}
	if res := a.onBarrier(1, b(2)); res.snapshot != nil {
		t.Fatal("checkpoint 2 is superseded")
	}
}

// TestAlignmentHoldsBackTheSender checks that alignment is bounded: a
// sender whose channel is held back can fill only that channel's buffers;
// what it emits beyond them it holds back itself (overdraft), never in the
// receiver, and the receiver's recycling lets it send them.
func TestAlignmentHoldsBackTheSender(t *testing.T) {
	g := network.NewInputGate[int](2, network.DefaultBuffersPerChannel, network.NewMailbox())
	c0 := g.AddChannel()
	g.AddChannel()
	w := newTestWriter(t, []any{c0}, network.ShipForward, 2)
	a := newAligner(2, true)
	w.BroadcastEvent(&network.Event{Kind: network.EventBarrier, Barrier: b(1)})
	first := <-g.In
	a.onBarrier(first.Ch, first.Ev.Barrier)
	if !a.blocked(first.Ch) {
		t.Fatal("channel 0 must be blocked")
	}
	var stash []network.Batch[int]
	stash = append(stash, first) // held back with its buffer
	// The sender fills the remaining buffers of channel 0, and two more.
	for i := 0; i < (network.DefaultBuffersPerChannel+1)*2; i++ {
		w.Collect(i)
	}
	for len(g.In) > 0 {
		stash = append(stash, <-g.In)
	}
	if len(stash) != network.DefaultBuffersPerChannel {
		t.Fatalf("the receiver holds %d batches; want %d", len(stash), network.DefaultBuffersPerChannel)
	}
	if c0.Credits != 0 || w.NumPending != 2 || !w.DrainPending() {
		t.Fatalf("the sender has %d credits and holds %d batches back; want 0 and 2", c0.Credits, w.NumPending)
	}
	// Releasing the held-back batches gives the buffers back, and the
	// sender sends what it held back.
	for _, s := range stash {
		g.Recycle(s)
	}
	if w.DrainPending() || len(g.In) != 2 {
		t.Fatalf("after recycling: %d held back, %d sent", w.NumPending, len(g.In))
	}
	for len(g.In) > 0 {
		g.Recycle(<-g.In)
	}
	if c0.Credits != network.DefaultBuffersPerChannel {
		t.Fatalf("%d credits returned", c0.Credits)
	}
}

// newTestWriter makes a writer of a task that exists only for it.
func newTestWriter(t *testing.T, targets []any, part network.ShipStrategy, batch int) *network.RecordWriter[int] {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	tk := &Task{done: done, Mail: network.NewMailbox(), wake: make(chan struct{}, 1)}
	return network.NewRecordWriter(channels(targets), nil, tk.WriterOptions(part, 128, batch, 0, false))
}

// channels asserts AddChannel's results back to their type.
func channels(targets []any) []*network.Channel[int] {
	var cs []*network.Channel[int]
	for _, c := range targets {
		cs = append(cs, c.(*network.Channel[int]))
	}
	return cs
}

// An older checkpoint's barrier arriving while a newer one aligns must be
// ignored: blocking its channel would complete the newer checkpoint before
// that channel's own barrier came, leaving out records that precede it
// upstream (found by review; data loss on restore).
func TestAlignerIgnoresOlderBarrierDuringNewerAlignment(t *testing.T) {
	a := newAligner(2, true)
	a.onBarrier(0, b(6))
	if res := a.onBarrier(1, b(5)); res.snapshot != nil {
		t.Fatalf("checkpoint %d completed by barrier 5", res.snapshot.ID)
	}
	if a.blocked(1) {
		t.Fatal("a stale barrier blocked its channel")
	}
	if res := a.onBarrier(1, b(6)); res.snapshot == nil || res.snapshot.ID != 6 {
		t.Fatal("checkpoint 6 must complete when its own barrier arrives")
	}
}

// Aborting a newer checkpoint does not drop the alignment of an older one
// in progress (max-concurrent >= 2), and the aborted one's barrier is
// ignored when it comes.
func TestAlignerAbortOfNewerKeepsOlderAlignment(t *testing.T) {
	a := newAligner(2, true)
	a.onBarrier(0, b(6))
	a.abort(7)
	if res := a.onBarrier(1, b(6)); res.snapshot == nil || res.snapshot.ID != 6 {
		t.Fatal("checkpoint 6 must still complete")
	}
	if res := a.onBarrier(0, b(7)); res.snapshot != nil || a.blocked(0) {
		t.Fatal("the aborted checkpoint 7's barrier must be ignored")
	}
}

// A barrier or end of input on a channel that carries no records takes a
// credit but allocates no batch: a keyed exchange has p×p channels, and
// allocating a 512-record batch for each on the first barrier made p=1000
// take 4.4 GB (issue 8).
func TestEventOnIdleChannelAllocatesNoBatch(t *testing.T) {
	const n = 8
	g := network.NewInputGate[int](n, network.DefaultBuffersPerChannel, network.NewMailbox())
	var targets []any
	for range n {
		targets = append(targets, g.AddChannel())
	}
	w := newTestWriter(t, targets, network.ShipRebalance, network.DefaultBatchSize)
	w.Collect(7) // one channel carries a record
	w.BroadcastEvent(&network.Event{Kind: network.EventBarrier, Barrier: b(1)})
	withBuffer := 0
	for range n {
		nb := <-g.In
		if cap(nb.Recs) > 0 {
			withBuffer++
		}
		if nb.Ev == nil {
			t.Fatal("every channel must carry the barrier")
		}
		g.Recycle(nb)
	}
	if withBuffer != 1 {
		t.Fatalf("%d of %d channels got a batch for the barrier; want only the one with a record", withBuffer, n)
	}
	for i, c := range g.Channels {
		if c.Credits != network.DefaultBuffersPerChannel {
			t.Fatalf("channel %d has %d credits after the barrier was processed; want %d", i, c.Credits, network.DefaultBuffersPerChannel)
		}
	}
}

// A sender out of credits holds its batches back, in order, until the
// receiver recycles one; past maxOverdraft batches it waits in the middle
// of the record, so that a record exploding into many cannot grow them
// without bound.
func TestSenderWaitsForCredit(t *testing.T) {
	g := network.NewInputGate[int](1, 1, network.NewMailbox())
	w := newTestWriter(t, []any{g.AddChannel()}, network.ShipForward, 1)
	w.Collect(1) // batch size 1: sent at once, the only credit is gone
	w.Collect(2) // held back
	if w.NumPending != 1 || len(g.In) != 1 {
		t.Fatalf("%d held back, %d sent", w.NumPending, len(g.In))
	}
	sent := make(chan struct{})
	go func() {
		for i := range network.MaxOverdraft {
			w.Collect(3 + i) // the last one waits
		}
		close(sent)
	}()
	first := <-g.In
	select {
	case <-sent:
		t.Fatal("the sender held back more than maxOverdraft batches")
	default:
	}
	g.Recycle(first)
	<-sent
	if second := <-g.In; len(second.Recs) != 1 || second.Recs[0] != 2 {
		t.Fatalf("second batch %v; want the first held back", second.Recs)
	}
}

// A sender past maxOverdraft whose drain sends enough to be back within
// it goes on without waiting: the credit it used came back before it
// looked (the wake-up for it was consumed already), and no other wake-up
// is coming, since its takes did not fail.
func TestSenderPastOverdraftDoesNotWaitAfterADrainThatSent(t *testing.T) {
	g := network.NewInputGate[int](1, 1, network.NewMailbox())
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	tk := &Task{done: done, Mail: network.NewMailbox(), wake: make(chan struct{}, 1)}
	w := network.NewRecordWriter(channels([]any{g.AddChannel()}), nil, tk.WriterOptions(network.ShipForward, 128, 1, 0, false))
	w.Collect(1) // sent: the only credit is gone
	w.Collect(2) // held back; its take failed
	g.Recycle(<-g.In)
	<-tk.wake // the wake-up for that credit, taken as a waiting sender would
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		defer func() { _ = recover() }() // canceled at cleanup if it waits
		for i := range network.MaxOverdraft {
			w.Collect(3 + i) // the last one drains 2 with the credit
		}
	}()
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatalf("the sender waits with %d held back, %d credits, %d queued", w.NumPending, g.Channels[0].Credits, len(g.In))
	}
	if got := <-g.In; len(got.Recs) != 1 || got.Recs[0] != 2 {
		t.Fatalf("sent %v; want the first held back", got.Recs)
	}
}

type countingEncoder struct{ calls []int }

func (e *countingEncoder) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	e.calls = append(e.calls, kg)
	return append(dst, 1, 2, 3), nil
}

// TestAbortedSnapshotStopsEncoding: once its checkpoint is aborted, the
// asynchronous writer encodes no more key groups of it (they would stay
// pinned, and the next snapshot's overlays grow, for a snapshot nobody
// reads); a snapshot the task keeps as its final state is exempt.
func TestAbortedSnapshotStopsEncoding(t *testing.T) {
	tk := &Task{}
	enc := &countingEncoder{}
	ae := abortableEncoder{enc: enc, aborted: func() bool { return tk.isAborted(7) }}
	if got, _ := ae.EncodeKeyGroup(nil, 0); string(got) != "\x01\x02\x03" {
		t.Fatalf("before the abort: %v", got)
	}
	tk.aborted = map[int64]bool{7: true, 9: true}
	if got, _ := ae.EncodeKeyGroup(nil, 1); len(got) != 1 || got[0] != 0 || len(enc.calls) != 1 {
		t.Fatalf("after the abort: %v, encoder called for %v", got, enc.calls)
	}
	tk.forgetAborted(7)
	if tk.isAborted(7) || !tk.isAborted(9) {
		t.Fatalf("forgetAborted(7) left %v", tk.aborted)
	}
}

// TestAbortWhileTheAttemptIsCancelled: the task's goroutine aborts an
// unaligned checkpoint's capture while the attempt is cancelled and the
// asynchronous writer, waiting for that capture, stops: the two must not
// race (go test -race), and the writer drops the snapshot.
func TestAbortWhileTheAttemptIsCancelled(t *testing.T) {
	for range 200 {
		done := make(chan struct{})
		tk := &Task{asyncState: asyncState{async: make(chan asyncJob, 1), asyncDone: make(chan struct{})}, done: done,
			svc: &Services{Clock: time.Now}}
		c := newChannelCapture(7, 2)
		tk.captures = []*channelCapture{c}
		tk.async <- asyncJob{b: network.Barrier{ID: 7}, channels: c}
		close(tk.async)
		go tk.asyncLoop()
		close(done) // the attempt is cancelled...
		// ...while the task's goroutine handles the checkpoint's abort.
		tk.abortMu.Lock()
		tk.aborted = map[int64]bool{7: true}
		tk.abortMu.Unlock()
		tk.abortCapture(7)
		<-tk.asyncDone
		if len(tk.captures) != 0 {
			t.Fatalf("the aborted capture is still open: %d", len(tk.captures))
		}
	}
}

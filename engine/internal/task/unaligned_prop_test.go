package task

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gflink/gflink/engine/internal/network"
	"pgregory.net/rapid"
)

// TestUnalignedChannelStateProperty checks the unaligned barrier protocol
// on real writers, channels, credits and input queues, under random
// interleavings: senders emit, flush, send what they held back and take
// checkpoints; receivers take batches from their gates, process them (in
// part: a barrier cuts a batch), end, and handle their mail. For every
// checkpoint a receiver completed, and every sender, the records the sender
// emitted to it before its snapshot must be exactly, in order: those the
// receiver processed before its snapshot, then the receiver's input channel
// state for that sender, then the sender's output channel state for that
// receiver — nothing lost, nothing twice.
func TestUnalignedChannelStateProperty(t *testing.T) {
	checked, withState := 0, 0
	defer func() {
		// The property must have had something to check: completed
		// checkpoints that caught records in flight.
		t.Logf("%d sender-receiver pairs of completed checkpoints checked, %d with channel state", checked, withState)
		if !t.Failed() && (checked == 0 || withState == 0) {
			t.Fatal("no completed checkpoint with channel state was checked")
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		numS := rapid.IntRange(1, 3).Draw(rt, "senders")
		numR := rapid.IntRange(1, 2).Draw(rt, "receivers")
		batch := rapid.IntRange(1, 4).Draw(rt, "batch")
		per := rapid.IntRange(1, 3).Draw(rt, "credits")
		done := make(chan struct{})
		defer close(done)

		type receiver struct {
			t *Task
			q *inputQueue[int]
			// processed lists the records processed, per sender.
			processed [][]int
			// at holds, per checkpoint, len(processed[s]) at its snapshot.
			at   map[int64][]int
			caps map[int64]*channelCapture
			// aligned: checkpoints taken aligned.
			aligned map[int64]bool
		}
		recv := make([]*receiver, numR)
		gates := make([]*network.InputGate[int], numR)
		for r := range recv {
			tk := &Task{done: done, Mail: network.NewMailbox(), wake: make(chan struct{}, 1), inputState: inputState{numIn: numS,
				al: newAligner(numS, true)}, svc: &Services{Clock: time.Now}}
			g := network.NewInputGate[int](numS, per, tk.Mail)
			q := &inputQueue[int]{t: tk, g: g, received: make([]uint32, numS), ser: intSer}
			tk.input = q
			recv[r] = &receiver{t: tk, q: q, processed: make([][]int, numS), at: map[int64][]int{}, caps: map[int64]*channelCapture{},
				aligned: map[int64]bool{}}
			gates[r] = g
		}
		type sender struct {
			w     *network.RecordWriter[int]
			next  int
			ended bool
			taken int64
			// sent lists, per receiver, the records emitted to it.
			sent [][]int
			// before holds, per checkpoint, len(sent[r]) at its snapshot,
			// and out its output channel state per receiver.
			before map[int64][]int
			out    map[int64][][]int
		}
		send := make([]*sender, numS)
		for s := range send {
			var targets []any
			for r := range recv {
				targets = append(targets, gates[r].AddChannel()) // channel s of gate r
			}
			tk := &Task{done: done, Mail: network.NewMailbox(), wake: make(chan struct{}, 1)}
			w := network.NewRecordWriter(channels(targets), nil, tk.WriterOptions(network.ShipRebalance, 128, batch, s, false))
			send[s] = &sender{w: w, sent: make([][]int, numR), before: map[int64][]int{}, out: map[int64][][]int{}}
		}
		var triggered int64
		// completed reports whether every task has taken checkpoint id,
		// or ended: the coordinator could trigger the next.
		completed := func(id int64) bool {
			if id == 0 {
				return true
			}
			for _, s := range send {
				if !s.ended && (s.taken < id || s.w.BarrierPending(id)) {
					return false
				}
			}
			for _, rc := range recv {
				if rc.aligned[id] || rc.t.al.allFinished() {
					continue
				}
				c := rc.caps[id]
				if c == nil {
					return false
				}
				select {
				case <-c.done:
				default:
					return false
				}
			}
			return true
		}
		// timeoutable[id]: checkpoint id starts aligned and may turn
		// unaligned (aligned-checkpoint timeout); else it is unaligned
		// from the start.
		timeoutable := map[int64]bool{}
		barrierOf := func(id int64) network.Barrier {
			b := network.Barrier{ID: id, Unaligned: true}
			if timeoutable[id] {
				b.AlignedUntil = 1
			}
			return b
		}
		take := func(s *sender) {
			s.taken++
			id := s.taken
			s.before[id] = make([]int, numR)
			for r := range recv {
				s.before[id][r] = len(s.sent[r])
			}
			out := make([][]int, numR)
			if b := barrierOf(id); b.Timeoutable() {
				s.w.BroadcastEvent(&network.Event{Kind: network.EventBarrier, Barrier: b})
			} else {
				for _, d := range s.w.UnalignedBarrier(b) {
					out[d.Channel] = decodeInts(rt, d)
				}
			}
			s.out[id] = out
		}
		// convert turns the sender's held-back in-band barrier unaligned.
		convert := func(s *sender) {
			id := s.taken
			if id == 0 || !timeoutable[id] || !s.w.BarrierPending(id) {
				return
			}
			for _, d := range s.w.ConvertBarrier(barrierOf(id)) {
				s.out[id][d.Channel] = decodeInts(rt, d)
			}
		}
		// snapshotAt records what a receiver processed at its snapshot.
		snapshotAt := func(rc *receiver, id int64) {
			at := make([]int, numS)
			for s := range at {
				at[s] = len(rc.processed[s])
			}
			rc.at[id] = at
		}
		onAlign := func(rc *receiver, res alignResult) {
			if res.snapshot != nil {
				// Taken aligned: no channel state at a receiver without
				// outputs.
				snapshotAt(rc, res.snapshot.ID)
				rc.aligned[res.snapshot.ID] = true
			}
		}
		receive := func(rc *receiver) bool {
			select {
			case b := <-rc.q.g.In:
				rc.q.receive(b)
				rc.q.queue = append(rc.q.queue, b)
				return true
			default:
				return false
			}
		}
		// processBatch processes up to n records of b, then its event, as
		// runInput does; it reports whether b is done.
		processBatch := func(rc *receiver, b *network.Batch[int], n int) bool {
			al := rc.t.al
			from := rc.t.chanSender(b.Ch)
			rc.processed[from] = append(rc.processed[from], b.Recs[b.Off:b.Off+n]...)
			b.Off += n
			if b.Off < len(b.Recs) {
				return false // cut short: stays at the front
			}
			rc.q.g.Recycle(*b)
			if ev := b.Ev; ev != nil {
				switch ev.Kind {
				case network.EventEndOfPartition:
					onAlign(rc, al.onEndOfPartition(b.Ch))
				case network.EventBarrier:
					onAlign(rc, al.onBarrier(b.Ch, ev.Barrier))
				}
			}
			return true
		}
		// process processes up to n records of the oldest batch.
		process := func(rc *receiver, n int) {
			b := &rc.q.queue[0]
			if rc.t.al.blocked(b.Ch) {
				rc.q.stash = append(rc.q.stash, *b) // held back for alignment
				rc.q.queue = rc.q.queue[1:]
				return
			}
			if processBatch(rc, b, n) {
				rc.q.queue = rc.q.queue[1:]
			}
		}
		handleMail := func(rc *receiver) bool {
			mails := rc.t.Mail.Take()
			for _, m := range mails {
				if m.Kind == network.MailBarrierAnnounce {
					if m.Barrier.ID > rc.t.announced.ID {
						rc.t.announced = m.Barrier
					}
					continue
				}
				if m.Kind != network.MailUnalignedBarrier {
					rt.Fatalf("unexpected mail %v", m.Kind)
				}
				id := m.Barrier.ID
				if rc.aligned[id] {
					rt.Fatalf("receiver got checkpoint %d's unaligned barrier after taking it aligned", id)
				}
				if id > rc.t.lastUnaligned {
					// What task.checkpoint does at a receiver without
					// outputs: the snapshot, then the capture.
					snapshotAt(rc, id)
					rc.t.state = lifeRunning
					rc.caps[id] = rc.t.startUnaligned(m.Barrier)
				}
				for _, c := range rc.t.captures {
					if c.id == id {
						rc.t.input.notify(c, m.Ch, m.Seq)
					}
				}
				rc.t.completeCaptures()
			}
			return len(mails) > 0
		}

		steps := rapid.IntRange(1, 300).Draw(rt, "steps")
		for range steps {
			// As runInput does on every turn of its loop.
			for _, rc := range recv {
				rc.q.unstash()
			}
			switch rapid.IntRange(0, 10).Draw(rt, "action") {
			case 0, 1: // a sender emits a record
				s := send[rapid.IntRange(0, numS-1).Draw(rt, "s")]
				if s.ended || s.w.NumPending >= network.MaxOverdraft {
					continue // it would wait for a credit here
				}
				r := s.w.Next
				v := s.next
				s.next++
				s.w.Collect(v)
				s.sent[r] = append(s.sent[r], v)
			case 2: // a sender flushes, or sends what it held back
				s := send[rapid.IntRange(0, numS-1).Draw(rt, "s")]
				if s.w.NumPending+numR > network.MaxOverdraft {
					continue // it could wait for a credit here
				}
				if rapid.Bool().Draw(rt, "flush") {
					s.w.Flush()
				} else {
					s.w.DrainPending()
				}
			case 3: // a checkpoint is triggered, once the last one completed
				// (max-concurrent-checkpoints: 1, which unaligned
				// checkpoints require)
				if !completed(triggered) {
					continue
				}
				triggered++
				timeoutable[triggered] = rapid.Bool().Draw(rt, "timeoutable")
			case 4: // a sender takes the next checkpoint
				s := send[rapid.IntRange(0, numS-1).Draw(rt, "s")]
				if !s.ended && s.taken < triggered && s.w.NumPending+numR <= network.MaxOverdraft {
					take(s)
				}
			case 5: // a sender ends its input
				s := send[rapid.IntRange(0, numS-1).Draw(rt, "s")]
				if !s.ended && s.w.NumPending+numR <= network.MaxOverdraft {
					s.ended = true
					s.w.BroadcastEvent(&network.Event{Kind: network.EventEndOfPartition})
				}
			case 6: // a receiver takes a batch from its gate
				receive(recv[rapid.IntRange(0, numR-1).Draw(rt, "r")])
			case 7: // a receiver processes (part of) its oldest batch
				rc := recv[rapid.IntRange(0, numR-1).Draw(rt, "r")]
				if len(rc.q.queue) == 0 || rc.t.Mail.Priority.Load() {
					// A task checks its mailbox before each record: a
					// barrier put there before a batch was sent is taken
					// before any record of the batch.
					continue
				}
				b := rc.q.queue[0]
				process(rc, rapid.IntRange(0, len(b.Recs)-b.Off).Draw(rt, "records"))
			case 8: // a receiver handles its mail
				handleMail(recv[rapid.IntRange(0, numR-1).Draw(rt, "r")])
			case 9: // a sender's held-back barrier reaches its timeout
				convert(send[rapid.IntRange(0, numS-1).Draw(rt, "s")])
			case 10: // a receiver's alignment reaches its timeout
				rc := recv[rapid.IntRange(0, numR-1).Draw(rt, "r")]
				if rc.t.Mail.Priority.Load() {
					continue // the mail goes first
				}
				if b, ok := rc.t.pendingAligned(); ok {
					snapshotAt(rc, b.ID)
					rc.t.state = lifeRunning
					rc.caps[b.ID] = rc.t.startUnaligned(b)
				}
			}
		}
		// Liveness: once every sender has taken every checkpoint and sent
		// everything, every receiver completes every checkpoint it started.
		for round, progress := 0, true; progress; round++ {
			if round == 10000 {
				rt.Fatal("the job does not quiesce")
			}
			progress = false
			for _, s := range send {
				for !s.ended && s.taken < triggered && s.w.NumPending+numR <= network.MaxOverdraft {
					take(s)
					progress = true
				}
				if s.w.NumPending+numR <= network.MaxOverdraft {
					s.w.Flush()
				}
				if s.w.DrainPending() || s.w.NumPending > 0 {
					progress = true
				}
			}
			for _, rc := range recv {
				for handleMail(rc) || receive(rc) {
					progress = true
				}
				rc.q.unstash()
				for len(rc.q.queue) > 0 && !rc.t.Mail.Priority.Load() {
					b := rc.q.queue[0]
					process(rc, len(b.Recs)-b.Off)
					rc.q.unstash()
					progress = true
				}
			}
		}
		for ri, rc := range recv {
			for id, c := range rc.caps {
				select {
				case <-c.done:
				default:
					rt.Fatalf("receiver %d never completed checkpoint %d: channels open %v", ri, id, c.open)
				}
			}
		}
		for ri, rc := range recv {
			for id := range rc.aligned {
				for si, s := range send {
					want := s.sent[ri]
					if s.before[id] != nil {
						want = want[:s.before[id][ri]]
					}
					if got := rc.processed[si][:rc.at[id][si]]; !slices.Equal(got, want) {
						rt.Fatalf("aligned checkpoint %d, sender %d -> receiver %d: processed %v; emitted before the snapshot %v", id, si, ri, got, want)
					}
					if out := s.out[id]; out != nil && len(out[ri]) > 0 {
						rt.Fatalf("aligned checkpoint %d: sender %d has output channel state %v for receiver %d", id, si, out[ri], ri)
					}
					checked++
				}
			}
			for id, c := range rc.caps {
				select {
				case <-c.done:
				default:
					continue // still recording: not checked
				}
				for si, s := range send {
					want := s.sent[ri]
					if s.before[id] != nil {
						want = want[:s.before[id][ri]]
					} else if !s.ended {
						rt.Fatalf("receiver %d completed checkpoint %d before sender %d took it or ended", ri, id, si)
					}
					var got []int
					got = append(got, rc.processed[si][:rc.at[id][si]]...)
					if d := c.input[si]; d != nil {
						got = append(got, decodeInts(rt, *d)...)
					}
					if out := s.out[id]; out != nil {
						got = append(got, out[ri]...)
					}
					if !slices.Equal(got, want) {
						rt.Fatalf("checkpoint %d, sender %d -> receiver %d: processed+input+output state %v; emitted before the snapshot %v",
							id, si, ri, got, want)
					}
					checked++
					if len(got) > rc.at[id][si] {
						withState++
					}
				}
			}
		}
	})
}

var intSer = intSerializerForTest{}

type intSerializerForTest struct{}

func (intSerializerForTest) Append(dst []byte, v int) []byte {
	return binary.AppendVarint(dst, int64(v))
}
func (intSerializerForTest) Decode(src []byte) (int, []byte, error) {
	v, n := binary.Varint(src)
	if n <= 0 {
		return 0, nil, fmt.Errorf("bad varint")
	}
	return int(v), src[n:], nil
}

func decodeInts(rt *rapid.T, d network.ChannelData) []int {
	var out []int
	data := d.Data
	for len(data) > 0 {
		v, rest, err := intSer.Decode(data)
		if err != nil {
			rt.Fatal(err)
		}
		out = append(out, v)
		data = rest
	}
	if int64(len(out)) != d.Records {
		rt.Fatalf("%d records decoded; the channel state says %d", len(out), d.Records)
	}
	return out
}

// chanSender is the sending subtask of a gate channel in these tests,
// where channel i of every gate is sender i's.
func (t *Task) chanSender(ch int32) int { return int(ch) }

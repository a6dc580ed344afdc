package task

import "github.com/gflink/gflink/engine/internal/network"

// aligner decides, for a task with several input channels, when a
// checkpoint barrier has arrived on every channel and the task may
// snapshot. It is pure bookkeeping; the task loop acts on its answers.
//
// EXACTLY_ONCE: a channel whose barrier n has arrived is blocked — its
// later batches are held back, unprocessed — until barrier n has arrived on
// every channel (or the channel has ended). Because each channel has a fixed
// number of buffers, holding them back stops the sender: alignment never
// buffers without bound. A newer barrier arriving during alignment aborts
// the older checkpoint, as in Flink.
//
// AT_LEAST_ONCE: nothing is blocked; the task snapshots when the last
// channel's barrier arrives, so records that came in after an earlier
// channel's barrier are part of the snapshot and will be replayed again
// after recovery (counted twice), which is what at-least-once allows.
type aligner struct {
	exactlyOnce bool
	n           int
	finished    []bool
	numFinished int   // channels ended; a channel is never both ended and blocked
	lastDone    int64 // barriers up to here are done or aborted: stale

	// EXACTLY_ONCE
	current    network.Barrier // being aligned; id 0: none
	blockedCh  []bool
	numBlocked int
	epoch      int // changes whenever channels are blocked or released

	// AT_LEAST_ONCE
	seen map[int64]*seenBarrier

	// abortedAhead holds checkpoints aborted before their barrier arrived
	// here: their barriers are stale when they come.
	abortedAhead map[int64]bool

	// directID is the checkpoint last started by startDirect.
	directID int64
}

type seenBarrier struct {
	b  network.Barrier
	ch []bool
}

func newAligner(numChannels int, exactlyOnce bool) *aligner {
	return &aligner{exactlyOnce: exactlyOnce, n: numChannels, finished: make([]bool, numChannels),
		blockedCh: make([]bool, numChannels), seen: map[int64]*seenBarrier{}}
}

// alignResult is what the task must do after an event.
type alignResult struct {
	snapshot *network.Barrier // take this checkpoint now
	aborted  int64            // this checkpoint's alignment was given up
}

func (a *aligner) blocked(ch int32) bool { return a.numBlocked > 0 && a.blockedCh[ch] }

func (a *aligner) allFinished() bool {
	return a.numFinished == a.n
}

func (a *aligner) releaseAll() {
	if a.numBlocked > 0 {
		clear(a.blockedCh)
		a.numBlocked = 0
	}
	a.epoch++
}

func (a *aligner) onBarrier(ch int32, b network.Barrier) alignResult {
	if b.ID <= a.lastDone || a.abortedAhead[b.ID] {
		return alignResult{} // a late barrier of a checkpoint already done or given up
	}
	if a.exactlyOnce && a.current.ID != 0 && b.ID < a.current.ID {
		// An older checkpoint's barrier while a newer one aligns: that
		// checkpoint was given up here; its barrier must neither block the
		// channel nor count towards the newer alignment (the channel's
		// records up to the newer barrier belong before the snapshot).
		return alignResult{}
	}
	if !a.exactlyOnce {
		s := a.seen[b.ID]
		if s == nil {
			s = &seenBarrier{b: b, ch: make([]bool, a.n)}
			a.seen[b.ID] = s
		}
		s.ch[ch] = true
		return a.checkAtLeastOnce()
	}
	var res alignResult
	if a.current.ID != 0 && b.ID > a.current.ID {
		res.aborted = a.current.ID
		a.lastDone = a.current.ID
		a.current = network.Barrier{}
		a.releaseAll()
	}
	if a.current.ID == 0 {
		a.current = b
	}
	if !a.blockedCh[ch] {
		a.blockedCh[ch] = true
		a.numBlocked++
		a.epoch++
	}
	if s := a.checkExactlyOnce(); s != nil {
		res.snapshot = s
	}
	return res
}

func (a *aligner) checkExactlyOnce() *network.Barrier {
	// Counting, not scanning: a task of a p×p exchange has p channels, and
	// this runs for each barrier that arrives.
	if a.current.ID == 0 || a.numBlocked+a.numFinished < a.n {
		return nil
	}
	b := a.current
	a.lastDone = b.ID
	a.current = network.Barrier{}
	a.releaseAll()
	return &b
}

func (a *aligner) checkAtLeastOnce() alignResult {
	// The oldest checkpoint seen on every live channel is due; older ones
	// that can no longer complete are dropped.
	var due *network.Barrier
	for id, s := range a.seen {
		complete := true
		for i := 0; i < a.n; i++ {
			if !s.ch[i] && !a.finished[i] {
				complete = false
				break
			}
		}
		if complete && (due == nil || id > due.ID) {
			b := s.b
			due = &b
		}
	}
	if due == nil {
		return alignResult{}
	}
	for id := range a.seen {
		if id <= due.ID {
			delete(a.seen, id)
		}
	}
	a.lastDone = due.ID
	return alignResult{snapshot: due}
}

// onEndOfPartition records that a channel has ended; an ended channel
// counts as aligned.
func (a *aligner) onEndOfPartition(ch int32) alignResult {
	if !a.finished[ch] {
		a.finished[ch] = true
		a.numFinished++
	}
	if a.blockedCh[ch] {
		a.blockedCh[ch] = false
		a.numBlocked--
	}
	a.epoch++
	if !a.exactlyOnce {
		return a.checkAtLeastOnce()
	}
	var res alignResult
	if s := a.checkExactlyOnce(); s != nil {
		res.snapshot = s
	}
	return res
}

// abort gives up checkpoint id (the coordinator aborted it), releasing the
// blocked channels.
func (a *aligner) abort(id int64) bool {
	delete(a.seen, id)
	if id <= a.lastDone {
		return false
	}
	if a.current.ID == id {
		a.lastDone = id
		a.current = network.Barrier{}
		a.releaseAll()
		return true
	}
	if a.current.ID == 0 || id > a.current.ID {
		// Not seen here yet (or newer than the alignment in progress, which
		// goes on): remember it, so that its barrier is ignored.
		if a.abortedAhead == nil {
			a.abortedAhead = map[int64]bool{}
		}
		a.abortedAhead[id] = true
	}
	return false
}

// direct records a checkpoint triggered directly (the task's inputs have
// all ended). It reports whether the task should snapshot it.
func (a *aligner) direct(id int64) bool {
	if id <= a.lastDone {
		return false
	}
	a.lastDone = id
	return true
}

// startDirect begins checkpoint b at a task triggered directly while its
// input is open: every task it reads from has finished, so no barrier of b
// will come, and each channel counts as aligned when it ends.
func (a *aligner) startDirect(b network.Barrier) alignResult {
	if b.ID <= a.lastDone || a.abortedAhead[b.ID] {
		return alignResult{}
	}
	a.directID = b.ID
	if !a.exactlyOnce {
		if a.seen[b.ID] == nil {
			a.seen[b.ID] = &seenBarrier{b: b, ch: make([]bool, a.n)}
		}
		return a.checkAtLeastOnce()
	}
	var res alignResult
	switch {
	case a.current.ID == 0:
		a.current = b
	case b.ID > a.current.ID:
		res.aborted = a.current.ID
		a.lastDone = a.current.ID
		a.current = b
		a.releaseAll()
	case b.ID < a.current.ID:
		return alignResult{} // older than the alignment in progress
	}
	if s := a.checkExactlyOnce(); s != nil {
		res.snapshot = s
	}
	return res
}

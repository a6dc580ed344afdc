package network

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ErrTaskCanceled unwinds a task whose job cancelled it: a writer waiting
// for credits when the task is cancelled panics with it, as the task
// pushes records through its chain by plain calls; the task recovers it
// and ends quietly.
var ErrTaskCanceled = errors.New("task canceled")

// MailKind says what a mail asks of a task.
type MailKind int

const (
	MailTrigger  MailKind = iota // take checkpoint Barrier now (sources, ended tasks)
	MailComplete                 // checkpoint ID completed
	MailAbort                    // checkpoint ID aborted
	MailDrain                    // stop --drain: end the input now
	// MailUnalignedBarrier: an upstream task sent checkpoint Barrier's barrier on
	// channel Ch ahead of its data, after its batch number Seq.
	MailUnalignedBarrier
	// MailBarrierAnnounce: an upstream task sent checkpoint b's in-band
	// barrier, which may turn unaligned (aligned-checkpoint timeout), on
	// channel ch: the receiver's timeout starts even while the barrier
	// waits in its queue (Flink's barrier announcement).
	MailBarrierAnnounce
	// MailAlignmentTimeout: the alignment of checkpoint id reached its
	// aligned-checkpoint timeout.
	MailAlignmentTimeout
)

// Mail is a control message to a task: Barrier for triggers and barriers,
// ID for the checkpoint it is about, Ch and Seq for an unaligned barrier's
// channel and the number of the last batch it overtook.
type Mail struct {
	Kind    MailKind
	Barrier Barrier
	ID      int64
	Ch      int32
	Seq     uint32
}

// Mailbox is a task's queue of control messages. It never blocks the
// sender (the job master must not wait on a task stuck in backpressure);
// it holds few messages, one per checkpoint event.
type Mailbox struct {
	mu     sync.Mutex
	q      []Mail
	Notify chan struct{}
	// Priority is set while a checkpoint trigger or an unaligned barrier
	// waits in q: the task stops processing its input batch at the next
	// record, and its writers stop waiting for credits (priorityWake wakes
	// them), so that the checkpoint does not wait behind backpressure.
	Priority     atomic.Bool
	priorityWake chan struct{}
}

// NewMailbox returns an empty mailbox.
func NewMailbox() *Mailbox {
	return &Mailbox{Notify: make(chan struct{}, 1), priorityWake: make(chan struct{}, 1)}
}

// Put queues x without blocking; a trigger, an unaligned barrier, an
// announcement or an alignment timeout makes the mailbox urgent (Priority).
func (m *Mailbox) Put(x Mail) {
	m.mu.Lock()
	m.q = append(m.q, x)
	// An announcement is urgent too: a task busy with a long queue would
	// see it only when the queue is empty, and its alignment timeout, which
	// runs from it, would wait for the drain.
	if x.Kind == MailTrigger || x.Kind == MailUnalignedBarrier || x.Kind == MailAlignmentTimeout || x.Kind == MailBarrierAnnounce {
		m.Priority.Store(true)
		select {
		case m.priorityWake <- struct{}{}:
		default:
		}
	}
	m.mu.Unlock()
	select {
	case m.Notify <- struct{}{}:
	default:
	}
}

// Take returns the queued mail and empties the mailbox.
func (m *Mailbox) Take() []Mail {
	m.mu.Lock()
	q := m.q
	m.q = nil
	m.Priority.Store(false)
	m.mu.Unlock()
	return q
}

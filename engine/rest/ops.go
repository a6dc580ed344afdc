package rest

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/gflink/gflink/engine"
)

type opKind int

const (
	opSavepoint opKind = iota // savepoints and stop-with-savepoint
	opCheckpoint
	opDisposal
)

// operation is one asynchronous operation (Flink's trigger/poll protocol).
type operation struct {
	kind      opKind
	jobID     string
	done      bool
	result    engine.SnapshotResult
	doneAt    time.Time
	fetched   bool // its completed status has been read once
	createdAt time.Time
}

// opStore keeps asynchronous operations by trigger id for
// rest.async.store-duration after they complete.
type opStore struct {
	mu       sync.Mutex
	ops      map[string]*operation
	storeFor time.Duration
	changed  chan struct{} // closed and replaced on every change
	wg       sync.WaitGroup
	closing  chan struct{}
}

func newOpStore(storeFor time.Duration) *opStore {
	return &opStore{ops: map[string]*operation{}, storeFor: storeFor, changed: make(chan struct{}), closing: make(chan struct{})}
}

func newTriggerID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *opStore) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// lookup returns an operation; a known trigger id given again by a client
// (Flink's idempotent retries) is answered with the same operation.
func (s *opStore) lookup(id string) (*operation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	op, ok := s.ops[id]
	return op, ok
}

func (s *opStore) expire() {
	now := time.Now()
	for id, op := range s.ops {
		if op.done && now.Sub(op.doneAt) > s.storeFor {
			delete(s.ops, id)
		}
	}
}

// start registers an operation and completes it when its result arrives.
// stop ends the wait (the server is closing).
func (s *opStore) start(id string, kind opKind, jobID string, ch <-chan engine.SnapshotResult, jobDone <-chan struct{}) {
	op := &operation{kind: kind, jobID: jobID, createdAt: time.Now()}
	s.mu.Lock()
	s.ops[id] = op
	s.notify()
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var r engine.SnapshotResult
		select {
		case r = <-ch:
		case <-jobDone:
			// The job master answers every request before it ends.
			select {
			case r = <-ch:
			default:
				r = engine.SnapshotResult{Err: errJobEnded}
			}
		case <-s.closing:
			return
		}
		s.complete(op, r)
	}()
}

func (s *opStore) complete(op *operation, r engine.SnapshotResult) {
	s.mu.Lock()
	op.done, op.result, op.doneAt = true, r, time.Now()
	s.notify()
	s.mu.Unlock()
}

// status returns an operation's state, marking a completed one as fetched.
func (s *opStore) status(id string, kind opKind, jobID string) (*operation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	op, ok := s.ops[id]
	if !ok || op.kind != kind || (jobID != "" && op.jobID != jobID) {
		return nil, false
	}
	c := *op
	if op.done && !op.fetched {
		op.fetched = true
		s.notify()
	}
	return &c, true
}

// waitFetched waits until every completed operation has been fetched and
// none is in progress, or the deadline passes: a process whose job has
// ended stays up until the client that asked for a stop has its answer.
func (s *opStore) waitFetched(deadline time.Time) {
	for {
		s.mu.Lock()
		pending := false
		for _, op := range s.ops {
			if !op.done || !op.fetched {
				pending = true
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if !pending {
			return
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
			return
		}
	}
}

func (s *opStore) close() {
	close(s.closing)
	s.wg.Wait()
}

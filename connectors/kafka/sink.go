package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gflink/gflink/stream"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Delivery guarantees of the sink (Flink's sink.delivery-guarantee).
const (
	ExactlyOnce = "exactly-once"
	AtLeastOnce = "at-least-once"
	None        = "none"
)

// Sink writes records to a topic (Flink's KafkaSink). Exactly-once: each
// subtask writes into one Kafka transaction per checkpoint, flushed at the
// barrier (pre-commit) and committed when the checkpoint completes — the
// two-phase commit the engine drives. Transactional ids are
// <prefix>-<subtask>-<n>, n counting the subtask's transactions; the
// writers' state (union) records each subtask's next n, so that after a
// restore, at any parallelism, the writer that takes an old subtask over
// aborts that subtask's lingering transactions — n upward until an id that
// was never used — and a fresh job does the same from 0, as Flink's
// TransactionAborter. At-least-once flushes at every barrier; none never
// waits.
type Sink[T any] struct {
	Brokers   []string
	Topic     string
	Guarantee string
	// TransactionalIDPrefix is required for exactly-once; two jobs must
	// not share one.
	TransactionalIDPrefix string
	// TransactionTimeout is transaction.timeout.ms: a transaction left open
	// by a failure blocks read_committed readers until it is aborted on
	// restore, or until this timeout. It must not exceed the brokers'
	// transaction.max.timeout.ms (15 min by default).
	TransactionTimeout time.Duration
	// Record turns a value into a record's key and value.
	Record  func(T) (key, value []byte)
	Options []kgo.Opt

	// open holds the clients of pre-committed transactions, so that the
	// committer ends them on the client that began them; after a restore
	// in another process the committer ends them by producer id and epoch
	// instead. The sink's writers and committers share it (they are made
	// from the same *Sink).
	open openTxns
}

type openTxns struct {
	mu sync.Mutex
	m  map[string]*kgo.Client
}

func (o *openTxns) put(id string, cl *kgo.Client) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]*kgo.Client{}
	}
	o.m[id] = cl
}

func (o *openTxns) take(id string) *kgo.Client {
	o.mu.Lock()
	defer o.mu.Unlock()
	cl := o.m[id]
	delete(o.m, id)
	return cl
}

// closePrefix closes the clients of the transactions whose ids start with
// prefix (the transactions stay open on the brokers).
func (o *openTxns) closePrefix(prefix string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, cl := range o.m {
		if strings.HasPrefix(id, prefix) {
			cl.Close()
			delete(o.m, id)
		}
	}
}

// UnionWriterState implements stream.UnionWriterStateSink.
func (*Sink[T]) UnionWriterState() bool { return true }

func (s *Sink[T]) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.Brokers...), kgo.DefaultProduceTopic(s.Topic)}, extra...)
	return append(opts, s.Options...)
}

func (s *Sink[T]) timeout() time.Duration {
	if s.TransactionTimeout > 0 {
		return s.TransactionTimeout
	}
	return 15 * time.Minute
}

// writerState is a writer's checkpointed state.
type writerState struct {
	Subtask int   `json:"subtask"`
	Next    int64 `json:"next"` // the next transaction's n
}

// committable is a pre-committed transaction.
type committable struct {
	TransactionalID string `json:"transactionalId"`
	ProducerID      int64  `json:"producerId"`
	Epoch           int16  `json:"epoch"`
}

// CheckCheckpointTiming implements stream.CheckpointTimingChecker. An
// exactly-once transaction is begun after one checkpoint's barrier and
// committed when the next checkpoint completes: it stays open for an
// interval plus that checkpoint's duration, and longer when a checkpoint
// fails or the job restarts. The brokers abort a transaction older than
// transaction.timeout.ms; its records are then lost and the commit fails,
// so an interval that comes near the timeout is worth a warning when the
// job starts, not a failure hours later.
func (s *Sink[T]) CheckCheckpointTiming(t stream.CheckpointTiming) []string {
	if s.Guarantee != ExactlyOnce {
		return nil
	}
	timeout := s.timeout()
	// Checkpoints start an interval apart, or a min-pause after the last
	// one completed if that is longer.
	gap, what := t.Interval, fmt.Sprintf("execution.checkpointing.interval (%s)", t.Interval)
	if t.MinPause > gap {
		gap, what = t.MinPause, fmt.Sprintf("execution.checkpointing.min-pause (%s)", t.MinPause)
	}
	switch {
	case t.Interval == 0:
		return []string{fmt.Sprintf("Kafka sink to %s is exactly-once but checkpointing is off (execution.checkpointing.interval is not set): its transaction commits only when the input ends, so read_committed readers see nothing before that, and an unbounded job never commits. Set execution.checkpointing.interval.", s.Topic)}
	case gap >= timeout:
		return []string{fmt.Sprintf("Kafka sink to %s: %s is not below transaction.timeout.ms (%d): every transaction stays open at least that long, so the brokers abort it before it commits, its records are lost and the job fails over. Lower it or raise transaction.timeout.ms (at most the brokers' transaction.max.timeout.ms, 15 min by default).",
			s.Topic, what, timeout.Milliseconds())}
	case 2*gap > timeout:
		return []string{fmt.Sprintf("Kafka sink to %s: %s approaches transaction.timeout.ms (%d): a transaction stays open for that plus the checkpoint's duration, longer when a checkpoint fails or the job restarts, and the brokers abort it at the timeout, losing its records. Keep it below half the timeout.",
			s.Topic, what, timeout.Milliseconds())}
	case t.Timeout > 0 && gap+t.Timeout >= timeout:
		return []string{fmt.Sprintf("Kafka sink to %s: a checkpoint may take up to execution.checkpointing.timeout (%s), but a transaction is aborted at transaction.timeout.ms (%d): a checkpoint slower than %s loses its records. Set execution.checkpointing.timeout below that, or raise transaction.timeout.ms.",
			s.Topic, t.Timeout, timeout.Milliseconds(), (timeout - gap).Round(time.Millisecond))}
	}
	return nil
}

func (s *Sink[T]) txnID(subtask int, n int64) string {
	return fmt.Sprintf("%s-%d-%d", s.TransactionalIDPrefix, subtask, n)
}

// CreateWriter implements stream.Sink.
func (s *Sink[T]) CreateWriter(ctx stream.SinkContext) (stream.SinkWriter[T], error) {
	w := &writer[T]{s: s, ctx: ctx}
	if s.Guarantee != ExactlyOnce {
		cl, err := kgo.NewClient(s.clientOpts()...)
		if err != nil {
			return nil, fmt.Errorf("kafka sink: %w", err)
		}
		w.cl = cl
		return w, nil
	}
	if s.TransactionalIDPrefix == "" {
		return nil, errors.New("kafka sink: delivery guarantee exactly-once needs a transactional-id-prefix")
	}
	// Which old subtasks this writer takes over, and where their
	// transactions stand.
	from := map[int]int64{ctx.Subtask: 0}
	for _, b := range ctx.RestoredState {
		var st writerState
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("kafka sink: restored writer state: %w", err)
		}
		if st.Subtask%ctx.Parallelism == ctx.Subtask {
			from[st.Subtask] = max(from[st.Subtask], st.Next)
		}
	}
	w.next = from[ctx.Subtask]
	if err := s.abortLingering(from); err != nil {
		return nil, err
	}
	return w, nil
}

// abortLingering aborts the transactions of the given subtasks from the
// given n upward, until an id that was never used: InitProducerID on a
// transactional id aborts its open transaction, and answers epoch 0 for
// an id never used before.
func (s *Sink[T]) abortLingering(from map[int]int64) error {
	cl, err := kgo.NewClient(s.clientOpts()...)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for subtask, n := range from {
		for ; ; n++ {
			id := s.txnID(subtask, n)
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID = &id
			req.TransactionTimeoutMillis = int32(s.timeout().Milliseconds())
			resp, err := req.RequestWith(ctx, cl)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			if err != nil {
				return fmt.Errorf("kafka sink: abort lingering transaction %s: %w", id, err)
			}
			if resp.ProducerEpoch == 0 {
				break // never used: nothing after it either
			}
		}
	}
	return nil
}

type writer[T any] struct {
	s   *Sink[T]
	ctx stream.SinkContext
	cl  *kgo.Client // at-least-once and none; exactly-once: the open transaction's

	next  int64  // exactly-once: the n of the next transaction
	txnID string // the open transaction, or ""

	// err is the first failed produce, set from the client's goroutines
	// and read at every Write: an atomic load there, not a lock per
	// record.
	err atomic.Pointer[error]

	sent int64 // the bytes of the keys and values produced (numBytesSend)
}

// NumBytesSend implements stream.BytesSendWriter: the bytes of the keys
// and values handed to the producer.
func (w *writer[T]) NumBytesSend() int64 { return w.sent }

func (w *writer[T]) failed(_ *kgo.Record, err error) {
	if err != nil {
		w.err.CompareAndSwap(nil, &err)
	}
}

func (w *writer[T]) produceErr() error {
	if err := w.err.Load(); err != nil {
		return fmt.Errorf("kafka sink: produce to %s: %w", w.s.Topic, *err)
	}
	return nil
}

// Write implements stream.SinkWriter: asynchronous; errors surface at the
// next flush.
func (w *writer[T]) Write(v T) error {
	if err := w.produceErr(); err != nil {
		return err
	}
	if w.s.Guarantee == ExactlyOnce && w.txnID == "" {
		if err := w.begin(); err != nil {
			return err
		}
	}
	k, val := w.s.Record(v)
	w.sent += int64(len(k) + len(val))
	w.cl.Produce(context.Background(), &kgo.Record{Key: k, Value: val}, w.failed)
	return nil
}

func (w *writer[T]) begin() error {
	id := w.s.txnID(w.ctx.Subtask, w.next)
	cl, err := kgo.NewClient(w.s.clientOpts(kgo.TransactionalID(id), kgo.TransactionTimeout(w.s.timeout()))...)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return fmt.Errorf("kafka sink: begin transaction %s: %w", id, err)
	}
	w.cl, w.txnID = cl, id
	w.next++
	return nil
}

// Flush implements stream.SinkWriter: at-least-once waits for every record
// to be acknowledged before the barrier passes on.
func (w *writer[T]) Flush(bool) error {
	if w.s.Guarantee == AtLeastOnce {
		if err := w.cl.Flush(context.Background()); err != nil {
			return err
		}
	}
	return w.produceErr()
}

// PrepareCommit implements stream.CommittingSinkWriter: the open
// transaction is flushed and handed over; the next record opens another.
func (w *writer[T]) PrepareCommit() ([][]byte, error) {
	if w.s.Guarantee != ExactlyOnce || w.txnID == "" {
		return nil, nil
	}
	ctx := context.Background()
	if err := w.cl.Flush(ctx); err != nil {
		return nil, err
	}
	if err := w.produceErr(); err != nil {
		return nil, err
	}
	pid, epoch, err := w.cl.ProducerID(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: transaction %s: %w", w.txnID, err)
	}
	b, _ := json.Marshal(committable{TransactionalID: w.txnID, ProducerID: pid, Epoch: epoch})
	w.s.open.put(w.txnID, w.cl)
	w.cl, w.txnID = nil, ""
	return [][]byte{b}, nil
}

// SnapshotState implements stream.StatefulSinkWriter.
func (w *writer[T]) SnapshotState(int64) ([][]byte, error) {
	if w.s.Guarantee != ExactlyOnce {
		return nil, nil
	}
	b, _ := json.Marshal(writerState{Subtask: w.ctx.Subtask, Next: w.next})
	return [][]byte{b}, nil
}

// Close implements stream.SinkWriter. An open transaction is aborted: it
// was never pre-committed, so no checkpoint refers to it.
func (w *writer[T]) Close() error {
	if w.cl == nil {
		return nil
	}
	if w.s.Guarantee == ExactlyOnce {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = w.cl.AbortBufferedRecords(ctx)
		_ = w.cl.EndTransaction(ctx, kgo.TryAbort)
		cancel()
	} else {
		w.cl.Flush(context.Background())
	}
	w.cl.Close()
	return nil
}

// CreateCommitter implements stream.TwoPhaseCommittingSink.
func (s *Sink[T]) CreateCommitter(ctx stream.SinkContext) (stream.Committer, error) {
	return &committer[T]{s: s, subtask: ctx.Subtask}, nil
}

type committer[T any] struct {
	s       *Sink[T]
	subtask int
	admin   *kgo.Client
}

// Commit implements stream.Committer. Idempotent: a transaction committed
// before answers success again; one the broker no longer knows in that
// epoch (fenced, or its state moved on) was committed before a failure.
func (c *committer[T]) Commit(items [][]byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, b := range items {
		var cm committable
		if err := json.Unmarshal(b, &cm); err != nil {
			return fmt.Errorf("kafka sink: committable: %w", err)
		}
		cl := c.s.open.take(cm.TransactionalID)
		if cl != nil {
			err := cl.EndTransaction(ctx, kgo.TryCommit)
			cl.Close()
			if err != nil {
				return fmt.Errorf("kafka sink: commit transaction %s: %w", cm.TransactionalID, err)
			}
			continue
		}
		if c.admin == nil {
			a, err := kgo.NewClient(c.s.clientOpts()...)
			if err != nil {
				return fmt.Errorf("kafka sink: %w", err)
			}
			c.admin = a
		}
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = cm.TransactionalID, cm.ProducerID, cm.Epoch, true
		resp, err := req.RequestWith(ctx, c.admin)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if errors.Is(err, kerr.InvalidTxnState) || errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
			err = nil // committed before the failure
		}
		if err != nil {
			return fmt.Errorf("kafka sink: commit transaction %s: %w", cm.TransactionalID, err)
		}
	}
	return nil
}

// Close implements stream.Committer. The clients of this subtask's
// pre-committed transactions that no commit ended (the job stopped between
// a checkpoint and its completion) are closed; the transactions stay open
// for a restore to commit, or for the next writer of the subtask to abort.
func (c *committer[T]) Close() error {
	if c.admin != nil {
		c.admin.Close()
	}
	mine := c.s.txnID(c.subtask, 0)
	mine = mine[:len(mine)-1]
	c.s.open.closePrefix(mine)
	return nil
}

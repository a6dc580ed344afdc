package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gflink/gflink/savepoint"
)

// Sink is where a stream ends (Flink's Sink V2).
type Sink[T any] interface {
	CreateWriter(ctx SinkContext) (SinkWriter[T], error)
}

// SinkContext describes the subtask a sink writer runs in.
type SinkContext struct {
	Subtask     int
	Parallelism int
	JobID       string
	// Attempt counts the job's restarts, from 0.
	Attempt int
	// RestoredState is the writer state of the restored checkpoint, for
	// sinks whose writers implement StatefulSinkWriter.
	RestoredState [][]byte
	// Checkpointing reports whether periodic checkpoints are enabled.
	Checkpointing bool
	// RunID identifies this attempt of this job (8 random hex digits), for
	// naming files so that no two attempts ever write the same name.
	RunID string
	// PreviousRunIDs are the run ids of this job's earlier attempts in this
	// process: what a RecoveryCleaner may clean up after.
	PreviousRunIDs []string
}

// SinkWriter writes records.
type SinkWriter[T any] interface {
	Write(v T) error
	// Flush is called before every checkpoint barrier is passed on, and
	// with endOfInput at the end of bounded input.
	Flush(endOfInput bool) error
	Close() error
}

// StatefulSinkWriter is a writer with state of its own to checkpoint.
type StatefulSinkWriter interface {
	SnapshotState(checkpointID int64) ([][]byte, error)
}

// CommittingSinkWriter is the first phase of a two-phase commit: at each
// checkpoint it pre-commits what it wrote and hands over committables
// (for example the names of pending files), which the engine stores in the
// checkpoint.
type CommittingSinkWriter[T any] interface {
	SinkWriter[T]
	PrepareCommit() ([][]byte, error)
}

// Committer is the second phase: it commits committables once the
// checkpoint that holds them is complete. Commit must be idempotent:
// after a restore the committables of the restored checkpoint are committed
// again, whether or not that had happened before the failure.
type Committer interface {
	Commit(committables [][]byte) error
	Close() error
}

// TwoPhaseCommittingSink is a sink whose output becomes visible exactly
// once: only what a completed checkpoint covers is committed, and whatever
// was written after it is discarded on restore.
type TwoPhaseCommittingSink[T any] interface {
	Sink[T]
	CreateCommitter(ctx SinkContext) (Committer, error)
}

// RecoveryCleaner is implemented by two-phase-commit sinks that remove what
// failed attempts left behind. After a restore, subtask 0 calls CleanUp with
// every committable of the restored checkpoint (of all subtasks): anything
// an earlier attempt of this job wrote (ctx.PreviousRunIDs) that is not
// among them can never be committed. Files of other jobs, even in the same
// place, are not this job's to touch.
type RecoveryCleaner interface {
	CleanUp(ctx SinkContext, committables [][]byte) error
}

// UnionWriterStateSink is a sink whose writers' state is union state:
// after a restore every writer sees every writer's state (the Kafka sink's
// writers find the transactions of the old subtasks they take over).
type UnionWriterStateSink interface {
	UnionWriterState() bool
}

// CheckpointTimingChecker is a connector whose guarantee depends on how
// often checkpoints complete (the Kafka exactly-once sink's transactions
// must commit before the brokers abort them). The job master logs what it
// returns when the job starts.
type CheckpointTimingChecker interface {
	CheckCheckpointTiming(CheckpointTiming) []string
}

// CheckpointTiming is what a CheckpointTimingChecker is told.
type CheckpointTiming struct {
	Interval time.Duration // 0: periodic checkpoints are off
	Timeout  time.Duration // execution.checkpointing.timeout
	MinPause time.Duration // execution.checkpointing.min-pause
}

func isStatefulSink(s any) bool {
	_, ok := s.(interface {
		CreateCommitter(SinkContext) (Committer, error)
	})
	return ok
}

// Operator state names of sinks (as in Flink's SinkWriterOperator and
// committer).
const (
	sinkWriterStateName    = "writer_raw_states"
	sinkCommitterStateName = "streaming_committer_raw_states"
)

type sinkOperator[T any] struct {
	baseOperator
	name      string
	sink      Sink[T]
	writer    SinkWriter[T]
	committer Committer
	// pending holds committables by the checkpoint that covers them, until
	// that checkpoint completes.
	pending map[int64][][]byte
	// lastSnapshot is the last checkpoint taken; committables of the end of
	// input belong to the next one.
	lastSnapshot int64
	ctx          SinkContext
}

func newSinkOperator[T any](rt *buildContext, sink Sink[T]) *sinkOperator[T] {
	return &sinkOperator[T]{name: rt.name, sink: sink, pending: map[int64][][]byte{}}
}

func (o *sinkOperator[T]) Collect(v T) {
	if err := o.writer.Write(v); err != nil {
		fail(o.name, err)
	}
}

func (o *sinkOperator[T]) open(ctx *opContext) error {
	t := ctx.t
	o.ctx = SinkContext{Subtask: t.subtask, Parallelism: t.v.parallelism, JobID: t.svc.jobID,
		Attempt: t.svc.attempt, Checkpointing: t.svc.checkpointing,
		RunID: t.svc.runID, PreviousRunIDs: t.svc.previousRunIDs}
	var restored [][]byte
	if ctx.restore != nil {
		for _, s := range ctx.restore.OperatorState {
			switch s.Name {
			case sinkWriterStateName:
				o.ctx.RestoredState = append(o.ctx.RestoredState, s.Items...)
			case sinkCommitterStateName:
				restored = append(restored, s.Items...)
			}
		}
	}
	if tpc, ok := o.sink.(TwoPhaseCommittingSink[T]); ok {
		c, err := tpc.CreateCommitter(o.ctx)
		if err != nil {
			return err
		}
		o.committer = c
		// The committables of the restored checkpoint are stored as union
		// state: every subtask sees all of them, commits (again, idempotently)
		// its deterministic share, and subtask 0 cleans up.
		var all, mine [][]byte
		for i, item := range restored {
			_, c, err := decodeCommittable(item)
			if err != nil {
				return fmt.Errorf("restore committables of %s: %w", o.name, err)
			}
			all = append(all, c)
			if i%o.ctx.Parallelism == o.ctx.Subtask {
				mine = append(mine, c)
			}
		}
		if len(mine) > 0 {
			if err := o.committer.Commit(mine); err != nil {
				return fmt.Errorf("commit restored committables of %s: %w", o.name, err)
			}
		}
		if cl, ok := o.sink.(RecoveryCleaner); ok && ctx.restore != nil && o.ctx.Subtask == 0 {
			if err := cl.CleanUp(o.ctx, all); err != nil {
				return fmt.Errorf("clean up after restore of %s: %w", o.name, err)
			}
		}
	}
	w, err := o.sink.CreateWriter(o.ctx)
	if err != nil {
		return err
	}
	o.writer = w
	return nil
}

func (o *sinkOperator[T]) prepareSnapshot(id int64) error {
	if err := o.writer.Flush(false); err != nil {
		return err
	}
	return o.preCommit(id)
}

func (o *sinkOperator[T]) preCommit(id int64) error {
	cw, ok := o.writer.(CommittingSinkWriter[T])
	if !ok {
		return nil
	}
	c, err := cw.PrepareCommit()
	if err != nil {
		return err
	}
	if len(c) > 0 {
		o.pending[id] = append(o.pending[id], c...)
	}
	return nil
}

func (o *sinkOperator[T]) snapshot(req snapshotRequest) (*opCapture, error) {
	id := req.id
	o.lastSnapshot = id
	c := &opCapture{}
	if sw, ok := o.writer.(StatefulSinkWriter); ok {
		items, err := sw.SnapshotState(id)
		if err != nil {
			return nil, err
		}
		mode := savepoint.SplitDistribute
		if u, ok := o.sink.(UnionWriterStateSink); ok && u.UnionWriterState() {
			mode = savepoint.Union
		}
		c.opState = append(c.opState, savepoint.OperatorListState{Name: sinkWriterStateName, Mode: mode, Items: items})
		c.states = append(c.states, savepoint.StateDescriptor{Name: sinkWriterStateName, Kind: mode.String(), Entries: int64(len(items))})
	}
	if o.committer != nil {
		var items [][]byte
		for _, cp := range slices.Sorted(mapsKeys(o.pending)) {
			if cp > id {
				continue
			}
			for _, c := range o.pending[cp] {
				items = append(items, encodeCommittable(cp, c))
			}
		}
		c.opState = append(c.opState, savepoint.OperatorListState{Name: sinkCommitterStateName, Mode: savepoint.Union, Items: items})
		c.states = append(c.states, savepoint.StateDescriptor{Name: sinkCommitterStateName, Kind: savepoint.Union.String(), Entries: int64(len(items))})
	}
	if len(c.opState) == 0 {
		return nil, nil
	}
	return c, nil
}

func mapsKeys[V any](m map[int64]V) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// notifyComplete commits every committable covered by checkpoint id.
func (o *sinkOperator[T]) notifyComplete(id int64) error {
	if o.committer == nil {
		return nil
	}
	var all [][]byte
	var done []int64
	for _, cp := range slices.Sorted(mapsKeys(o.pending)) {
		if cp <= id {
			all = append(all, o.pending[cp]...)
			done = append(done, cp)
		}
	}
	if len(all) == 0 {
		return nil
	}
	if err := o.committer.Commit(all); err != nil {
		return fmt.Errorf("commit checkpoint %d of %s: %w", id, o.name, err)
	}
	for _, cp := range done {
		delete(o.pending, cp)
	}
	return nil
}

// endInput flushes and pre-commits the tail of the output; it belongs to
// the next checkpoint, the final one. Without checkpointing nothing would
// ever commit it, so it is committed at once.
func (o *sinkOperator[T]) endInput() error {
	if err := o.writer.Flush(true); err != nil {
		return err
	}
	next := o.lastSnapshot + 1
	if err := o.preCommit(next); err != nil {
		return err
	}
	if !o.ctx.Checkpointing && o.committer != nil {
		return o.notifyComplete(next)
	}
	return nil
}

func (o *sinkOperator[T]) idle() {
	if f, ok := o.writer.(interface{ idle() }); ok {
		f.idle()
	}
}

func (o *sinkOperator[T]) close() error {
	var errs []error
	if o.writer != nil {
		errs = append(errs, o.writer.Close())
	}
	if o.committer != nil {
		errs = append(errs, o.committer.Close())
	}
	return errors.Join(errs...)
}

func encodeCommittable(cp int64, c []byte) []byte {
	b := binary.AppendVarint(nil, cp)
	return append(b, c...)
}

func decodeCommittable(b []byte) (int64, []byte, error) {
	cp, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("truncated committable: %w", savepoint.ErrCorrupt)
	}
	return cp, b[n:], nil
}

// PrintSink writes records to W, one per line (Flink's print()): their
// AppendTo when they are Appenders, else their String or fmt's %v (see
// RecordText). Lines are collected in a buffer and written in chunks of
// whole lines — when the buffer passes 64 KiB, before every checkpoint
// barrier is passed on, whenever the task runs out of input (so that a
// slow stream's lines appear at once), at the end of input and on close —
// never one write per record. The chunks of the subtasks sharing W never
// interleave. Printing is not transactional: after a recovery, lines are
// printed again.
type PrintSink[T any] struct {
	W io.Writer
	// Prefix, when set, replaces Flink's "<subtask>> " prefix.
	Prefix string

	mu sync.Mutex
}

// printFlushSize is the size at which a print writer writes its lines
// without waiting for a barrier or for its task to run out of input.
const printFlushSize = 64 << 10

// CreateWriter implements Sink.
func (s *PrintSink[T]) CreateWriter(ctx SinkContext) (SinkWriter[T], error) {
	prefix := s.Prefix
	if prefix == "" && ctx.Parallelism > 1 {
		prefix = strconv.Itoa(ctx.Subtask+1) + "> "
	}
	// The buffer grows as lines come (and keeps its size once flushed):
	// a thousand subtasks that print little do not hold 64 KiB each.
	return &printWriter[T]{s: s, prefix: prefix, text: NewRecordText[T]()}, nil
}

type printWriter[T any] struct {
	s      *PrintSink[T]
	prefix string
	text   *RecordText[T]
	buf    []byte
	// err is the error of a write on idle, which has no one to return it
	// to: the next Write, Flush or Close does.
	err error
}

func (w *printWriter[T]) Write(v T) error {
	if w.err != nil {
		return w.err
	}
	w.buf = append(w.buf, w.prefix...)
	w.buf = w.text.Append(w.buf, v)
	w.buf = append(w.buf, '\n')
	if len(w.buf) >= printFlushSize {
		return w.Flush(false)
	}
	return nil
}

// Flush writes the buffered lines in one write. Lines of one subtask are
// written whole, never interleaved with another subtask's.
func (w *printWriter[T]) Flush(bool) error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	w.s.mu.Lock()
	_, err := w.s.W.Write(w.buf)
	if f, ok := w.s.W.(*bufio.Writer); ok && err == nil {
		err = f.Flush()
	}
	w.s.mu.Unlock()
	w.buf = w.buf[:0]
	if err != nil {
		w.err = fmt.Errorf("print: %w", err)
	}
	return w.err
}

// idle writes what is buffered: the task has no input for now, and a line
// must not wait for the next one.
func (w *printWriter[T]) idle() { w.Flush(false) }

func (w *printWriter[T]) Close() error { return w.Flush(true) }

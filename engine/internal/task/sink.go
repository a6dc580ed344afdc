package task

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/savepoint"
)

// IsStatefulSink reports whether a sink keeps state in snapshots (writer
// state or committables), which makes its operator stateful in the graph.
func IsStatefulSink(s any) bool {
	_, ok := s.(interface {
		CreateCommitter(api.SinkContext) (api.Committer, error)
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
	sink      api.Sink[T]
	writer    api.SinkWriter[T]
	committer api.Committer
	// pending holds committables by the checkpoint that covers them, until
	// that checkpoint completes.
	pending map[int64][][]byte
	// lastSnapshot is the last checkpoint taken; committables of the end of
	// input belong to the next one.
	lastSnapshot int64
	ctx          api.SinkContext
	taken        int64 // records taken (numRecordsIn), read by publishCounts
}

// NewSinkOperator makes the operator that runs a sink's writers and, for a
// two-phase-commit sink, its committer.
func NewSinkOperator[T any](rt *BuildContext, sink api.Sink[T]) *sinkOperator[T] {
	return &sinkOperator[T]{name: rt.Name, sink: sink, pending: map[int64][][]byte{}}
}

// InputCounter is an operator that counts the records it takes, for its
// metrics, so that the chain edge into it needs no counter of its own.
type InputCounter interface {
	InputCount() *int64
}

// InputCount implements InputCounter.
func (o *sinkOperator[T]) InputCount() *int64 { return &o.taken }

func (o *sinkOperator[T]) Collect(v T) {
	o.taken++
	if err := o.writer.Write(v); err != nil {
		Fail(o.name, err)
	}
}

func (o *sinkOperator[T]) open(ctx *OpContext) error {
	t := ctx.Task
	o.ctx = api.SinkContext{Subtask: t.Subtask, Parallelism: t.Parallelism, JobID: t.svc.JobID,
		Attempt: t.svc.Attempt, Checkpointing: t.svc.Checkpointing,
		RunID: t.svc.RunID, PreviousRunIDs: t.svc.PreviousRunIDs}
	var restored [][]byte
	if ctx.Restore != nil {
		for _, s := range ctx.Restore.OperatorState {
			switch s.Name {
			case sinkWriterStateName:
				o.ctx.RestoredState = append(o.ctx.RestoredState, s.Items...)
			case sinkCommitterStateName:
				restored = append(restored, s.Items...)
			}
		}
	}
	if tpc, ok := o.sink.(api.TwoPhaseCommittingSink[T]); ok {
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
		if cl, ok := o.sink.(api.RecoveryCleaner); ok && ctx.Restore != nil && o.ctx.Subtask == 0 {
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
	if b, ok := w.(api.BytesSendWriter); ok {
		t.sinkBytes = b
	}
	return nil
}

func (o *sinkOperator[T]) prepareSnapshot(id int64) error {
	if err := o.writer.Flush(false); err != nil {
		return err
	}
	return o.preCommit(id)
}

func (o *sinkOperator[T]) preCommit(id int64) error {
	cw, ok := o.writer.(api.CommittingSinkWriter[T])
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
	if sw, ok := o.writer.(api.StatefulSinkWriter); ok {
		items, err := sw.SnapshotState(id)
		if err != nil {
			return nil, err
		}
		mode := savepoint.SplitDistribute
		if u, ok := o.sink.(api.UnionWriterStateSink); ok && u.UnionWriterState() {
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
	if f, ok := o.writer.(api.IdleFlusher); ok {
		f.Idle()
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

package task

import (
	"fmt"
	"slices"

	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/savepoint"
)

type opStateEntry struct {
	name   string
	mode   savepoint.Redistribution
	encode func() [][]byte
}

// opStateStore is an operator's api.OperatorStateStore: the lists
// restored for its subtask, and the states its function declared in Open,
// encoded at every snapshot.
type opStateStore struct {
	rc       api.RuntimeContext
	opening  bool
	restored map[string][][]byte
	states   []opStateEntry
}

// openFunction calls open, if not nil, with the function's RuntimeContext
// holding the operator state restored for the subtask.
func (c *opStateStore) openFunction(ctx *OpContext, open func(*api.RuntimeContext) error, name string) error {
	t := ctx.Task
	c.rc = api.NewRuntimeContext(api.SubtaskInfo{Subtask: t.Subtask, Parallelism: t.Parallelism, Attempt: t.svc.Attempt,
		JobID: t.svc.JobID}, c)
	c.restored = map[string][][]byte{}
	if ctx.Restore != nil {
		for _, s := range ctx.Restore.OperatorState {
			c.restored[s.Name] = append(c.restored[s.Name], s.Items...)
		}
	}
	if open == nil {
		return nil
	}
	c.opening = true
	defer func() { c.opening = false }()
	if err := open(&c.rc); err != nil {
		return fmt.Errorf("%s: open: %w", name, err)
	}
	c.restored = nil // what no state claimed is dropped, as Flink drops it
	return nil
}

// Opening, Declared, Restored and Declare make opStateStore an
// api.OperatorStateStore.
func (c *opStateStore) Opening() bool { return c.opening }

func (c *opStateStore) Declared(name string) bool {
	return slices.ContainsFunc(c.states, func(s opStateEntry) bool { return s.name == name })
}

func (c *opStateStore) Restored(name string) [][]byte { return c.restored[name] }

func (c *opStateStore) Declare(name string, mode savepoint.Redistribution, encode func() [][]byte) {
	c.states = append(c.states, opStateEntry{name: name, mode: mode, encode: encode})
}

// capture encodes the declared states into capt.
func (c *opStateStore) capture(capt *opCapture) {
	for _, s := range c.states {
		items := s.encode()
		capt.opState = append(capt.opState, savepoint.OperatorListState{Name: s.name, Mode: s.mode, Items: items})
		capt.states = append(capt.states, savepoint.StateDescriptor{Name: s.name, Kind: s.mode.String(), Entries: int64(len(items))})
	}
}

// RichCore is the part of a rich operator that does not depend on its
// record types: the function's set-up, close and operator state.
type RichCore struct {
	baseOperator
	opStateStore
	Fn   any
	Name string
}

func (c *RichCore) open(ctx *OpContext) error {
	var open func(*api.RuntimeContext) error
	if o, ok := c.Fn.(api.RichOpener); ok {
		open = o.Open
	}
	return c.openFunction(ctx, open, c.Name)
}

func (c *RichCore) snapshot(snapshotRequest) (*opCapture, error) {
	if len(c.states) == 0 {
		return nil, nil
	}
	capt := &opCapture{}
	c.capture(capt)
	return capt, nil
}

func (c *RichCore) close() error {
	if cl, ok := c.Fn.(api.Closer); ok {
		return cl.Close()
	}
	return nil
}

// RichMapOperator runs a MapFunction object (MapFunc).
type RichMapOperator[IN, OUT any] struct {
	RichCore
	F   api.MapFunction[IN, OUT]
	Out api.Collector[OUT]
}

func (o *RichMapOperator[IN, OUT]) Collect(v IN) {
	r, err := o.F.Map(v)
	if err != nil {
		Fail(o.Name, err)
	}
	o.Out.Collect(r)
}

// RichFlatMapOperator runs a FlatMapFunction object (FlatMapFunc).
type RichFlatMapOperator[IN, OUT any] struct {
	RichCore
	F   api.FlatMapFunction[IN, OUT]
	Out api.Collector[OUT]
}

func (o *RichFlatMapOperator[IN, OUT]) Collect(v IN) {
	if err := o.F.FlatMap(v, o.Out); err != nil {
		Fail(o.Name, err)
	}
}

// RichFilterOperator runs a FilterFunction object (FilterFunc).
type RichFilterOperator[T any] struct {
	RichCore
	F   api.FilterFunction[T]
	Out api.Collector[T]
}

func (o *RichFilterOperator[T]) Collect(v T) {
	keep, err := o.F.Filter(v)
	if err != nil {
		Fail(o.Name, err)
	}
	if keep {
		o.Out.Collect(v)
	}
}

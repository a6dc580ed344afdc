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

// RichCore is the part of a rich operator that does not depend on its
// record types: the function's set-up, close and operator state.
type RichCore struct {
	baseOperator
	Fn       any
	Name     string
	rc       api.RuntimeContext
	opening  bool
	restored map[string][][]byte
	states   []opStateEntry
}

func (c *RichCore) open(ctx *OpContext) error {
	t := ctx.Task
	c.rc = api.NewRuntimeContext(api.SubtaskInfo{Subtask: t.Subtask, Parallelism: t.Parallelism, Attempt: t.svc.Attempt,
		JobID: t.svc.JobID}, c)
	c.restored = map[string][][]byte{}
	if ctx.Restore != nil {
		for _, s := range ctx.Restore.OperatorState {
			c.restored[s.Name] = append(c.restored[s.Name], s.Items...)
		}
	}
	o, ok := c.Fn.(api.RichOpener)
	if !ok {
		return nil
	}
	c.opening = true
	defer func() { c.opening = false }()
	if err := o.Open(&c.rc); err != nil {
		return fmt.Errorf("%s: open: %w", c.Name, err)
	}
	c.restored = nil // what no state claimed is dropped, as Flink drops it
	return nil
}

// Opening, Declared, Restored and Declare make RichCore the function's
// api.OperatorStateStore.
func (c *RichCore) Opening() bool { return c.opening }

func (c *RichCore) Declared(name string) bool {
	return slices.ContainsFunc(c.states, func(s opStateEntry) bool { return s.name == name })
}

func (c *RichCore) Restored(name string) [][]byte { return c.restored[name] }

func (c *RichCore) Declare(name string, mode savepoint.Redistribution, encode func() [][]byte) {
	c.states = append(c.states, opStateEntry{name: name, mode: mode, encode: encode})
}

func (c *RichCore) snapshot(snapshotRequest) (*opCapture, error) {
	if len(c.states) == 0 {
		return nil, nil
	}
	capt := &opCapture{}
	for _, s := range c.states {
		items := s.encode()
		capt.opState = append(capt.opState, savepoint.OperatorListState{Name: s.name, Mode: s.mode, Items: items})
		capt.states = append(capt.states, savepoint.StateDescriptor{Name: s.name, Kind: s.mode.String(), Entries: int64(len(items))})
	}
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

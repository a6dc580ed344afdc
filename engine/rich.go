package engine

import (
	"fmt"

	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/savepoint"
)

// MapFunction is a map function as an object (Flink's RichMapFunction):
// it may also implement RichOpener, to set itself up and declare operator
// state, and Closer.
type MapFunction[IN, OUT any] interface {
	Map(in IN) (OUT, error)
}

// FlatMapFunction is a flat-map function as an object; see MapFunction.
type FlatMapFunction[IN, OUT any] interface {
	FlatMap(in IN, out Collector[OUT]) error
}

// FilterFunction is a filter as an object; see MapFunction.
type FilterFunction[T any] interface {
	Filter(in T) (bool, error)
}

// RichOpener is implemented by function objects that set themselves up
// before the first record: Open gets the subtask's RuntimeContext, where
// operator state is declared.
type RichOpener interface {
	Open(ctx *RuntimeContext) error
}

// RuntimeContext describes the subtask a function object runs in and holds
// its operator state (Flink's RuntimeContext and OperatorStateStore).
type RuntimeContext struct {
	subtask, parallelism, attempt int
	jobID                         string
	core                          *richCore
}

// Subtask is the index of the subtask, from 0.
func (c *RuntimeContext) Subtask() int { return c.subtask }

// Parallelism is the operator's parallelism.
func (c *RuntimeContext) Parallelism() int { return c.parallelism }

// Attempt counts the job's restarts, from 0.
func (c *RuntimeContext) Attempt() int { return c.attempt }

// JobID is the job's 32-hex id.
func (c *RuntimeContext) JobID() string { return c.jobID }

// GetOperatorListState declares (in Open) the operator list state called
// name (Flink's CheckpointedFunction with getListState): a list per
// subtask, checkpointed as it is at each barrier and restored from the
// subtask's last checkpoint. At another parallelism the lists of all
// subtasks are concatenated and split evenly (round-robin, as Flink does).
func GetOperatorListState[V any](ctx *RuntimeContext, name string) (ListState[V], error) {
	return getOperatorState[V](ctx, name, savepoint.SplitDistribute)
}

// GetUnionListState declares the operator list state called name whose
// restore gives every subtask the lists of all subtasks (Flink's
// getUnionListState): each keeps what it needs.
func GetUnionListState[V any](ctx *RuntimeContext, name string) (ListState[V], error) {
	return getOperatorState[V](ctx, name, savepoint.Union)
}

func getOperatorState[V any](ctx *RuntimeContext, name string, mode savepoint.Redistribution) (ListState[V], error) {
	c := ctx.core
	if c == nil || !c.opening {
		return nil, fmt.Errorf("operator state %q: declare operator state in Open", name)
	}
	for _, s := range c.states {
		if s.name == name {
			return nil, fmt.Errorf("operator state %q is declared twice", name)
		}
	}
	ser := state.SerializerFor[V]()
	l := &opList[V]{}
	for i, b := range c.restored[name] {
		v, rest, err := ser.Decode(b)
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%d bytes left over", len(rest))
		}
		if err != nil {
			return nil, fmt.Errorf("operator state %q: item %d of the snapshot: %w", name, i, err)
		}
		l.vals = append(l.vals, v)
	}
	c.states = append(c.states, opStateEntry{name: name, mode: mode, encode: func() [][]byte {
		items := make([][]byte, len(l.vals))
		for i, v := range l.vals {
			items[i] = ser.Append(nil, v)
		}
		return items
	}})
	return l, nil
}

// opList is an operator's list state: a plain slice, touched only by the
// task's goroutine, encoded in the synchronous part of a snapshot (operator
// state is small: offsets, buffers, a few values per subtask).
type opList[V any] struct{ vals []V }

func (l *opList[V]) Get() []V      { return l.vals }
func (l *opList[V]) Add(v V)       { l.vals = append(l.vals, v) }
func (l *opList[V]) Update(vs []V) { l.vals = append([]V(nil), vs...) }
func (l *opList[V]) Clear()        { l.vals = nil }

type opStateEntry struct {
	name   string
	mode   savepoint.Redistribution
	encode func() [][]byte
}

// richCore is the part of a rich operator that does not depend on its
// record types: the function's set-up, close and operator state.
type richCore struct {
	baseOperator
	fn       any
	name     string
	rc       RuntimeContext
	opening  bool
	restored map[string][][]byte
	states   []opStateEntry
}

func (c *richCore) open(ctx *opContext) error {
	t := ctx.t
	c.rc = RuntimeContext{subtask: t.subtask, parallelism: t.v.parallelism, attempt: t.svc.attempt,
		jobID: t.svc.jobID, core: c}
	c.restored = map[string][][]byte{}
	if ctx.restore != nil {
		for _, s := range ctx.restore.OperatorState {
			c.restored[s.Name] = append(c.restored[s.Name], s.Items...)
		}
	}
	o, ok := c.fn.(RichOpener)
	if !ok {
		return nil
	}
	c.opening = true
	defer func() { c.opening = false }()
	if err := o.Open(&c.rc); err != nil {
		return fmt.Errorf("%s: open: %w", c.name, err)
	}
	c.restored = nil // what no state claimed is dropped, as Flink drops it
	return nil
}

func (c *richCore) snapshot(snapshotRequest) (*opCapture, error) {
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

func (c *richCore) close() error {
	if cl, ok := c.fn.(Closer); ok {
		return cl.Close()
	}
	return nil
}

type richMapOperator[IN, OUT any] struct {
	richCore
	f   MapFunction[IN, OUT]
	out Collector[OUT]
}

func (o *richMapOperator[IN, OUT]) Collect(v IN) {
	r, err := o.f.Map(v)
	if err != nil {
		fail(o.name, err)
	}
	o.out.Collect(r)
}

type richFlatMapOperator[IN, OUT any] struct {
	richCore
	f   FlatMapFunction[IN, OUT]
	out Collector[OUT]
}

func (o *richFlatMapOperator[IN, OUT]) Collect(v IN) {
	if err := o.f.FlatMap(v, o.out); err != nil {
		fail(o.name, err)
	}
}

type richFilterOperator[T any] struct {
	richCore
	f   FilterFunction[T]
	out Collector[T]
}

func (o *richFilterOperator[T]) Collect(v T) {
	keep, err := o.f.Filter(v)
	if err != nil {
		fail(o.name, err)
	}
	if keep {
		o.out.Collect(v)
	}
}

// MapFunc applies a map function object to every record. Each subtask
// gets its own copy of fn when it is a pointer to a struct.
func MapFunc[IN, OUT any](s DataStream[IN], fn MapFunction[IN, OUT]) DataStream[OUT] {
	n := s.env.newNode(kindOperator, "Map", newTypeOps[OUT]())
	n.stateful = true // it may declare operator state in Open
	s.env.connect(s.n, n, s.part, nil)
	n.build = func(rt *buildContext, out any) (any, operator) {
		f := cloneFunction(fn)
		op := &richMapOperator[IN, OUT]{richCore: richCore{fn: f, name: rt.name}, f: f, out: out.(Collector[OUT])}
		return Collector[IN](op), op
	}
	return DataStream[OUT]{env: s.env, n: n}
}

// FlatMapFunc applies a flat-map function object to every record.
func FlatMapFunc[IN, OUT any](s DataStream[IN], fn FlatMapFunction[IN, OUT]) DataStream[OUT] {
	n := s.env.newNode(kindOperator, "Flat Map", newTypeOps[OUT]())
	n.stateful = true
	s.env.connect(s.n, n, s.part, nil)
	n.build = func(rt *buildContext, out any) (any, operator) {
		f := cloneFunction(fn)
		op := &richFlatMapOperator[IN, OUT]{richCore: richCore{fn: f, name: rt.name}, f: f, out: out.(Collector[OUT])}
		return Collector[IN](op), op
	}
	return DataStream[OUT]{env: s.env, n: n}
}

// FilterFunc keeps the records a filter function object accepts.
func FilterFunc[T any](s DataStream[T], fn FilterFunction[T]) DataStream[T] {
	n := s.env.newNode(kindOperator, "Filter", s.n.out)
	n.stateful = true
	s.env.connect(s.n, n, s.part, nil)
	n.build = func(rt *buildContext, out any) (any, operator) {
		f := cloneFunction(fn)
		op := &richFilterOperator[T]{richCore: richCore{fn: f, name: rt.name}, f: f, out: out.(Collector[T])}
		return Collector[T](op), op
	}
	return DataStream[T]{env: s.env, n: n}
}

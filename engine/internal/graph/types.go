package graph

import (
	"reflect"

	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/internal/api"
)

// TypeOps makes the typed runtime pieces for records of one type: a job
// graph's nodes carry records of many types, and deployment wires them
// without knowing those types. This is the one place where they are
// erased: every value TypeOps returns as any is asserted back to its type
// here, by the TypeOps of the same type.
type TypeOps interface {
	// ConnectInput gives a task an input gate for these records.
	ConnectInput(t *task.Task, numChannels int)
	// AddChannel adds a channel to a task's input gate, and returns it.
	AddChannel(gate any) any
	// NewWriter makes the record writer of a task's output over channels
	// AddChannel returned, hash being the edge's key hash or nil, whose
	// records carry their timestamps if stamped; the first result is its
	// api.Collector.
	NewWriter(t *task.Task, targets []any, ship network.ShipStrategy, hash any, maxParallelism, batchSize, start int, stamped bool) (any, network.OutputWriter)
	// NewFanout is one collector sending each record to all of outs.
	NewFanout(outs []any) any
	// NewCounter is a collector passing each record to out and counting
	// it in *n: an edge inside a chain, for its operators' metrics.
	NewCounter(out any, n *int64) any
	// Type names the record type, for messages.
	Type() string
}

type typeOpsFor[T any] struct{}

// NewTypeOps returns the TypeOps of records of type T.
func NewTypeOps[T any]() TypeOps { return typeOpsFor[T]{} }

func (typeOpsFor[T]) Type() string {
	return reflect.TypeFor[T]().String()
}

func (typeOpsFor[T]) ConnectInput(t *task.Task, numChannels int) {
	task.ConnectInput[T](t, numChannels)
}

func (typeOpsFor[T]) AddChannel(gate any) any { return gate.(*network.InputGate[T]).AddChannel() }

func (typeOpsFor[T]) NewWriter(t *task.Task, targets []any, ship network.ShipStrategy, hash any, maxParallelism, batchSize, start int, stamped bool) (any, network.OutputWriter) {
	chans := make([]*network.Channel[T], 0, len(targets))
	for _, c := range targets {
		chans = append(chans, c.(*network.Channel[T]))
	}
	var h func(T) uint64
	if hash != nil {
		h = hash.(func(T) uint64)
	}
	w := network.NewRecordWriter(chans, h, t.WriterOptions(ship, maxParallelism, batchSize, start, stamped))
	return api.Collector[T](w), w
}

func (typeOpsFor[T]) NewFanout(outs []any) any {
	if len(outs) == 0 {
		return api.Collector[T](discard[T]{})
	}
	if len(outs) == 1 {
		return outs[0]
	}
	f := &fanout[T]{}
	for _, o := range outs {
		f.outs = append(f.outs, o.(api.Collector[T]))
	}
	return api.Collector[T](f)
}

func (typeOpsFor[T]) NewCounter(out any, n *int64) any {
	return api.Collector[T](&counter[T]{out: out.(api.Collector[T]), n: n})
}

// counter counts the records passed between two chained operators: a
// plain increment, as only the task's goroutine calls it.
type counter[T any] struct {
	out api.Collector[T]
	n   *int64
}

func (c *counter[T]) Collect(v T) {
	*c.n++
	c.out.Collect(v)
}

// fanout sends each record to several outputs.
type fanout[T any] struct{ outs []api.Collector[T] }

func (f *fanout[T]) Collect(v T) {
	for _, o := range f.outs {
		o.Collect(v)
	}
}

// discard is the main output of a node read only through its side outputs.
type discard[T any] struct{}

func (discard[T]) Collect(T) {}

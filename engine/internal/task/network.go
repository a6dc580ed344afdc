package task

import (
	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/internal/api"
)

// keyGroupCollector is a keyed operator fed by a keyed exchange: it takes
// each record with the key group and the upper half of the key's hash its
// sender computed.
type keyGroupCollector[T any] interface {
	CollectInKeyGroup(v T, keyGroup int, hash uint32)
	// PrefetchKey is told about a record prefetchAhead records before
	// CollectInKeyGroup is, so that its state lookup's cache misses
	// overlap with the records in between (state.Prefetcher, from the key
	// group and hash; state.KeyPrefetcher, from the record's key).
	PrefetchKey(v T, keyGroup int, hash uint32)
}

// prefetchAhead is how many records ahead a keyed input prefetches: enough
// for several misses to be in flight at once, few enough that the lines
// are still cached when their records come (4, 8 and 16 measured alike on
// a 1 M-key table).
const prefetchAhead = 8

// fanout sends each record to several outputs.
type fanout[T any] struct{ outs []api.Collector[T] }

func (f *fanout[T]) Collect(v T) {
	for _, o := range f.outs {
		o.Collect(v)
	}
}

// TypeOps creates the typed runtime pieces for records of one type.
type TypeOps interface {
	NewGate(numChannels, perChannel int, mail *network.Mailbox) any
	AddChannel(gate any) any
	NewWriter(targets []any, part network.ShipStrategy, hash any, maxPar, batch, start int, t *Task) (any, network.OutputWriter)
	NewFanout(outs []any) any
	RunInput(t *Task, gate any, head any) error
}

type typeOpsFor[T any] struct{}

// NewTypeOps returns the TypeOps of records of type T.
func NewTypeOps[T any]() TypeOps { return typeOpsFor[T]{} }

func (typeOpsFor[T]) NewGate(n, per int, mail *network.Mailbox) any {
	return network.NewInputGate[T](n, per, mail)
}

func (typeOpsFor[T]) AddChannel(gate any) any { return gate.(*network.InputGate[T]).AddChannel() }

func (typeOpsFor[T]) NewWriter(targets []any, part network.ShipStrategy, hash any, maxPar, batch, start int, t *Task) (any, network.OutputWriter) {
	chans := make([]*network.Channel[T], 0, len(targets))
	for _, c := range targets {
		chans = append(chans, c.(*network.Channel[T]))
	}
	var h func(T) uint64
	if hash != nil {
		h = hash.(func(T) uint64)
	}
	w := network.NewRecordWriter(chans, h, network.WriterOptions{Ship: part, MaxParallelism: maxPar, BatchSize: batch,
		Start: start, Done: t.done, Wake: t.wake, Mail: t.Mail})
	return api.Collector[T](w), w
}

func (typeOpsFor[T]) NewFanout(outs []any) any {
	if len(outs) == 1 {
		return outs[0]
	}
	f := &fanout[T]{}
	for _, o := range outs {
		f.outs = append(f.outs, o.(api.Collector[T]))
	}
	return api.Collector[T](f)
}

func (typeOpsFor[T]) RunInput(t *Task, gate any, head any) error {
	return runInput(t, gate.(*network.InputGate[T]), head.(api.Collector[T]))
}

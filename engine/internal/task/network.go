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

// ConnectInput gives t an input gate of numChannels channels for records
// of type T, and the aligner of their barriers; the task runs it into its
// Head once it starts.
func ConnectInput[T any](t *Task, numChannels int) *network.InputGate[T] {
	g := network.NewInputGate[T](numChannels, network.BuffersPerChannel(numChannels), t.Mail)
	t.Gate = g
	t.runIn = func() error { return runInput(t, g, t.Head.(api.Collector[T])) }
	t.numIn = numChannels
	t.al = newAligner(numChannels, t.exactlyOnce)
	t.valve = newValve(numChannels)
	return g
}

// WriterOptions are the options of a record writer of this task: it ships
// as ship to downstream subtasks (starting at start for round robin), its
// records carry their timestamps if stamped, and it stops waiting for
// credit when the task is done or woken.
func (t *Task) WriterOptions(ship network.ShipStrategy, maxParallelism, batchSize, start int, stamped bool) network.WriterOptions {
	o := network.WriterOptions{Ship: ship, MaxParallelism: maxParallelism, BatchSize: batchSize,
		Start: start, Done: t.done, Wake: t.wake, Mail: t.Mail, RecordsOut: &t.M.RecordsOut, BackPressured: &t.M.BackPressured}
	if stamped {
		o.Timestamp = &t.ts
	}
	return o
}

package graph

import (
	"fmt"

	"github.com/gflink/gflink/engine/internal/network"
)

// channelBytes is what one channel between two subtasks costs before it
// carries records: its credit state, the sender's slot for a batch and the
// receiver's index entry, with room to spare (p=1000 word count, 10⁶
// channels, peaks at ~170 MB in all).
const channelBytes = 160

// NumChannels is how many channels an attempt of g creates: one per pair of
// subtasks for each keyed or rebalanced exchange, one per subtask for a
// forward one.
func (g *JobGraph) NumChannels() int64 {
	var n int64
	for _, v := range g.Vertices {
		for _, in := range v.Inputs {
			if in.Ship == network.ShipForward {
				n += int64(v.Parallelism)
			} else {
				n += int64(in.From.Parallelism) * int64(v.Parallelism)
			}
		}
	}
	return n
}

// CheckExchangeMemory refuses, before anything starts, a job whose channels
// alone would need more than half the machine's memory: an all-to-all
// exchange grows with p², and a process killed by the OOM killer tells the
// user nothing.
func CheckExchangeMemory(g *JobGraph, total uint64) error {
	if total == 0 {
		return nil // unknown: let it try
	}
	ch := g.NumChannels()
	need := uint64(ch) * channelBytes
	if need <= total/2 {
		return nil
	}
	maxP := 1
	for _, v := range g.Vertices {
		maxP = max(maxP, v.Parallelism)
	}
	return fmt.Errorf("parallelism %d is more than this machine can hold: the job's data exchanges need %d channels (one per pair of subtasks of each keyBy or rebalance), about %s, more than half of its %s of memory; lower the parallelism (-p, parallelism.default)",
		maxP, ch, formatBytes(need), formatBytes(total))
}

func formatBytes(b uint64) string {
	const gb = 1 << 30
	if b >= gb {
		return fmt.Sprintf("%.1f GB", float64(b)/gb)
	}
	return fmt.Sprintf("%d MB", b>>20)
}

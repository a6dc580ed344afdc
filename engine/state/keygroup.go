// Package state holds gflink's state backend: keyed state (value, list and
// map state and timers) stored by key group in Go maps (the "hashmap"
// backend), operator state, and their snapshots. Key groups are what make
// rescaling possible: a key's group never changes, and a snapshot can be
// split by key group among any number of new subtasks.
package state

import "fmt"

// UpperBoundMaxParallelism is the largest max parallelism, as in Flink.
const UpperBoundMaxParallelism = 1 << 15

// DefaultMaxParallelism computes an operator's max parallelism from its
// parallelism when pipeline.max-parallelism is not set, with Flink's
// formula: min(max(roundUpToPowerOfTwo(p + p/2), 128), 32768).
func DefaultMaxParallelism(parallelism int) int {
	n := roundUpToPowerOfTwo(parallelism + parallelism/2)
	return min(max(n, 128), UpperBoundMaxParallelism)
}

func roundUpToPowerOfTwo(x int) int {
	n := 1
	for n < x {
		n <<= 1
	}
	return n
}

// KeyGroupRange is an inclusive range of key groups.
type KeyGroupRange struct {
	Start, End int
}

// Len is the number of key groups in the range.
func (r KeyGroupRange) Len() int {
	if r.End < r.Start {
		return 0
	}
	return r.End - r.Start + 1
}

// Contains reports whether kg is in the range.
func (r KeyGroupRange) Contains(kg int) bool { return kg >= r.Start && kg <= r.End }

func (r KeyGroupRange) String() string {
	return fmt.Sprintf("KeyGroupRange{startKeyGroup=%d, endKeyGroup=%d}", r.Start, r.End)
}

// RangeForSubtask returns the key groups subtask index owns among
// parallelism subtasks, with Flink's formula, so that ranges are contiguous
// and differ in size by at most one.
func RangeForSubtask(maxParallelism, parallelism, index int) KeyGroupRange {
	start := (index*maxParallelism + parallelism - 1) / parallelism
	end := ((index+1)*maxParallelism - 1) / parallelism
	return KeyGroupRange{Start: start, End: end}
}

// SubtaskForKeyGroup returns the subtask that owns a key group.
func SubtaskForKeyGroup(maxParallelism, parallelism, keyGroup int) int {
	return keyGroup * parallelism / maxParallelism
}

// KeyGroupForHash maps a key's hash to its key group.
func KeyGroupForHash(hash uint64, maxParallelism int) int {
	if m := uint64(maxParallelism); m != 0 && m&(m-1) == 0 {
		return int(hash & (m - 1)) // the same as the remainder, without a division
	}
	return int(hash % uint64(maxParallelism))
}

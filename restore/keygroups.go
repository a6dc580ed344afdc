package restore

import (
	"fmt"

	"github.com/gflink/gflink/savepoint"
)

// KeyGroupRange returns the key groups [start, end] that subtask index owns
// among parallelism subtasks: Flink's
// KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex.
func KeyGroupRange(maxParallelism, parallelism, index int) (start, end int) {
	return (index*maxParallelism + parallelism - 1) / parallelism, ((index+1)*maxParallelism - 1) / parallelism
}

// CheckKeyGroups refuses an operator's keyed state whose key groups do not
// map onto [0, maxParallelism) exactly once. _metadata's checksum only
// proves the file is the one written; a snapshot edited or assembled by
// hand can still hand one key group to two subtasks (its state counted
// twice, or the wrong copy kept) or to none, and a restore from it would
// silently give wrong results. Validate calls it for every operator.
//
// Each subtask with a keyed handle must hold exactly the range Flink's
// formula gives its index at the snapshot's parallelism, so that together
// they cover the key groups once; a subtask without a handle had no keyed
// state (the writer leaves empty handles out). Every key group listed must
// lie in its subtask's range and be listed once.
func CheckKeyGroups(op *savepoint.OperatorState) error {
	maxPar := op.MaxParallelism
	fail := func(format string, args ...any) error {
		return fmt.Errorf("the key groups of operator %s do not cover [0, %d) exactly once: %s: %w",
			op.UID, maxPar, fmt.Sprintf(format, args...), savepoint.ErrCorrupt)
	}
	keyed := false
	for _, st := range op.Subtasks {
		keyed = keyed || st.Keyed != nil
	}
	if !keyed {
		return nil
	}
	if maxPar < 1 {
		return fail("max parallelism %d", maxPar)
	}
	seen := make(map[int]int, maxPar) // key group -> subtask index
	owner := make(map[int]int)        // subtask index -> position, to find it listed twice
	for pos, st := range op.Subtasks {
		kh := st.Keyed
		if kh == nil {
			continue
		}
		if kh.Start < 0 || kh.End >= maxPar || kh.Start > kh.End {
			return fail("subtask %d has the range [%d, %d]", st.Index, kh.Start, kh.End)
		}
		if op.Parallelism > 0 {
			if st.Index < 0 || st.Index >= op.Parallelism {
				return fail("subtask %d is outside the parallelism %d", st.Index, op.Parallelism)
			}
			if _, dup := owner[st.Index]; dup {
				return fail("subtask %d is listed twice", st.Index)
			}
			owner[st.Index] = pos
			if lo, hi := KeyGroupRange(maxPar, op.Parallelism, st.Index); kh.Start != lo || kh.End != hi {
				return fail("subtask %d has the range [%d, %d]; at parallelism %d it owns [%d, %d]", st.Index, kh.Start, kh.End, op.Parallelism, lo, hi)
			}
		}
		for _, kg := range kh.KeyGroups {
			if kg.KeyGroup < kh.Start || kg.KeyGroup > kh.End {
				return fail("subtask %d with the range [%d, %d] lists key group %d", st.Index, kh.Start, kh.End, kg.KeyGroup)
			}
			if other, dup := seen[kg.KeyGroup]; dup {
				return fail("key group %d is listed by subtask %d and subtask %d", kg.KeyGroup, other, st.Index)
			}
			seen[kg.KeyGroup] = st.Index
		}
	}
	return nil
}

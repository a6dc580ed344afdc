package checkpoint

import (
	"maps"
	"slices"
	"time"

	"github.com/gflink/gflink/savepoint"
)

// Ack is a task's acknowledgement of a checkpoint: per operator uid, the
// state it wrote and its states' descriptions. A finished task's last
// state (Final) is written by the job master into each later checkpoint
// instead.
type Ack struct {
	Handles map[string]savepoint.SubtaskState
	Descs   map[string][]savepoint.StateDescriptor
	Final   []OperatorSnapshot
	// Stats is the subtask's part in the checkpoint, for statistics.
	Stats SubtaskStats
}

// SubtaskStats is what a subtask reports of its part in a checkpoint
// (Flink's SubtaskCheckpointStatistics).
type SubtaskStats struct {
	VertexID  string // the job vertex (its head operator's id)
	Subtask   int
	Unaligned bool
	// Alignment is, aligned, from the first barrier to the snapshot;
	// unaligned, from the first barrier to the last (the input channel
	// state is complete).
	Alignment time.Duration
	// Sync and Async are the snapshot's synchronous and asynchronous parts.
	Sync, Async time.Duration
	// Persisted is the bytes of channel state (records in flight) written.
	Persisted int64
	StateSize int64
	// OperatorStateSize is StateSize by operator uid (the operators of the
	// chain that have state).
	OperatorStateSize map[string]int64
	// AckTimestamp is when the job master got the ack (Unix ms).
	AckTimestamp int64
}

// OperatorInfo is what _metadata says of an operator of the job.
type OperatorInfo struct {
	UID, OperatorID, Name string
	Parallelism           int
	MaxParallelism        int
}

// Handle is the reference to a completed snapshot: where it is and what
// its _metadata says.
type Handle struct {
	Loc  *Location
	Meta *savepoint.Metadata
}

// AssembleOperators turns the tasks' acknowledgements into _metadata's
// operators, in the job's operator order: each operator's subtasks in
// index order, its states' entries summed over subtasks, and Finished when
// every subtask acknowledged with its final state. It has no I/O: final
// states must have been written (finals says which acks they were).
func AssembleOperators(ops []OperatorInfo, acks []Ack, finals []bool) []savepoint.OperatorState {
	type opAcc struct {
		subtasks []savepoint.SubtaskState
		descs    map[string]savepoint.StateDescriptor
		finals   int
	}
	acc := map[string]*opAcc{}
	for i, ack := range acks {
		for uid, st := range ack.Handles {
			o := acc[uid]
			if o == nil {
				o = &opAcc{descs: map[string]savepoint.StateDescriptor{}}
				acc[uid] = o
			}
			o.subtasks = append(o.subtasks, st)
			if finals[i] {
				o.finals++
			}
			for _, d := range ack.Descs[uid] {
				e := o.descs[d.Name]
				e.Name, e.Kind, e.Type = d.Name, d.Kind, d.Type
				e.Entries += d.Entries
				o.descs[d.Name] = e
			}
		}
	}
	var out []savepoint.OperatorState
	for _, op := range ops {
		o := acc[op.UID]
		if o == nil {
			continue
		}
		slices.SortFunc(o.subtasks, func(a, b savepoint.SubtaskState) int { return a.Index - b.Index })
		os := savepoint.OperatorState{UID: op.UID, OperatorID: op.OperatorID, Name: op.Name,
			Parallelism: op.Parallelism, MaxParallelism: op.MaxParallelism, Subtasks: o.subtasks,
			Finished: o.finals == op.Parallelism}
		for _, name := range slices.Sorted(maps.Keys(o.descs)) {
			os.States = append(os.States, o.descs[name])
		}
		out = append(out, os)
	}
	return out
}

// Descriptors returns each operator's state descriptions of snapshots.
func Descriptors(snaps []OperatorSnapshot) map[string][]savepoint.StateDescriptor {
	out := make(map[string][]savepoint.StateDescriptor, len(snaps))
	for _, s := range snaps {
		out[s.UID] = s.States
	}
	return out
}

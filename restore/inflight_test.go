package restore_test

import (
	"testing"

	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

// inFlightMeta is a snapshot whose operator "to" (parallelism 2) had
// records in flight from "from" on each subtask's input.
func inFlightMeta() *savepoint.Metadata {
	to := savepoint.OperatorState{UID: "to", Parallelism: 2, MaxParallelism: 128}
	for i := range 2 {
		to.Subtasks = append(to.Subtasks, savepoint.SubtaskState{Index: i,
			InputChannels: []savepoint.ChannelStateHandle{{Peer: "from", Channel: 0}}})
	}
	return &savepoint.Metadata{Operators: []savepoint.OperatorState{{UID: "from", Parallelism: 1, MaxParallelism: 128}, to}}
}

// TestInFlightBroadcast: a broadcast exchange's records in flight restore
// at the same parallelism each subtask its own, and at another new subtask
// j takes old subtask j mod the old parallelism's (a rebalance's go from
// old subtask j to j mod p).
func TestInFlightBroadcast(t *testing.T) {
	m := inFlightMeta()
	for p, want := range map[int][]int{1: {1}, 2: {1, 1}, 3: {1, 1, 1}} {
		per, err := restore.InFlightFor(m, restore.Exchange{From: "from", To: "to", Broadcast: true, Parallelism: p, MaxParallelism: 128})
		if err != nil || len(per) != p {
			t.Fatalf("broadcast at parallelism %d: %v, %v", p, per, err)
		}
		for j := range per {
			if len(per[j]) != want[j] {
				t.Errorf("broadcast at parallelism %d: subtask %d replays %d channels, want %d", p, j, len(per[j]), want[j])
			}
		}
		per, err = restore.InFlightFor(m, restore.Exchange{From: "from", To: "to", Parallelism: p, MaxParallelism: 128})
		if err != nil || len(per) != p {
			t.Errorf("rebalance at parallelism %d: %v, %v", p, per, err)
		}
	}
}

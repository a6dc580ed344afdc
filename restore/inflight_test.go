package restore_test

import (
	"strings"
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
// at the same parallelism, each subtask its own; at another they are
// refused with what to do instead (a rebalance's go to subtask j mod p).
func TestInFlightBroadcast(t *testing.T) {
	m := inFlightMeta()
	per, err := restore.InFlightFor(m, restore.Exchange{From: "from", To: "to", Broadcast: true, Parallelism: 2, MaxParallelism: 128})
	if err != nil || len(per) != 2 || len(per[0]) != 1 || len(per[1]) != 1 {
		t.Fatalf("same parallelism: %v, %v", per, err)
	}
	for _, p := range []int{1, 3} {
		_, err := restore.InFlightFor(m, restore.Exchange{From: "from", To: "to", Broadcast: true, Parallelism: p, MaxParallelism: 128})
		if err == nil || !strings.Contains(err.Error(), "broadcast exchange") || !strings.Contains(err.Error(), "savepoint") {
			t.Errorf("parallelism %d: error %v, want a refusal naming the broadcast exchange and a savepoint", p, err)
		}
		per, err := restore.InFlightFor(m, restore.Exchange{From: "from", To: "to", Parallelism: p, MaxParallelism: 128})
		if err != nil || len(per) != p {
			t.Errorf("rebalance at parallelism %d: %v, %v", p, per, err)
		}
	}
}

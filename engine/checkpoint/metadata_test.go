package checkpoint

import (
	"testing"

	"github.com/gflink/gflink/savepoint"
)

func TestAssembleOperators(t *testing.T) {
	ops := []OperatorInfo{{UID: "source", OperatorID: "s", Name: "Source", Parallelism: 2, MaxParallelism: 128},
		{UID: "counter", OperatorID: "c", Name: "counter", Parallelism: 2, MaxParallelism: 128},
		{UID: "stateless", Parallelism: 2}}
	ack := func(index int, entries int64) Ack {
		return Ack{
			Handles: map[string]savepoint.SubtaskState{"counter": {Index: index, Bytes: 10}, "source": {Index: index}},
			Descs:   map[string][]savepoint.StateDescriptor{"counter": {{Name: "count", Kind: "value", Type: "int64", Entries: entries}}},
		}
	}
	// Acknowledged out of order; the second task had finished.
	got := AssembleOperators(ops, []Ack{ack(1, 5), ack(0, 7)}, []bool{true, false})
	if len(got) != 2 || got[0].UID != "source" || got[1].UID != "counter" {
		t.Fatalf("operators %+v; want source, counter in the job's order and nothing for the stateless one", got)
	}
	c := got[1]
	if c.Subtasks[0].Index != 0 || c.Subtasks[1].Index != 1 {
		t.Errorf("subtasks %+v not in index order", c.Subtasks)
	}
	if len(c.States) != 1 || c.States[0].Entries != 12 {
		t.Errorf("states %+v; want count with 12 entries (summed)", c.States)
	}
	if c.Finished || c.OperatorID != "c" || c.MaxParallelism != 128 {
		t.Errorf("operator %+v: one of two subtasks finished is not finished", c)
	}
	all := AssembleOperators(ops, []Ack{ack(1, 5), ack(0, 7)}, []bool{true, true})
	if !all[1].Finished {
		t.Error("every subtask finished, but the operator is not")
	}
}

func TestKeepOnEnd(t *testing.T) {
	for _, tc := range []struct {
		failed, canceled bool
		retention        ExternalizedCheckpointRetention
		want             bool
	}{
		{false, false, RetainOnCancellation, false}, // finished: never kept
		{true, false, NoExternalized, false},
		{true, false, DeleteOnCancellation, true},
		{true, false, RetainOnCancellation, true},
		{false, true, DeleteOnCancellation, false},
		{false, true, RetainOnCancellation, true},
		{false, true, NoExternalized, false},
	} {
		if got := KeepOnEnd(tc.failed, tc.canceled, tc.retention); got != tc.want {
			t.Errorf("KeepOnEnd(failed=%v, canceled=%v, %s) = %v; want %v", tc.failed, tc.canceled, tc.retention, got, tc.want)
		}
	}
}

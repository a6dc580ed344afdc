package restore_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

func TestCheck(t *testing.T) {
	meta := &savepoint.Metadata{Operators: []savepoint.OperatorState{
		{UID: "source", Name: "file-input"},
		{UID: "counter", Name: "counter"},
		{UID: "old-counter", Name: "counter (v1)"},
	}}
	source, counter, oldCounter := &meta.Operators[0], &meta.Operators[1], &meta.Operators[2]
	job := restore.Job{Operators: []restore.Operator{
		{UID: "source", Name: "Source: file-input", Stateful: true},
		{UID: "tokenizer", Name: "tokenizer"}, // stateless: not worth a row
		{UID: "counter", Name: "counter", Stateful: true},
		{UID: "dedup", Name: "dedup", Stateful: true},
	}}
	plan := func(dropped ...string) *restore.Plan {
		return &restore.Plan{Meta: meta, Matched: []string{"source", "counter"}, New: []string{"tokenizer", "dedup"}, Dropped: dropped}
	}
	matched := []restore.CheckRow{
		{UID: "source", Status: restore.CheckMatched, Name: "Source: file-input", State: source},
		{UID: "counter", Status: restore.CheckMatched, Name: "counter", State: counter},
	}
	newDedup := restore.CheckRow{UID: "dedup", Status: restore.CheckNew, Name: "dedup"}
	missing := restore.CheckRow{UID: "old-counter", Status: restore.CheckMissing, Name: "counter (v1)", State: oldCounter}
	unmapped := errors.New("Cannot map checkpoint/savepoint state for operator old-counter")
	splits := errors.New("the split file:/a is not among the source's inputs")
	refused := errors.New("The source state of operator source does not fit the new program")
	tooHigh := errors.New("The new parallelism 300 of operator counter is higher than its max parallelism 128")

	for _, tc := range []struct {
		name string
		plan *restore.Plan
		opts restore.CheckOptions
		want restore.CheckReport
	}{
		{"every uid matched or new", plan(), restore.CheckOptions{},
			restore.CheckReport{Rows: append(matched[:2:2], newDedup), OK: true}},
		{"missing without -n", plan("old-counter"), restore.CheckOptions{RestoreErr: unmapped},
			restore.CheckReport{Rows: append(matched[:2:2], missing, newDedup), Err: unmapped}},
		{"missing with -n", plan("old-counter"), restore.CheckOptions{AllowNonRestoredState: true},
			restore.CheckReport{Rows: append(matched[:2:2], missing, newDedup), OK: true}},
		{"a source that does not fit", plan(),
			restore.CheckOptions{SourceMismatch: map[string]error{"source": splits}, RestoreErr: refused},
			restore.CheckReport{Rows: []restore.CheckRow{
				{UID: "source", Status: restore.CheckMismatch, Name: "Source: file-input", State: source, Problem: splits},
				matched[1], newDedup}, Err: refused}},
		{"no plan: the planner's error, the restore's words", nil, restore.CheckOptions{PlanErr: tooHigh, RestoreErr: refused},
			restore.CheckReport{Err: refused}},
		{"no plan and no restore error: the planner's", nil, restore.CheckOptions{PlanErr: tooHigh},
			restore.CheckReport{Err: tooHigh}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := restore.Check(tc.plan, job, tc.opts)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Check =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}

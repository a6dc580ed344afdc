package flinkrest

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestPrune: fields the description does not have go, at any depth; a
// discriminator's subtype keeps its own (a completed checkpoint's path);
// maps keep their keys; the metric arrays stay as they are.
func TestPrune(t *testing.T) {
	doc, _, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ schema, in, want string }{
		{"CheckpointingStatistics",
			`{"counts":{"completed":1,"extra":2},"history":[{"className":"completed","id":1,"external_path":"file:/c/chk-1","gflinkOnly":true},
			  {"className":"failed","id":2,"failure_message":"boom","external_path":"x"}]}`,
			`{"counts":{"completed":1},"history":[{"className":"completed","id":1,"external_path":"file:/c/chk-1"},
			  {"className":"failed","id":2,"failure_message":"boom"}]}`},
		{"JobPlanInfo", `{"plan":{"jid":"j","nodes":[{"id":"a","extra":1}]}}`, `{"plan":{"jid":"j","nodes":[{"id":"a","extra":1}]}}`},
		{"MetricCollectionResponseBody", `[{"id":"0.numRecordsIn","value":"3","x":1}]`, `[{"id":"0.numRecordsIn","value":"3"}]`},
	} {
		var in, want any
		if err := json.Unmarshal([]byte(tc.in), &in); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
			t.Fatal(err)
		}
		if got := Prune(doc, doc.Components.Schemas[tc.schema], in); !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			t.Errorf("%s: pruned to %s; want %s", tc.schema, g, tc.want)
		}
	}
}

package restore_test

import (
	"encoding/json"
	"testing"

	"github.com/gflink/gflink/restore"
)

// FuzzValidate: whatever JSON a _metadata holds, Validate answers with an
// error or nil and never panics (go test -fuzz FuzzValidate ./restore).
func FuzzValidate(f *testing.F) {
	seed, err := json.Marshal(validMetadata())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"operators":[{"uid":"a","parallelism":1,"maxParallelism":1,"subtasks":[{"index":0,"keyed":{"startKeyGroup":0,"endKeyGroup":0}}]}]}`))
	f.Add([]byte(`{"operators":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m restore.Resolved
		if json.Unmarshal(data, &m.Metadata) != nil || m.Metadata == nil {
			return
		}
		restore.Validate(m.Metadata)
	})
}

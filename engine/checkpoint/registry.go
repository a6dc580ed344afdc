package checkpoint

import (
	"maps"
	"slices"
)

// SharedRegistry counts which retained checkpoints refer to which shared
// files (Flink's SharedStateRegistry): an incremental checkpoint refers to
// the SST files earlier checkpoints uploaded to <jobDir>/shared/, so a file
// may be deleted only once no retained checkpoint refers to it. It is a
// value without I/O: it says what to delete; the storage deletes.
//
// A checkpoint in progress refers only to files of the last completed
// checkpoint, which is retained until a newer one completes — and a newer
// completion aborts the one in progress — so counting the retained
// checkpoints is enough.
type SharedRegistry struct {
	refs map[string]map[int64]struct{} // file -> checkpoints referring to it
}

// Register records the shared files (relative to the job directory) a
// completed checkpoint refers to.
func (r *SharedRegistry) Register(id int64, files []string) {
	if r.refs == nil {
		r.refs = map[string]map[int64]struct{}{}
	}
	for _, f := range files {
		ids := r.refs[f]
		if ids == nil {
			ids = map[int64]struct{}{}
			r.refs[f] = ids
		}
		ids[id] = struct{}{}
	}
}

// Unregister forgets a checkpoint that is no longer retained and returns,
// sorted, the files no retained checkpoint refers to any more.
func (r *SharedRegistry) Unregister(id int64) []string {
	var free []string
	for f, ids := range r.refs {
		if _, ok := ids[id]; !ok {
			continue
		}
		delete(ids, id)
		if len(ids) == 0 {
			delete(r.refs, f)
			free = append(free, f)
		}
	}
	slices.Sort(free)
	return free
}

// Referenced reports whether a retained checkpoint refers to file.
func (r *SharedRegistry) Referenced(file string) bool {
	_, ok := r.refs[file]
	return ok
}

// Files returns every file some retained checkpoint refers to, sorted.
func (r *SharedRegistry) Files() []string {
	return slices.Sorted(maps.Keys(r.refs))
}

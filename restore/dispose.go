package restore

import (
	"fmt"
	"path/filepath"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// Dispose deletes the snapshot at path (a savepoint directory, a chk-N
// directory or a _metadata file), as `savepoint -dispose` and Flink's
// POST /savepoint-disposal do. check may refuse it (a running job's
// checkpoint). It lives here because it resolves path as a restore does;
// the deleting, and the refusal of a _metadata naming files outside the
// snapshot or through a symbolic link, is savepoint.Discard's.
func Dispose(fsys vfs.FS, path string, check func(*savepoint.Metadata) error) error {
	r, err := Resolve(fsys, path)
	if err != nil {
		return err
	}
	// Never pick a snapshot for the user (a job directory resolves to its
	// newest checkpoint): disposal deletes, so the path must name one.
	if filepath.Base(r.MetadataFile) != savepoint.MetadataFileName || r.JobDir != "" {
		return fmt.Errorf("'%s' is not a savepoint or checkpoint directory or its _metadata file", path)
	}
	if check != nil {
		if err := check(r.Metadata); err != nil {
			return err
		}
	}
	return savepoint.Discard(fsys, r.Dir, r.Metadata)
}

package jobmaster

import (
	"fmt"
	"log/slog"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint/vfs"
)

// RestoreSource is the snapshot -s names, found and checked, with the
// user's restore settings.
type RestoreSource struct {
	*restore.Resolved
	AllowNonRestoredState bool
	ClaimMode             RecoveryClaimMode
	// StateBackend is the job's state backend: a checkpoint or native
	// savepoint restores only into the one that wrote it.
	StateBackend task.StateBackendKind
}

// ResolveRestore finds the snapshot execution.state-recovery.path (-s)
// names and reads every state block it references, so that a lost or
// damaged file stops the run before the job starts rather than in its
// first restore. It returns nil (and no error) when there is nothing to
// restore. Why checkpoints of a job directory were skipped goes to the log.
func ResolveRestore(fsys vfs.FS, conf *config.Configuration, log *slog.Logger) (*RestoreSource, error) {
	path, _ := StateRecoveryPath.Get(conf)
	if path == "" {
		return nil, nil
	}
	resolved, err := restore.Resolve(fsys, path)
	if resolved != nil {
		for _, n := range resolved.Notes {
			log.Warn(n)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := restore.VerifyStateFiles(fsys, resolved.Dir, resolved.Metadata); err != nil {
		return nil, fmt.Errorf("Failed to read checkpoint/savepoint '%s': %w\nNothing was restored. Restore from an earlier checkpoint (-s <the job's checkpoint directory> takes the newest intact one) or a savepoint.", path, err)
	}
	src := &RestoreSource{Resolved: resolved}
	src.AllowNonRestoredState, _ = IgnoreUnclaimedState.Get(conf)
	src.ClaimMode, _ = ClaimMode.Get(conf)
	src.StateBackend, _ = task.StateBackend.Get(conf)
	return src, nil
}

package cluster

import (
	"fmt"
	"strings"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

// RestoreNotices are the lines that tell the user, before the job starts,
// which snapshot it restores, in which claim mode, and what gflink may
// delete: a user must never be surprised by what CLAIM or NO_CLAIM removes.
func RestoreNotices(src *engine.RestoreSource, conf *config.Configuration) []string {
	var notices []string
	if src.JobDir != "" {
		notices = append(notices, fmt.Sprintf("Restoring from the newest complete checkpoint in %s: %s", src.JobDir, savepoint.URI(src.Dir)))
	}
	if src.ClaimMode == engine.ClaimModeLegacy {
		notices = append(notices, "Warning: The LEGACY restore mode is deprecated, please use CLAIM or NO_CLAIM mode instead.")
	}
	return append(notices, claimNotice(src.Resolved, src.ClaimMode, conf))
}

// DroppedNotices name the state a restore with -n leaves behind, which
// only the engine's plan knows.
func DroppedNotices(p *restore.Plan) []string {
	if p == nil {
		return nil
	}
	var notices []string
	for _, uid := range p.Dropped {
		notices = append(notices, fmt.Sprintf("Dropping the state of operator %s, which this job does not have (--allowNonRestoredState): %s", uid, StateNames(p.Meta.Operator(uid))))
	}
	return notices
}

// claimNotice says in one line which claim mode applies and what gflink
// may delete.
func claimNotice(r *restore.Resolved, mode engine.RecoveryClaimMode, conf *config.Configuration) string {
	ptr := savepoint.URI(r.Dir)
	switch mode {
	case engine.ClaimModeClaim:
		n, _ := checkpoint.NumRetained.Get(conf)
		retention, _ := checkpoint.Retention.Get(conf)
		if r.Metadata != nil {
			if shared := r.Metadata.SharedFiles(); len(shared) > 0 {
				// An incremental checkpoint: its shared files are claimed too.
				return fmt.Sprintf("Restoring from %s in CLAIM mode: the job owns it now and deletes it once %d newer checkpoint(s) complete (execution.checkpointing.num-retained), or when the job ends as %s says; the %d shared file(s) it refers to become the job's too, and each is deleted once no checkpoint of the job refers to it — other checkpoints of the old job that refer to them cannot be restored after that.", ptr, max(n, 1), retention, len(shared))
			}
		}
		return fmt.Sprintf("Restoring from %s in CLAIM mode: the job owns it now and deletes it once %d newer checkpoint(s) complete (execution.checkpointing.num-retained), or when the job ends as %s says; nothing else beside it is touched.", ptr, max(n, 1), retention)
	case engine.ClaimModeLegacy:
		return fmt.Sprintf("Restoring from %s in LEGACY mode: gflink never deletes it.", ptr)
	}
	return fmt.Sprintf("Restoring from %s in NO_CLAIM mode: gflink never modifies or deletes it, and new checkpoints use none of its files; it may be deleted once the job's first checkpoint has completed.", ptr)
}

// StateNames describes an operator's states in a snapshot: name, kind and
// number of entries of each.
func StateNames(op *savepoint.OperatorState) string {
	if op == nil || len(op.States) == 0 {
		return "no named state"
	}
	var parts []string
	for _, s := range op.States {
		parts = append(parts, fmt.Sprintf("%s (%s, %d entries)", s.Name, s.Kind, s.Entries))
	}
	return strings.Join(parts, ", ")
}

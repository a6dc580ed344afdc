package restore

import "github.com/gflink/gflink/savepoint"

// What a restore does with one operator uid, as `run --check` reports it.
const (
	// CheckMatched: the snapshot's state restores into the job's operator.
	CheckMatched = "matched"
	// CheckMissing: the snapshot has state for an operator the job lacks;
	// the restore fails unless that state may be dropped (-n).
	CheckMissing = "missing"
	// CheckNew: a stateful operator of the job has no state in the
	// snapshot, and starts empty.
	CheckNew = "new"
	// CheckMismatch: matched by uid, but the state of a source does not
	// fit the job's source; the restore fails.
	CheckMismatch = "mismatch"
)

// CheckRow is one operator uid of a CheckReport.
type CheckRow struct {
	UID    string
	Status string // CheckMatched, CheckMissing, CheckNew or CheckMismatch
	// Name is the job's name of the operator, or the snapshot's for a
	// missing one.
	Name string
	// State is the snapshot's state of the uid; nil for a new operator.
	State *savepoint.OperatorState
	// Problem says why a mismatched source's state does not fit.
	Problem error
}

// CheckOptions are what Check needs beyond the plan: the user's setting,
// and the engine's findings, passed in as values because restore does not
// know the engine.
type CheckOptions struct {
	// AllowNonRestoredState is the user's -n.
	AllowNonRestoredState bool
	// PlanErr is why the snapshot could not be mapped onto the job at all
	// (NewPlan's error with AllowNonRestoredState set; the plan is nil).
	PlanErr error
	// SourceMismatch holds, by matched uid, why the restored state of a
	// source does not fit the job's source: only the engine can tell.
	SourceMismatch map[string]error
	// RestoreErr is the error of the restore itself, with the user's
	// settings: one source of truth for the verdict and its words.
	RestoreErr error
}

// CheckReport says how a snapshot maps onto a job, without running it.
type CheckReport struct {
	// Rows: the matched uids (mismatched among them) in the snapshot's
	// order, then the missing ones, then the new stateful ones in the
	// job's order. Operators without state in either are left out.
	Rows []CheckRow
	// OK: the restore would succeed.
	OK bool
	// Err says why it would not: the restore's own error, else the
	// planner's. Nil when OK.
	Err error
}

// Check reports, per operator uid, how plan maps a snapshot onto job —
// matched, missing from the job, new, or a source whose state does not
// fit — and whether the restore would succeed. plan is NewPlan's with
// AllowNonRestoredState set, so that every missing uid is listed; it is
// nil when opts.PlanErr says why there is none. Only the UID, Name and
// Stateful of job's operators are read.
func Check(plan *Plan, job Job, opts CheckOptions) CheckReport {
	var rep CheckReport
	ok := opts.PlanErr == nil
	if plan != nil {
		byUID := map[string]Operator{}
		for _, op := range job.Operators {
			byUID[op.UID] = op
		}
		for _, uid := range plan.Matched {
			row := CheckRow{UID: uid, Status: CheckMatched, Name: byUID[uid].Name, State: plan.Meta.Operator(uid)}
			if err := opts.SourceMismatch[uid]; err != nil {
				row.Status, row.Problem = CheckMismatch, err
			}
			rep.Rows = append(rep.Rows, row)
		}
		for _, uid := range plan.Dropped {
			st := plan.Meta.Operator(uid)
			rep.Rows = append(rep.Rows, CheckRow{UID: uid, Status: CheckMissing, Name: st.Name, State: st})
		}
		for _, uid := range plan.New {
			if byUID[uid].Stateful {
				rep.Rows = append(rep.Rows, CheckRow{UID: uid, Status: CheckNew, Name: byUID[uid].Name})
			}
		}
		if len(plan.Dropped) > 0 && !opts.AllowNonRestoredState {
			ok = false
		}
	}
	if opts.RestoreErr != nil {
		ok = false
	}
	rep.OK = ok
	if !ok {
		rep.Err = opts.RestoreErr
		if rep.Err == nil {
			rep.Err = opts.PlanErr
		}
	}
	return rep
}

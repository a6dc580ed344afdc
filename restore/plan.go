package restore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// Operator describes one operator of the new job, as far as restoring is
// concerned.
type Operator struct {
	UID            string
	Name           string
	Parallelism    int
	MaxParallelism int
	// MaxParallelismExplicit is true when the user set the max parallelism
	// (pipeline.max-parallelism or per operator). Otherwise, as in Flink,
	// the snapshot's max parallelism is adopted.
	MaxParallelismExplicit bool
	// Stateful: the operator keeps state, so that a new one starts empty
	// (Check lists it; NewPlan does not need to know).
	Stateful bool
}

// Job is the new job's operators.
type Job struct {
	Operators []Operator
}

// Options are the user's restore settings.
type Options struct {
	AllowNonRestoredState bool
	// StateBackend is the new job's state backend ("hashmap"); a NATIVE
	// snapshot restores only into the backend that wrote it.
	StateBackend string
}

// BackendMismatchError refuses a NATIVE snapshot into another backend.
type BackendMismatchError struct {
	Pointer, Written, Wanted string
}

func (e *BackendMismatchError) Error() string {
	return fmt.Sprintf("Cannot restore %s: it is a NATIVE snapshot written by the '%s' state backend, and native snapshots restore only into the backend that wrote them, but the job uses the '%s' state backend. Take a CANONICAL savepoint (gflink savepoint -type canonical) to change state backends.", e.Pointer, e.Written, e.Wanted)
}

// Plan says which state each new subtask restores.
type Plan struct {
	// Pointer names the snapshot in messages (file:/… URI of its directory).
	Pointer string
	Dir     string
	Meta    *savepoint.Metadata
	// Operators holds the plan of every operator of the new job that has
	// state in the snapshot, by uid.
	Operators map[string]*OperatorPlan
	// Matched, New and Dropped list uids: state found for a job operator;
	// job operators without state in the snapshot; snapshot state with no
	// operator in the job (allowed only with AllowNonRestoredState, or when
	// that state is empty).
	Matched, New, Dropped []string
}

// OperatorPlan is the restore of one operator.
type OperatorPlan struct {
	UID            string
	MaxParallelism int // the max parallelism to run with (possibly adopted)
	Finished       bool
	Subtasks       []SubtaskRestore // one per new subtask
	States         []savepoint.StateDescriptor
}

// SubtaskRestore is the state one new subtask restores.
type SubtaskRestore struct {
	KeyGroups     []KeyGroupBlock
	OperatorState []savepoint.OperatorListState
	// Native lists the old subtasks' LSM files whose key groups overlap
	// this subtask's (the rocksdb backend's native snapshots).
	Native []NativeRestore
	// Changelog lists the old subtasks' state changelogs whose key groups
	// overlap this subtask's: replayed, filtered by key group, on top of
	// the materialized state in KeyGroups.
	Changelog []ChangelogRestore
}

// ChangelogRestore is one old subtask's state changelog.
type ChangelogRestore struct {
	Start, End int // its key groups
	Log        []savepoint.ChangelogFile
}

// NativeRestore is one old subtask's native keyed state.
type NativeRestore struct {
	Start, End int // its key groups
	Handle     *savepoint.NativeStateHandle
}

// KeyGroupBlock locates one key group's block in the snapshot.
type KeyGroupBlock struct {
	KeyGroup int
	Stream   *savepoint.StreamStateHandle
	Offset   int64
	Length   int64
}

// NewPlan matches a resolved snapshot against a job.
func NewPlan(fsys vfs.FS, r *Resolved, job Job, opts Options) (*Plan, error) {
	m := r.Metadata
	p := &Plan{Pointer: savepoint.URI(r.Dir), Dir: r.Dir, Meta: m, Operators: map[string]*OperatorPlan{}}
	if err := Validate(m); err != nil {
		return nil, fmt.Errorf("Failed to rollback to checkpoint/savepoint %s. Its %s describes state that cannot be restored: %w", p.Pointer, savepoint.MetadataFileName, err)
	}
	// The format decides where a snapshot may go: canonical state restores
	// into any backend, native state only into the one that wrote it.
	if m.Format != savepoint.FormatCanonical && opts.StateBackend != "" && m.Backend != "" && m.Backend != opts.StateBackend {
		return nil, &BackendMismatchError{Pointer: p.Pointer, Written: m.Backend, Wanted: opts.StateBackend}
	}
	byUID := map[string]Operator{}
	for _, op := range job.Operators {
		byUID[op.UID] = op
	}
	br := &savepoint.BlockReader{FS: fsys, Dir: r.Dir}
	defer br.Close()
	for i := range m.Operators {
		old := &m.Operators[i]
		op, ok := byUID[old.UID]
		if !ok {
			if isEmpty(old) {
				continue
			}
			if !opts.AllowNonRestoredState {
				return nil, fmt.Errorf("Failed to rollback to checkpoint/savepoint %s. Cannot map checkpoint/savepoint state for operator %s to the new program, because the operator is not available in the new program. If you want to allow to skip this, you can set the --allowNonRestoredState option on the CLI.", p.Pointer, old.UID)
			}
			p.Dropped = append(p.Dropped, old.UID)
			continue
		}
		plan, err := planOperator(br, p.Pointer, old, op)
		if err != nil {
			return nil, err
		}
		p.Operators[op.UID] = plan
		p.Matched = append(p.Matched, op.UID)
	}
	for _, op := range job.Operators {
		if _, ok := p.Operators[op.UID]; !ok {
			p.New = append(p.New, op.UID)
		}
	}
	return p, nil
}

// subtaskKeyGroups is the key-group range of subtask i of p (Flink's
// formula, as savepoint/FORMAT.md gives it).
func subtaskKeyGroups(maxPar, p, i int) (start, end int) {
	return (i*maxPar + p - 1) / p, ((i+1)*maxPar - 1) / p
}

func isEmpty(op *savepoint.OperatorState) bool {
	for _, st := range op.Subtasks {
		if st.Keyed != nil && (len(st.Keyed.KeyGroups) > 0 || st.Keyed.Native != nil || st.Keyed.Changelog != nil && len(st.Keyed.Changelog.Log) > 0) || st.Operator != nil ||
			len(st.InputChannels) > 0 || len(st.OutputChannels) > 0 {
			return false
		}
	}
	return true
}

func planOperator(br *savepoint.BlockReader, pointer string, old *savepoint.OperatorState, op Operator) (*OperatorPlan, error) {
	maxPar := op.MaxParallelism
	if old.MaxParallelism != op.MaxParallelism {
		if op.MaxParallelismExplicit {
			return nil, fmt.Errorf("Failed to rollback to checkpoint/savepoint %s. Max parallelism mismatch between checkpoint/savepoint state and new program. Cannot map operator %s with max parallelism %d to new program with max parallelism %d. This indicates that the program has been changed in a non-compatible way after the checkpoint/savepoint.", pointer, old.UID, old.MaxParallelism, op.MaxParallelism)
		}
		maxPar = old.MaxParallelism
	}
	if op.Parallelism < 1 {
		return nil, fmt.Errorf("Failed to rollback to checkpoint/savepoint %s. Operator %s has parallelism %d; it must be at least 1.", pointer, old.UID, op.Parallelism)
	}
	if op.Parallelism > maxPar {
		return nil, fmt.Errorf("Failed to rollback to checkpoint/savepoint %s. The new parallelism %d of operator %s is higher than its max parallelism %d, which the snapshot fixes. Lower the parallelism.", pointer, op.Parallelism, old.UID, maxPar)
	}
	plan := &OperatorPlan{UID: op.UID, MaxParallelism: maxPar, Finished: old.Finished,
		Subtasks: make([]SubtaskRestore, op.Parallelism), States: old.States}

	// Keyed state: each key group's block goes to the subtask owning it;
	// native files go to every subtask whose key groups they overlap.
	for _, st := range old.Subtasks {
		if st.Keyed == nil {
			continue
		}
		if n := st.Keyed.Native; n != nil {
			if st.Keyed.Start < 0 || st.Keyed.End >= maxPar || st.Keyed.Start > st.Keyed.End {
				return nil, fmt.Errorf("snapshot %s: operator %s has native state for key groups [%d, %d] outside [0, %d): %w", pointer, old.UID, st.Keyed.Start, st.Keyed.End, maxPar, savepoint.ErrCorrupt)
			}
			for i := range plan.Subtasks {
				start, end := subtaskKeyGroups(maxPar, op.Parallelism, i)
				if start <= st.Keyed.End && st.Keyed.Start <= end {
					plan.Subtasks[i].Native = append(plan.Subtasks[i].Native, NativeRestore{Start: st.Keyed.Start, End: st.Keyed.End, Handle: n})
				}
			}
		}
		if c := st.Keyed.Changelog; c != nil && len(c.Log) > 0 {
			for i := range plan.Subtasks {
				start, end := subtaskKeyGroups(maxPar, op.Parallelism, i)
				if start <= st.Keyed.End && st.Keyed.Start <= end {
					plan.Subtasks[i].Changelog = append(plan.Subtasks[i].Changelog, ChangelogRestore{Start: st.Keyed.Start, End: st.Keyed.End, Log: c.Log})
				}
			}
		}
		for _, kg := range st.Keyed.KeyGroups {
			if kg.KeyGroup < 0 || kg.KeyGroup >= maxPar {
				return nil, fmt.Errorf("snapshot %s: operator %s has key group %d outside [0, %d): %w", pointer, old.UID, kg.KeyGroup, maxPar, savepoint.ErrCorrupt)
			}
			i := kg.KeyGroup * op.Parallelism / maxPar
			plan.Subtasks[i].KeyGroups = append(plan.Subtasks[i].KeyGroups,
				KeyGroupBlock{KeyGroup: kg.KeyGroup, Stream: st.Keyed.Stream, Offset: kg.Offset, Length: kg.Length})
		}
	}

	// Operator state, by old subtask index: the snapshot lists only the
	// subtasks that acknowledged, so a position in Subtasks is not an index.
	oldPar := old.Parallelism
	if oldPar <= 0 {
		for _, st := range old.Subtasks {
			oldPar = max(oldPar, st.Index+1)
		}
	}
	perOld := make([][]savepoint.OperatorListState, oldPar)
	for _, st := range old.Subtasks {
		if st.Operator == nil {
			continue
		}
		if st.Index < 0 || st.Index >= oldPar {
			return nil, fmt.Errorf("snapshot %s: operator %s has subtask %d outside [0, %d): %w", pointer, old.UID, st.Index, oldPar, savepoint.ErrCorrupt)
		}
		payload, err := br.Read(st.Operator, st.Operator.Offset, st.Operator.Length)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s, operator %s, subtask %d: %w", pointer, old.UID, st.Index, err)
		}
		states, err := savepoint.DecodeOperatorState(payload)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s, operator %s, subtask %d: %w", pointer, old.UID, st.Index, err)
		}
		perOld[st.Index] = append(perOld[st.Index], states...)
	}
	redistributed, err := Redistribute(perOld, op.Parallelism, oldPar == op.Parallelism)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s, operator %s: %w", pointer, old.UID, err)
	}
	for i := range plan.Subtasks {
		plan.Subtasks[i].OperatorState = redistributed[i]
	}
	return plan, nil
}

// Redistribute divides operator list states among newPar subtasks. When
// the parallelism is unchanged each subtask keeps its own split-distributed
// lists, as in Flink; otherwise each list state's elements, concatenated in
// subtask order, are cut into newPar contiguous parts (the first ones one
// element larger when it does not divide evenly, as in Flink) of sizes differing by
// at most one. Union states give every subtask all elements; broadcast
// states give new subtask i old subtask i mod the old parallelism's copy.
func Redistribute(old [][]savepoint.OperatorListState, newPar int, sameParallelism bool) ([][]savepoint.OperatorListState, error) {
	type merged struct {
		mode  savepoint.Redistribution
		items [][]byte
		per   [][][]byte // per old subtask
	}
	byName := map[string]*merged{}
	var names []string
	for i, states := range old {
		for _, s := range states {
			m := byName[s.Name]
			if m == nil {
				m = &merged{mode: s.Mode, per: make([][][]byte, len(old))}
				byName[s.Name] = m
				names = append(names, s.Name)
			}
			if m.mode != s.Mode {
				return nil, fmt.Errorf("operator state %q is both %s and %s", s.Name, m.mode, s.Mode)
			}
			m.items = append(m.items, s.Items...)
			m.per[i] = append(m.per[i], s.Items...)
		}
	}
	slices.SortFunc(names, strings.Compare)
	out := make([][]savepoint.OperatorListState, newPar)
	for _, name := range names {
		m := byName[name]
		for i := 0; i < newPar; i++ {
			var items [][]byte
			// Capacities are clipped so that a subtask appending to its
			// list can never overwrite another subtask's elements.
			switch {
			case m.mode == savepoint.Union:
				items = slices.Clip(m.items)
			case m.mode == savepoint.Broadcast:
				items = slices.Clip(m.per[i%len(m.per)])
			case sameParallelism:
				if i < len(m.per) {
					items = slices.Clip(m.per[i])
				}
			default:
				n := len(m.items)
				// Flink's RoundRobinOperatorStateRepartitioner: the first
				// n%newPar subtasks get one element more.
				base, rem := n/newPar, n%newPar
				start := i*base + min(i, rem)
				size := base
				if i < rem {
					size++
				}
				items = slices.Clip(m.items[start : start+size])
			}
			out[i] = append(out[i], savepoint.OperatorListState{Name: name, Mode: m.mode, Items: items})
		}
	}
	return out, nil
}

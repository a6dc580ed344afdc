package jobmaster

import (
	"slices"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/savepoint"
)

// CheckpointStats describes one checkpoint or savepoint, as Flink's REST
// API reports it.
type CheckpointStats struct {
	ID                 int64
	Status             string           // IN_PROGRESS, COMPLETED, FAILED
	Type               savepoint.Kind   // CHECKPOINT, SAVEPOINT, SYNC_SAVEPOINT
	Format             savepoint.Format // for savepoints: CANONICAL or NATIVE
	TriggerTimestamp   int64
	LatestAckTimestamp int64
	StateSize          int64
	// CheckpointedSize is what the checkpoint wrote itself: StateSize
	// minus the shared files of earlier checkpoints it refers to.
	CheckpointedSize int64
	EndToEndDuration int64
	NumSubtasks      int
	NumAcknowledged  int
	ExternalPath     string
	Discarded        bool
	FailureTimestamp int64
	FailureMessage   string
	// Unaligned: some subtask took the checkpoint unaligned (Flink's type
	// UNALIGNED_CHECKPOINT); PersistedData is the bytes of records in
	// flight it stored.
	Unaligned     bool
	PersistedData int64
	// Subtasks holds the acknowledged subtasks' reports, in ack order.
	Subtasks []checkpoint.SubtaskStats
}

// CheckpointType is Flink's checkpoint_type: CHECKPOINT,
// UNALIGNED_CHECKPOINT, SAVEPOINT or SYNC_SAVEPOINT.
func (c *CheckpointStats) CheckpointType() string {
	if c.Unaligned && !c.IsSavepoint() {
		return "UNALIGNED_CHECKPOINT"
	}
	return string(c.Type)
}

// IsSavepoint reports whether the snapshot is a savepoint.
func (c *CheckpointStats) IsSavepoint() bool { return c.Type != savepoint.KindCheckpoint }

// RestoredStats describes the snapshot the job was restored from.
type RestoredStats struct {
	ID          int64
	Timestamp   int64
	IsSavepoint bool
	Path        string
}

// CheckpointingStats is Flink's CheckpointingStatistics.
type CheckpointingStats struct {
	Restored, Total, InProgress, Completed, Failed int64
	// History holds the newest checkpoints first (web.checkpoints.history:
	// 10).
	History         []CheckpointStats
	LatestCompleted *CheckpointStats
	LatestSavepoint *CheckpointStats
	LatestFailed    *CheckpointStats
	LatestRestored  *RestoredStats
	// Durations and sizes of completed checkpoints, for the summary.
	completedDurations, completedSizes []int64
}

// Summary returns min, max, average and percentiles of a completed
// checkpoints' figure.
func (s *CheckpointingStats) Summary(durations bool) (minV, maxV, avg int64, p50, p90, p95, p99, p999 float64) {
	xs := s.completedSizes
	if durations {
		xs = s.completedDurations
	}
	if len(xs) == 0 {
		return
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	var sum int64
	for _, x := range sorted {
		sum += x
	}
	q := func(p float64) float64 { return float64(sorted[int(p*float64(len(sorted)-1))]) }
	return sorted[0], sorted[len(sorted)-1], sum / int64(len(sorted)), q(0.5), q(0.9), q(0.95), q(0.99), q(0.999)
}

const historySize = 10

// ExceptionInfo is one failure of the job.
type ExceptionInfo struct {
	Timestamp int64
	Message   string
	TaskName  string
}

// statsTracker keeps checkpoint statistics; the job master updates it
// under jm.mu.
type statsTracker struct {
	s    CheckpointingStats
	byID map[int64]*CheckpointStats
}

func (st *statsTracker) entry(id int64) *CheckpointStats {
	if st.byID == nil {
		st.byID = map[int64]*CheckpointStats{}
	}
	return st.byID[id]
}

func (st *statsTracker) triggered(p *checkpoint.Pending, subtasks int) {
	if st.entry(p.ID) != nil {
		return
	}
	c := &CheckpointStats{ID: p.ID, Status: "IN_PROGRESS", Type: p.Type.Kind, TriggerTimestamp: p.Triggered.UnixMilli(),
		NumSubtasks: subtasks}
	if p.Type.IsSavepoint() {
		c.Format = p.Type.Format
	}
	st.byID[p.ID] = c
	st.s.Total++
	st.s.InProgress++
	st.pushHistory(c)
}

func (st *statsTracker) pushHistory(c *CheckpointStats) {
	st.s.History = append([]CheckpointStats{*c}, st.s.History...)
	if len(st.s.History) > historySize {
		st.s.History = st.s.History[:historySize]
	}
}

// sync copies an entry into the history.
func (st *statsTracker) sync(c *CheckpointStats) {
	for i := range st.s.History {
		if st.s.History[i].ID == c.ID {
			st.s.History[i] = *c
		}
	}
}

func (st *statsTracker) acked(id int64, now time.Time, a *checkpoint.Ack) {
	c := st.entry(id)
	if c == nil {
		return
	}
	c.NumAcknowledged++
	c.LatestAckTimestamp = now.UnixMilli()
	if a != nil {
		for _, h := range a.Handles {
			c.StateSize += h.Bytes
			c.CheckpointedSize += h.Bytes // until completion says what was shared
		}
		s := a.Stats
		s.AckTimestamp = c.LatestAckTimestamp
		if s.VertexID != "" {
			c.Subtasks = append(c.Subtasks, s)
			c.Unaligned = c.Unaligned || s.Unaligned
			c.PersistedData += s.Persisted
		}
	}
	st.sync(c)
}

func (st *statsTracker) completed(id int64, now time.Time, path string, size, checkpointed int64) {
	c := st.entry(id)
	if c == nil {
		return
	}
	c.Status = "COMPLETED"
	c.ExternalPath = path
	if c.ExternalPath == "" {
		c.ExternalPath = "<checkpoint-not-externally-addressable>"
	}
	c.StateSize, c.CheckpointedSize = size, checkpointed
	c.NumAcknowledged = c.NumSubtasks
	c.EndToEndDuration = now.UnixMilli() - c.TriggerTimestamp
	st.s.InProgress--
	st.s.Completed++
	st.s.completedDurations = append(st.s.completedDurations, c.EndToEndDuration)
	st.s.completedSizes = append(st.s.completedSizes, c.StateSize)
	cp := *c
	if c.IsSavepoint() {
		st.s.LatestSavepoint = &cp
	} else {
		st.s.LatestCompleted = &cp
	}
	st.sync(c)
}

func (st *statsTracker) failed(id int64, now time.Time, msg string) {
	c := st.entry(id)
	if c == nil || c.Status != "IN_PROGRESS" {
		return
	}
	c.Status = "FAILED"
	c.FailureTimestamp = now.UnixMilli()
	c.FailureMessage = msg
	c.EndToEndDuration = c.FailureTimestamp - c.TriggerTimestamp
	st.s.InProgress--
	st.s.Failed++
	cp := *c
	st.s.LatestFailed = &cp
	st.sync(c)
}

func (st *statsTracker) discarded(id int64) {
	if c := st.entry(id); c != nil {
		c.Discarded = true
		st.sync(c)
		if st.s.LatestCompleted != nil && st.s.LatestCompleted.ID == id {
			st.s.LatestCompleted.Discarded = true
		}
	}
}

func (st *statsTracker) restored(md *savepoint.Metadata, dir string, now time.Time) {
	st.s.Restored++
	st.s.LatestRestored = &RestoredStats{ID: md.CheckpointID, Timestamp: now.UnixMilli(),
		IsSavepoint: md.Kind != savepoint.KindCheckpoint, Path: savepoint.URI(dir)}
}

func (st *statsTracker) snapshot() CheckpointingStats {
	s := st.s
	s.History = slices.Clone(st.s.History)
	return s
}

// checkpoint returns the statistics of one checkpoint, if known.
func (st *statsTracker) checkpoint(id int64) (CheckpointStats, bool) {
	if c := st.entry(id); c != nil {
		return *c, true
	}
	return CheckpointStats{}, false
}

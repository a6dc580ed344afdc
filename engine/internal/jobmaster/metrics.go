package jobmaster

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gflink/gflink/engine/internal/graph"
	"github.com/gflink/gflink/engine/internal/task"
)

// Metric is one metric's value at a reading, under Flink's name: a
// number, or text for Flink's string gauges (lastCheckpointExternalPath).
type Metric struct {
	Name  string
	Value float64
	// Int: Value is an integer (a Flink counter or long gauge), written
	// without a fraction.
	Int bool
	// Text is the value of a text metric ("" for numbers).
	Text   string
	IsText bool
}

// String is the value as Flink's REST API writes it: a string.
func (m Metric) String() string {
	switch {
	case m.IsText:
		return m.Text
	case m.Int:
		return strconv.FormatInt(int64(m.Value), 10)
	}
	return strconv.FormatFloat(m.Value, 'f', -1, 64)
}

func intMetric(name string, v int64) Metric { return Metric{Name: name, Value: float64(v), Int: true} }
func rateMetric(name string, v float64) Metric {
	return Metric{Name: name, Value: math.Round(v*1000) / 1000}
}

// OperatorMetrics are the metrics of one operator of a subtask's chain
// (Flink's operator scope).
type OperatorMetrics struct {
	ID, Name string
	Metrics  []Metric
}

// SubtaskMetrics are one subtask's metrics: its task's (Flink's task
// scope) and its operators'.
type SubtaskMetrics struct {
	Subtask, Attempt int
	Task             []Metric
	Operators        []OperatorMetrics
}

// VertexMetrics are the metrics of a vertex's subtasks.
type VertexMetrics struct {
	ID, Name    string
	Parallelism int
	// Source: the vertex reads a source (FLIP-33's source metrics apply).
	Source   bool
	Subtasks []SubtaskMetrics
}

// JobMetrics are a reading of every metric of the job: its own (Flink's
// jobmanager job scope) and its vertices'.
type JobMetrics struct {
	JobID, JobName string
	At             time.Time
	Job            []Metric
	Vertices       []VertexMetrics
}

// Get returns the metric named name of ms.
func Get(ms []Metric, name string) (Metric, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// liveAttempt is the attempt whose tasks the metrics read: the running
// one, or the last one after the job ended.
type liveAttempt struct {
	attempt int
	tasks   []*task.Task
}

// meters turns the tasks' counters into rates: each reading is compared
// with an earlier sample of the same task, at most meterSpan old, so that
// a rate says what the task did over the last seconds (Flink's MeterView
// does the same over 60 s; a dashboard polling every second wants a
// shorter memory).
type meters struct {
	mu      sync.Mutex
	samples map[*task.Metrics][]meterSample
}

const (
	meterSpan  = 5 * time.Second
	meterEvery = time.Second // a new sample at most this often
)

type meterSample struct {
	at                                time.Time
	in, out, emitted, idle, pressured int64
}

func sampleOf(m *task.Metrics, at time.Time) meterSample {
	return meterSample{at: at, in: m.RecordsIn.Load(), out: m.RecordsOut.Load(), emitted: m.SourceEmitted.Load(),
		idle: m.Idle.Load(at), pressured: m.BackPressured.Load(at)}
}

// rates reads m and returns its reading and the sample to compare it
// with: the oldest kept sample at least 100 ms old — within the last 5 s
// for a reader polling that often, else the previous reading, however
// old (a Prometheus scrape every 15 s gets the rate over those 15 s) —
// and the task's start (all zero) before the first reading.
func (ms *meters) rates(m *task.Metrics, now time.Time) (cur, base meterSample) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.samples == nil {
		ms.samples = map[*task.Metrics][]meterSample{}
	}
	cur = sampleOf(m, now)
	list := ms.samples[m]
	// Drop samples older than the span, but keep the newest of them while
	// no younger one is old enough to be a base.
	for len(list) > 1 && now.Sub(list[1].at) > meterSpan {
		list = list[1:]
	}
	base = meterSample{at: m.Started}
	for _, s := range list {
		// The oldest within the span; failing that, the newest before it
		// (list holds at most one such, first).
		if age := now.Sub(s.at); age >= 100*time.Millisecond {
			base = s
			if age <= meterSpan {
				break
			}
		}
	}
	if len(list) == 0 || now.Sub(list[len(list)-1].at) >= meterEvery {
		list = append(list, cur)
	}
	ms.samples[m] = list
	return cur, base
}

// forget drops the samples of tasks no longer read (an attempt that
// failed over).
func (ms *meters) forget(keep []*task.Task) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	live := map[*task.Metrics]bool{}
	for _, t := range keep {
		live[&t.M] = true
	}
	for m := range ms.samples {
		if !live[m] {
			delete(ms.samples, m)
		}
	}
}

// BackPressureLevel is Flink's level for a back-pressured ratio: ok up to
// 10 %, low up to 50 %, high above.
func BackPressureLevel(ratio float64) string {
	switch {
	case ratio <= 0.10:
		return "ok"
	case ratio <= 0.5:
		return "low"
	}
	return "high"
}

// Metrics reads every metric of the job. It works after the job has ended
// too (the last attempt's counts stay).
func (j *Job) Metrics() JobMetrics {
	jm := j.jm
	now := time.Now()
	info := j.Info()
	out := JobMetrics{JobID: info.ID, JobName: info.Name, At: now, Job: jobScope(info, now)}
	live := jm.live.Load()
	if live == nil {
		// Not deployed yet: the vertices, without subtasks.
		for _, v := range jm.graph.Vertices {
			out.Vertices = append(out.Vertices, VertexMetrics{ID: graph.OperatorID(v.Head()), Name: v.Name, Parallelism: v.Parallelism, Source: v.Head().Kind == graph.KindSource})
		}
		return out
	}
	out.Job = append(out.Job, intMetric("numRestarts", int64(live.attempt)))
	latest := info.Checkpoints.LatestCompleted
	for _, v := range jm.graph.Vertices {
		vm := VertexMetrics{ID: graph.OperatorID(v.Head()), Name: v.Name, Parallelism: v.Parallelism, Source: v.Head().Kind == graph.KindSource}
		for _, t := range live.tasks {
			if t.Vertex != v.ID {
				continue
			}
			vm.Subtasks = append(vm.Subtasks, jm.subtaskMetrics(v, t, live.attempt, latest, now, vm.Source))
		}
		out.Vertices = append(out.Vertices, vm)
	}
	return out
}

// jobScope is Flink's job metrics: uptime and the checkpointing ones, with
// Flink's values where there is nothing to say yet (-1, "n/a").
func jobScope(info JobInfo, now time.Time) []Metric {
	uptime := int64(0)
	switch {
	case info.Status == StatusRunning:
		uptime = max(now.UnixMilli()-info.Timestamps[StatusRunning], 0)
	case info.Status.IsGloballyTerminal():
		uptime = -1 // Flink's NO_LONGER_RUNNING
	}
	st := info.Checkpoints
	duration, size, fullSize, id, path := int64(-1), int64(-1), int64(-1), int64(-1), "n/a"
	if c := st.LatestCompleted; c != nil {
		duration, size, fullSize, id, path = c.EndToEndDuration, c.CheckpointedSize, c.StateSize, c.ID, c.ExternalPath
	}
	restored := int64(-1)
	if r := st.LatestRestored; r != nil {
		restored = r.Timestamp
	}
	return []Metric{
		intMetric("uptime", uptime),
		intMetric("lastCheckpointDuration", duration),
		intMetric("lastCheckpointSize", size),
		intMetric("lastCheckpointFullSize", fullSize),
		intMetric("lastCompletedCheckpointId", id),
		{Name: "lastCheckpointExternalPath", Text: path, IsText: true},
		intMetric("lastCheckpointRestoreTimestamp", restored),
		intMetric("numberOfCompletedCheckpoints", st.Completed),
		intMetric("numberOfFailedCheckpoints", st.Failed),
		intMetric("numberOfInProgressCheckpoints", st.InProgress),
		intMetric("totalNumberOfCheckpoints", st.Total),
	}
}

func (jm *jobMaster) subtaskMetrics(v *graph.Vertex, t *task.Task, attempt int, latest *CheckpointStats, now time.Time, source bool) SubtaskMetrics {
	cur, base := jm.meters.rates(&t.M, now)
	secs := now.Sub(base.at).Seconds()
	per := func(d int64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(d) / secs
	}
	idle := min(max(per(cur.idle-base.idle)/1e6, 0), 1000)
	pressured := min(max(per(cur.pressured-base.pressured)/1e6, 0), 1000-idle)
	busy := max(1000-idle-pressured, 0)
	if t.M.Ended.Load() {
		idle, pressured, busy = 0, 0, 0 // a task that has returned does nothing
	}
	in, out := cur.in, cur.out
	inRate, outRate := per(cur.in-base.in), per(cur.out-base.out)
	inWM, outWM := t.M.InputWatermark.Load(), t.M.OutputWatermark.Load()
	sm := SubtaskMetrics{Subtask: t.Subtask, Attempt: attempt, Task: []Metric{
		intMetric("numRecordsIn", in),
		intMetric("numRecordsOut", out),
		rateMetric("numRecordsInPerSecond", inRate),
		rateMetric("numRecordsOutPerSecond", outRate),
		rateMetric("busyTimeMsPerSecond", busy),
		rateMetric("idleTimeMsPerSecond", idle),
		rateMetric("backPressuredTimeMsPerSecond", pressured),
		intMetric("currentInputWatermark", inWM),
		intMetric("checkpointStartDelayNanos", t.M.CheckpointStartDelayNanos.Load()),
	}}
	if latest != nil {
		for _, s := range latest.Subtasks {
			if s.VertexID == graph.OperatorID(v.Head()) && s.Subtask == t.Subtask {
				sm.Task = append(sm.Task, intMetric("checkpointAlignmentTime", int64(s.Alignment)))
			}
		}
	}
	for i, n := range v.Nodes {
		om := OperatorMetrics{ID: graph.OperatorID(n), Name: graph.DisplayName(n)}
		if i == 0 {
			headIn, headRate := in, inRate
			if source {
				// FLIP-33: a source's numRecordsIn is what it read.
				headIn, headRate = cur.emitted, per(cur.emitted-base.emitted)
			}
			om.Metrics = append(om.Metrics, intMetric("numRecordsIn", headIn), rateMetric("numRecordsInPerSecond", headRate))
			if !source {
				om.Metrics = append(om.Metrics, intMetric("currentInputWatermark", inWM))
			} else if p := t.M.PendingRecords.Load(); p >= 0 {
				om.Metrics = append(om.Metrics, intMetric("pendingRecords", p))
			}
			if source && outWM > math.MinInt64 && outWM < math.MaxInt64 {
				// FLIP-33: how far the event time the source's chain has
				// reached trails the wall clock.
				om.Metrics = append(om.Metrics, intMetric("watermarkLag", now.UnixMilli()-outWM))
			}
		}
		if i == len(v.Nodes)-1 {
			om.Metrics = append(om.Metrics, intMetric("numRecordsOut", out), rateMetric("numRecordsOutPerSecond", outRate),
				intMetric("currentOutputWatermark", outWM))
		}
		sm.Operators = append(sm.Operators, om)
	}
	return sm
}

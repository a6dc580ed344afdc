package jobmaster

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
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
	chain                             []int64 // task.Metrics.Chain
	bytesIn, bytesSend                int64   // -1: not counted
}

func sampleOf(m *task.Metrics, at time.Time) meterSample {
	s := meterSample{at: at, in: m.RecordsIn.Load(), out: m.RecordsOut.Load(), emitted: m.SourceEmitted.Load(),
		idle: m.Idle.Load(at), pressured: m.BackPressured.Load(at),
		bytesIn: m.SourceBytesIn.Load(), bytesSend: m.SinkBytesSend.Load()}
	if len(m.Chain) > 0 {
		s.chain = make([]int64, len(m.Chain))
		for i := range m.Chain {
			s.chain[i] = m.Chain[i].Load()
		}
	}
	return s
}

// chainCount is the sample's count on chain edge i (0 in the task's start
// sample, which has none).
func (s meterSample) chainCount(i int) int64 {
	if i < len(s.chain) {
		return s.chain[i]
	}
	return 0
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
	var stats *subtaskStats // the subtask's part in the latest checkpoint
	if latest != nil {
		for i, s := range latest.Subtasks {
			if s.VertexID == graph.OperatorID(v.Head()) && s.Subtask == t.Subtask {
				stats = (*subtaskStats)(&latest.Subtasks[i])
				sm.Task = append(sm.Task, intMetric("checkpointAlignmentTime", int64(s.Alignment)))
			}
		}
	}
	last := len(v.Nodes) - 1
	for i, n := range v.Nodes {
		om := OperatorMetrics{ID: graph.OperatorID(n), Name: graph.DisplayName(n)}
		// What the operator took: the task's input at the head (a
		// source's: what it read, as FLIP-33 counts it), else what the
		// operator before it in the chain emitted.
		opIn, opInRate := in, inRate
		switch {
		case i > 0:
			opIn, opInRate = cur.chainCount(i-1), per(cur.chainCount(i-1)-base.chainCount(i-1))
		case source:
			opIn, opInRate = cur.emitted, per(cur.emitted-base.emitted)
		}
		// What it emitted: into the chain, or the task's output at the
		// tail. A sink's numRecordsOut is what it wrote out (Flink
		// counts its numRecordsSend there too).
		opOut, opOutRate := out, outRate
		switch {
		case i < last:
			opOut, opOutRate = cur.chainCount(i), per(cur.chainCount(i)-base.chainCount(i))
		case n.Kind == graph.KindSink:
			opOut, opOutRate = opIn, opInRate
		}
		om.Metrics = append(om.Metrics, intMetric("numRecordsIn", opIn), rateMetric("numRecordsInPerSecond", opInRate),
			intMetric("numRecordsOut", opOut), rateMetric("numRecordsOutPerSecond", opOutRate))
		if i == 0 && !source {
			om.Metrics = append(om.Metrics, intMetric("currentInputWatermark", inWM))
		}
		if i == 0 && source {
			om.Metrics = append(om.Metrics, sourceMetrics(&t.M, cur, base, per, now, outWM)...)
		}
		if i == last && n.Kind == graph.KindSink {
			om.Metrics = append(om.Metrics, intMetric("numRecordsSend", opOut))
			if cur.bytesSend >= 0 {
				rate := per(cur.bytesSend - max(base.bytesSend, 0))
				om.Metrics = append(om.Metrics, intMetric("numBytesOut", cur.bytesSend), rateMetric("numBytesOutPerSecond", rate),
					intMetric("numBytesSend", cur.bytesSend))
			}
		}
		if i == last {
			om.Metrics = append(om.Metrics, intMetric("currentOutputWatermark", outWM))
		}
		if size, ok := stats.operatorStateSize(n.UID); ok {
			// The operator's state as the latest completed checkpoint
			// stored it (Flink shows it per checkpoint; as a metric it
			// follows the state's size over time).
			om.Metrics = append(om.Metrics, intMetric("lastCheckpointFullSize", size))
		}
		sm.Operators = append(sm.Operators, om)
	}
	return sm
}

// sourceMetrics are FLIP-33's metrics of a source operator that its task
// knows: numRecordsInErrors (gflink's readers fail the job on a record
// they cannot read, so none is ever dropped and counted here),
// pendingRecords, numBytesIn and currentEmitEventTimeLag where the reader
// says, and watermarkLag once the source has emitted a watermark.
func sourceMetrics(m *task.Metrics, cur, base meterSample, per func(int64) float64, now time.Time, outWM int64) []Metric {
	out := []Metric{intMetric("numRecordsInErrors", 0)}
	if p := m.PendingRecords.Load(); p >= 0 {
		out = append(out, intMetric("pendingRecords", p))
	}
	if cur.bytesIn >= 0 {
		out = append(out, intMetric("numBytesIn", cur.bytesIn), rateMetric("numBytesInPerSecond", per(cur.bytesIn-max(base.bytesIn, 0))))
	}
	if lag := m.EmitEventTimeLag.Load(); lag != math.MinInt64 {
		out = append(out, intMetric("currentEmitEventTimeLag", lag))
	}
	if outWM > math.MinInt64 && outWM < math.MaxInt64 {
		// How far the event time the source's chain has reached trails
		// the wall clock.
		out = append(out, intMetric("watermarkLag", now.UnixMilli()-outWM))
	}
	return out
}

// subtaskStats is a subtask's report on a checkpoint, or nil before any.
type subtaskStats checkpoint.SubtaskStats

func (s *subtaskStats) operatorStateSize(uid string) (int64, bool) {
	if s == nil {
		return 0, false
	}
	n, ok := s.OperatorStateSize[uid]
	return n, ok
}

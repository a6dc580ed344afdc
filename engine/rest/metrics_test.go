package rest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// submitWordCount runs word count over gen at parallelism 2; throttle, if
// set, slows the counting task down like a slow database would.
func submitWordCount(t *testing.T, gen *connectors.WordGenerator, throttle *connectors.Throttle) *engine.Job {
	t.Helper()
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: io.Discard})
	counts := jobs.WordCountPipeline(engine.FromSource[string](env, gen, "words").UID("source"))
	if throttle != nil {
		counts = engine.Map(counts, func(r jobs.WordCountRecord) jobs.WordCountRecord { throttle.Wait(); return r }).UID("throttle")
	}
	counts.SinkTo(connectors.DiscardingSink[jobs.WordCountRecord]{}).UID("sink")
	return submit(t, env, config.New())
}

// submit builds env's job and runs it with conf; the test's cleanup
// cancels it.
func submit(t *testing.T, env *engine.Environment, conf *config.Configuration) *engine.Job {
	t.Helper()
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: conf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Cancel(); j.Wait() })
	return j
}

// sumOf is the sum over the vertex's subtasks of a metric, through
// /subtasks/metrics?agg=sum.
func sumOf(t *testing.T, srv *Server, j *engine.Job, vertex int, name string) int64 {
	t.Helper()
	var out []AggregatedMetric
	getJSON(t, srv.Address(), fmt.Sprintf("/jobs/%s/vertices/%s/subtasks/metrics?get=%s&agg=sum", j.ID(), j.Info().Vertices[vertex].ID, name), &out)
	if len(out) != 1 || out[0].Sum == nil {
		t.Fatalf("%s of vertex %d: %+v", name, vertex, out)
	}
	return int64(*out[0].Sum)
}

// TestMetricsCountRecords: on a bounded run, the records in and out of
// each vertex and its source operator equal the input's lines and words.
func TestMetricsCountRecords(t *testing.T) {
	const words, perLine = 200_000, 10
	j := submitWordCount(t, &connectors.WordGenerator{Words: words, WordsPerLine: perLine, Distinct: 1000, Seed: 1}, nil)
	srv := serve(t, j, ServerOptions{Token: testToken})
	if res := j.Wait(); res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, tc := range []struct {
		vertex  int
		metric  string
		want    int64
		meaning string
	}{
		{0, "numRecordsIn", 0, "a source task takes no input"},
		{0, "numRecordsOut", words, "the tokenizer's words"},
		{1, "numRecordsIn", words, "the counter's input"},
		{1, "numRecordsOut", 0, "a task ending in a sink sends nothing"},
	} {
		if got := sumOf(t, srv, j, tc.vertex, tc.metric); got != tc.want {
			t.Errorf("vertex %d %s = %d; want %d (%s)", tc.vertex, tc.metric, got, tc.want, tc.meaning)
		}
	}
	// The source operator's FLIP-33 numRecordsIn is the lines it read, in
	// the vertex's metrics under its name.
	m := j.Metrics()
	var lines int64
	for _, st := range m.Vertices[0].Subtasks {
		var got []MetricValue
		id := fmt.Sprintf("%d.%s.numRecordsIn", st.Subtask, MetricScopeName(st.Operators[0].Name))
		getJSON(t, srv.Address(), fmt.Sprintf("/jobs/%s/vertices/%s/metrics?get=%s", j.ID(), m.Vertices[0].ID, id), &got)
		if len(got) != 1 || got[0].Value == nil {
			t.Fatalf("%s: %+v", id, got)
		}
		var n int64
		fmt.Sscan(*got[0].Value, &n)
		lines += n
	}
	if lines != words/perLine {
		t.Errorf("the source read %d lines; want %d", lines, words/perLine)
	}
	var job []MetricValue
	getJSON(t, srv.Address(), "/jobs/"+j.ID()+"/metrics?get=uptime,numRestarts,lastCompletedCheckpointId,lastCheckpointExternalPath", &job)
	want := map[string]string{"uptime": "-1", "numRestarts": "0", "lastCompletedCheckpointId": "-1", "lastCheckpointExternalPath": "n/a"}
	if len(job) != len(want) {
		t.Fatalf("job metrics: %+v", job)
	}
	for _, mv := range job {
		if *mv.Value != want[mv.ID] {
			t.Errorf("job metric %s = %s after the job finished without checkpoints; want %s", mv.ID, *mv.Value, want[mv.ID])
		}
	}
}

// backPressure polls the vertex's back pressure until cond holds for its
// level, and returns the last answer.
func backPressure(t *testing.T, srv *Server, j *engine.Job, vertex int, cond func(BackPressureInfo) bool) BackPressureInfo {
	t.Helper()
	var bp BackPressureInfo
	deadline := testutil.Deadline(30 * time.Second)
	for {
		getJSON(t, srv.Address(), fmt.Sprintf("/jobs/%s/vertices/%s/backpressure", j.ID(), j.Info().Vertices[vertex].ID), &bp)
		if cond(bp) {
			return bp
		}
		if time.Now().After(deadline) {
			t.Fatalf("back pressure of vertex %d after 30 s: %+v", vertex, bp)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBackPressureFollowsASlowSink: a source feeding a counter throttled
// to 2,000 records/s waits for room downstream: its back pressure is high
// and the counter is busy. Without the throttle, at a rate the counter
// keeps up with, the source is not back-pressured.
func TestBackPressureFollowsASlowSink(t *testing.T) {
	slow := submitWordCount(t, &connectors.WordGenerator{Distinct: 1000, Seed: 1}, connectors.NewThrottle(2000))
	srv := serve(t, slow, ServerOptions{Token: testToken})
	waitRunning(t, slow)
	bp := backPressure(t, srv, slow, 0, func(bp BackPressureInfo) bool { return bp.Level == "high" })
	if len(bp.Subtasks) != 2 || bp.Status != "ok" {
		t.Errorf("back pressure of the source: %+v", bp)
	}
	counter := backPressure(t, srv, slow, 1, func(bp BackPressureInfo) bool { return bp.Level == "ok" && bp.Subtasks[0].BusyRatio > 0.5 })
	t.Logf("throttled: source %+v; counter %+v", bp.Subtasks, counter.Subtasks)
	slow.Cancel()
	slow.Wait()

	paced := submitWordCount(t, &connectors.WordGenerator{Distinct: 1000, Seed: 1, Rate: 20_000}, nil)
	srv = serve(t, paced, ServerOptions{Token: testToken})
	waitRunning(t, paced)
	// Rates cover the last seconds: once the readings show the paced
	// source mostly idle, no subtask is back-pressured.
	bp = backPressure(t, srv, paced, 0, func(bp BackPressureInfo) bool {
		return len(bp.Subtasks) == 2 && bp.Subtasks[0].IdleRatio > 0.5
	})
	if bp.Level != "ok" {
		t.Errorf("an unthrottled source at 20,000 words/s: %+v; want ok", bp)
	}
	var wm []MetricValue
	getJSON(t, srv.Address(), fmt.Sprintf("/jobs/%s/vertices/%s/watermarks", paced.ID(), paced.Info().Vertices[1].ID), &wm)
	if len(wm) != 2 || !strings.HasSuffix(wm[0].ID, ".currentInputWatermark") {
		t.Errorf("watermarks: %+v", wm)
	}
}

// operatorMetric is the sum over a vertex's subtasks of an operator's
// metric, read through the vertex's metrics path by Flink's
// <subtask>.<operator>.<metric> ids; ok is false if no subtask has it.
func operatorMetric(t *testing.T, srv *Server, j *engine.Job, v engine.VertexMetrics, op int, name string) (sum int64, ok bool) {
	t.Helper()
	for _, st := range v.Subtasks {
		id := fmt.Sprintf("%d.%s.%s", st.Subtask, MetricScopeName(st.Operators[op].Name), name)
		var got []MetricValue
		getJSON(t, srv.Address(), fmt.Sprintf("/jobs/%s/vertices/%s/metrics?get=%s", j.ID(), v.ID, id), &got)
		if len(got) == 0 {
			continue
		}
		var n int64
		if _, err := fmt.Sscan(*got[0].Value, &n); err != nil {
			t.Fatalf("%s = %q", id, *got[0].Value)
		}
		sum, ok = sum+n, true
	}
	return sum, ok
}

var letterRuns = regexp.MustCompile(`\pL+`)

// TestOperatorMetricsInsideChains: every operator of a chain, not only its
// head and tail, counts what it took and emitted; the text source counts
// the bytes it read and the print sink the bytes it wrote (FLIP-33's
// numBytesIn and numBytesSend). The expected figures come from reading
// the input file here: lines, lines the filter keeps, their words, the
// file's size, the printed output's size.
func TestOperatorMetricsInsideChains(t *testing.T) {
	path := filepath.Join(t.TempDir(), "input.txt")
	var text strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&text, "line %d has words w%d x%d\n", i, i%97, i%13)
	}
	if err := os.WriteFile(path, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	keep := func(line string) bool { return len(line)%3 != 0 }
	var lines, kept, words int64
	for _, l := range strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n") {
		lines++
		if keep(l) {
			kept++
			words += int64(len(letterRuns.FindAllString(l, -1))) // word count's words
		}
	}
	var printed testutil.SyncBuffer
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: io.Discard})
	src := engine.FromSource[string](env, &connectors.TextFileSource{Paths: []string{path}, SplitSize: 4096}, "lines").UID("source")
	counts := jobs.WordCountPipeline(src.Filter(keep).Name("keep").UID("keep"))
	engine.Map(counts, func(r jobs.WordCountRecord) string { return r.Word }).Name("word").UID("word").
		SinkTo(&api.PrintSink[string]{W: &printed}).Name("print").UID("print")
	j := submit(t, env, config.New())
	srv := serve(t, j, ServerOptions{Token: testToken})
	if res := j.Wait(); res.Err != nil {
		t.Fatal(res.Err)
	}
	m := j.Metrics()
	if len(m.Vertices) != 2 || len(m.Vertices[0].Subtasks[0].Operators) != 3 || len(m.Vertices[1].Subtasks[0].Operators) != 3 {
		t.Fatalf("want two chains of three operators: %+v", m.Vertices)
	}
	for _, tc := range []struct {
		vertex, op int
		metric     string
		want       int64
	}{
		{0, 0, "numRecordsIn", lines}, {0, 0, "numRecordsOut", lines}, {0, 0, "numBytesIn", int64(text.Len())},
		{0, 0, "numRecordsInErrors", 0},
		{0, 1, "numRecordsIn", lines}, {0, 1, "numRecordsOut", kept},
		{0, 2, "numRecordsIn", kept}, {0, 2, "numRecordsOut", words},
		{1, 0, "numRecordsIn", words}, {1, 0, "numRecordsOut", words},
		{1, 1, "numRecordsIn", words}, {1, 1, "numRecordsOut", words},
		{1, 2, "numRecordsIn", words}, {1, 2, "numRecordsOut", words}, {1, 2, "numRecordsSend", words},
		{1, 2, "numBytesSend", int64(len(printed.String()))}, {1, 2, "numBytesOut", int64(len(printed.String()))},
	} {
		v := m.Vertices[tc.vertex]
		name := v.Subtasks[0].Operators[tc.op].Name
		if got, ok := operatorMetric(t, srv, j, v, tc.op, tc.metric); !ok || got != tc.want {
			t.Errorf("%s %s = %d (found: %v); want %d", name, tc.metric, got, ok, tc.want)
		}
	}
	// A source without timestamps has no event time lag to report.
	if _, ok := operatorMetric(t, srv, j, m.Vertices[0], 0, "currentEmitEventTimeLag"); ok {
		t.Error("currentEmitEventTimeLag reported for records without timestamps")
	}
}

// TestEmitEventTimeLag: a source whose watermark strategy gives each
// record an event time reports FLIP-33's currentEmitEventTimeLag, the
// wall clock at emission minus the last record's event time.
func TestEmitEventTimeLag(t *testing.T) {
	const eventTime = 1_000_000 // ms since the epoch: a record from 1970
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: io.Discard})
	strategy := api.ForMonotonousTimestamps[string]().WithTimestampAssigner(func(string, int64) int64 { return eventTime })
	gen := &connectors.WordGenerator{Words: 20_000, WordsPerLine: 10, Distinct: 100, Seed: 1}
	engine.FromSourceWithWatermarks[string](env, gen, strategy, "words").UID("source").
		SinkTo(connectors.DiscardingSink[string]{}).UID("sink")
	before := time.Now().UnixMilli()
	j := submit(t, env, config.New())
	srv := serve(t, j, ServerOptions{Token: testToken})
	if res := j.Wait(); res.Err != nil {
		t.Fatal(res.Err)
	}
	after := time.Now().UnixMilli()
	m := j.Metrics()
	lag, ok := operatorMetric(t, srv, j, m.Vertices[0], 0, "currentEmitEventTimeLag")
	if !ok || lag < before-eventTime || lag > after-eventTime {
		t.Errorf("currentEmitEventTimeLag = %d (found: %v); want between %d and %d", lag, ok, before-eventTime, after-eventTime)
	}
}

// TestOperatorStateSize: a stateful operator's lastCheckpointFullSize is,
// per subtask, the bytes of its state in the latest completed checkpoint,
// as that checkpoint's _metadata records them.
func TestOperatorStateSize(t *testing.T) {
	dir := t.TempDir()
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: io.Discard})
	counts := jobs.WordCountPipeline(engine.FromSource[string](env, &connectors.WordGenerator{Distinct: 5000, Seed: 1, Rate: 50_000}, "words").UID("source"))
	counts.SinkTo(connectors.DiscardingSink[jobs.WordCountRecord]{}).UID("sink")
	conf := config.New()
	conf.SetString("execution.checkpointing.interval", "50 ms", "test")
	conf.SetString("execution.checkpointing.dir", dir, "test")
	// Kept, so that the checkpoint a reading names is still there when
	// the test reads its _metadata.
	conf.SetString("execution.checkpointing.num-retained", "1000", "test")
	j := submit(t, env, conf)
	// One reading: its job metrics and operator metrics describe the same
	// latest checkpoint.
	var m engine.JobMetrics
	waitUntil(t, func() bool {
		m = j.Metrics()
		id, _ := engine.GetMetric(m.Job, "lastCompletedCheckpointId")
		return id.Value >= 3
	})
	path, _ := engine.GetMetric(m.Job, "lastCheckpointExternalPath")
	local, err := savepoint.LocalPath(path.Text)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := savepoint.ReadMetadata(vfs.Default, filepath.Join(local, savepoint.MetadataFileName))
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, op := range meta.Operators {
		if op.UID == "counter" {
			for _, st := range op.Subtasks {
				want = append(want, st.Bytes)
			}
		}
	}
	var got []int64
	for _, st := range m.Vertices[1].Subtasks {
		size, ok := engine.GetMetric(st.Operators[0].Metrics, "lastCheckpointFullSize")
		if !ok || st.Operators[0].Name != "counter" {
			t.Fatalf("subtask %d of %s: no lastCheckpointFullSize: %+v", st.Subtask, st.Operators[0].Name, st.Operators[0].Metrics)
		}
		got = append(got, int64(size.Value))
	}
	if len(want) != 2 || !slices.Equal(got, want) || want[0] <= 0 {
		t.Errorf("the counter's lastCheckpointFullSize by subtask: %v; %s records %v", got, local, want)
	}
}

package rest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/testutil"
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
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: config.New()})
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

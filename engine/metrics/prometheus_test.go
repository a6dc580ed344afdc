package metrics

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/engine/rest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func conf(kv ...string) *config.Configuration {
	c := config.New()
	for i := 0; i+1 < len(kv); i += 2 {
		c.SetString(kv[i], kv[i+1], "test")
	}
	return c
}

// TestConfigured reads Flink's reporter keys: the factory class or the
// older reporter class selects Prometheus; its port is a port or a range
// (9249 by default); other reporters are not started, with a warning;
// bad values are errors naming the key.
func TestConfigured(t *testing.T) {
	reps, warns, err := Configured(conf(
		"metrics.reporter.prom.factory.class", PrometheusFactory,
		"metrics.reporter.old.class", PrometheusClass, "metrics.reporter.old.port", "9250-9260",
		"metrics.reporter.jmx.factory.class", "org.apache.flink.metrics.jmx.JMXReporterFactory"))
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || reps[0].Name != "old" || reps[0].Ports.String() != "9250-9260" || reps[1].Name != "prom" || reps[1].Ports.String() != "9249" || !reps[1].FilterLabelValues {
		t.Errorf("reporters: %+v", reps)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "'jmx'") || !strings.Contains(warns[0], PrometheusFactory) {
		t.Errorf("warnings: %q", warns)
	}
	// metrics.reporters picks some.
	reps, _, err = Configured(conf("metrics.reporters", "b", "metrics.reporter.a.factory.class", PrometheusFactory,
		"metrics.reporter.b.factory.class", PrometheusFactory, "metrics.reporter.b.filterLabelValueCharacters", "false"))
	if err != nil || len(reps) != 1 || reps[0].Name != "b" || reps[0].FilterLabelValues {
		t.Errorf("metrics.reporters: b: %+v, %v", reps, err)
	}
	for _, tc := range []struct {
		kv   []string
		want string
	}{
		{[]string{"metrics.reporter.p.factory.class", PrometheusFactory, "metrics.reporter.p.port", "92x"}, "metrics.reporter.p.port"},
		{[]string{"metrics.reporter.p.factory.class", PrometheusFactory, "metrics.reporter.p.filterLabelValueCharacters", "maybe"}, "filterLabelValueCharacters"},
		{[]string{"metrics.reporters", "nope"}, "metrics.reporter.nope.factory.class"},
	} {
		if _, _, err := Configured(conf(tc.kv...)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Configured(%q): %v; want an error naming %s", tc.kv, err, tc.want)
		}
	}
	if reps, warns, err := Configured(config.New()); len(reps)+len(warns) != 0 || err != nil {
		t.Errorf("no reporter configured: %+v %q %v", reps, warns, err)
	}
}

// submit builds and submits the job on env; the test's cleanup cancels
// it and waits for it.
func submit(t *testing.T, env *engine.Environment) *engine.Job {
	t.Helper()
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

// scrape reads the reporter's /metrics and parses it with Prometheus' own
// parser.
func scrape(t *testing.T, r *Reporter) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + r.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestPrometheusReporterServesFlinksNames: a word count's metrics scrape
// as Prometheus gauges named and labelled as Flink's reporter names them,
// with the values the job's own reading has.
func TestPrometheusReporterServesFlinksNames(t *testing.T) {
	const words = 100_000
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: io.Discard})
	jobs.WordCountPipeline(engine.FromSource[string](env, &connectors.WordGenerator{Words: words, WordsPerLine: 10, Distinct: 500, Seed: 1}, "words").UID("source")).
		SinkTo(connectors.DiscardingSink[jobs.WordCountRecord]{}).UID("sink")
	env.SetJobName("Word: count")
	j := submit(t, env)
	r, err := Start(j, ReporterConfig{Name: "prom", Ports: rest.PortSpec{{0, 0}}, FilterLabelValues: true}, "127.0.0.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if res := j.Wait(); res.Err != nil {
		t.Fatal(res.Err)
	}
	fams := scrape(t, r)
	for _, name := range []string{"flink_jobmanager_job_uptime", "flink_jobmanager_job_numRestarts", "flink_jobmanager_job_lastCheckpointDuration",
		"flink_jobmanager_job_numberOfCompletedCheckpoints", "flink_taskmanager_job_task_numRecordsIn", "flink_taskmanager_job_task_numRecordsOutPerSecond",
		"flink_taskmanager_job_task_busyTimeMsPerSecond", "flink_taskmanager_job_task_backPressuredTimeMsPerSecond",
		"flink_taskmanager_job_task_operator_numRecordsIn", "flink_taskmanager_job_task_operator_currentOutputWatermark"} {
		f := fams[name]
		if f == nil {
			t.Errorf("%s is missing", name)
			continue
		}
		if f.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %v; Flink's reporter makes every counter and gauge a gauge", name, f.GetType())
		}
	}
	if _, ok := fams["flink_jobmanager_job_lastCheckpointExternalPath"]; ok {
		t.Error("a text gauge was exported")
	}
	job := fams["flink_jobmanager_job_uptime"].GetMetric()[0]
	if l := labels(job); l["job_id"] != j.ID() || l["job_name"] != "Word:_count" || l["host"] == "" {
		t.Errorf("job labels %v: want job_id, job_name filtered to [a-zA-Z0-9:_], host", l)
	}
	// The counting vertex's records in, summed over its subtasks, are the
	// words; each subtask has Flink's task labels.
	vid := j.Info().Vertices[1].ID
	var in float64
	seen := map[string]bool{}
	for _, m := range fams["flink_taskmanager_job_task_numRecordsIn"].GetMetric() {
		l := labels(m)
		for _, k := range []string{"tm_id", "task_attempt_id", "task_name", "subtask_index", "task_attempt_num"} {
			if l[k] == "" {
				t.Errorf("task metric without %s: %v", k, l)
			}
		}
		if l["task_id"] == vid {
			in += m.GetGauge().GetValue()
			seen[l["subtask_index"]] = true
		}
	}
	if in != words || len(seen) != 2 {
		t.Errorf("numRecordsIn of the counting vertex: %v over subtasks %v; want %d over 2", in, seen, words)
	}
	var ops int
	for _, m := range fams["flink_taskmanager_job_task_operator_numRecordsIn"].GetMetric() {
		if l := labels(m); l["operator_id"] != "" && l["operator_name"] != "" {
			ops++
		}
	}
	if ops == 0 {
		t.Error("no operator metric carries operator_id and operator_name")
	}
}

// TestReporterPortBusy: a reporter whose only port is taken is an error
// naming the reporter and the port.
func TestReporterPortBusy(t *testing.T) {
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: io.Discard})
	engine.FromSource[string](env, &connectors.WordGenerator{Words: 10, Seed: 1}, "words").UID("source").
		SinkTo(connectors.DiscardingSink[string]{}).UID("sink")
	j := submit(t, env)
	first, err := Start(j, ReporterConfig{Name: "a", Ports: rest.PortSpec{{0, 0}}}, "127.0.0.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, port, _ := strings.Cut(first.Addr(), ":")
	spec, err := rest.ParsePorts(port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(j, ReporterConfig{Name: "b", Ports: spec}, "127.0.0.1", nil); err == nil || !strings.Contains(err.Error(), "metric reporter 'b'") || !strings.Contains(err.Error(), port) {
		t.Errorf("a taken port: %v; want an error naming reporter b and port %s", err, port)
	}
}

package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/flinkrest"
	"github.com/gflink/gflink/internal/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(slowlorisEnv); addr != "" {
		slowloris(addr) // this process is the attacker of TestSlowlorisDoesNotLockOutTheUser
		return
	}
	goleak.VerifyTestMain(m)
}

// loadSpec loads Flink's description of its REST API (flinkrest.Load).
func loadSpec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	doc, router, err := flinkrest.Load()
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

// validator checks every request the server receives and every response
// it gives against the description, and records which operations were
// exercised.
type validator struct {
	t      *testing.T
	router routers.Router
	next   http.Handler
	mu     sync.Mutex
	seen   map[string]int
}

type recorder struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (r *recorder) WriteHeader(code int) { r.code = code; r.ResponseWriter.WriteHeader(code) }
func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (v *validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := v.router.FindRoute(r)
	if err != nil {
		v.t.Errorf("%s %s: not in Flink's REST API: %v", r.Method, r.URL, err)
		v.next.ServeHTTP(w, r)
		return
	}
	ctx := context.Background()
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		v.t.Errorf("request %s %s does not match the description: %v", r.Method, r.URL, err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := &recorder{ResponseWriter: w, code: http.StatusOK}
	v.next.ServeHTTP(rec, r)
	key := r.Method + " " + route.Path
	v.mu.Lock()
	v.seen[key]++
	v.mu.Unlock()
	if rec.code >= 400 {
		// Error bodies are not described; they must be {"errors": [...]}.
		var eb ErrorBody
		if err := json.Unmarshal(rec.body.Bytes(), &eb); err != nil || len(eb.Errors) == 0 {
			v.t.Errorf("%s %s: error body %q is not {\"errors\": [...]}", r.Method, r.URL, rec.body.String())
		}
		return
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.code,
		Header: rec.Header(), Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		v.t.Errorf("response to %s %s does not match the description: %v\nbody: %s", r.Method, r.URL, err, rec.body.String())
	}
}

func startJob(t *testing.T, dir string, conf ...string) *engine.Job {
	t.Helper()
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: io.Discard})
	src := &connectors.WordGenerator{Distinct: 100, Seed: 1, Rate: 20000}
	jobs.WordCountPipeline(engine.FromSource[string](env, src, "gen").UID("source")).Print().UID("sink")
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := config.New()
	c.SetString("execution.checkpointing.interval", "30 ms", "test")
	c.SetString("execution.checkpointing.dir", filepath.Join(dir, "ck"), "test")
	c.SetString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION", "test")
	for i := 0; i+1 < len(conf); i += 2 {
		c.SetString(conf[i], conf[i+1], "test")
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// testToken is the token the tests' servers require.
const testToken = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

// get sends an authenticated GET.
func get(t *testing.T, base, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := testutil.Deadline(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestRESTContract serves a running job and checks every endpoint gflink
// serves, and every request its CLI client sends, against Flink's OpenAPI
// description.
func TestRESTContract(t *testing.T) {
	_, router := loadSpec(t)
	dir := t.TempDir()
	j := startJob(t, dir)
	srv := NewServer(j, ServerOptions{Version: "gflink test", Token: testToken})
	v := &validator{t: t, router: router, next: srv, seen: map[string]int{}}
	hs := httptest.NewServer(v)
	// Deliberately wrong requests go to the same server, unvalidated.
	raw := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		raw.Close()
		srv.Close()
		j.Cancel()
		j.Wait()
	}()
	base := hs.URL
	id := j.ID()
	waitUntil(t, func() bool { return j.Info().Checkpoints.Completed > 0 })
	c := NewClient(base)
	c.Token = testToken
	ctx := context.Background()

	for _, p := range []string{"/overview", "/config", "/jobs", "/jobs/overview", "/jobs/" + id, "/jobs/" + id + "/status",
		"/jobs/" + id + "/checkpoints", "/jobs/" + id + "/checkpoints/config", "/jobs/" + id + "/exceptions",
		"/jobs/" + id + "/execution-result", "/jobs/" + id + "/checkpoints/details/1",
		"/jobs/" + id + "/checkpoints/details/1/subtasks/" + j.Info().Vertices[1].ID,
		"/jobmanager/config", "/jobs/" + id + "/jobmanager/config", "/jobs/" + id + "/config", "/jobs/" + id + "/plan"} {
		if code, body := get(t, base, p); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}
	// Metrics: listed, selected, aggregated, per subtask; watermarks and
	// back pressure.
	vid := j.Info().Vertices[1].ID
	var ckm []AggregatedMetric
	getJSON(t, base, "/jobs/"+id+"/vertices/"+vid+"/subtasks/metrics?get=checkpointStartDelayNanos,checkpointAlignmentTime&agg=MAX", &ckm)
	if len(ckm) != 2 || ckm[0].ID != "checkpointStartDelayNanos" || ckm[0].Max == nil || *ckm[0].Max < 0 || ckm[1].ID != "checkpointAlignmentTime" {
		t.Errorf("checkpoint metrics of a checkpointed job's keyed vertex: %+v", ckm)
	}
	for _, p := range []string{"/jobs/" + id + "/metrics", "/jobs/" + id + "/metrics?get=uptime,lastCheckpointDuration",
		"/jobs/" + id + "/vertices/" + vid + "/metrics", "/jobs/" + id + "/vertices/" + vid + "/metrics?get=0.numRecordsIn",
		"/jobs/" + id + "/vertices/" + vid + "/subtasks/metrics", "/jobs/" + id + "/vertices/" + vid + "/subtasks/metrics?get=numRecordsIn&agg=SUM&subtasks=0-1",
		"/jobs/" + id + "/vertices/" + vid + "/subtasks/1/metrics?get=numRecordsOut,busyTimeMsPerSecond",
		"/jobs/" + id + "/vertices/" + vid + "/watermarks", "/jobs/" + id + "/vertices/" + vid + "/backpressure"} {
		if code, body := get(t, base, p); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}

	// The CLI's requests: savepoint (and its poll), checkpoint, dispose,
	// list, stop — through the client the CLI uses.
	trigger, err := c.TriggerSavepoint(ctx, id, filepath.Join(dir, "sp"), "CANONICAL", false)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := c.WaitSavepoint(ctx, id, trigger)
	if err != nil || !strings.HasPrefix(loc, "file:/") {
		t.Fatalf("savepoint: %q %v", loc, err)
	}
	ck, err := c.TriggerCheckpoint(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	ckID, err := c.WaitCheckpoint(ctx, id, ck)
	if err != nil || ckID <= 0 {
		t.Fatalf("checkpoint: %d %v", ckID, err)
	}
	if _, err := c.CheckpointPath(ctx, id, ckID); err != nil {
		t.Fatal(err)
	}
	dt, err := c.Dispose(ctx, strings.TrimPrefix(loc, "file:"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitDisposal(ctx, dt); err != nil {
		t.Fatalf("dispose: %v", err)
	}
	if _, err := c.JobsOverview(ctx); err != nil {
		t.Fatal(err)
	}
	// A failed savepoint reports its failure cause.
	bad, err := c.TriggerSavepoint(ctx, id, "/proc/self/no/such/place", "NATIVE", false)
	if err == nil {
		if _, err := c.WaitSavepoint(ctx, id, bad); err == nil {
			t.Error("a savepoint into /proc must fail")
		}
	}
	// The optional /v1 prefix; errors keep Flink's status codes and bodies.
	if code, body := get(t, raw.URL, "/v1/jobs/overview"); code != http.StatusOK {
		t.Errorf("GET /v1/jobs/overview: %d %s", code, body)
	}
	for _, tc := range []struct {
		path string
		code int
	}{{"/jobs/0123456789abcdef0123456789abcdef", 404}, {"/jobs/nope", 400}, {"/nothing", 404},
		{"/jobs/" + id + "/savepoints/0123456789abcdef0123456789abcdef", 404},
		{"/jobs/" + id + "/vertices/0123456789abcdef0123456789abcdef/metrics", 404},
		{"/jobs/" + id + "/vertices/nope/backpressure", 400},
		{"/jobs/" + id + "/vertices/" + vid + "/subtasks/7/metrics", 404},
		{"/jobs/" + id + "/vertices/" + vid + "/subtasks/metrics?get=numRecordsIn&agg=median", 400},
		{"/jobs/" + id + "/vertices/" + vid + "/subtasks/metrics?get=numRecordsIn&subtasks=a-b", 400}} {
		if code, body := get(t, raw.URL, tc.path); code != tc.code || !bytes.Contains(body, []byte(`"errors"`)) {
			t.Errorf("GET %s: %d %s; want %d with errors", tc.path, code, body, tc.code)
		}
	}
	req, _ := http.NewRequest(http.MethodPatch, base+"/jobs/"+id+"?mode=STOP", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusPermanentRedirect {
		t.Errorf("PATCH mode=stop: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	stop, err := c.Stop(ctx, id, filepath.Join(dir, "sp2"), "CANONICAL", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitSavepoint(ctx, id, stop); err != nil {
		t.Fatalf("stop: %v", err)
	}
	<-j.Done()
	// After the job ended, the endpoint still answers.
	for _, p := range []string{"/jobs/" + id, "/jobs/" + id + "/execution-result", "/jobs/overview", "/jobs/" + id + "/checkpoints"} {
		if code, body := get(t, base, p); code != http.StatusOK {
			t.Errorf("GET %s after the job ended: %d %s", p, code, body)
		}
	}
	if err := c.Cancel(ctx, id); err == nil || !strings.Contains(err.Error(), "already reached another terminal state (FINISHED)") {
		t.Errorf("cancel after FINISHED: %v", err)
	}

	want := []string{"GET /overview", "GET /config", "GET /jobs", "GET /jobs/overview", "GET /jobs/{jobid}",
		"PATCH /jobs/{jobid}", "GET /jobs/{jobid}/checkpoints", "POST /jobs/{jobid}/checkpoints",
		"GET /jobs/{jobid}/checkpoints/config", "GET /jobs/{jobid}/checkpoints/{triggerid}",
		"GET /jobs/{jobid}/checkpoints/details/{checkpointid}", "GET /jobs/{jobid}/exceptions",
		"GET /jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}",
		"POST /jobs/{jobid}/savepoints", "GET /jobs/{jobid}/savepoints/{triggerid}", "POST /jobs/{jobid}/stop",
		"POST /savepoint-disposal", "GET /savepoint-disposal/{triggerid}", "GET /jobs/{jobid}/status",
		"GET /jobs/{jobid}/execution-result", "GET /jobmanager/config", "GET /jobs/{jobid}/jobmanager/config",
		"GET /jobs/{jobid}/config", "GET /jobs/{jobid}/plan", "GET /jobs/{jobid}/metrics",
		"GET /jobs/{jobid}/vertices/{vertexid}/metrics", "GET /jobs/{jobid}/vertices/{vertexid}/subtasks/metrics",
		"GET /jobs/{jobid}/vertices/{vertexid}/subtasks/{subtaskindex}/metrics",
		"GET /jobs/{jobid}/vertices/{vertexid}/watermarks", "GET /jobs/{jobid}/vertices/{vertexid}/backpressure"}
	var missing []string
	for _, w := range want {
		if v.seen[w] == 0 {
			missing = append(missing, w)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("endpoints not exercised: %v", missing)
	}
	t.Logf("validated %d operations", len(v.seen))
}

// TestUnalignedCheckpointStatistics: with unaligned checkpoints, the
// configuration, each checkpoint's type and each subtask's report say so.
func TestUnalignedCheckpointStatistics(t *testing.T) {
	j := startJob(t, t.TempDir(), "execution.checkpointing.unaligned.enabled", "true",
		"execution.checkpointing.aligned-checkpoint-timeout", "0 ms")
	srv := NewServer(j, ServerOptions{Version: "gflink test", Token: testToken})
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		srv.Close()
		j.Cancel()
		j.Wait()
	}()
	waitUntil(t, func() bool { return j.Info().Checkpoints.Completed > 0 })
	base, id := hs.URL, j.ID()
	var cfg CheckpointConfigInfo
	getJSON(t, base, "/jobs/"+id+"/checkpoints/config", &cfg)
	if !cfg.UnalignedCheckpoints || cfg.AlignedCheckpointTimeout != 0 {
		t.Errorf("checkpoints/config: unaligned_checkpoints %v, aligned_checkpoint_timeout %d", cfg.UnalignedCheckpoints, cfg.AlignedCheckpointTimeout)
	}
	done := j.Info().Checkpoints.LatestCompleted.ID
	var cs CheckpointStatistics
	getJSON(t, base, fmt.Sprintf("/jobs/%s/checkpoints/details/%d", id, done), &cs)
	if cs.CheckpointType != "UNALIGNED_CHECKPOINT" || len(cs.Tasks) != 2 {
		t.Errorf("checkpoint %d: type %q with %d tasks; want UNALIGNED_CHECKPOINT, 2", done, cs.CheckpointType, len(cs.Tasks))
	}
	for _, v := range j.Info().Vertices {
		var ts TaskCheckpointStatisticsWithSubtaskDetails
		getJSON(t, base, fmt.Sprintf("/jobs/%s/checkpoints/details/%d/subtasks/%s", id, done, v.ID), &ts)
		if ts.NumAcknowledgedSubtasks != 2 || len(ts.Subtasks) != 2 {
			t.Fatalf("vertex %s: %d subtasks acknowledged, %d listed; want 2", v.Name, ts.NumAcknowledgedSubtasks, len(ts.Subtasks))
		}
		for i, st := range ts.Subtasks {
			if st.Index != i || !st.UnalignedCheckpoint || st.AckTimestamp < cs.TriggerTimestamp {
				t.Errorf("vertex %s subtask %d: %+v", v.Name, i, st)
			}
		}
	}
	if code, body := get(t, base, fmt.Sprintf("/jobs/%s/checkpoints/details/%d/subtasks/nope", id, done)); code != http.StatusNotFound {
		t.Errorf("unknown vertex: %d %s", code, body)
	}
}

func getJSON(t *testing.T, base, path string, v any) {
	t.Helper()
	code, body := get(t, base, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

// TestCheckpointConfigReportsTheChangelog: checkpoints/config says whether
// the job uses the changelog, with its storage and materialization
// interval as configured (Flink's defaults when it is off).
func TestCheckpointConfigReportsTheChangelog(t *testing.T) {
	for _, tc := range []struct {
		conf     []string
		enabled  bool
		storage  string
		interval int64
	}{
		{nil, false, "memory", 600000},
		{[]string{"state.changelog.enabled", "true", "state.changelog.storage", "filesystem",
			"state.changelog.dstl.dfs.base-path", "", "state.changelog.periodic-materialize.interval", "2 min"}, true, "filesystem", 120000},
	} {
		dir := t.TempDir()
		if len(tc.conf) > 5 {
			tc.conf[5] = filepath.Join(dir, "dstl")
		}
		j := startJob(t, dir, tc.conf...)
		srv := NewServer(j, ServerOptions{Version: "gflink test", Token: testToken})
		hs := httptest.NewServer(srv)
		code, body := get(t, hs.URL, "/jobs/"+j.ID()+"/checkpoints/config")
		hs.Close()
		srv.Close()
		j.Cancel()
		j.Wait()
		var got CheckpointConfigInfo
		if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil {
			t.Fatalf("GET checkpoints/config: %d %s %v", code, body, err)
		}
		if got.StateChangelogEnabled != tc.enabled || got.ChangelogStorage != tc.storage || got.ChangelogPeriodicMaterializationInterval != tc.interval {
			t.Errorf("with %v: state_changelog_enabled=%v changelog_storage=%q interval=%d; want %v %q %d", tc.conf,
				got.StateChangelogEnabled, got.ChangelogStorage, got.ChangelogPeriodicMaterializationInterval, tc.enabled, tc.storage, tc.interval)
		}
	}
}

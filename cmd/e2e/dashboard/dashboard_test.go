package dashboard

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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gflink/gflink/internal/clitest"
	"github.com/gflink/gflink/internal/flinkrest"
	"github.com/gflink/gflink/internal/testutil"
)

// chromium is Debian's Chromium, which .ci/run installs.
const chromium = "/usr/bin/chromium"

// browser starts a headless Chromium with the flags a closed machine
// needs (no background network, no first-run work) and returns its
// context; the test's cleanup closes it.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the dashboard test needs Chromium at %s (.ci/run installs it: apt-get install chromium)", chromium)
		}
		t.Skipf("needs Chromium at %s: install it with apt-get install -y --no-install-recommends chromium (.ci/run does)", chromium)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// startJob runs a paced, checkpointed word count detached and returns its
// id, endpoint and token (from its registry entry, as a user would read
// it).
func startJob(t *testing.T, dir string) (id, endpoint, token string) {
	t.Helper()
	out, err := clitest.Command(dir, "run", "-d", "-o", "json", "-Dexecution.checkpointing.interval=300ms",
		"-Dexecution.checkpointing.dir="+filepath.Join(dir, "ck"), "-Drest.bind-port=0",
		"wordcount", "--generate", "unbounded", "--rate", "20000", "--discard").Output()
	if err != nil {
		t.Fatalf("run -d: %v\n%s", err, out)
	}
	var res struct{ JobID, Endpoint string }
	if err := json.Unmarshal(out, &res); err != nil || res.JobID == "" {
		t.Fatalf("run -d printed %s", out)
	}
	t.Cleanup(func() { clitest.Command(dir, "cancel", res.JobID).Run() })
	entry, err := os.ReadFile(filepath.Join(dir, ".gflink", "jobs", res.JobID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Token string }
	json.Unmarshal(entry, &e)
	return res.JobID, res.Endpoint, e.Token
}

// waitFor polls the page's JavaScript expression until it is true.
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := testutil.Deadline(60 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("%s: not within 60 s; the page says:\n%s", what, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// screenshot writes the page as an artifact: $GFLINK_TEST_ARTIFACTS, or
// a directory under the system's temporary one.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("GFLINK_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "gflink-test-artifacts")
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestDashboardInABrowser: the dashboard of a running word count, in
// Chromium. Without the token it shows nothing of the job; with it, the
// job graph with non-zero rates, a checkpoint chart that grows, and a
// savepoint triggered from the page that `gflink checkpoints` then lists.
func TestDashboardInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a job and a browser")
	}
	if testutil.RaceEnabled() {
		t.Skip("drives a browser for a minute: the plain run covers it; the REST handlers it calls are race-tested in engine/rest")
	}
	ctx := browser(t)
	dir := t.TempDir()
	id, endpoint, token := startJob(t, dir)

	if err := chromedp.Do(ctx, chromedp.Navigate(endpoint+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the token form", `!document.getElementById("login").hidden`)
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if strings.Contains(body, id) || strings.Contains(body, "WordCount") {
		t.Fatalf("without the token the page shows the job:\n%s", body)
	}
	screenshot(t, ctx, "dashboard-login")

	// A wrong token is refused, and still nothing of the job shows.
	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", "not-the-token"), chromedp.Click(`#login button[type="submit"]`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the refusal", `document.getElementById("login-error").textContent.includes("refused")`)

	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", token), chromedp.Click(`#login button[type="submit"]`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the job graph with both vertices", `document.querySelectorAll("#graph g.vertex").length === 2`)
	waitFor(t, ctx, "non-zero rates", `[...document.querySelectorAll('#vertices td[data-metric="out"]')].some(td => Number(td.dataset.value) > 0)`)
	body, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if !strings.Contains(body, id) {
		t.Errorf("the page does not name the job %s:\n%s", id, body)
	}
	waitFor(t, ctx, "a checkpoint in the chart", `document.querySelectorAll("#ck-chart rect.ck").length > 0`)
	before, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#ck-chart rect.ck").length`))
	waitFor(t, ctx, "the chart growing", fmt.Sprintf(`document.querySelectorAll("#ck-chart rect.ck").length > %d`, before))
	screenshot(t, ctx, "dashboard-running")

	// A savepoint from the page, through the same token.
	spDir := filepath.Join(dir, "sp")
	if err := chromedp.Do(ctx, chromedp.SendKeys("#sp-dir", spDir), chromedp.Click("#savepoint")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the savepoint", `document.getElementById("action-result").textContent.startsWith("Savepoint completed. Path: ")`)
	result, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("action-result").textContent`))
	path := strings.TrimPrefix(result, "Savepoint completed. Path: ")
	screenshot(t, ctx, "dashboard-savepoint")
	out, err := clitest.Command(dir, "checkpoints", spDir).CombinedOutput()
	if err != nil {
		t.Fatalf("gflink checkpoints %s: %v\n%s", spDir, err, out)
	}
	if !strings.Contains(string(out), filepath.Base(strings.TrimPrefix(path, "file:"))) {
		t.Errorf("gflink checkpoints %s does not list the page's savepoint %s:\n%s", spDir, path, out)
	}
}

// flinkShaped is an endpoint in front of gflink's that answers as a Flink
// cluster's REST API would where the shapes agree: the dashboard's files
// as they are, then only the operations of Flink's OpenAPI description,
// each answer pruned to the fields the description has, and no token
// asked (it sends gflink's itself: Flink's REST API has none). It counts
// the requests the page made outside the description and the fields it
// pruned.
func flinkShaped(t *testing.T, endpoint, token string) (url string, outside, pruned *atomic.Int64) {
	t.Helper()
	doc, router, err := flinkrest.Load()
	if err != nil {
		t.Fatal(err)
	}
	outside, pruned = new(atomic.Int64), new(atomic.Int64)
	static := map[string]bool{"/": true, "/index.html": true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, _, err := router.FindRoute(r)
		isStatic := static[r.URL.Path] || strings.HasPrefix(r.URL.Path, "/web/")
		if err != nil && !isStatic {
			t.Logf("outside Flink's REST API: %s %s", r.Method, r.URL)
			outside.Add(1)
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"errors":["Not found: %s"]}`, r.URL.Path)
			return
		}
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, endpoint+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		if !isStatic {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		for k, vs := range resp.Header {
			if k != "Content-Length" {
				w.Header()[k] = vs
			}
		}
		if !isStatic && resp.StatusCode < 300 && len(data) > 0 {
			var v any
			if json.Unmarshal(data, &v) == nil {
				if rs := route.Operation.Responses.Status(resp.StatusCode); rs != nil && rs.Value != nil {
					if mt := rs.Value.Content.Get("application/json"); mt != nil {
						kept, _ := json.Marshal(flinkrest.Prune(doc, mt.Schema, v))
						if len(kept) < len(data) {
							pruned.Add(1)
						}
						data = kept
					}
				}
			}
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, outside, pruned
}

// TestDashboardOnAFlinkShapedEndpoint: the page needs nothing but Flink's
// REST API. Served by an endpoint that answers only the operations and
// fields of Flink's description and asks no token, as a Flink cluster's,
// it shows the job, its graph with non-zero rates and its checkpoints,
// without asking for a token and without a request outside Flink's API.
func TestDashboardOnAFlinkShapedEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a job and a browser")
	}
	if testutil.RaceEnabled() {
		t.Skip("drives a browser: the plain run covers it")
	}
	ctx := browser(t)
	dir := t.TempDir()
	id, endpoint, token := startJob(t, dir)
	url, outside, pruned := flinkShaped(t, endpoint, token)
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the job graph with both vertices", `document.querySelectorAll("#graph g.vertex").length === 2`)
	waitFor(t, ctx, "non-zero rates", `[...document.querySelectorAll('#vertices td[data-metric="out"]')].some(td => Number(td.dataset.value) > 0)`)
	waitFor(t, ctx, "a checkpoint in the chart", `document.querySelectorAll("#ck-chart rect.ck").length > 0`)
	waitFor(t, ctx, "a completed checkpoint's path", `document.body.innerText.includes("/chk-")`)
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if !strings.Contains(body, id) {
		t.Errorf("the page does not name the job %s:\n%s", id, body)
	}
	if login, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("login").hidden`)); login {
		t.Error("the page asks for a token from an endpoint that needs none")
	}
	if n := outside.Load(); n > 0 {
		t.Errorf("the page made %d requests outside Flink's REST API", n)
	}
	t.Logf("answers with fields Flink's description does not have, pruned: %d", pruned.Load())
	screenshot(t, ctx, "dashboard-flink-shaped")
}

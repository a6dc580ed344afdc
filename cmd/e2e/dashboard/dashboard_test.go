package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gflink/gflink/internal/clitest"
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

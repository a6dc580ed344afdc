package engine_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// syncBuffer is an io.Writer safe for the print sinks of several subtasks.
type syncBuffer = testutil.SyncBuffer

type wcRun struct {
	p        int
	lines    int64
	distinct int
	rate     float64 // words per second
	conf     map[string]string
	fs       vfs.FS
	restore  *restore.Resolved
	jobID    string
	// slow makes the counter spin this many rounds per update, so that it
	// backpressures the tokenizer: the keyed exchange's buffers stay full.
	slow int
	// sinkRate throttles the counts to this many a second in all (a slow
	// sink that leaves the cores free, unlike slow).
	sinkRate float64
	// log, if set, receives the job's log.
	log *syncBuffer
}

func (r wcRun) generator() *connectors.WordGenerator {
	return &connectors.WordGenerator{Lines: r.lines, Distinct: r.distinct, Seed: 3, WordsPerLine: 10, Rate: r.rate}
}

// stateBackend runs these tests' jobs on a chosen state backend:
// TestEngineTestsOnRocksDB runs them again, in a child process, with
// -state.backend=rocksdb.
var stateBackend = flag.String("state.backend", "", "run the engine tests' jobs on this state backend (hashmap or rocksdb)")

// newTestConfig is an empty configuration but for the chosen backend.
func newTestConfig(t testing.TB) *config.Configuration {
	c := config.New()
	if *stateBackend != "" {
		c.SetString("state.backend.type", *stateBackend, "test")
		c.SetString("state.backend.rocksdb.localdir", t.TempDir(), "test")
		c.SetString("taskmanager.memory.managed.size", "32 mb", "test")
	}
	if *unaligned {
		c.SetString("execution.checkpointing.unaligned.enabled", "true", "test")
		if *alignedTimeout != "" {
			c.SetString("execution.checkpointing.aligned-checkpoint-timeout", *alignedTimeout, "test")
		}
	}
	if *stateChangelog {
		c.SetString("state.changelog.enabled", "true", "test")
		c.SetString("state.changelog.storage", "filesystem", "test")
		c.SetString("state.changelog.dstl.dfs.base-path", t.TempDir(), "test")
		c.SetString("state.changelog.periodic-materialize.interval", "20 ms", "test")
	}
	return c
}

var (
	unaligned      = flag.Bool("unaligned", false, "run the engine tests' jobs with unaligned checkpoints")
	alignedTimeout = flag.String("aligned-timeout", "", "with -unaligned: execution.checkpointing.aligned-checkpoint-timeout")
)

// spinSink keeps spin's work from being optimized away.
var spinSink atomic.Uint64

// spin burns CPU for about n rounds of a multiply-add: work, not a sleep,
// so that a slowed operator is slow the same way on any scheduler.
func spin(n int) {
	x := uint64(n)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	spinSink.Add(x & 1)
}

var stateChangelog = flag.Bool("state.changelog", false, "run the engine tests' jobs with the changelog state backend (filesystem log, materialized every 20 ms)")

// run runs word count with a print sink into a buffer.
func (r wcRun) run(t *testing.T) (engine.JobResult, string) {
	t.Helper()
	out := &syncBuffer{}
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: r.p, Stdout: out})
	lines := engine.FromSource[string](env, r.generator(), "generator").UID("source")
	counts := jobs.WordCountPipeline(lines)
	if r.slow > 0 {
		counts = engine.Map(counts, func(c jobs.WordCountRecord) jobs.WordCountRecord {
			spin(r.slow)
			return c
		}).Name("slow").UID("slow")
	}
	if r.sinkRate > 0 {
		th := connectors.NewThrottle(r.sinkRate)
		counts = engine.Map(counts, func(c jobs.WordCountRecord) jobs.WordCountRecord {
			th.Wait()
			return c
		}).Name("throttle").UID("throttle")
	}
	counts.Print().UID("sink")
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := newTestConfig(t)
	for k, v := range r.conf {
		c.SetString(k, v, "test")
	}
	if *unaligned && r.conf["execution.checkpointing.mode"] == "AT_LEAST_ONCE" {
		c.SetString("execution.checkpointing.unaligned.enabled", "false", "test") // EXACTLY_ONCE only
	}
	var logger *slog.Logger
	switch {
	case r.log != nil:
		logger = slog.New(slog.NewTextHandler(r.log, nil))
	case os.Getenv("GFLINK_TEST_LOG") != "":
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c, FS: r.fs, Restore: r.restore, JobID: r.jobID, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan engine.JobResult, 1)
	go func() { done <- j.Wait() }()
	select {
	case res := <-done:
		return res, out.String()
	case <-testutil.After(60 * time.Second):
		j.Cancel()
		<-done
		tail := ""
		if r.log != nil {
			lines := strings.Split(r.log.String(), "\n")
			tail = strings.Join(lines[max(len(lines)-40, 0):], "\n")
		}
		t.Fatalf("job did not finish within 60 s; %d lines printed; the log ends:\n%s", strings.Count(out.String(), "\n"), tail)
		return engine.JobResult{}, ""
	}
}

var line = regexp.MustCompile(`^(?:\d+> )?\((.*),(\d+)\)$`)

// finalCounts reads (word,count) updates; a word's final count is the
// highest count emitted for it (counts only grow, and replays repeat lower
// ones).
func finalCounts(t *testing.T, out string) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		g := line.FindStringSubmatch(l)
		if g == nil {
			t.Fatalf("unexpected output line %q", l)
		}
		n, _ := strconv.ParseInt(g[2], 10, 64)
		if n > m[g[1]] {
			m[g[1]] = n
		}
	}
	return m
}

// expected counts the words of the generated text directly.
func expected(r wcRun) map[string]int64 {
	g := r.generator()
	m := map[string]int64{}
	var buf []byte
	for i := int64(0); i < r.lines; i++ {
		buf = g.Line(i, buf)
		for _, w := range strings.Fields(string(buf)) {
			m[w]++
		}
	}
	return m
}

func compareCounts(t *testing.T, got, want map[string]int64, atLeast bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d distinct words; want %d", len(got), len(want))
	}
	bad := 0
	for w, n := range want {
		g := got[w]
		if g == n || atLeast && g > n {
			continue
		}
		if bad++; bad <= 5 {
			t.Errorf("count of %q = %d; want %d", w, g, n)
		}
	}
	if bad > 5 {
		t.Errorf("... %d wrong counts in all", bad)
	}
}

func checkpointConf(dir string, extra ...string) map[string]string {
	c := map[string]string{
		"execution.checkpointing.interval":      "20 ms",
		"execution.checkpointing.dir":           dir,
		"restart-strategy.type":                 "fixed-delay",
		"restart-strategy.fixed-delay.attempts": "10",
		"restart-strategy.fixed-delay.delay":    "1 ms",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i]] = extra[i+1]
	}
	return c
}

// failWithCheckpoint runs r, which must fail with one retained checkpoint,
// and returns that checkpoint resolved and the run's output. Its injected
// failure waits for a completed checkpoint (fault-injection.after-
// checkpoints): on a loaded machine the sources could otherwise reach the
// failure before the first checkpoint completed.
func failWithCheckpoint(t *testing.T, r wcRun) (*restore.Resolved, string) {
	t.Helper()
	r.conf["fault-injection.after-checkpoints"] = "1"
	res, out := r.run(t)
	if res.Status != engine.StatusFailed || len(res.Retained) != 1 {
		t.Fatalf("status %s (%v), retained %v; want FAILED with one checkpoint", res.Status, res.Err, res.Retained)
	}
	chk, err := savepoint.LocalPath(res.Retained[0])
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := restore.Resolve(vfs.Default, chk)
	if err != nil {
		t.Fatal(err)
	}
	return resolved, out
}

func TestWordCountWithoutFailures(t *testing.T) {
	r := wcRun{p: 2, lines: 2000, distinct: 300}
	res, out := r.run(t)
	if res.Status != engine.StatusFinished {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	compareCounts(t, finalCounts(t, out), expected(r), false)
	// Without failures every update is printed exactly once.
	if n := strings.Count(out, "\n"); n != 20000 {
		t.Errorf("%d updates printed; want 20000", n)
	}
}

// TestExactlyOnceUnderInjectedFailures is the foundation's promise: with
// EXACTLY_ONCE checkpoints, word count over 200,000 words (10,000 distinct)
// with 1–3 injected failures ends with the same counts as a failure-free
// run, at p=1 and p=4.
func TestExactlyOnceUnderInjectedFailures(t *testing.T) {
	for _, tc := range []struct {
		p, failures int
		after       int
	}{{1, 1, 5000}, {1, 3, 3000}, {4, 1, 7000}, {4, 3, 2500}} {
		t.Run(fmt.Sprintf("p=%d/failures=%d", tc.p, tc.failures), func(t *testing.T) {
			r := wcRun{p: tc.p, lines: 20000, distinct: 10000, rate: 2_000_000,
				conf: checkpointConf(t.TempDir(),
					"fault-injection.fail-after-records", strconv.Itoa(tc.after),
					"fault-injection.max-failures", strconv.Itoa(tc.failures))}
			res, out := r.run(t)
			if res.Status != engine.StatusFinished {
				t.Fatalf("status %s: %v", res.Status, res.Err)
			}
			compareCounts(t, finalCounts(t, out), expected(r), false)
		})
	}
}

func TestAtLeastOnceNeverCountsLess(t *testing.T) {
	r := wcRun{p: 4, lines: 20000, distinct: 5000, rate: 2_000_000,
		conf: checkpointConf(t.TempDir(),
			"execution.checkpointing.mode", "AT_LEAST_ONCE",
			"fault-injection.fail-after-records", "4000",
			"fault-injection.max-failures", "2")}
	res, out := r.run(t)
	if res.Status != engine.StatusFinished {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	compareCounts(t, finalCounts(t, out), expected(r), true)
}

// TestFaultInjectionWaitsForCheckpoints: with
// fault-injection.after-checkpoints the injected failure comes once the
// records are emitted *and* that many checkpoints have completed — so a
// rehearsal always has a checkpoint to restore, however fast the sources
// (here the record threshold is crossed by the first line).
func TestFaultInjectionWaitsForCheckpoints(t *testing.T) {
	r := wcRun{p: 2, lines: 2_000_000, distinct: 100, rate: 200_000, log: &syncBuffer{}, // outlasts the failure
		conf: checkpointConf(t.TempDir(), "restart-strategy.type", "none",
			"fault-injection.fail-after-records", "1",
			"fault-injection.after-checkpoints", "3")}
	res, _ := r.run(t)
	if res.Status != engine.StatusFailed || !strings.Contains(res.Err.Error(), "injected failure 1 of 1") {
		t.Fatalf("status %s (%v); want FAILED by the injected failure", res.Status, res.Err)
	}
	log := r.log.String()
	if !strings.Contains(log, "after the sources emit 1 records and 3 checkpoints complete") {
		t.Errorf("the start-up warning does not say the failure waits for 3 checkpoints:\n%s", log)
	}
	failed := strings.Index(log, "injected failure")
	if failed < 0 {
		t.Fatalf("the log does not mention the injected failure:\n%s", log)
	}
	if n := len(completedCheckpoints.FindAllString(log[:failed], -1)); n < 3 {
		t.Errorf("%d checkpoints completed before the injected failure; want at least 3:\n%s", n, log[:failed])
	}
}

func TestNoRestartStrategyFailsTheJob(t *testing.T) {
	r := wcRun{p: 2, lines: 5000, distinct: 100, rate: 1_000_000,
		conf: checkpointConf(t.TempDir(), "restart-strategy.type", "none",
			"fault-injection.fail-after-records", "1000")}
	res, _ := r.run(t)
	if res.Status != engine.StatusFailed {
		t.Fatalf("status %s; want FAILED", res.Status)
	}
	for _, want := range []string{"Recovery is suppressed by NoRestartBackoffTimeStrategy", "injected failure 1 of 1"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("error %q does not mention %q", res.Err, want)
		}
	}
}

// TestEngineTestsUnaligned runs the engine tests again with unaligned
// checkpoints, over either backend.
func TestEngineTestsUnaligned(t *testing.T) {
	for _, backend := range []string{"hashmap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			rerunTests(t, "with unaligned checkpoints on "+backend, true, "-state.backend="+backend, "-unaligned")
		})
	}
	// Aligned at first, unaligned where a barrier is not through within
	// 2 ms: both kinds, and checkpoints that turn halfway.
	t.Run("aligned-timeout", func(t *testing.T) {
		rerunTests(t, "with unaligned checkpoints after a 2 ms alignment timeout", true, "-unaligned", "-aligned-timeout=2ms")
	})
}

// TestRetainedCheckpointRestores: with RETAIN_ON_CANCELLATION and no
// restarts, one failure leaves chk-N; restoring from it (its directory,
// its _metadata, a file:// URI) gives the exact counts, and the first new
// checkpoint is chk-(N+1).
func TestRetainedCheckpointRestores(t *testing.T) {
	dir := t.TempDir()
	// Paced, so that the run lasts long enough for the failure at 12,000
	// records to come after a checkpoint (every 20 ms), which the failure
	// waits for (fault-injection.after-checkpoints).
	base := wcRun{p: 2, lines: 20000, distinct: 2000, rate: 200_000}
	first := base
	first.conf = checkpointConf(dir, "restart-strategy.type", "none",
		"execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION",
		"fault-injection.fail-after-records", "12000", "fault-injection.after-checkpoints", "1")
	res, out1 := first.run(t)
	if res.Status != engine.StatusFailed {
		t.Fatalf("status %s; want FAILED", res.Status)
	}
	if len(res.Retained) != 1 {
		t.Fatalf("retained %v; want one checkpoint", res.Retained)
	}
	chk, err := savepoint.LocalPath(res.Retained[0])
	if err != nil {
		t.Fatal(err)
	}
	n, ok := savepoint.ParseCheckpointDirName(filepath.Base(chk))
	if !ok {
		t.Fatalf("retained %s is not a chk-N directory", chk)
	}
	before := finalCounts(t, out1)
	for _, ptr := range []string{chk, filepath.Join(chk, "_metadata"), "file://" + chk} {
		t.Run(ptr, func(t *testing.T) {
			resolved, err := restore.Resolve(vfs.Default, ptr)
			if err != nil {
				t.Fatal(err)
			}
			if want := cmp.Or(*stateBackend, "hashmap"); resolved.Metadata.Backend != want {
				t.Fatalf("the checkpoint was written by the %q backend; want %q", resolved.Metadata.Backend, want)
			}
			second := base
			ckDir := t.TempDir()
			second.conf = checkpointConf(ckDir, "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
			second.restore = resolved
			second.jobID = "00000000000000000000000000000042"
			res, out2 := second.run(t)
			if res.Status != engine.StatusFinished {
				t.Fatalf("status %s: %v", res.Status, res.Err)
			}
			// Counts continue from the checkpoint: the restored run's final
			// counts are the whole text's.
			got := finalCounts(t, out2)
			for w, c := range before {
				if got[w] < c {
					got[w] = c // words not updated after the restore
				}
			}
			compareCounts(t, got, expected(base), false)
			if _, err := os.Stat(filepath.Join(chk, "_metadata")); err != nil {
				t.Fatalf("the restored checkpoint must be left alone (NO_CLAIM): %v", err)
			}
			_ = n
		})
	}
}

func TestRestoredCheckpointIDsContinue(t *testing.T) {
	dir := t.TempDir()
	r := wcRun{p: 1, lines: 20000, distinct: 100, rate: 500_000,
		conf: checkpointConf(dir, "restart-strategy.type", "none",
			"execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION",
			"fault-injection.fail-after-records", "15000", "fault-injection.after-checkpoints", "1")}
	res, _ := r.run(t)
	if res.Status != engine.StatusFailed || len(res.Retained) == 0 {
		t.Fatalf("status %s, retained %v", res.Status, res.Retained)
	}
	chk, _ := savepoint.LocalPath(res.Retained[0])
	n, _ := savepoint.ParseCheckpointDirName(filepath.Base(chk))
	resolved, err := restore.Resolve(vfs.Default, chk)
	if err != nil {
		t.Fatal(err)
	}
	// Log every operation of the restored run's storage: its first
	// checkpoint directory must be chk-(n+1).
	logfs := &vfs.LogFS{FS: vfs.Default}
	ck2 := t.TempDir()
	r2 := wcRun{p: 1, lines: 20000, distinct: 100, rate: 500_000, fs: logfs, restore: resolved,
		jobID: "0000000000000000000000000000abcd",
		conf:  checkpointConf(ck2, "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")}
	if res, _ := r2.run(t); res.Status != engine.StatusFinished {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	want := fmt.Sprintf("mkdirall %s", savepoint.CheckpointDir(filepath.Join(ck2, r2.jobID), n+1))
	for _, op := range logfs.Log() {
		if strings.HasPrefix(op, "mkdirall "+filepath.Join(ck2, r2.jobID, "chk-")) {
			if op != want {
				t.Fatalf("first checkpoint after restoring chk-%d: %q; want %q", n, op, want)
			}
			return
		}
	}
	t.Fatal("the restored job took no checkpoint")
}

// TestFailingCheckpointStorage: state files that cannot be written make
// checkpoints fail; within tolerable-failed-checkpoints the job goes on and
// still counts exactly.
func TestFailingCheckpointStorage(t *testing.T) {
	dir := t.TempDir()
	// Fail every third of the first 60 state file writes. A checkpoint
	// writes about four files here, so failing every third forever would
	// fail every checkpoint, the final one too, and the job could never
	// finish (a failed final checkpoint is retried at the interval, no
	// longer in a tight loop that made it pass by chance).
	var n int
	var mu sync.Mutex
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op != vfs.OpCreate || filepath.Base(path) == "_metadata" || strings.Contains(filepath.Base(path), "_metadata") {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if n++; n%3 == 0 && n <= 60 {
			return fmt.Errorf("create %s: %w", path, vfs.ErrInjected)
		}
		return nil
	})}
	r := wcRun{p: 2, lines: 20000, distinct: 3000, rate: 1_000_000, fs: efs,
		conf: checkpointConf(dir, "execution.checkpointing.tolerable-failed-checkpoints", "1000",
			"execution.checkpointing.data-inline-threshold", "0",
			"fault-injection.fail-after-records", "9000")}
	res, out := r.run(t)
	if res.Status != engine.StatusFinished {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	compareCounts(t, finalCounts(t, out), expected(r), false)
	if mu.Lock(); n < 3 {
		t.Fatalf("only %d state files written: no write failed", n)
	}
	mu.Unlock()
}

func TestCancelAppliesRetention(t *testing.T) {
	for _, tc := range []struct {
		retention string
		kept      bool
	}{{"NO_EXTERNALIZED_CHECKPOINTS", false}, {"DELETE_ON_CANCELLATION", false}, {"RETAIN_ON_CANCELLATION", true}} {
		// On synctest's fake clock: the paced source and the checkpoint
		// interval take no wall time.
		t.Run(tc.retention, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: &syncBuffer{}})
				src := &connectors.WordGenerator{Distinct: 100, Seed: 1, Rate: 100_000} // unbounded
				jobs.WordCountPipeline(engine.FromSource[string](env, src, "gen").UID("source")).Print().UID("sink")
				g, _ := env.Build()
				c := newTestConfig(t)
				for k, v := range checkpointConf(dir, "execution.checkpointing.externalized-checkpoint-retention", tc.retention) {
					c.SetString(k, v, "test")
				}
				// What is on disk at the moment CANCELED is published: the
				// retention policy must have run by then (issue 8: `gflink
				// cancel` returned while checkpoints were still being deleted).
				jobID := engine.NewJobID()
				jobDir := filepath.Join(dir, jobID)
				keptAtCanceled := make(chan bool, 1)
				onStatus := func(s engine.JobStatus, _ time.Time) {
					if s == engine.StatusCanceled {
						_, err := os.Stat(jobDir)
						keptAtCanceled <- err == nil
					}
				}
				j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c, JobID: jobID, OnStatus: onStatus})
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, func() bool {
					ids, _ := restore.CheckpointIDs(vfs.Default, jobDir)
					for _, id := range ids {
						if _, err := os.Stat(filepath.Join(savepoint.CheckpointDir(jobDir, id), "_metadata")); err == nil {
							return true
						}
					}
					return false
				})
				j.Cancel()
				res := j.Wait()
				if res.Status != engine.StatusCanceled {
					t.Fatalf("status %s", res.Status)
				}
				if kept := <-keptAtCanceled; kept != tc.kept {
					t.Fatalf("when CANCELED was published, job checkpoint directory kept = %v; want %v", kept, tc.kept)
				}
				_, err = os.Stat(jobDir)
				if kept := err == nil; kept != tc.kept {
					t.Fatalf("job checkpoint directory kept = %v; want %v", kept, tc.kept)
				}
				if tc.kept {
					found, _, err := restore.LatestCheckpoint(vfs.Default, jobDir)
					if err != nil || found == nil {
						t.Fatalf("no restorable checkpoint left: %v", err)
					}
				}
			})
		})
	}
}

// waitFor polls cond until it holds, failing after a deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := testutil.Deadline(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// timerFn emits "<key>:fired" from a processing-time timer set 30 ms after
// the key's first record.
type timerFn struct {
	seen api.ValueState[bool]
}

func (f *timerFn) Open(ctx *api.Context[string]) (err error) {
	f.seen, err = api.GetValueState[bool](ctx, "seen")
	return err
}

func (f *timerFn) ProcessElement(ctx *api.Context[string], w string, out api.Collector[string]) error {
	if s, _ := f.seen.Value(); !s {
		f.seen.Update(true)
		ts := ctx.TimerService()
		ts.RegisterProcessingTimeTimer(ts.CurrentProcessingTime() + 30)
	}
	return nil
}

func (f *timerFn) OnTimer(ctx *api.Context[string], ts int64, out api.Collector[string]) error {
	out.Collect(ctx.CurrentKey() + ":fired")
	return nil
}

// TestTimersSurviveFailures: timers are part of the snapshot; a timer set
// before a failure fires after recovery.
func TestTimersSurviveFailures(t *testing.T) {
	// On synctest's fake clock: the source's pacing and the 30 ms timers
	// take no wall time, and the timers fire in a deterministic order of
	// fake time.
	synctest.Test(t, func(t *testing.T) {
		out := &syncBuffer{}
		env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: out})
		words := make([]string, 0, 400)
		for i := 0; i < 400; i++ {
			words = append(words, fmt.Sprintf("w%d", i%40))
		}
		// A slow source so that timers are pending at checkpoints and failures.
		src := &connectors.WordGenerator{Lines: 300, Distinct: 40, Seed: 9, WordsPerLine: 1, Rate: 6000}
		lines := engine.FromSource[string](env, src, "gen").UID("source")
		engine.Process(engine.KeyBy(lines, func(s string) string { return s }), &timerFn{}).UID("timers").Print()
		g, _ := env.Build()
		c := newTestConfig(t)
		for k, v := range checkpointConf(t.TempDir(), "fault-injection.fail-after-records", "150", "fault-injection.max-failures", "2") {
			c.SetString(k, v, "test")
		}
		j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c})
		if err != nil {
			t.Fatal(err)
		}
		// The job ends when its input does; timers due later would not fire,
		// so wait until every key's timer has fired, then cancel.
		keys := map[string]bool{}
		var buf []byte
		for i := int64(0); i < 300; i++ {
			buf = src.Line(i, buf)
			keys[string(buf)] = true
		}
		waitFor(t, func() bool {
			if j.Status() == engine.StatusFinished {
				return true
			}
			fired := 0
			for k := range keys {
				if strings.Contains(out.String(), k+":fired") {
					fired++
				}
			}
			return fired == len(keys)
		})
		j.Cancel()
		j.Wait()
		for k := range keys {
			if !strings.Contains(out.String(), k+":fired") {
				t.Errorf("timer of %s never fired", k)
			}
		}
		_ = words
	})
}

func TestUserErrorFailsTaskWithMessage(t *testing.T) {
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: &syncBuffer{}})
	src := &connectors.Elements[string]{Items: []string{"a", "b", "boom"}}
	s := engine.FromSource[string](env, src, "in").UID("source")
	engine.Map(s, func(v string) string {
		if v == "boom" {
			panic(errors.New("bad record"))
		}
		return v
	}).Name("mapper").Print()
	g, _ := env.Build()
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := j.Wait()
	if res.Status != engine.StatusFailed || !strings.Contains(res.Err.Error(), "bad record") {
		t.Fatalf("status %s, err %v", res.Status, res.Err)
	}
}

// TestJobManagerStorageRecovers: checkpoints kept in memory (no directory)
// still recover failures exactly, and nothing is written to disk.
func TestJobManagerStorageRecovers(t *testing.T) {
	logfs := &vfs.LogFS{FS: vfs.Default}
	r := wcRun{p: 2, lines: 20000, distinct: 3000, rate: 2_000_000, fs: logfs, conf: map[string]string{
		"execution.checkpointing.interval":      "20 ms",
		"restart-strategy.type":                 "fixed-delay",
		"restart-strategy.fixed-delay.attempts": "5",
		"restart-strategy.fixed-delay.delay":    "1 ms",
		"fault-injection.fail-after-records":    "6000",
		"fault-injection.max-failures":          "2",
	}}
	res, out := r.run(t)
	if res.Status != engine.StatusFinished {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	compareCounts(t, finalCounts(t, out), expected(r), false)
	if ops := logfs.Log(); len(ops) != 0 {
		t.Errorf("jobmanager storage wrote to disk: %q", ops)
	}
}

// TestCheckpointsAfterTasksFinishDisabled: a bounded job finishes without a
// final checkpoint; tasks do not wait.
//
// It runs on synctest's fake clock: time passes only while every goroutine
// of the job waits, so a job that waited for the hour-long interval would
// take exactly that hour, at once, and the check is exact.
func TestCheckpointsAfterTasksFinishDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := wcRun{p: 3, lines: 3000, distinct: 100, conf: map[string]string{
			"execution.checkpointing.interval":                       "1 h",
			"execution.checkpointing.checkpoints-after-tasks-finish": "false",
		}}
		start := time.Now()
		res, out := r.run(t)
		if res.Status != engine.StatusFinished {
			t.Fatalf("status %s: %v", res.Status, res.Err)
		}
		if d := time.Since(start); d >= time.Minute {
			t.Fatalf("the job waited %v for a checkpoint", d)
		}
		compareCounts(t, finalCounts(t, out), expected(r), false)
	})
}

// TestFinalCheckpointDoesNotWaitForTheInterval: with an hour-long interval
// a bounded job still finishes promptly: the final checkpoint is triggered
// as soon as every task has ended its input.
// On synctest's fake clock, as TestCheckpointsAfterTasksFinishDisabled.
func TestFinalCheckpointDoesNotWaitForTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := wcRun{p: 2, lines: 3000, distinct: 100, conf: map[string]string{
			"execution.checkpointing.interval": "1 h",
			"execution.checkpointing.dir":      t.TempDir(),
		}}
		start := time.Now()
		res, _ := r.run(t)
		if d := time.Since(start); d >= time.Minute {
			t.Fatalf("a bounded job waited %v for the checkpoint interval to finish", d)
		}
		if res.Status != engine.StatusFinished {
			t.Fatalf("status %s: %v", res.Status, res.Err)
		}
	})
}

// TestNoCheckpointingIsAtMostOnce: without checkpointing a restart starts
// with empty state while sources go on where they were (like a Kafka
// source's committed offsets): counts so far are lost, and nothing is
// counted twice.
func TestNoCheckpointingIsAtMostOnce(t *testing.T) {
	r := wcRun{p: 2, lines: 20000, distinct: 1000, rate: 1_000_000, conf: map[string]string{
		"restart-strategy.type":              "fixed-delay",
		"restart-strategy.fixed-delay.delay": "1 ms",
		"fault-injection.fail-after-records": "10000",
	}}
	res, out := r.run(t)
	if res.Status != engine.StatusFinished {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	got, want := finalCounts(t, out), expected(r)
	var lower int
	var total, wantTotal int64
	for w, n := range want {
		if got[w] > n {
			t.Fatalf("count of %q = %d above %d: at most once must not count twice", w, got[w], n)
		}
		if got[w] < n {
			lower++
		}
		total += got[w]
		wantTotal += n
	}
	if lower == 0 {
		t.Fatal("every count is exact: the restart must have lost the state")
	}
	// The sources did not start over: the second attempt counted only what
	// followed the failure.
	if total >= wantTotal/2+wantTotal/4 {
		t.Errorf("final counts sum to %d of %d words: the sources were replayed", total, wantTotal)
	}
}

// TestSuppressRestartsFailsTheJobOnce: a failure no restart can mend
// fails the job at once, though the restart strategy would allow many
// restarts, and the message says why.
func TestSuppressRestartsFailsTheJobOnce(t *testing.T) {
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: &syncBuffer{}})
	src := &connectors.Elements[string]{Items: []string{"a", "b", "boom"}}
	s := engine.FromSource[string](env, src, "in").UID("source")
	calls := 0
	engine.Map(s, func(v string) string {
		if v == "boom" {
			calls++
			panic(api.SuppressRestarts(errors.New("cannot commit part file /x/part-0")))
		}
		return v
	}).Name("mapper").Print()
	g, _ := env.Build()
	c := newTestConfig(t)
	c.SetString("restart-strategy.type", "fixed-delay", "test")
	c.SetString("restart-strategy.fixed-delay.attempts", "100", "test")
	c.SetString("restart-strategy.fixed-delay.delay", "0s", "test")
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	res := j.Wait()
	if res.Status != engine.StatusFailed || calls != 1 {
		t.Fatalf("status %s after %d failures; want FAILED after 1", res.Status, calls)
	}
	for _, want := range []string{"no restart could succeed", "cannot commit part file /x/part-0"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("error %q does not mention %q", res.Err, want)
		}
	}
}

// TestRunningOnlyAfterStateRestored: a restored job reports RUNNING only
// once every task has loaded its state (Flink: tasks are INITIALIZING while
// restoring); `run -d -s` returns on RUNNING, which the README says means
// restored. The restored state files are held back until the test lets
// them go: until then the job must not be RUNNING.
func TestRunningOnlyAfterStateRestored(t *testing.T) {
	dir := t.TempDir()
	// Paced, so that the run lasts long enough for the failure at 12,000
	// records to come after a checkpoint (every 20 ms), which the failure
	// waits for (fault-injection.after-checkpoints).
	base := wcRun{p: 2, lines: 20000, distinct: 2000, rate: 200_000}
	first := base
	first.conf = checkpointConf(dir, "restart-strategy.type", "none",
		"execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION",
		"execution.checkpointing.data-inline-threshold", "0", // state in files, read through the FS
		"fault-injection.fail-after-records", "12000")
	resolved, _ := failWithCheckpoint(t, first)
	chk := resolved.Dir

	var held atomic.Int64
	var armed, released atomic.Bool // armed once planning (which reads files too) is done
	release := make(chan struct{})
	gated := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.InjectorFunc(func(op vfs.Op, path string) error {
		// The checkpoint's files, and with the changelog its
		// materialization in shared/ and its log files.
		if armed.Load() && op == vfs.OpOpen && (strings.HasPrefix(path, filepath.Dir(chk)+string(filepath.Separator)) ||
			filepath.Base(filepath.Dir(path)) == "dstl") {
			held.Add(1)
			<-release
		}
		return nil
	})}
	statuses := make(chan engine.JobStatus, 16)
	releasedAtRunning := make(chan bool, 1)
	onStatus := func(s engine.JobStatus, _ time.Time) {
		statuses <- s
		if s == engine.StatusRunning {
			releasedAtRunning <- released.Load()
		}
	}
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: base.p, Stdout: &syncBuffer{}})
	jobs.WordCountPipeline(engine.FromSource[string](env, base.generator(), "generator").UID("source")).Print().UID("sink")
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := newTestConfig(t)
	for k, v := range checkpointConf(t.TempDir()) {
		c.SetString(k, v, "test")
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c, FS: gated, Restore: resolved, OnStatus: onStatus,
		OnAccepted: func(*engine.Job) { armed.Store(true) }})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return held.Load() > 0 })
	if st := j.Status(); st != engine.StatusCreated {
		t.Errorf("status %s while tasks are still loading their state; want CREATED", st)
	}
	released.Store(true)
	close(release)
	if res := j.Wait(); res.Status != engine.StatusFinished {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	select {
	case ok := <-releasedAtRunning:
		if !ok {
			t.Fatal("RUNNING was published before the restored state was loaded")
		}
	default:
		t.Fatal("the job never reported RUNNING")
	}
	close(statuses)
	var seq []string
	for s := range statuses {
		seq = append(seq, string(s))
	}
	if got := strings.Join(seq, " "); got != "CREATED RUNNING FINISHED" {
		t.Fatalf("statuses %s; want CREATED RUNNING FINISHED", got)
	}
}

// rerunTests are the engine's fault-injection and restore tests that run
// again on another backend, in a child process of this test binary (the
// backend is chosen by flags): exactly-once under injected failures at p=1
// and p=4, retained checkpoints restored, checkpoint ids continuing,
// failing checkpoint storage, retention on cancel, timers across failures,
// stop-with-savepoint continuing exactly once, and more. jobManager adds
// the two that keep checkpoints in memory, which the changelog refuses.
func rerunTests(t *testing.T, what string, jobManager bool, flags ...string) {
	if *stateBackend != "" || *stateChangelog || *unaligned {
		t.Skip("running on a chosen backend already")
	}
	if testutil.Quick() {
		t.Skip("-short or -race: the engine tests run once, on hashmap (the plain run repeats them on every backend)")
	}
	tests := []string{"TestWordCountWithoutFailures", "TestExactlyOnceUnderInjectedFailures", "TestAtLeastOnceNeverCountsLess",
		"TestNoRestartStrategyFailsTheJob", "TestRetainedCheckpointRestores", "TestRestoredCheckpointIDsContinue",
		"TestFailingCheckpointStorage", "TestCancelAppliesRetention", "TestTimersSurviveFailures",
		"TestFinalCheckpointDoesNotWaitForTheInterval", "TestNoCheckpointingIsAtMostOnce", "TestSuppressRestartsFailsTheJobOnce",
		"TestRunningOnlyAfterStateRestored", "TestStopWithSavepointContinuesExactlyOnce", "TestSavepointErrors"}
	if jobManager {
		tests = append(tests, "TestJobManagerStorageRecovers", "TestCheckpointsAfterTasksFinishDisabled")
	}
	args := append([]string{"-test.run=^(" + strings.Join(tests, "|") + ")$", "-test.count=1", "-test.v"}, flags...)
	out, err := exec.Command(os.Args[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("the engine tests %s failed: %v\n%s", what, err, out)
	}
	if n := bytes.Count(out, []byte("--- PASS")); n < len(tests) {
		t.Fatalf("only %d of %d tests passed %s:\n%s", n, len(tests), what, out)
	}
}

// TestEngineTestsOnRocksDB runs the engine tests again on rocksdb.
func TestEngineTestsOnRocksDB(t *testing.T) {
	rerunTests(t, "on rocksdb", true, "-state.backend=rocksdb")
}

// TestEngineTestsOnChangelog runs the engine tests that checkpoint to a
// directory again with the changelog on, over either backend.
func TestEngineTestsOnChangelog(t *testing.T) {
	for _, backend := range []string{"hashmap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			rerunTests(t, "with the changelog over "+backend, false, "-state.backend="+backend, "-state.changelog")
		})
	}
}

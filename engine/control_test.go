package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

// fileSinkJob builds word count over a throttled generator into a file
// sink and submits it.
func fileSinkJob(t *testing.T, r wcRun, out string) *engine.Job {
	t.Helper()
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: r.p, Stdout: &syncBuffer{}})
	lines := engine.FromSource[string](env, r.generator(), "generator").UID("source")
	jobs.WordCountPipeline(lines).SinkTo(&connectors.FileSink[jobs.WordCountRecord]{Dir: out}).UID("sink")
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := newTestConfig(t)
	for k, v := range r.conf {
		c.SetString(k, v, "test")
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c, Restore: r.restore})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// partFileCounts reads the finished part files of a directory, failing on
// any update seen twice.
func partFileCounts(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	m := map[string]int64{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "part-") {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		for _, l := range strings.Split(string(b), "\n") {
			r, ok := jobs.ParseWordCountRecord(l)
			if !ok {
				continue
			}
			if seen[l] {
				t.Fatalf("%s appears twice in the finished part files", l)
			}
			seen[l] = true
			m[r.Word] = max(m[r.Word], r.Count)
		}
	}
	return m
}

func waitResult(t *testing.T, ch <-chan engine.SnapshotResult) engine.SnapshotResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-testutil.After(60 * time.Second):
		t.Fatal("no result within 60 s")
		return engine.SnapshotResult{}
	}
}

// snapshotMetadata returns a function that waits for a triggered
// checkpoint or savepoint (what Trigger… returned) and reads its
// directory's _metadata, failing the test on any error.
func snapshotMetadata(t *testing.T) func(<-chan engine.SnapshotResult, error) (string, *savepoint.Metadata) {
	return func(ch <-chan engine.SnapshotResult, err error) (string, *savepoint.Metadata) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		res := waitResult(t, ch)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		p, err := savepoint.LocalPath(res.Path)
		if err != nil {
			t.Fatal(err)
		}
		md, err := savepoint.ReadMetadata(vfs.Default, filepath.Join(p, "_metadata"))
		if err != nil {
			t.Fatal(err)
		}
		return p, md
	}
}

func waitCheckpoint(t *testing.T, j *engine.Job) {
	t.Helper()
	waitFor(t, func() bool { return j.Info().Checkpoints.Completed > 0 || j.Status().IsGloballyTerminal() })
}

// TestStopWithSavepointContinuesExactlyOnce: stop a running job with a
// savepoint; it ends FINISHED, and a job restored from that savepoint into
// the same output finishes the input with every update exactly once.
func TestStopWithSavepointContinuesExactlyOnce(t *testing.T) {
	// On synctest's fake clock: the paced source and the checkpoint interval
	// take no wall time.
	synctest.Test(t, func(t *testing.T) {
		out, spDir := t.TempDir(), t.TempDir()
		r := wcRun{p: 2, lines: 20000, distinct: 2000, rate: 150_000,
			conf: map[string]string{"execution.checkpointing.interval": "50 ms", "execution.checkpointing.dir": t.TempDir()}}
		j := fileSinkJob(t, r, out)
		waitCheckpoint(t, j)

		// A savepoint on the side leaves the job running.
		ch, err := j.TriggerSavepoint(spDir, "")
		if err != nil {
			t.Fatal(err)
		}
		sp := waitResult(t, ch)
		if sp.Err != nil || !strings.HasPrefix(sp.Path, "file:/") {
			t.Fatalf("savepoint: %+v", sp)
		}
		spPath, _ := savepoint.LocalPath(sp.Path)
		if !savepoint.IsSavepointDirName(filepath.Base(spPath)) || !strings.HasPrefix(filepath.Base(spPath), "savepoint-"+j.ID()[:6]+"-") {
			t.Errorf("savepoint directory %s is not savepoint-<jobId[:6]>-<12 hex>", spPath)
		}
		if j.Status() != engine.StatusRunning {
			t.Fatalf("after a savepoint the job is %s", j.Status())
		}

		ch, err = j.StopWithSavepoint(spDir, "", false)
		if err != nil {
			t.Fatal(err)
		}
		stop := waitResult(t, ch)
		if stop.Err != nil {
			t.Fatalf("stop: %v", stop.Err)
		}
		if res := j.Wait(); res.Status != engine.StatusFinished {
			t.Fatalf("after stop the job is %s", res.Status)
		}
		stopPath, _ := savepoint.LocalPath(stop.Path)
		md, err := savepoint.ReadMetadata(vfs.Default, filepath.Join(stopPath, "_metadata"))
		if err != nil || md.Kind != savepoint.KindSyncSavepoint || md.Format != savepoint.FormatCanonical {
			t.Fatalf("stop savepoint metadata: %+v %v", md, err)
		}
		info := j.Info()
		if info.Checkpoints.LatestSavepoint == nil || info.Checkpoints.LatestSavepoint.Type != savepoint.KindSyncSavepoint {
			t.Errorf("latest savepoint stats: %+v", info.Checkpoints.LatestSavepoint)
		}

		resolved, err := restore.Resolve(vfs.Default, stop.Path)
		if err != nil {
			t.Fatal(err)
		}
		r2 := r
		r2.rate, r2.restore = 0, resolved
		j2 := fileSinkJob(t, r2, out)
		if res := j2.Wait(); res.Status != engine.StatusFinished {
			t.Fatalf("restored job: %s %v", res.Status, res.Err)
		}
		compareCounts(t, partFileCounts(t, out), expected(r), false)
	})
}

// eventTimerFn sets an event-time timer per key; a drain fires them, a
// plain stop does not.
type eventTimerFn struct {
	seen api.ValueState[bool]
}

func (f *eventTimerFn) Open(ctx *api.Context[string]) (err error) {
	f.seen, err = api.GetValueState[bool](ctx, "seen")
	return err
}

func (f *eventTimerFn) ProcessElement(ctx *api.Context[string], w string, out api.Collector[string]) error {
	if s, _ := f.seen.Value(); !s {
		f.seen.Update(true)
		ctx.TimerService().RegisterEventTimeTimer(1 << 40)
		out.Collect(w + ":seen")
	}
	return nil
}

func (f *eventTimerFn) OnTimer(ctx *api.Context[string], ts int64, out api.Collector[string]) error {
	out.Collect(ctx.CurrentKey() + ":fired")
	return nil
}

func TestStopDrainFiresEventTimers(t *testing.T) {
	for _, drain := range []bool{false, true} {
		// On synctest's fake clock: the paced source takes no wall time.
		t.Run("drain="+strconv.FormatBool(drain), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				out := &syncBuffer{}
				env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: out})
				src := &connectors.WordGenerator{Distinct: 20, Seed: 2, WordsPerLine: 1, Rate: 2000} // unbounded
				lines := engine.FromSource[string](env, src, "gen").UID("source")
				engine.Process(engine.KeyBy(lines, func(s string) string { return s }), &eventTimerFn{}).UID("timers").Print()
				g, _ := env.Build()
				// No periodic checkpointing: a stop must work without it.
				j, err := engine.Submit(context.Background(), g, engine.JobOptions{})
				if err != nil {
					t.Fatal(err)
				}
				// Stop once keys (and so timers) exist.
				waitFor(t, func() bool { return strings.Count(out.String(), ":seen") >= 5 })
				ch, err := j.StopWithSavepoint(t.TempDir(), "NATIVE", drain)
				if err != nil {
					t.Fatal(err)
				}
				res := waitResult(t, ch)
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				if st := j.Wait().Status; st != engine.StatusFinished {
					t.Fatalf("status %s", st)
				}
				fired := regexp.MustCompile(`:fired`).FindAllString(out.String(), -1)
				if drain && len(fired) == 0 {
					t.Error("a drain must fire the event-time timers")
				}
				if !drain && len(fired) != 0 {
					t.Errorf("a stop without drain fired %d timers", len(fired))
				}
				p, _ := savepoint.LocalPath(res.Path)
				md, err := savepoint.ReadMetadata(vfs.Default, filepath.Join(p, "_metadata"))
				if err != nil || md.Format != savepoint.FormatNative {
					t.Fatalf("metadata %+v %v", md, err)
				}
			})
		})
	}
}

func TestSavepointErrors(t *testing.T) {
	// On synctest's fake clock: the paced source takes no wall time.
	synctest.Test(t, func(t *testing.T) {
		r := wcRun{p: 1, lines: 0, distinct: 10, rate: 1000, conf: map[string]string{}}
		j := fileSinkJob(t, r, t.TempDir())
		defer func() { j.Cancel(); j.Wait() }()
		waitFor(t, func() bool { return j.Status() == engine.StatusRunning })
		if _, err := j.TriggerSavepoint("", ""); err == nil || err.Error() != "Config key [execution.checkpointing.savepoint-dir] is not set. Property [target-directory] must be provided." {
			t.Errorf("no directory: %v", err)
		}
		if _, err := j.StopWithSavepoint("", "", false); err == nil || !strings.HasPrefix(err.Error(), "No savepoint directory configured.") {
			t.Errorf("stop without directory: %v", err)
		}
		if _, err := j.TriggerSavepoint(t.TempDir(), "fancy"); err == nil || !strings.Contains(err.Error(), "[[CANONICAL, NATIVE]]") {
			t.Errorf("bad format: %v", err)
		}
		// A manual checkpoint works without periodic checkpointing (kept in
		// memory: no path).
		ch, err := j.TriggerCheckpoint(false)
		if err != nil {
			t.Fatal(err)
		}
		if res := waitResult(t, ch); res.Err != nil || res.ID != 1 || res.Path != "" {
			t.Errorf("checkpoint: %+v", res)
		}
		j.Cancel()
		j.Wait()
		var nr *engine.NotRunningError
		if _, err := j.TriggerSavepoint(t.TempDir(), ""); err == nil || !asNotRunning(err, &nr) || nr.Status != engine.StatusCanceled {
			t.Errorf("savepoint of a cancelled job: %v", err)
		}
	})
}

func asNotRunning(err error, nr **engine.NotRunningError) bool {
	e, ok := err.(*engine.NotRunningError)
	*nr = e
	return ok
}

// TestMaterializationStartsAfterACheckpoint: a due materialization starts
// after a checkpoint completes (right after: the keyed operator's
// notifyComplete ticks the changelog; otherwise at its next tick within
// half a period). Periodic checkpoints come every hour here, so a
// materialization due after 20 ms that waited for its timer would start an
// hour and a half later; a checkpoint triggered by hand starts one, and a
// later checkpoint refers to it.
func TestMaterializationStartsAfterACheckpoint(t *testing.T) {
	r := wcRun{p: 1, lines: 0, distinct: 100, rate: 20000, conf: map[string]string{
		"execution.checkpointing.interval":              "1 h",
		"execution.checkpointing.dir":                   t.TempDir(),
		"state.backend.type":                            "hashmap",
		"state.changelog.enabled":                       "true",
		"state.changelog.storage":                       "filesystem",
		"state.changelog.dstl.dfs.base-path":            t.TempDir(),
		"state.changelog.periodic-materialize.interval": "20 ms",
	}}
	j := fileSinkJob(t, r, t.TempDir())
	defer func() { j.Cancel(); j.Wait() }()
	waitFor(t, func() bool { return j.Status() == engine.StatusRunning })
	deadline := testutil.Deadline(30 * time.Second)
	for n := 1; ; n++ {
		ch, err := j.TriggerCheckpoint(false)
		_, md := snapshotMetadata(t)(ch, err)
		if cl := md.Changelog(); cl != nil && cl.MaxMaterialization >= 1 {
			return // a materialization started after an earlier checkpoint
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d checkpoints in 30 s, none referring to a materialization", n)
		}
	}
}

// TestIncrementalCheckpointAfterAFullOne: with incremental checkpoints on
// rocksdb, a full checkpoint (checkpoint --full) refers to no earlier file
// and uploads all of its own, its SST files into shared/; the incremental
// checkpoint after it refers to those rather than uploading the state
// again (Flink's FORWARD sharing), and stays whole once the full one is
// subsumed.
func TestIncrementalCheckpointAfterAFullOne(t *testing.T) {
	// A slow input: few writes between two checkpoints, so that few
	// flushes and compactions replace the files one refers to.
	r := wcRun{p: 1, lines: 0, distinct: 20, rate: 50, conf: map[string]string{
		"execution.checkpointing.interval":    "1 h",
		"execution.checkpointing.dir":         t.TempDir(),
		"execution.checkpointing.incremental": "true",
		"state.backend.type":                  "rocksdb",
		"state.backend.rocksdb.localdir":      t.TempDir(),
	}}
	j := fileSinkJob(t, r, t.TempDir())
	defer func() { j.Cancel(); j.Wait() }()
	waitFor(t, func() bool { return j.Status() == engine.StatusRunning })
	checkpoint := func(full bool) *savepoint.Metadata {
		t.Helper()
		p, md := snapshotMetadata(t)(j.TriggerCheckpoint(full))
		if err := restore.VerifyStateFiles(vfs.Default, p, md); err != nil {
			t.Fatalf("checkpoint %d: %v", md.CheckpointID, err)
		}
		return md
	}
	ssts := func(md *savepoint.Metadata) []savepoint.NativeFile {
		var out []savepoint.NativeFile
		for _, op := range md.Operators {
			for _, st := range op.Subtasks {
				if st.Keyed != nil && st.Keyed.Native != nil {
					for _, f := range st.Keyed.Native.Files {
						if strings.HasSuffix(f.Name, ".sst") {
							out = append(out, f)
						}
					}
				}
			}
		}
		return out
	}
	deadline := testutil.Deadline(30 * time.Second)
	for len(ssts(checkpoint(false))) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint with state within 30 s")
		}
	}
	// Pebble compacts on goroutines of its own, so which of the full
	// checkpoint's files are still there at the next is not determined:
	// the checks hold for whatever files there are, and an attempt in
	// which compactions replaced them all is repeated.
	for range 10 {
		full := checkpoint(true)
		uploaded := map[string]string{}
		for _, f := range ssts(full) {
			if !f.Added || !strings.HasPrefix(f.Path, "../shared/") {
				t.Fatalf("the full checkpoint's %+v: want added by it, into shared/", f)
			}
			uploaded[f.Name] = f.Path
		}
		if !full.Full || len(uploaded) == 0 || restore.TypeOf(full) != "full" {
			t.Fatalf("full checkpoint: full %v, %d SST files, type %s", full.Full, len(uploaded), restore.TypeOf(full))
		}
		next := checkpoint(false)
		referred := 0
		for _, f := range ssts(next) {
			p, ok := uploaded[f.Name]
			switch {
			case ok && (f.Added || f.Path != p):
				t.Fatalf("the checkpoint after the full one has its %s again: %+v; want it referred to at %s", f.Name, f, p)
			case !ok && !f.Added:
				t.Fatalf("the checkpoint after the full one refers to %+v, which the full one did not upload", f)
			case ok:
				referred++
			}
		}
		if referred > 0 {
			if restore.TypeOf(next) != "incremental" {
				t.Errorf("the checkpoint after the full one is listed as %s", restore.TypeOf(next))
			}
			return
		}
		t.Logf("compactions replaced every file of the full checkpoint %d; again", full.CheckpointID)
	}
	t.Fatal("every attempt was vacuous")
}

// boundedBesidePaced is a job of two branches: a word count over 200
// lines of 300 distinct words that ends (uids bounded…), and one paced at
// 100 lines a second that runs until cancelled.
func boundedBesidePaced(t *testing.T) *engine.JobGraph {
	t.Helper()
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: &syncBuffer{}})
	done := engine.FromSource[string](env, &connectors.WordGenerator{Lines: 200, Distinct: 300, Seed: 3, WordsPerLine: 10}, "bounded").UID("bounded")
	words := engine.FlatMap(done, jobs.Tokenize).UID("bounded-tokenizer")
	engine.Process(engine.KeyBy(words, func(w string) string { return w }), &jobs.Counter{}).UID("bounded-counter").
		SinkTo(connectors.DiscardingSink[jobs.WordCountRecord]{}).UID("bounded-sink")
	running := engine.FromSource[string](env, &connectors.WordGenerator{Lines: 0, Distinct: 10, Seed: 4, WordsPerLine: 10, Rate: 100}, "paced").UID("paced")
	jobs.WordCountPipeline(running).SinkTo(connectors.DiscardingSink[jobs.WordCountRecord]{}).UID("sink")
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestFinishedTaskStateInSavepoints: with checkpointing off, a branch
// whose input ended keeps its keyed state (encoded only when a snapshot
// asks, on hashmap); every savepoint taken while the rest of the job runs
// holds it, the second as the first.
func TestFinishedTaskStateInSavepoints(t *testing.T) {
	g := boundedBesidePaced(t)
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: newTestConfig(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Cancel(); j.Wait() }()
	// The bounded branch may finish before every task of the paced one
	// has started: the job is RUNNING (and takes savepoints) only then.
	waitFor(t, func() bool { return j.Status() == engine.StatusRunning })
	waitFor(t, func() bool {
		for _, v := range j.Info().Vertices {
			if strings.Contains(v.Name, "bounded") && v.Tasks["FINISHED"] == v.Parallelism {
				return true
			}
		}
		return false
	})
	waitFor(t, func() bool {
		for _, v := range j.Info().Vertices {
			if strings.Contains(v.Name, "bounded") && v.Tasks["FINISHED"] != v.Parallelism {
				return false
			}
		}
		return true
	})
	var sizes []int64
	for range 2 {
		p, md := snapshotMetadata(t)(j.TriggerSavepoint(t.TempDir(), ""))
		entries := int64(-1)
		for _, op := range md.Operators {
			if op.UID == "bounded-counter" {
				entries = 0
				for _, st := range op.States {
					entries += st.Entries
				}
				if !op.Finished {
					t.Errorf("savepoint %d: the bounded counter is not marked finished", md.CheckpointID)
				}
				for _, st := range op.Subtasks {
					sizes = append(sizes, st.Bytes)
				}
			}
		}
		if entries != 300 {
			t.Fatalf("savepoint %d: the finished counter has %d entries; want its 300 words", md.CheckpointID, entries)
		}
		if err := restore.VerifyStateFiles(vfs.Default, p, md); err != nil {
			t.Fatal(err)
		}
	}
	// 300 words and their counts: a few KB, the same in both.
	if len(sizes) != 2 || sizes[0] < 2000 || sizes[0] != sizes[1] {
		t.Fatalf("the finished counter's state in the two savepoints: %v bytes", sizes)
	}
}

// TestFinishedTaskStateAfterItsFinalCheckpoint: with checkpointing on, a
// branch whose input ended takes one more checkpoint and finishes; the
// checkpoints and savepoints taken after that, while the rest of the job
// runs, hold its keyed state whole — on hashmap (kept unencoded as the
// task exits, its final checkpoint written like any other: with the
// changelog, the log's tail) as on rocksdb (encoded in that checkpoint).
func TestFinishedTaskStateAfterItsFinalCheckpoint(t *testing.T) {
	for _, c := range []struct {
		name string
		conf []string
	}{
		{"hashmap", []string{"state.backend.type", "hashmap"}},
		{"hashmap-changelog", []string{"state.backend.type", "hashmap", "state.changelog.enabled", "true",
			"state.changelog.storage", "filesystem", "state.changelog.periodic-materialize.interval", "20 ms"}},
		{"rocksdb", []string{"state.backend.type", "rocksdb", "taskmanager.memory.managed.size", "32 mb"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := boundedBesidePaced(t)
			conf := config.New()
			conf.SetString("execution.checkpointing.interval", "50 ms", "test")
			conf.SetString("execution.checkpointing.dir", t.TempDir(), "test")
			conf.SetString("state.backend.rocksdb.localdir", t.TempDir(), "test")
			conf.SetString("state.changelog.dstl.dfs.base-path", t.TempDir(), "test")
			for i := 0; i < len(c.conf); i += 2 {
				conf.SetString(c.conf[i], c.conf[i+1], "test")
			}
			j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: conf})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { j.Cancel(); j.Wait() }()
			waitFor(t, func() bool { return j.Status() == engine.StatusRunning })
			waitFor(t, func() bool {
				for _, v := range j.Info().Vertices {
					if strings.Contains(v.Name, "bounded") && v.Tasks["FINISHED"] != v.Parallelism {
						return false
					}
				}
				return true
			})
			for range 2 {
				for _, take := range []func() (<-chan engine.SnapshotResult, error){
					func() (<-chan engine.SnapshotResult, error) { return j.TriggerSavepoint(t.TempDir(), "") },
					func() (<-chan engine.SnapshotResult, error) { return j.TriggerCheckpoint(false) },
				} {
					p, md := snapshotMetadata(t)(take())
					entries := int64(-1)
					for _, op := range md.Operators {
						if op.UID == "bounded-counter" {
							entries = 0
							for _, st := range op.States {
								entries += st.Entries
							}
							if !op.Finished {
								t.Errorf("snapshot %d: the bounded counter is not marked finished", md.CheckpointID)
							}
						}
					}
					if entries != 300 {
						t.Fatalf("snapshot %d (%s): the finished counter has %d entries; want its 300 words", md.CheckpointID, md.Kind, entries)
					}
					if err := restore.VerifyStateFiles(vfs.Default, p, md); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

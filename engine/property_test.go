package engine_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/savepoint/vfs"
)

// TestPropertyEndToEnd runs -prop.schedules (1,000 by default; a tenth
// with -short) seeded random failure schedules in every `go test` run. A
// failing schedule is reported with its seed; replay it alone with
//
//	go test ./engine/ -run TestPropertyEndToEnd -prop.seed=<seed> -count=20 -v
//
// The seed fixes the schedule, not the thread interleaving (checkpoints
// fire on a real clock), so a replay reproduces most but not every time:
// hence -count.
var (
	propSchedules = flag.Int("prop.schedules", 1000, "how many random failure schedules TestPropertyEndToEnd runs")
	propSeed      = flag.Int64("prop.seed", -1, "run only the TestPropertyEndToEnd schedule with this seed")
)

// flagSet reports whether the flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// propConcurrency is how many schedules run at once. A schedule's job is
// paced by its source's rate, so it mostly waits: running several at a
// time keeps 1,000 schedules within ~a minute on two cores.
const propConcurrency = 8

// schedule is one random failure schedule: the job's shape, when a task
// fails (after some records), and which checkpoint file write fails — with
// tolerable-failed-checkpoints 0 that fails the job over in the middle of
// a checkpoint.
type schedule struct {
	seed       int64
	p          int
	mode       string
	intervalMs int
	lines      int
	failAfter  int // fault-injection.fail-after-records
	failures   int // fault-injection.max-failures
	ckFailAt   int // the n-th checkpoint file created fails; 0: none
	tolerable  int // execution.checkpointing.tolerable-failed-checkpoints
	backend    string
	// incremental: execution.checkpointing.incremental (rocksdb shares
	// SST files between checkpoints).
	incremental bool
	// changelog: state.changelog.enabled, its log under the checkpoint
	// directory (so injected file failures hit it too), materialized every
	// materializeMs.
	changelog     bool
	materializeMs int
	// fanout: the job is the second topology (fanOutPipeline) instead of
	// word count.
	fanout bool
}

func drawSchedule(seed int64) schedule {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	s := schedule{seed: seed,
		p:          []int{1, 2, 4}[r.IntN(3)],
		mode:       []string{"EXACTLY_ONCE", "AT_LEAST_ONCE"}[r.IntN(2)],
		intervalMs: 10 + r.IntN(11),
		lines:      100 + r.IntN(201),
		failures:   1 + r.IntN(3),
		tolerable:  []int{0, 100}[r.IntN(2)],
	}
	s.failAfter = 1 + r.IntN(s.lines)
	if r.IntN(3) > 0 {
		s.ckFailAt = 1 + r.IntN(30)
	}
	// Drawn last, so that the fields above are what they were for a seed
	// before there were two backends.
	s.backend = []string{"hashmap", "rocksdb"}[r.IntN(2)]
	s.incremental = r.IntN(2) == 0
	s.changelog = r.IntN(2) == 0
	s.materializeMs = 5 + r.IntN(30)
	s.fanout = r.IntN(2) == 0
	return s
}

func (s schedule) String() string {
	return fmt.Sprintf("seed=%d p=%d %s interval=%dms lines=%d fail-after-records=%d max-failures=%d checkpoint-file-failure=%d tolerable=%d backend=%s incremental=%v changelog=%v materialize=%dms fanout=%v",
		s.seed, s.p, s.mode, s.intervalMs, s.lines, s.failAfter, s.failures, s.ckFailAt, s.tolerable, s.backend, s.incremental, s.changelog, s.materializeMs, s.fanout)
}

const propWordsPerLine, propDistinct = 5, 50

func (s schedule) generator() *connectors.WordGenerator {
	// ~25–75 ms of input: several checkpoints while it is read.
	return &connectors.WordGenerator{Lines: int64(s.lines), Distinct: propDistinct, Seed: 3,
		WordsPerLine: propWordsPerLine, Rate: 20_000}
}

// want is, per output directory, every update of a failure-free run, once
// each: for word count every (word,count); for the fan-out topology the
// odd word counts in "odd" and every (letter,n) of the second keyed stage
// in "letters".
func (s schedule) want() map[string]map[string]int {
	g := s.generator()
	counts := map[string]int{}
	words, odd, letters := map[string]int{}, map[string]int{}, map[string]int{}
	perLetter := map[string]int{}
	var buf []byte
	for i := int64(0); i < int64(s.lines); i++ {
		buf = g.Line(i, buf)
		for _, w := range strings.Fields(string(buf)) {
			counts[w]++
			words[fmt.Sprintf("%s,%d", w, counts[w])] = 1
			if counts[w]%2 == 1 {
				odd[fmt.Sprintf("%s,%d", w, counts[w])] = 1
			}
			perLetter[w[:1]]++
			letters[fmt.Sprintf("%s,%d", w[:1], perLetter[w[:1]])] = 1
		}
	}
	if s.fanout {
		return map[string]map[string]int{"odd": odd, "letters": letters}
	}
	return map[string]map[string]int{"out": words}
}

// countBy is a keyed count for the fan-out topology: each record of a key
// is emitted as (key, how many of the key so far).
type countBy[IN any] struct{ n api.ValueState[int64] }

func (c *countBy[IN]) Open(ctx *api.Context[string]) (err error) {
	c.n, err = api.GetValueState[int64](ctx, "n")
	return err
}

func (c *countBy[IN]) ProcessElement(ctx *api.Context[string], _ IN, out api.Collector[jobs.WordCountRecord]) error {
	n, _ := c.n.Value()
	c.n.Update(n + 1)
	out.Collect(jobs.WordCountRecord{Word: ctx.CurrentKey(), Count: n + 1})
	return nil
}

// fanOutPipeline is the property test's second topology: two keyed stages
// at different parallelism, a fan-out, a filter and a rebalance —
//
//	source(p) → split → keyBy(word) count(p) ┬→ filter(odd) → rebalance → sink "odd" (3)
//	                                          └→ keyBy(first letter) count(p+1) → sink "letters" (p+1)
func fanOutPipeline(env *engine.Environment, src api.Source[string], p int, dir string) {
	lines := engine.FromSource[string](env, src, "gen").UID("source")
	words := engine.FlatMap(lines, func(l string, out api.Collector[string]) {
		for _, w := range strings.Fields(l) {
			out.Collect(w)
		}
	}).Name("split").UID("split")
	counts := engine.Process(engine.KeyBy(words, func(w string) string { return w }), &countBy[string]{}).
		Name("count words").UID("words")
	counts.Filter(func(r jobs.WordCountRecord) bool { return r.Count%2 == 1 }).Name("odd").UID("odd").Rebalance().
		SinkTo(&connectors.FileSink[jobs.WordCountRecord]{Dir: filepath.Join(dir, "odd")}).UID("sink-odd").Parallelism(3)
	engine.Process(engine.KeyBy(counts, func(r jobs.WordCountRecord) string { return r.Word[:1] }), &countBy[jobs.WordCountRecord]{}).
		Name("count letters").UID("letters").Parallelism(p + 1).
		SinkTo(&connectors.FileSink[jobs.WordCountRecord]{Dir: filepath.Join(dir, "letters")}).UID("sink-letters").Parallelism(p + 1)
}

// run runs word count into the two-phase-commit file sink under the
// schedule and checks the committed output: under EXACTLY_ONCE exactly the
// failure-free updates, each once; under AT_LEAST_ONCE none missing.
// outcome is what a schedule went through, so that the test can tell that
// the failures it draws do happen.
type outcome struct {
	restarts       int
	ckFailInjected bool
}

func (s schedule) run() (o outcome, err error) {
	dir, err := os.MkdirTemp("", "prop")
	if err != nil {
		return o, err
	}
	defer os.RemoveAll(dir)
	out, ck := filepath.Join(dir, "out"), filepath.Join(dir, "ck")

	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: s.p, Stdout: &syncBuffer{}})
	if s.fanout {
		fanOutPipeline(env, s.generator(), s.p, dir)
	} else {
		jobs.WordCountPipeline(engine.FromSource[string](env, s.generator(), "gen").UID("source")).
			SinkTo(&connectors.FileSink[jobs.WordCountRecord]{Dir: out}).UID("sink")
	}
	g, err := env.Build()
	if err != nil {
		return o, err
	}
	c := config.New()
	for k, v := range map[string]string{
		"execution.checkpointing.interval":                     fmt.Sprintf("%d ms", s.intervalMs),
		"execution.checkpointing.mode":                         s.mode,
		"execution.checkpointing.dir":                          ck,
		"execution.checkpointing.data-inline-threshold":        "0",
		"execution.checkpointing.tolerable-failed-checkpoints": fmt.Sprint(s.tolerable),
		"restart-strategy.type":                                "fixed-delay",
		"restart-strategy.fixed-delay.attempts":                "20",
		"restart-strategy.fixed-delay.delay":                   "1 ms",
		"fault-injection.fail-after-records":                   fmt.Sprint(s.failAfter),
		"fault-injection.max-failures":                         fmt.Sprint(s.failures),
		"state.backend.type":                                   s.backend,
		"state.backend.rocksdb.localdir":                       filepath.Join(dir, "lsm"),
		"state.backend.rocksdb.writebuffer.size":               "1 mb",
		"execution.checkpointing.incremental":                  fmt.Sprint(s.incremental),
	} {
		c.SetString(k, v, "test")
	}
	if s.changelog {
		c.SetString("state.changelog.enabled", "true", "test")
		c.SetString("state.changelog.storage", "filesystem", "test")
		c.SetString("state.changelog.dstl.dfs.base-path", filepath.Join(ck, "dstl-base"), "test")
		c.SetString("state.changelog.periodic-materialize.interval", fmt.Sprintf("%d ms", s.materializeMs), "test")
	}
	var creates atomic.Int64
	fsys := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpCreate && strings.HasPrefix(path, ck) && creates.Add(1) == int64(s.ckFailAt) {
			return fmt.Errorf("create %s: %w", path, vfs.ErrInjected)
		}
		return nil
	})}
	onStatus := func(st engine.JobStatus, _ time.Time) {
		if st == engine.StatusRestarting {
			o.restarts++ // on the job master's goroutine; read after Done
		}
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c, FS: fsys, OnStatus: onStatus})
	if err != nil {
		return o, err
	}
	var res engine.JobResult
	select {
	case <-j.Done():
		res = j.Wait()
	case <-testutil.After(60 * time.Second):
		j.Cancel()
		j.Wait()
		return o, fmt.Errorf("the job did not finish within 60 s")
	}
	o.ckFailInjected = s.ckFailAt > 0 && creates.Load() >= int64(s.ckFailAt)
	if res.Status != engine.StatusFinished {
		return o, fmt.Errorf("job ended %s: %v", res.Status, res.Err)
	}
	// A finished job discards its checkpoints (no retention): no shared
	// file may outlive them, whatever failed on the way.
	if left, _ := filepath.Glob(filepath.Join(ck, "*", "shared", "*")); len(left) > 0 {
		return o, fmt.Errorf("%d shared files left after the job finished, e.g. %s", len(left), left[0])
	}
	if left, _ := filepath.Glob(filepath.Join(ck, "dstl-base", "*", "dstl", "*")); len(left) > 0 {
		return o, fmt.Errorf("%d changelog files left after the job finished, e.g. %s", len(left), left[0])
	}
	for name, want := range s.want() {
		got, err := partUpdates(filepath.Join(dir, name))
		if err != nil {
			return o, err
		}
		var missing, dup, extra []string
		for u := range want {
			if got[u] == 0 {
				missing = append(missing, u)
			}
		}
		for u, n := range got {
			if want[u] == 0 {
				extra = append(extra, u)
			} else if n > 1 {
				dup = append(dup, u)
			}
		}
		if len(missing) > 0 {
			return o, fmt.Errorf("%s: %d updates missing from the committed output, e.g. %v", name, len(missing), missing[:min(3, len(missing))])
		}
		if s.mode == "EXACTLY_ONCE" && (len(dup) > 0 || len(extra) > 0) {
			return o, fmt.Errorf("%s: %d updates committed twice (e.g. %v), %d that a failure-free run never emits (e.g. %v)",
				name, len(dup), dup[:min(3, len(dup))], len(extra), extra[:min(3, len(extra))])
		}
	}
	return o, nil
}

// partUpdates reads the finished part files of dir: every (word,count)
// update with how often it appears.
func partUpdates(dir string) (map[string]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "part-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if r, ok := jobs.ParseWordCountRecord(l); ok {
				out[fmt.Sprintf("%s,%d", r.Word, r.Count)]++
			}
		}
	}
	return out, nil
}

// TestPropertyEndToEnd draws failure schedules — parallelism 1, 2 or 4,
// EXACTLY_ONCE or AT_LEAST_ONCE, a checkpoint interval, a task failure after
// a random number of records (up to three times), and a checkpoint file
// write that fails (failing the job over mid-checkpoint when no checkpoint
// failure is tolerated) — runs word count, or the fan-out topology, into
// two-phase-commit file sinks under each, and compares the committed output
// with the failure-free one. Each schedule is small (100–300 lines) so that a thousand run in
// every `go test`.
func TestPropertyEndToEnd(t *testing.T) {
	n := *propSchedules
	if testutil.Quick() && !flagSet("prop.schedules") {
		// -short, or the race detector (about ten times slower): a tenth
		// of the schedules.
		n /= 10
	}
	seeds := make([]int64, 0, n)
	if *propSeed >= 0 {
		seeds = append(seeds, *propSeed)
	} else {
		for i := range n {
			seeds = append(seeds, int64(i))
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, propConcurrency)
	var failed, restarted, ckFailed atomic.Int64
	for _, seed := range seeds {
		if failed.Load() >= 3 {
			break // enough to go on with
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			s := drawSchedule(seed)
			o, err := s.run()
			if o.restarts > 0 {
				restarted.Add(1)
			}
			if o.ckFailInjected {
				ckFailed.Add(1)
			}
			if err != nil {
				failed.Add(1)
				t.Errorf("schedule %v: %v\nreplay: go test ./engine/ -run TestPropertyEndToEnd -prop.seed=%d -count=20 -v", s, err, seed)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d schedules in %v: %d restarted, %d had a checkpoint file write fail", len(seeds),
		time.Since(start).Round(time.Millisecond), restarted.Load(), ckFailed.Load())
	// The schedules must exercise what they draw: almost every one fails a
	// task, and most of those with a checkpoint failure drawn reach it.
	if len(seeds) >= 100 && (restarted.Load() < int64(len(seeds))*9/10 || ckFailed.Load() < int64(len(seeds))/3) {
		t.Errorf("too few schedules exercised failures: %d of %d restarted, %d had a checkpoint write fail",
			restarted.Load(), len(seeds), ckFailed.Load())
	}
}

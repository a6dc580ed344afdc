package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/cli"
	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// Numbered counts, in operator state, the records its subtask has seen,
// and tags each record with the job, its subtask and that count.
type Numbered struct {
	count stream.ListState[int64]
	rc    *stream.RuntimeContext
	n     int64
}

func (f *Numbered) Open(ctx *stream.RuntimeContext) (err error) {
	f.rc = ctx
	if f.count, err = stream.GetOperatorListState[int64](ctx, "count"); err != nil {
		return err
	}
	for _, c := range f.count.Get() { // at another parallelism, a share of the old subtasks' counts
		f.n += c
	}
	f.count.Update([]int64{f.n})
	return nil
}

func (f *Numbered) FlatMap(v int64, out stream.Collector[string]) error {
	f.n++
	f.count.Update([]int64{f.n})
	out.Collect(fmt.Sprintf("%s,%d,%d,%d", f.rc.JobID(), f.rc.Subtask(), v, f.n))
	return nil
}

type line struct {
	job          string
	subtask      int
	value, count int64
}

func readLines(t *testing.T, dir string) []line {
	t.Helper()
	var out []line
	for _, l := range testutil.CommittedLines(t, dir) {
		p := strings.Split(l, ",")
		s, _ := strconv.Atoi(p[1])
		v, _ := strconv.ParseInt(p[2], 10, 64)
		c, _ := strconv.ParseInt(p[3], 10, 64)
		out = append(out, line{p[0], s, v, c})
	}
	return out
}

func numbers(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

func build(env *stream.Environment, items []int64, rate float64, out string) {
	src := stream.FromSource[int64](env, &connectors.Elements[int64]{Items: items, Rate: rate}, "numbers").UID("source")
	tagged := stream.FlatMapFunc[int64, string](src.Rebalance(), &Numbered{}).UID("numbered")
	tagged.SinkTo(&connectors.FileSink[string]{Dir: out}).UID("sink")
}

// TestOperatorStateExactlyOnce: under injected failures the operator state
// of a function object is restored with the records it covers — every
// record is committed once, and each subtask's counts run 1…n with no gap
// or repeat.
func TestOperatorStateExactlyOnce(t *testing.T) {
	const n = 20000
	dir := t.TempDir()
	var log testutil.SyncBuffer
	env, err := stream.NewEnvironment(stream.Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Config: testutil.FailingJob(dir, 2, 3000, 2)})
	if err != nil {
		t.Fatal(err)
	}
	build(env, numbers(n), 40000, filepath.Join(dir, "out"))
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.CheckRestores(t, log.String(), 2)
	seen := map[int64]bool{}
	counts := map[int]map[int64]bool{}
	for _, l := range readLines(t, filepath.Join(dir, "out")) {
		if seen[l.value] {
			t.Fatalf("record %d committed twice", l.value)
		}
		seen[l.value] = true
		if counts[l.subtask] == nil {
			counts[l.subtask] = map[int64]bool{}
		}
		if counts[l.subtask][l.count] {
			t.Fatalf("subtask %d: count %d twice", l.subtask, l.count)
		}
		counts[l.subtask][l.count] = true
	}
	if len(seen) != n {
		t.Fatalf("%d of %d records committed", len(seen), n)
	}
	for s, c := range counts {
		for i := int64(1); i <= int64(len(c)); i++ {
			if !c[i] {
				t.Fatalf("subtask %d: counts 1…%d lack %d", s, len(c), i)
			}
		}
	}
}

// TestOperatorStateRescaled: a job cancelled at parallelism 2 (its last
// checkpoint retained) and restored at 3 hands its subtasks' counts to the
// new subtasks: their shares add up to the records the checkpoint covered,
// and every record is committed exactly once over both runs.
func TestOperatorStateRescaled(t *testing.T) {
	const n = 30000
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	conf := func(p string) map[string]string {
		return map[string]string{
			"parallelism.default":                                       p,
			"execution.checkpointing.interval":                          "20 ms",
			"execution.checkpointing.dir":                               filepath.Join(dir, "chk"),
			"execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
		}
	}
	var log testutil.SyncBuffer
	env, err := stream.NewEnvironment(stream.Options{Config: conf("2"), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	build(env, numbers(n), 20000, out)
	// Cancel once three checkpoints have completed; the watcher also ends
	// when the job does.
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		deadline := testutil.Deadline(30 * time.Second)
		for strings.Count(log.String(), "Completed checkpoint") < 3 && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	res, err := env.Execute(ctx)
	cancel()
	<-watched
	if res.Status != "CANCELED" || len(res.Retained) == 0 {
		t.Fatalf("first run: %+v, %v; want CANCELED with a retained checkpoint", res, err)
	}
	first := res.JobID

	c := conf("3")
	c["execution.state-recovery.path"] = res.Retained[len(res.Retained)-1]
	env, err = stream.NewEnvironment(stream.Options{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	build(env, numbers(n), 0, out)
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}

	lines := readLines(t, out)
	seen := map[int64]bool{}
	covered := 0
	share := map[int]int64{} // the least count of each new subtask, less one
	for _, l := range lines {
		if seen[l.value] {
			for _, m := range lines {
				if m.value == l.value {
					t.Logf("%+v (first job %s)", m, first)
				}
			}
			t.Fatalf("record %d committed twice", l.value)
		}
		seen[l.value] = true
		if l.job == first {
			covered++
			continue
		}
		if s, ok := share[l.subtask]; !ok || l.count-1 < s {
			share[l.subtask] = l.count - 1
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d records committed", len(seen), n)
	}
	if len(share) != 3 {
		t.Fatalf("records from %d subtasks after the restore, want 3", len(share))
	}
	var sum int64
	for _, s := range share {
		sum += s
	}
	if sum != int64(covered) {
		t.Fatalf("the restored counts add up to %d (%v); the checkpoint covered %d records", sum, share, covered)
	}
}

func TestOperatorStateOutsideOpen(t *testing.T) {
	var rc stream.RuntimeContext
	if _, err := stream.GetOperatorListState[int](&rc, "x"); err == nil || !strings.Contains(err.Error(), "in Open") {
		t.Fatalf("error %v, want one saying to declare state in Open", err)
	}
}

// Tag emits each record with the subtask that received it.
type Tag struct{ rc *stream.RuntimeContext }

func (f *Tag) Open(ctx *stream.RuntimeContext) error { f.rc = ctx; return nil }

func (f *Tag) FlatMap(v int64, out stream.Collector[string]) error {
	out.Collect(fmt.Sprintf("%d,%d", f.rc.Subtask(), v))
	return nil
}

// TestBroadcastExactlyOnce: a broadcast from 2 source subtasks to 3
// receivers delivers every record to every receiver, once each, across
// injected failures restored from checkpoints.
func TestBroadcastExactlyOnce(t *testing.T) {
	const n = 6000
	dir := t.TempDir()
	var log testutil.SyncBuffer
	env, err := stream.NewEnvironment(stream.Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Config: testutil.FailingJob(dir, 2, 1500, 2)})
	if err != nil {
		t.Fatal(err)
	}
	src := stream.FromSource[int64](env, &connectors.Elements[int64]{Items: numbers(n), Rate: 15000}, "numbers").UID("source")
	tagged := stream.FlatMapFunc[int64, string](src.Broadcast(), &Tag{}).UID("tag").Parallelism(3)
	tagged.SinkTo(&connectors.FileSink[string]{Dir: filepath.Join(dir, "out")}).UID("sink").Parallelism(3)
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.CheckRestores(t, log.String(), 2)
	seen := map[string]bool{}
	for _, l := range testutil.CommittedLines(t, filepath.Join(dir, "out")) {
		if seen[l] {
			t.Fatalf("%s committed twice", l)
		}
		seen[l] = true
	}
	for s := range 3 {
		for v := 1; v <= n; v++ {
			if k := fmt.Sprintf("%d,%d", s, v); !seen[k] {
				t.Fatalf("subtask %d never received record %d (%d lines committed)", s, v, len(seen))
			}
		}
	}
}

// TestPartitioningsUnalignedExactlyOnce runs every partitioning — shuffle,
// rebalance between parallelisms, broadcast and a union of two branches —
// with unaligned checkpoints (records in flight are part of the snapshot)
// and injected failures restored from them: every record reaches the sink
// exactly as a failure-free run's would.
func TestPartitioningsUnalignedExactlyOnce(t *testing.T) {
	const n = 8000
	for _, unaligned := range []string{"false", "true"} {
		t.Run("unaligned="+unaligned, func(t *testing.T) {
			dir := t.TempDir()
			var log testutil.SyncBuffer
			env, err := stream.NewEnvironment(stream.Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Config: testutil.FailingJob(dir, 2, 2000, 2, "execution.checkpointing.unaligned.enabled", unaligned)})
			if err != nil {
				t.Fatal(err)
			}
			src := stream.FromSource[int64](env, &connectors.Elements[int64]{Items: numbers(n), Rate: 20000}, "numbers").UID("source")
			// Branch a: shuffled to 3 subtasks, doubled, rebalanced to 2.
			a := stream.Map(src.Shuffle(), func(v int64) string { return fmt.Sprintf("a,%d", 2*v) }).UID("double").Parallelism(3).Rebalance()
			// Branch b: the multiples of 100, broadcast to 2 subtasks that
			// tag them.
			b := stream.FlatMapFunc[int64, string](src.Filter(func(v int64) bool { return v%100 == 0 }).UID("hundreds").Broadcast(),
				&Tag{}).UID("tag")
			stream.Union(a, b).SinkTo(&connectors.FileSink[string]{Dir: filepath.Join(dir, "out")}).UID("sink")
			if _, err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			testutil.CheckRestores(t, log.String(), 2)
			want := map[string]bool{}
			for v := int64(1); v <= n; v++ {
				want[fmt.Sprintf("a,%d", 2*v)] = true
				if v%100 == 0 {
					for s := range 2 {
						want[fmt.Sprintf("%d,%d", s, v)] = true
					}
				}
			}
			seen := map[string]bool{}
			for _, l := range testutil.CommittedLines(t, filepath.Join(dir, "out")) {
				if seen[l] || !want[l] {
					t.Fatalf("%s committed twice or never expected (seen before: %v)", l, seen[l])
				}
				seen[l] = true
			}
			if len(seen) != len(want) {
				t.Fatalf("%d of %d records committed", len(seen), len(want))
			}
		})
	}
}

// TestExecuteTwice: an environment runs one job, once; a second Execute
// says so instead of running the operators again.
func TestExecuteTwice(t *testing.T) {
	env, err := stream.NewEnvironment(stream.Options{Stdout: &testutil.SyncBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	stream.FromSource[int64](env, &connectors.Elements[int64]{Items: numbers(3)}, "n").Print()
	if res, err := env.Execute(context.Background()); err != nil || res.Status != "FINISHED" {
		t.Fatalf("first Execute: %+v, %v", res, err)
	}
	if _, err := env.Execute(context.Background()); err == nil || !strings.Contains(err.Error(), "has run its job already") {
		t.Fatalf("second Execute: %v, want a refusal", err)
	}
}

// TestNewEnvironmentBadConfig: a bad value is refused naming the key.
func TestNewEnvironmentBadConfig(t *testing.T) {
	_, err := stream.NewEnvironment(stream.Options{Config: map[string]string{"parallelism.default": "zero"}})
	if err == nil || !strings.Contains(err.Error(), "parallelism.default") {
		t.Fatalf("error %v, want one naming parallelism.default", err)
	}
}

// TestExecuteUnderTheCommandLine: a job's Build that calls Execute on the
// environment the command line handed it is told to return instead.
func TestExecuteUnderTheCommandLine(t *testing.T) {
	var got error
	job := stream.Job{Name: "selfrun", Build: func(env *stream.Environment, _ []string) error {
		stream.FromSource[int64](env, &connectors.Elements[int64]{Items: numbers(3)}, "n").Print()
		_, got = env.Execute(context.Background())
		return nil
	}}
	home := t.TempDir()
	t.Setenv("GFLINK_HOME", home)
	if code := cli.Run([]string{"run", "-Drest.bind-port=0", "selfrun"}, job); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got == nil || !strings.Contains(got.Error(), "return from the job's Build") {
		t.Fatalf("Execute under the command line: %v", got)
	}
}

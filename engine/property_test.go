package engine_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/connectors"
	"github.com/gflink/gflink/engine/jobs"
	"pgregory.net/rapid"
)

// propertyChecks is how many random cases TestPropertyEndToEnd draws unless
// -rapid.checks says otherwise; each runs a whole job (~0.1–0.3 s).
const propertyChecks = 40

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

// TestPropertyEndToEnd draws failure points, numbers of failures,
// parallelism (1, 2, 4), checkpoint intervals and the checkpointing mode,
// runs word count into the two-phase-commit file sink, and checks the
// committed output against the failure-free output: under EXACTLY_ONCE it
// must be exactly the same — every update once, nothing else; under
// AT_LEAST_ONCE nothing may be missing.
func TestPropertyEndToEnd(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		f.Value.Set(fmt.Sprint(propertyChecks))
		defer f.Value.Set(f.DefValue)
	}
	const lines, distinct = 3000, 400
	base := wcRun{lines: lines, distinct: distinct}
	want := map[string]int{}
	for w, n := range expected(base) {
		for c := int64(1); c <= n; c++ {
			want[fmt.Sprintf("%s,%d", w, c)] = 1
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		p := rapid.SampledFrom([]int{1, 2, 4}).Draw(rt, "parallelism")
		interval := rapid.IntRange(10, 40).Draw(rt, "intervalMs")
		mode := rapid.SampledFrom([]string{"EXACTLY_ONCE", "AT_LEAST_ONCE"}).Draw(rt, "mode")
		failAfter := rapid.IntRange(1, lines).Draw(rt, "failAfterRecords")
		failures := rapid.IntRange(1, 3).Draw(rt, "failures")
		dir, err := os.MkdirTemp("", "prop")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "out")

		env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: p, Stdout: &syncBuffer{}})
		src := &connectors.WordGenerator{Lines: lines, Distinct: distinct, Seed: 3, WordsPerLine: 10, Rate: 200_000}
		jobs.WordCountPipeline(engine.FromSource[string](env, src, "gen").UID("source")).
			SinkTo(&connectors.FileSink[jobs.WordCountRecord]{Dir: out}).UID("sink")
		g, err := env.Build()
		if err != nil {
			rt.Fatal(err)
		}
		c := config.New()
		for k, v := range map[string]string{
			"execution.checkpointing.interval":      fmt.Sprintf("%d ms", interval),
			"execution.checkpointing.mode":          mode,
			"execution.checkpointing.dir":           filepath.Join(dir, "ck"),
			"restart-strategy.type":                 "fixed-delay",
			"restart-strategy.fixed-delay.attempts": "10",
			"restart-strategy.fixed-delay.delay":    "1 ms",
			"fault-injection.fail-after-records":    fmt.Sprint(failAfter),
			"fault-injection.max-failures":          fmt.Sprint(failures),
		} {
			c.SetString(k, v, "test")
		}
		j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c})
		if err != nil {
			rt.Fatal(err)
		}
		var res engine.JobResult
		select {
		case <-j.Done():
			res = j.Wait()
		case <-time.After(60 * time.Second):
			j.Cancel()
			j.Wait()
			rt.Fatal("the job did not finish within 60 s")
		}
		if res.Status != engine.StatusFinished {
			rt.Fatalf("job ended %s: %v", res.Status, res.Err)
		}
		got, err := partUpdates(out)
		if err != nil {
			rt.Fatal(err)
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
			rt.Fatalf("%s: %d updates missing from the committed output, e.g. %v", mode, len(missing), missing[:min(3, len(missing))])
		}
		if mode == "EXACTLY_ONCE" && (len(dup) > 0 || len(extra) > 0) {
			rt.Fatalf("EXACTLY_ONCE: %d updates committed twice (e.g. %v), %d that a failure-free run never emits (e.g. %v)",
				len(dup), dup[:min(3, len(dup))], len(extra), extra[:min(3, len(extra))])
		}
	})
}

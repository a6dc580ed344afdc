package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/jobs"
)

// unalignedRatios measures unaligned checkpoints (issue 12), in one run:
//
//   - RUA_P50: under sustained backpressure — word count at p=2 over a
//     keyed exchange, its sink throttled to -sink-rate counts a second so
//     that every buffer stays full — the median checkpoint duration
//     unaligned ÷ aligned; RUA_TIMEOUT_P50 the same with
//     aligned-checkpoint-timeout: 100 ms (reported).
//   - RUA_THROUGHPUT: without backpressure (-words at full speed, the
//     discarding sink, p=2), throughput unaligned ÷ aligned.
func unalignedRatios(scratch string) {
	variants := []struct {
		name  string
		extra []string
	}{
		{"aligned", nil},
		{"unaligned", []string{"execution.checkpointing.unaligned.enabled", "true"}},
		{"timeout-100ms", []string{"execution.checkpointing.unaligned.enabled", "true", "execution.checkpointing.aligned-checkpoint-timeout", "100 ms"}},
	}
	durs := map[string][]float64{}
	persisted := map[string]int64{}
	var thr []float64
	for r := range *rounds {
		if *mode == "unaligned-throughput" {
			break
		}
		for k := range variants {
			v := variants[(k+r)%len(variants)] // rotate the order each round
			ds, inFlight := backpressured(scratch, v.extra)
			durs[v.name] = append(durs[v.name], ds...)
			persisted[v.name] += inFlight
			fmt.Printf("# round %d, %s under backpressure: %d checkpoints, median %.0f ms, max %.0f ms, %d KB in flight stored\n",
				r+1, v.name, len(ds), median(ds), slices.Max(ds), inFlight>>10)
		}
	}
	// Throughput runs are short and one slow spell of the shared machine
	// moves a single ratio by 30%, so they get more rounds than the
	// backpressure runs.
	for r := range *thrRounds {
		el := map[bool]float64{}
		for _, un := range []bool{r%2 == 0, r%2 != 0} {
			var extra []string
			if un {
				extra = variants[1].extra
			}
			el[un] = fullSpeed(scratch, extra).Seconds()
		}
		thr = append(thr, el[false]/el[true])
		fmt.Printf("# round %d without backpressure: aligned %.2fs, unaligned %.2fs\n", r+1, el[false], el[true])
	}
	for _, v := range variants {
		if len(durs[v.name]) == 0 {
			break
		}
		fmt.Printf("# %s: checkpoint duration p50 %.0f ms, max %.0f ms over %d checkpoints; %d KB in flight stored in all\n",
			v.name, median(durs[v.name]), slices.Max(durs[v.name]), len(durs[v.name]), persisted[v.name]>>10)
	}
	if len(durs["aligned"]) > 0 {
		fmt.Printf("RUA_P50=%.3f\n", median(durs["unaligned"])/median(durs["aligned"]))
		fmt.Printf("RUA_TIMEOUT_P50=%.3f\n", median(durs["timeout-100ms"])/median(durs["aligned"]))
	}
	report("RUA_THROUGHPUT", thr)
}

// thrRounds is the number of throughput rounds (-mode unaligned).
var thrRounds = flag.Int("throughput-rounds", 7, "-mode unaligned: rounds of the throughput ratio")

// sinkRate is the throttled sink's counts per second (-mode unaligned).
var sinkRate = 20000.0

// backpressured runs word count with a throttled sink for ten checkpoint
// intervals and returns the completed checkpoints' durations (ms) and the
// bytes of records in flight they stored.
func backpressured(scratch string, extra []string) ([]float64, int64) {
	ck := filepath.Join(scratch, "ck")
	os.RemoveAll(ck)
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: io.Discard})
	lines := engine.FromSource[string](env, unbounded(), "generator").UID("source")
	th := connectors.NewThrottle(sinkRate)
	counts := engine.Map(jobs.WordCountPipeline(lines), func(r jobs.WordCountRecord) jobs.WordCountRecord {
		th.Wait()
		return r
	}).UID("throttle")
	counts.SinkTo(connectors.DiscardingSink[jobs.WordCountRecord]{}).UID("sink")
	g, err := env.Build()
	check(err)
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: conf(ck, true, extra...)})
	check(err)
	seen := map[int64]engine.CheckpointStats{}
	end := time.Now().Add(10 * *interval)
	for time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
		for _, c := range j.Info().Checkpoints.History {
			if c.Status == "COMPLETED" {
				seen[c.ID] = c
			}
		}
	}
	j.Cancel()
	j.Wait()
	var ds []float64
	var inFlight int64
	for _, c := range seen {
		if os.Getenv("UA_DEBUG") != "" && len(extra) > 2 {
			for _, st := range c.Subtasks {
				fmt.Printf("#   ckpt %d %s/%d ack +%d ms unaligned=%v align=%v sync=%v async=%v\n", c.ID, st.VertexID[:6], st.Subtask, st.AckTimestamp-c.TriggerTimestamp, st.Unaligned, st.Alignment, st.Sync, st.Async)
			}
		}
		ds = append(ds, float64(c.EndToEndDuration))
		inFlight += c.PersistedData
	}
	if len(ds) == 0 {
		check(fmt.Errorf("no checkpoint completed under backpressure in %v", 10**interval))
	}
	return ds, inFlight
}

// fullSpeed runs word count over -words at p=2 into the discarding sink,
// checkpointing every -interval, and returns how long it took.
func fullSpeed(scratch string, extra []string) time.Duration {
	ck := filepath.Join(scratch, "ck")
	os.RemoveAll(ck)
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 2, Stdout: io.Discard})
	lines := engine.FromSource[string](env, generator(), "generator").UID("source")
	jobs.WordCountPipeline(lines).SinkTo(connectors.DiscardingSink[jobs.WordCountRecord]{}).UID("sink")
	g, err := env.Build()
	check(err)
	start := time.Now()
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: conf(ck, true, extra...)})
	check(err)
	if res := j.Wait(); res.Status != engine.StatusFinished {
		check(fmt.Errorf("job ended %s: %v", res.Status, res.Err))
	}
	return time.Since(start)
}

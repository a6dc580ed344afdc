package jobs

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/internal/apibridge"
	"github.com/gflink/gflink/stream"
)

// windowCountJob adds to env a count of words per event-time window of
// assigner over src's lines, into the discarding sink. Line i has event
// time i ms (an assigner counting lines: the cost of reading a field),
// watermarks every 200 ms trail it by 1 s.
func windowCountJob(env *engine.Environment, src stream.Source[string], a stream.WindowAssigner) {
	senv := apibridge.Wrap(env).(*stream.Environment)
	lines := stream.FromSource(senv, src, "input").UID("source")
	var n int64
	timed := lines.AssignTimestampsAndWatermarks(stream.ForBoundedOutOfOrderness[string](time.Second).
		WithTimestampAssigner(func(string, int64) int64 { n++; return n }))
	words := stream.FlatMap(timed, Tokenize).UID("tokenizer")
	counts := stream.WindowAggregate(stream.Window(stream.KeyBy(words, func(w string) string { return w }), a), count[string]{}).UID("window")
	counts.SinkTo(connectors.DiscardingSink[int64]{}).UID("sink")
}

// alternate runs the variants round after round, in a rotating order,
// and returns each round's durations.
func alternate(rounds int, variants ...func() time.Duration) [][]time.Duration {
	out := make([][]time.Duration, rounds)
	for i := range rounds {
		out[i] = make([]time.Duration, len(variants))
		for k := range variants {
			j := (i + k) % len(variants)
			runtime.GC()
			out[i][j] = variants[j]()
		}
	}
	return out
}

// BenchmarkWindowRatio reports RWIN: the throughput of a word count per
// tumbling event-time window (1 min of event time: 600,000 words, each
// word ~6 times a window)
// ÷ the running keyed count of word count (one update per word), over
// the first 5 M words of BenchmarkWordCountRatios' input (100,000
// distinct) at p=1, checkpointing off, into
// the discarding sink; and RSLIDE: sliding windows of the same size every
// 6 s (each word in 10 windows) ÷ the tumbling ones. The baseline has no
// timestamp assigner or watermarks: it is plain word count.
func BenchmarkWindowRatio(b *testing.B) {
	path := writeBenchLines(b, 500_000)
	input := func() stream.Source[string] { return &connectors.TextFileSource{Paths: []string{path}} }
	timed := func(build func(env *engine.Environment)) func() time.Duration {
		return func() time.Duration {
			start := time.Now()
			env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1})
			build(env)
			runToEnd(b, env, config.New())
			return time.Since(start)
		}
	}
	b.ResetTimer()
	rounds := alternate(benchRounds(5),
		timed(func(env *engine.Environment) {
			lines := engine.FromSource[string](env, input(), "input").UID("source")
			WordCountPipeline(lines).SinkTo(connectors.DiscardingSink[WordCountRecord]{}).UID("sink")
		}),
		timed(func(env *engine.Environment) {
			windowCountJob(env, input(), stream.TumblingEventTimeWindows(time.Minute))
		}),
		timed(func(env *engine.Environment) {
			windowCountJob(env, input(), stream.SlidingEventTimeWindows(time.Minute, 6*time.Second))
		}))
	var win, slide []float64
	for i, r := range rounds {
		win = append(win, r[0].Seconds()/r[1].Seconds())
		slide = append(slide, r[1].Seconds()/r[2].Seconds())
		b.Logf("round %d: running count %v, tumbling %v, sliding %v", i, r[0].Round(time.Millisecond), r[1].Round(time.Millisecond), r[2].Round(time.Millisecond))
	}
	b.Logf("RWIN: %s; RSLIDE: %s", spread(win), spread(slide))
	b.ReportMetric(median(win), "RWIN")
	b.ReportMetric(median(slide), "RSLIDE")
}

// BenchmarkWindowCheckpointRatio reports RWIN_CK_1M: the throughput of
// a window count holding 1 M keys (10 M generated words over 1 M
// distinct ones, all in one event-time window that fires at the end) with
// checkpoints every 1 s to the filesystem ÷ without, p=1, hashmap.
func BenchmarkWindowCheckpointRatio(b *testing.B) {
	ckDir := b.TempDir()
	run := func(checkpoints bool) func() time.Duration {
		return func() time.Duration {
			start := time.Now()
			env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1})
			windowCountJob(env, &connectors.WordGenerator{Words: 10_000_000, Distinct: 1_000_000, Seed: 3, WordsPerLine: 10},
				stream.TumblingEventTimeWindows(time.Hour))
			c := config.New()
			if checkpoints {
				c.SetString("execution.checkpointing.interval", "1 s", "bench")
				c.SetString("execution.checkpointing.dir", ckDir, "bench")
			}
			runToEnd(b, env, c)
			return time.Since(start)
		}
	}
	b.ResetTimer()
	var r []float64
	for i, d := range alternate(benchRounds(5), run(false), run(true)) {
		r = append(r, d[0].Seconds()/d[1].Seconds())
		b.Logf("round %d: without checkpoints %v, with %v", i, d[0].Round(time.Millisecond), d[1].Round(time.Millisecond))
	}
	b.Logf("RWIN_CK_1M: %s", spread(r))
	b.ReportMetric(median(r), "RWIN_CK_1M")
}

// benchRounds is n, or GFLINK_BENCH_ROUNDS when set (a quick look).
func benchRounds(n int) int {
	if v, err := strconv.Atoi(os.Getenv("GFLINK_BENCH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return n
}

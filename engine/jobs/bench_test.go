package jobs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/internal/api"
)

// The ratios reported here are gflink's performance figures (README,
// scripts/bench.sh). Each is measured within one process, alternating the
// variants round by round and taking the median of per-round ratios, so
// that drift of a shared machine affects both sides of each ratio alike.

const (
	benchLines    = 2_000_000 // × 10 words
	benchDistinct = 100_000
)

// writeBenchInput writes the generated text to a file, once per run.
func writeBenchInput(b *testing.B) string {
	b.Helper()
	return writeBenchLines(b, benchLines)
}

// writeBenchLines writes the first lines of BenchmarkWordCountRatios'
// input.
func writeBenchLines(b *testing.B, benchLines int64) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "words.txt")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	g := &connectors.WordGenerator{Distinct: benchDistinct, Seed: 7, WordsPerLine: 10}
	var buf []byte
	for i := int64(0); i < benchLines; i++ {
		buf = g.Line(i, buf)
		w.Write(buf)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return path
}

// handWrittenCount is the baseline: the loop a careful Go programmer
// writes to count words in a file — one pass, no allocation for a word
// already seen, the same tokenization rules as the job (ASCII fast path).
func handWrittenCount(path string) (map[string]*int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]*int64{}
	var word []byte
	add := func() {
		if p := counts[string(word)]; p != nil {
			*p++
		} else {
			n := int64(1)
			counts[string(word)] = &n
		}
		word = word[:0]
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		for _, c := range sc.Bytes() {
			switch {
			case 'a' <= c && c <= 'z':
				word = append(word, c)
			case 'A' <= c && c <= 'Z':
				word = append(word, c+('a'-'A'))
			default:
				if len(word) > 0 {
					add()
				}
			}
		}
		if len(word) > 0 {
			add()
		}
	}
	return counts, sc.Err()
}

// handWrittenPrint is the baseline of the print ratio: handWrittenCount's
// loop that also prints every update as a (word,count) line — the bytes
// the job's print sink writes at parallelism 1, in the same order —
// through a bufio.Writer of 64 KiB, without fmt.
func handWrittenPrint(path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(out, 64<<10)
	counts := map[string]*int64{}
	var word []byte
	var num [20]byte
	add := func() {
		p := counts[string(word)]
		if p == nil {
			p = new(int64)
			counts[string(word)] = p
		}
		*p++
		w.WriteByte('(')
		w.Write(word)
		w.WriteByte(',')
		w.Write(strconv.AppendInt(num[:0], *p, 10))
		w.WriteString(")\n")
		word = word[:0]
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		for _, c := range sc.Bytes() {
			switch {
			case 'a' <= c && c <= 'z':
				word = append(word, c)
			case 'A' <= c && c <= 'Z':
				word = append(word, c+('a'-'A'))
			default:
				if len(word) > 0 {
					add()
				}
			}
		}
		if len(word) > 0 {
			add()
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return w.Flush()
}

// runEngineWordCount runs word count over path at parallelism 1 into
// Flink's DiscardingSink (the benchmark measures the engine, not a
// terminal) and returns the wall time.
func runEngineWordCount(b *testing.B, path string, conf *config.Configuration) time.Duration {
	b.Helper()
	return runWordCountJob(b, path, conf, nil).wall
}

// cost is what a run took: wall time and the process's CPU time (user and
// system, every thread: the engine's tasks and the garbage collector).
type cost struct{ wall, cpu time.Duration }

// measure runs f and returns its cost.
func measure(f func()) cost {
	cpu0, wall0 := cpuTime(), time.Now()
	f()
	return cost{time.Since(wall0), cpuTime() - cpu0}
}

// runWordCountJob runs word count over path at parallelism 1, printing its
// updates to stdout (the print sink), or dropping them if stdout is nil.
func runWordCountJob(tb testing.TB, path string, conf *config.Configuration, stdout io.Writer) cost {
	tb.Helper()
	return measure(func() {
		env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: stdout})
		lines := engine.FromSource[string](env, &connectors.TextFileSource{Paths: []string{path}}, "file-input").UID("source")
		counts := WordCountPipeline(lines)
		if stdout == nil {
			counts.SinkTo(connectors.DiscardingSink[WordCountRecord]{}).UID("sink")
		} else {
			counts.Print().UID("sink")
		}
		runToEnd(tb, env, conf)
	})
}

// runToEnd runs the job built on env with conf until it finishes.
func runToEnd(tb testing.TB, env *engine.Environment, conf *config.Configuration) {
	tb.Helper()
	g, err := env.Build()
	if err != nil {
		tb.Fatal(err)
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: conf})
	if err != nil {
		tb.Fatal(err)
	}
	if res := j.Wait(); res.Status != engine.StatusFinished {
		tb.Fatalf("job ended %s: %v", res.Status, res.Err)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkWordCountRatios reports R1 (engine at p=1 without checkpoints ÷
// the hand-written loop, as throughput) and R3 (EXACTLY_ONCE checkpoints
// every 1 s to the filesystem ÷ no checkpoints), over 20 M words with
// 100,000 distinct ones.
func BenchmarkWordCountRatios(b *testing.B) {
	path := writeBenchInput(b)
	ckDir := b.TempDir()
	rounds := 5 // run with -benchtime=1x: each round alternates all variants
	var r1, r3 []float64
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		var loop, off, ck time.Duration
		variants := []func(){
			func() {
				start := time.Now()
				if _, err := handWrittenCount(path); err != nil {
					b.Fatal(err)
				}
				loop = time.Since(start)
			},
			func() { off = runEngineWordCount(b, path, config.New()) },
			func() {
				on := config.New()
				on.SetString("execution.checkpointing.interval", "1 s", "bench")
				on.SetString("execution.checkpointing.mode", "EXACTLY_ONCE", "bench")
				on.SetString("execution.checkpointing.dir", ckDir, "bench")
				ck = runEngineWordCount(b, path, on)
			},
		}
		// Rotate the order each round and start each run from a collected
		// heap, so that no variant inherits another's garbage.
		for k := range variants {
			runtime.GC()
			variants[(i+k)%len(variants)]()
		}
		r1 = append(r1, loop.Seconds()/off.Seconds())
		r3 = append(r3, off.Seconds()/ck.Seconds())
		b.Logf("round %d: loop %v, engine %v, engine+checkpoints %v", i, loop.Round(time.Millisecond), off.Round(time.Millisecond), ck.Round(time.Millisecond))
	}
	b.ReportMetric(median(r1), "R1")
	b.ReportMetric(median(r3), "R3")
	b.ReportMetric(float64(benchLines*10)/1e6, "Mwords")
}

// plainFileSink is the at-least-once baseline of R8: each subtask appends
// to one visible file, flushing and fsyncing at every checkpoint barrier —
// the same bytes as the file sink, without its two-phase commit (no part
// files to roll, no renames): after a failure it would hold duplicates.
type plainFileSink struct{ dir string }

func (s plainFileSink) CreateWriter(ctx api.SinkContext) (api.SinkWriter[WordCountRecord], error) {
	f, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("out-%d", ctx.Subtask)))
	if err != nil {
		return nil, err
	}
	return &plainFileWriter{f: f}, nil
}

type plainFileWriter struct {
	f   *os.File
	buf []byte
}

func (w *plainFileWriter) Write(r WordCountRecord) error {
	// Rendered as the file sink renders (AppendTo): R8 compares the
	// commit protocols, not two ways of formatting.
	w.buf = append(r.AppendTo(w.buf), '\n')
	if len(w.buf) >= 64<<10 {
		_, err := w.f.Write(w.buf)
		w.buf = w.buf[:0]
		return err
	}
	return nil
}

func (w *plainFileWriter) Flush(bool) error {
	if _, err := w.f.Write(w.buf); err != nil {
		return err
	}
	w.buf = w.buf[:0]
	return w.f.Sync()
}

func (w *plainFileWriter) Close() error {
	w.Flush(true)
	return w.f.Close()
}

const r8Lines = 1_000_000 // × 10 words

// BenchmarkSinkRatio reports R8: the throughput of word count writing every
// update through the exactly-once file sink ÷ through the at-least-once
// plain file sink writing the same bytes, with EXACTLY_ONCE checkpoints
// every 1 s in both, over 10 M words with 100,000 distinct ones.
func BenchmarkSinkRatio(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "words.txt")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	g := &connectors.WordGenerator{Distinct: benchDistinct, Seed: 7, WordsPerLine: 10}
	var buf []byte
	for i := int64(0); i < r8Lines; i++ {
		buf = g.Line(i, buf)
		w.Write(buf)
		w.WriteByte('\n')
	}
	w.Flush()
	f.Close()

	runWith := func(sink api.Sink[WordCountRecord], ck string) time.Duration {
		start := time.Now()
		env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1})
		lines := engine.FromSource[string](env, &connectors.TextFileSource{Paths: []string{path}}, "file-input").UID("source")
		WordCountPipeline(lines).SinkTo(sink).UID("sink")
		c := config.New()
		c.SetString("execution.checkpointing.interval", "1 s", "bench")
		c.SetString("execution.checkpointing.dir", ck, "bench")
		runToEnd(b, env, c)
		return time.Since(start)
	}
	var r8 []float64
	for i := 0; i < 5; i++ {
		var eo, alo time.Duration
		round := filepath.Join(dir, fmt.Sprint(i))
		variants := []func(){
			func() {
				eo = runWith(&connectors.FileSink[WordCountRecord]{Dir: filepath.Join(round, "eo")}, filepath.Join(round, "ck-eo"))
			},
			func() {
				out := filepath.Join(round, "alo")
				os.MkdirAll(out, 0o755)
				alo = runWith(plainFileSink{dir: out}, filepath.Join(round, "ck-alo"))
			},
		}
		for k := range variants {
			runtime.GC()
			variants[(i+k)%len(variants)]()
		}
		os.RemoveAll(round)
		r8 = append(r8, alo.Seconds()/eo.Seconds())
		b.Logf("round %d: exactly-once file sink %v, at-least-once file sink %v", i, eo.Round(time.Millisecond), alo.Round(time.Millisecond))
	}
	b.ReportMetric(median(r8), "R8")
}

// spread is the minimum, median and maximum of per-round ratios.
func spread(xs []float64) string {
	return fmt.Sprintf("min %.3f median %.3f max %.3f", slices.Min(xs), median(xs), slices.Max(xs))
}

// BenchmarkWordCountCPU reports R1cpu: the CPU time of the hand-written
// loop ÷ the CPU time of the engine's word count at p=1 into the
// discarding sink, checkpointing off, over the input of
// BenchmarkWordCountRatios. CPU time (user and system, every thread,
// garbage collection included) is what the engine costs a shared
// machine; wall time would credit it with the second core its pipeline
// runs on. R1 (wall) is reported alongside from the same runs.
func BenchmarkWordCountCPU(b *testing.B) {
	if !haveCPUTime {
		b.Skip("no CPU time on this platform")
	}
	path := writeBenchInput(b)
	var cpu, wall []float64
	b.ResetTimer()
	for i := 0; i < 5; i++ { // run with -benchtime=1x
		var loop, eng cost
		variants := []func(){
			func() {
				loop = measure(func() {
					if _, err := handWrittenCount(path); err != nil {
						b.Fatal(err)
					}
				})
			},
			func() { eng = runWordCountJob(b, path, config.New(), nil) },
		}
		for k := range variants {
			runtime.GC()
			variants[(i+k)%len(variants)]()
		}
		cpu = append(cpu, loop.cpu.Seconds()/eng.cpu.Seconds())
		wall = append(wall, loop.wall.Seconds()/eng.wall.Seconds())
		b.Logf("round %d: loop cpu %v wall %v, engine cpu %v wall %v", i, loop.cpu.Round(time.Millisecond), loop.wall.Round(time.Millisecond),
			eng.cpu.Round(time.Millisecond), eng.wall.Round(time.Millisecond))
	}
	b.Logf("R1cpu: %s; R1 (wall): %s", spread(cpu), spread(wall))
	b.ReportMetric(median(cpu), "R1cpu")
	b.ReportMetric(median(wall), "R1wall")
}

// BenchmarkPrintRatio reports Rprint: the wall time of a Go loop that
// counts the words and prints every (word,count) update through a
// bufio.Writer ÷ the wall time of the engine's word count at p=1 printing
// the identical bytes (TestEnginePrintsTheLoopsBytes) with its print sink,
// both into /dev/null — `gflink run wordcount >/dev/null` without the CLI.
// Rprintcpu is the same ratio on CPU time.
func BenchmarkPrintRatio(b *testing.B) {
	path := writeBenchInput(b)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	var wall, cpu []float64
	b.ResetTimer()
	for i := 0; i < 5; i++ { // run with -benchtime=1x
		var loop, eng cost
		variants := []func(){
			func() {
				loop = measure(func() {
					if err := handWrittenPrint(path, null); err != nil {
						b.Fatal(err)
					}
				})
			},
			func() { eng = runWordCountJob(b, path, config.New(), null) },
		}
		for k := range variants {
			runtime.GC()
			variants[(i+k)%len(variants)]()
		}
		wall = append(wall, loop.wall.Seconds()/eng.wall.Seconds())
		if haveCPUTime {
			cpu = append(cpu, loop.cpu.Seconds()/eng.cpu.Seconds())
		}
		b.Logf("round %d: loop wall %v cpu %v, engine wall %v cpu %v", i, loop.wall.Round(time.Millisecond), loop.cpu.Round(time.Millisecond),
			eng.wall.Round(time.Millisecond), eng.cpu.Round(time.Millisecond))
	}
	b.Logf("Rprint: %s", spread(wall))
	b.ReportMetric(median(wall), "Rprint")
	if haveCPUTime {
		b.Logf("Rprintcpu: %s", spread(cpu))
		b.ReportMetric(median(cpu), "Rprintcpu")
	}
}

// BenchmarkWatermarkRatio reports RWM: word count's throughput with
// periodic watermarks (every 200 ms, the default) ÷ without, over the
// input of BenchmarkWordCountRatios at p=1, checkpointing off. With
// watermarks, an AssignTimestampsAndWatermarks operator after the source
// gives every line a timestamp (its length: an assigner that reads a
// field) and a bounded-out-of-orderness generator emits a watermark every
// 200 ms, which the keyed counter's valve takes and passes on; without,
// the same job has no such operator.
func BenchmarkWatermarkRatio(b *testing.B) {
	path := writeBenchInput(b)
	run := func(watermarks bool) time.Duration {
		start := time.Now()
		env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1})
		lines := engine.FromSource[string](env, &connectors.TextFileSource{Paths: []string{path}}, "file-input").UID("source")
		if watermarks {
			lines = lines.AssignTimestampsAndWatermarks(api.ForBoundedOutOfOrderness[string](time.Second).
				WithTimestampAssigner(func(l string, _ int64) int64 { return int64(len(l)) }))
		}
		WordCountPipeline(lines).SinkTo(connectors.DiscardingSink[WordCountRecord]{}).UID("sink")
		runToEnd(b, env, config.New())
		return time.Since(start)
	}
	var r []float64
	b.ResetTimer()
	for i := 0; i < 7; i++ { // run with -benchtime=1x
		var with, without time.Duration
		variants := []func(){func() { with = run(true) }, func() { without = run(false) }}
		for k := range variants {
			runtime.GC()
			variants[(i+k)%len(variants)]()
		}
		r = append(r, without.Seconds()/with.Seconds())
		b.Logf("round %d: with watermarks %v, without %v", i, with.Round(time.Millisecond), without.Round(time.Millisecond))
	}
	b.Logf("RWM: %s", spread(r))
	b.ReportMetric(median(r), "RWM")
}

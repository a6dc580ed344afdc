// Command scale measures gflink's checkpointing at realistic state sizes
// (1 M to 20 M keys), as ratios within one run, because absolute times on
// shared machines drift by ±30%. It runs word count in this process, with
// gflink as a library, over generated text whose words are drawn uniformly
// from -keys distinct words, so every key is written again and again while
// each checkpoint is open (the worst case for copy-on-write):
//
//	R3       throughput with checkpoints every -interval to the filesystem
//	         ÷ checkpointing off (the variants alternate round by round)
//	STALL_MS the longest span without a processed record in the keyed task
//	         around a checkpoint trigger (from the trigger to its
//	         completion), sampled every 64 records
//	STALL_CPU_MS the most CPU time the task's thread had within such a span
//	         (the rest of a span the thread was off the processor: another
//	         guest or process ran; see gapWriter)
//	R4       a checkpoint's duration ÷ writing and fsyncing the same number
//	         of bytes with a plain Go program, in the same directory
//	R5       restoring the state (submit until the first record is
//	         processed) ÷ a hand-written decode of the same state file into
//	         a map[string]int64
//
// With -mode rss-engine and rss-map it runs word count with checkpoints
// (resp. a plain map[string]int64 over the same words) and prints the
// process's peak RSS; scripts/bench.sh divides the two.
//
// Usage: go run ./scripts/scale -keys 1000000 [-words N] [-rounds 3] [-interval 1s]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/engine/state/lsm"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/changelog"
	"github.com/gflink/gflink/savepoint/vfs"
	"golang.org/x/sys/unix"
)

var (
	keys     = flag.Int("keys", 1_000_000, "distinct words: the number of keys in state")
	words    = flag.Int64("words", 0, "words of input (default 8 × keys)")
	rounds   = flag.Int("rounds", 3, "rounds of the ratio measurements")
	interval = flag.Duration("interval", time.Second, "checkpoint interval")
	mode     = flag.String("mode", "ratios", "ratios, restore, backends, incremental, changelog, unaligned, unaligned-throughput, rss-engine, rss-map, trace, changelog-run or checkpointed-run")
	dir      = flag.String("dir", "", "scratch directory (default: a temporary one)")
	cpuProf  = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	incr     = flag.Bool("incremental", false, "execution.checkpointing.incremental (rocksdb)")
	cacheMB  = flag.Int("cache-mb", 0, "state.backend.rocksdb.block.cache-size in MB (0: the default)")
	dynamic  dynamicFlags // -D key=value, repeatable: any configuration key of every run
	backend  = flag.String("backend", "hashmap", "state.backend.type: hashmap or rocksdb")
	zipf     = flag.Float64("zipf", 0, "draw words by a Zipf law of this exponent (> 1) rather than uniformly")
	traceOut = flag.String("trace", "", "write a runtime execution trace of a single checkpointed run (-mode trace) to this file")
	matEvery = flag.Duration("materialize", 10*time.Second, "-mode changelog: state.changelog.periodic-materialize.interval")
	recProf  = flag.String("recovery-profile", "", "-mode changelog: write a CPU profile of one recovery with the changelog to this file")
	rate     = flag.Float64("rate", 0, "-mode changelog: words per second (0: as fast as possible)")
	restores = flag.Int("restores", 3, "-mode changelog: restores of each checkpoint per round (the median is compared)")
	memProf  = flag.String("memprofile", "", "write an allocation profile of the whole run to this file")
	ckDetail = flag.Bool("checkpoint-details", false, "-mode changelog, changelog-run, checkpointed-run: print every checkpoint, each subtask's synchronous and asynchronous parts and when it acknowledged")
	// changelogOn adds the changelog to conf (-mode changelog).
	changelogOn bool
)

func main() {
	flag.Var(&dynamic, "D", "key=value: a configuration key of every run (repeatable)")
	flag.Parse()
	if *words == 0 {
		*words = 8 * int64(*keys)
	}
	scratch := *dir
	if scratch == "" {
		d, err := os.MkdirTemp("", "gflink-scale-")
		check(err)
		defer os.RemoveAll(d)
		scratch = d
	}
	if *cpuProf != "" {
		if *mode == "trace" {
			// Sample every 0.5 ms, so that the trace's CPU samples show what
			// a task did during a gap of a few milliseconds.
			runtime.SetCPUProfileRate(2000)
		}
		f, err := os.Create(*cpuProf)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	if *memProf != "" {
		defer func() {
			f, err := os.Create(*memProf)
			check(err)
			check(pprof.Lookup("allocs").WriteTo(f, 0))
			check(f.Close())
		}()
	}
	switch *mode {
	case "ratios":
		ratios(scratch)
	case "restore":
		restoreRatio(scratch)
	case "backends":
		backendRatio(scratch)
	case "incremental":
		incrementalRatio(scratch)
	case "changelog":
		changelogRatios(scratch)
	case "unaligned", "unaligned-throughput":
		unalignedRatios(scratch)
	case "rss-engine":
		_, _ = runWordCount(scratch, true)
		fmt.Printf("RSS_KB=%d\n", peakRSS())
	case "changelog-run", "checkpointed-run":
		// One run with checkpoints, with or without the changelog, for a
		// profile of either (go tool pprof -diff_base the other).
		changelogOn = *mode == "changelog-run"
		cpu0 := processCPU()
		x, ds := runCollecting(scratch)
		fmt.Printf("# %s: %.2fs (CPU %.2fs), %d checkpoints, median %.0f ms\n", *mode, x.elapsed.Seconds(), (processCPU() - cpu0).Seconds(), len(ds), median(ds))
		fmt.Printf("RSS_KB=%d\n", peakRSS())
	case "trace":
		// One run with checkpoints, traced, to see what a stall is made of:
		// go tool trace <file>.
		f, err := os.Create(*traceOut)
		check(err)
		check(trace.Start(f))
		r, err := runWordCount(scratch, true)
		trace.Stop()
		check(err)
		check(f.Close())
		for _, g := range r.sink.gaps {
			if g.d >= 3*time.Millisecond {
				fmt.Printf("# gap %v at +%v (the task's thread on a processor for %v of it)\n", g.d.Round(100*time.Microsecond), g.start.Sub(r.start).Round(time.Millisecond), g.cpu.Round(10*time.Microsecond))
			}
		}
		for _, c := range r.info.Checkpoints.History {
			t := time.UnixMilli(c.TriggerTimestamp).Sub(r.start)
			fmt.Printf("# checkpoint %d %s from +%v to +%v\n", c.ID, c.Status, t.Round(time.Millisecond), (t + time.Duration(c.EndToEndDuration)*time.Millisecond).Round(time.Millisecond))
			for _, st := range c.Subtasks {
				fmt.Printf("#   %s/%d: alignment %v, sync %v, async %v, acked at +%d ms\n", st.VertexID, st.Subtask,
					st.Alignment.Round(10*time.Microsecond), st.Sync.Round(10*time.Microsecond), st.Async.Round(100*time.Microsecond), st.AckTimestamp-c.TriggerTimestamp)
			}
		}
	case "rss-map":
		plainMap()
		fmt.Printf("RSS_KB=%d\n", peakRSS())
	default:
		check(fmt.Errorf("unknown -mode %q", *mode))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func generator() *connectors.WordGenerator {
	return &connectors.WordGenerator{Words: *words, Distinct: *keys, Seed: 7, WordsPerLine: 10, Rate: *rate, Skew: *zipf}
}

// unbounded is the same text without an end, for the restore measurement:
// its job runs until cancelled, and the restored job reads on.
func unbounded() *connectors.WordGenerator {
	return &connectors.WordGenerator{Distinct: *keys, Seed: 7, WordsPerLine: 10, Rate: *rate, Skew: *zipf}
}

// gapSink discards records and notes every span longer than a millisecond
// in which none arrived (sampled every 64 records: at millions of records
// a second that is a few tens of microseconds).
type gapSink struct {
	mu    sync.Mutex
	gaps  []gap
	first chan struct{} // closed at the first record
	once  sync.Once
}

type gap struct {
	start time.Time
	d     time.Duration
	cpu   time.Duration // the thread's CPU time during the gap, or -1
}

func (s *gapSink) CreateWriter(api.SinkContext) (api.SinkWriter[jobs.WordCountRecord], error) {
	return &gapWriter{s: s, last: time.Now()}, nil
}

// A gapWriter also notes the CPU time its thread got during a gap. On a
// shared virtual machine most gaps of several milliseconds are spans in
// which the task's thread was not on a processor at all (measured: 70–480
// µs of CPU in gaps of 3–4 ms, with or without a checkpoint open), which the
// Go runtime cannot see (an execution trace shows the goroutine running)
// and gflink cannot cause: the hypervisor ran another guest, or another
// process ran. Reported beside the gaps themselves, as STALL_CPU_MS.
type gapWriter struct {
	s       *gapSink
	n       int
	last    time.Time
	lastCPU time.Duration
	lastTID int
	// cpuAt is when lastCPU was read: the thread's clock is read at most
	// every cpuEvery, not at every sample. Two system calls every 64
	// records cost 4% of the job's CPU once it ran at 6 M words/s, and a
	// fixed cost in both runs of a ratio pulls the ratio towards 1. A
	// gap's CPU time then counts up to cpuEvery from before it.
	cpuAt time.Time
}

const cpuEvery = 250 * time.Microsecond

// threadCPU is the CPU time of the calling thread (its sum of execution
// time, which excludes time stolen by the hypervisor).
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func (w *gapWriter) Write(jobs.WordCountRecord) error {
	if w.n == 0 && w.s.first != nil {
		w.s.once.Do(func() { close(w.s.first) })
	}
	if w.n++; w.n&63 != 0 {
		return nil
	}
	now := time.Now()
	if now.Sub(w.cpuAt) < cpuEvery {
		w.last = now
		return nil
	}
	tid, cpu := unix.Gettid(), threadCPU()
	defer func() { w.lastCPU, w.lastTID, w.cpuAt = cpu, tid, now }()
	if d := now.Sub(w.last); d > time.Millisecond {
		c := d // on another thread than at the last sample: count it all
		if tid == w.lastTID {
			c = min(cpu-w.lastCPU, d)
		}
		if d >= 3*time.Millisecond && trace.IsEnabled() {
			// A mark in the execution trace where the gap ends (-mode trace).
			trace.Log(context.Background(), "gap", d.String())
		}
		w.s.mu.Lock()
		w.s.gaps = append(w.s.gaps, gap{w.last, d, c})
		w.s.mu.Unlock()
	}
	w.last = now
	return nil
}

func (w *gapWriter) Flush(bool) error { return nil }
func (w *gapWriter) Close() error     { return nil }

// stall is the longest gap overlapping a checkpoint, from its trigger to its
// completion, and the most CPU time the task's thread had in such a gap.
func (s *gapSink) stall(cps []engine.CheckpointStats) (worst, worstCPU time.Duration) {
	for _, c := range cps {
		if c.Status != "COMPLETED" {
			continue
		}
		from := time.UnixMilli(c.TriggerTimestamp).Add(-5 * time.Millisecond)
		to := time.UnixMilli(c.TriggerTimestamp + c.EndToEndDuration).Add(5 * time.Millisecond)
		for _, g := range s.gaps {
			if g.start.Before(to) && g.start.Add(g.d).After(from) {
				worst = max(worst, g.d)
				worstCPU = max(worstCPU, g.cpu)
			}
		}
	}
	return worst, worstCPU
}

func (s *gapSink) longest() time.Duration {
	var worst time.Duration
	for _, g := range s.gaps {
		worst = max(worst, g.d)
	}
	return worst
}

type run struct {
	start   time.Time
	elapsed time.Duration
	cpu     time.Duration // the process's CPU time during the run
	info    engine.JobInfo
	sink    *gapSink
}

func wordCountJob(src api.Source[string], sink *gapSink) *engine.JobGraph {
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: io.Discard})
	lines := engine.FromSource[string](env, src, "generator").UID("source")
	jobs.WordCountPipeline(lines).SinkTo(sink).Name("gap-sink").UID("sink")
	g, err := env.Build()
	check(err)
	return g
}

func conf(ckDir string, checkpointing bool, extra ...string) *config.Configuration {
	c := config.New()
	c.SetString("state.backend.type", *backend, "scale")
	c.SetString("state.backend.rocksdb.localdir", filepath.Join(filepath.Dir(ckDir), "lsm"), "scale")
	if *cacheMB > 0 {
		c.SetString("state.backend.rocksdb.block.cache-size", fmt.Sprintf("%d mb", *cacheMB), "scale")
	}
	if checkpointing {
		c.SetString("execution.checkpointing.interval", interval.String(), "scale")
		c.SetString("execution.checkpointing.dir", ckDir, "scale")
		c.SetString("execution.checkpointing.incremental", fmt.Sprint(*incr), "scale")
	}
	if changelogOn && checkpointing {
		c.SetString("state.changelog.enabled", "true", "scale")
		c.SetString("state.changelog.storage", "filesystem", "scale")
		c.SetString("state.changelog.dstl.dfs.base-path", filepath.Join(filepath.Dir(ckDir), "dstl"), "scale")
		c.SetString("state.changelog.periodic-materialize.interval", fmt.Sprintf("%d ms", matEvery.Milliseconds()), "scale")
	}
	for _, kv := range dynamic {
		k, v, _ := strings.Cut(kv, "=")
		c.SetString(k, v, "scale -D")
	}
	for i := 0; i+1 < len(extra); i += 2 {
		c.SetString(extra[i], extra[i+1], "scale")
	}
	return c
}

// dynamicFlags collects -D key=value.
type dynamicFlags []string

func (d *dynamicFlags) String() string { return strings.Join(*d, ",") }
func (d *dynamicFlags) Set(kv string) error {
	if !strings.Contains(kv, "=") {
		return fmt.Errorf("-D %q: want key=value", kv)
	}
	*d = append(*d, kv)
	return nil
}

// runWordCount runs word count over the generated text to its end.
func runWordCount(scratch string, checkpointing bool) (run, error) {
	ck := filepath.Join(scratch, "ck")
	os.RemoveAll(ck)
	sink := &gapSink{}
	g := wordCountJob(generator(), sink)
	start, cpu0 := time.Now(), processCPU()
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: conf(ck, checkpointing)})
	if err != nil {
		return run{}, err
	}
	res := j.Wait()
	if res.Status != engine.StatusFinished {
		return run{}, fmt.Errorf("job ended %s: %v", res.Status, res.Err)
	}
	return run{start: start, elapsed: time.Since(start), cpu: processCPU() - cpu0, info: j.Info(), sink: sink}, nil
}

// fsyncTime writes and fsyncs n bytes to a new file in dir, as a plain Go
// program would write a snapshot of that size.
func fsyncTime(dir string, n int64) time.Duration {
	check(os.MkdirAll(dir, 0o700))
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	p := filepath.Join(dir, "plain")
	start := time.Now()
	f, err := os.Create(p)
	check(err)
	w := bufio.NewWriterSize(f, 1<<20)
	for left := n; left > 0; {
		k := min(left, int64(len(buf)))
		_, err := w.Write(buf[:k])
		check(err)
		left -= k
	}
	check(w.Flush())
	check(f.Sync())
	check(f.Close())
	d := time.Since(start)
	os.Remove(p)
	return d
}

func ratios(scratch string) {
	var r3, r3cpu, stalls, stallsCPU, baseGaps, r4 []float64
	for r := range *rounds {
		var on, off run
		var err error
		// Alternate the order, so that a drift of the machine's speed
		// does not favour one variant.
		for _, cp := range []bool{r%2 == 0, r%2 != 0} {
			x, e := runWordCount(scratch, cp)
			if e != nil {
				err = e
			}
			if cp {
				on = x
			} else {
				off = x
			}
		}
		check(err)
		r3 = append(r3, off.elapsed.Seconds()/on.elapsed.Seconds())
		r3cpu = append(r3cpu, off.cpu.Seconds()/on.cpu.Seconds())
		hist := on.info.Checkpoints.History
		st, stCPU := on.sink.stall(hist)
		stalls = append(stalls, float64(st.Microseconds())/1000)
		stallsCPU = append(stallsCPU, float64(stCPU.Microseconds())/1000)
		baseGaps = append(baseGaps, float64(off.sink.longest().Microseconds())/1000)
		var durs []float64
		var size int64
		for _, c := range hist {
			if c.Status == "COMPLETED" && !c.IsSavepoint() {
				durs = append(durs, float64(c.EndToEndDuration))
				size = max(size, c.StateSize)
			}
		}
		if len(durs) > 0 {
			// The median of three: a single write+fsync on a shared disk
			// varied 7–29 ms for the same 6 MB.
			var ps []float64
			for range 3 {
				ps = append(ps, float64(fsyncTime(filepath.Join(scratch, "plain"), size)))
			}
			plain := time.Duration(median(ps))
			r4 = append(r4, median(durs)/float64(plain.Milliseconds()+1))
			fmt.Printf("# round %d: off %.2fs, on %.2fs (R3 %.3f; CPU %.2fs, %.2fs: %.3f), %d checkpoints of %d MB, median %.0f ms (plain write+fsync %v), stall %.1f ms (on CPU %.1f ms), longest gap without checkpoints %.1f ms\n",
				r+1, off.elapsed.Seconds(), on.elapsed.Seconds(), r3[len(r3)-1], off.cpu.Seconds(), on.cpu.Seconds(), r3cpu[len(r3cpu)-1], len(durs), size>>20, median(durs), plain.Round(time.Millisecond), stalls[len(stalls)-1], stallsCPU[len(stallsCPU)-1], baseGaps[len(baseGaps)-1])
		} else {
			fmt.Printf("# round %d: off %.2fs, on %.2fs (R3 %.3f), no checkpoint completed\n", r+1, off.elapsed.Seconds(), on.elapsed.Seconds(), r3[len(r3)-1])
		}
	}
	report("R3", r3)
	report("R3_CPU", r3cpu)
	report("STALL_MS", stalls)
	report("STALL_CPU_MS", stallsCPU)
	report("GAP_OFF_MS", baseGaps)
	if len(r4) > 0 {
		report("R4", r4)
	}
}

// backendRatio reports RLSM: word count's throughput on the rocksdb
// backend ÷ on hashmap, both checkpointing every -interval.
func backendRatio(scratch string) {
	var rl []float64
	for r := range *rounds {
		el := map[string]float64{}
		for i, b := range []string{"hashmap", "rocksdb"} {
			if r%2 == 1 {
				b = []string{"rocksdb", "hashmap"}[i]
			}
			*backend = b
			x, err := runWordCount(scratch, true)
			check(err)
			el[b] = x.elapsed.Seconds()
		}
		rl = append(rl, el["hashmap"]/el["rocksdb"])
		fmt.Printf("# round %d: hashmap %.2fs, rocksdb %.2fs (RLSM %.3f)\n", r+1, el["hashmap"], el["rocksdb"], rl[len(rl)-1])
	}
	report("RLSM", rl)
}

func restoreRatio(scratch string) {
	var r5 []float64
	for r := range *rounds {
		chk := retainedCheckpoint(filepath.Join(scratch, fmt.Sprintf("restore-%d", r)))
		eng := timeRestore(chk)
		hand, n := handDecode(chk)
		if n < *keys*9/10 {
			check(fmt.Errorf("the checkpoint holds %d keys; expected about %d", n, *keys))
		}
		r5 = append(r5, eng.Seconds()/hand.Seconds())
		fmt.Printf("# round %d: %d keys: engine restore until the first record %v, hand-written decode %v (R5 %.2f)\n",
			r+1, n, eng.Round(time.Millisecond), hand.Round(time.Millisecond), r5[len(r5)-1])
	}
	report("R5", r5)
}

// retainedCheckpoint runs word count until its state holds (nearly) every
// key and a checkpoint has completed after that, cancels it, and returns
// the retained checkpoint's directory.
func retainedCheckpoint(scratch string) string {
	ck := filepath.Join(scratch, "ck")
	sink := &gapSink{}
	g := wordCountJob(unbounded(), sink)
	c := conf(ck, true, "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c})
	check(err)
	// Every key has been seen once about 5 × keys words in (uniform draws);
	// wait for the first checkpoint triggered after the input is past that.
	deadline := time.Now().Add(10 * time.Minute)
	var after int64
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		info := j.Info()
		if info.Status.IsGloballyTerminal() {
			check(fmt.Errorf("the job ended %s before a checkpoint held the state", info.Status))
		}
		if after == 0 && info.Checkpoints.Completed > 0 {
			if done := time.Since(time.UnixMilli(info.StartTime)); done > 4**interval {
				after = info.Checkpoints.Total
			}
		}
		if after > 0 && info.Checkpoints.Completed > after {
			break
		}
	}
	j.Cancel()
	res := j.Wait()
	if len(res.Retained) == 0 {
		check(errors.New("no checkpoint was retained"))
	}
	p, err := savepoint.LocalPath(res.Retained[len(res.Retained)-1])
	check(err)
	return p
}

// timeRestore submits word count restored from chk and times it until the
// first record reaches the sink.
func timeRestore(chk string) time.Duration {
	sink := &gapSink{first: make(chan struct{})}
	g := wordCountJob(unbounded(), sink)
	start := time.Now()
	resolved, err := restore.Resolve(vfs.Default, chk)
	check(err)
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: conf("", false), Restore: resolved})
	check(err)
	<-sink.first
	d := time.Since(start)
	j.Cancel()
	j.Wait()
	return d
}

// handDecode reads the keyed state of chk's counter operator as a plain
// program would: every key group block of format v1 into one
// map[string]int64 (savepoint/FORMAT.md).
func handDecode(chk string) (time.Duration, int) {
	start := time.Now()
	md, err := savepoint.ReadMetadata(vfs.Default, filepath.Join(chk, savepoint.MetadataFileName))
	check(err)
	var counts map[string]int64
	for _, op := range md.Operators {
		if op.UID != "counter" {
			continue
		}
		// Presized from the entry count _metadata records, as a careful
		// hand-written reader would.
		for _, d := range op.States {
			if d.Name == "count" {
				counts = make(map[string]int64, d.Entries)
			}
		}
		for _, st := range op.Subtasks {
			if st.Keyed == nil {
				continue
			}
			var data []byte
			if st.Keyed.Stream.Path != "" {
				data, err = os.ReadFile(filepath.Join(chk, st.Keyed.Stream.Path))
				check(err)
			} else {
				data = st.Keyed.Stream.Inline
			}
			for _, kg := range st.Keyed.KeyGroups {
				decodeBlock(data[kg.Offset:kg.Offset+kg.Length-4], counts)
			}
		}
	}
	return time.Since(start), len(counts)
}

func uvarint(b []byte) (uint64, []byte) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		check(errors.New("corrupt block"))
	}
	return v, b[n:]
}

func decodeBlock(b []byte, counts map[string]int64) {
	states, b := uvarint(b)
	for range states {
		var n uint64
		n, b = uvarint(b)
		name := string(b[:n])
		b = b[n:]
		b = b[1:] // kind
		n, b = uvarint(b)
		b = b[n:] // type
		n, b = uvarint(b)
		payload := b[:n]
		b = b[n:]
		if name != "count" {
			continue
		}
		var entries uint64
		entries, payload = uvarint(payload)
		for range entries {
			n, payload = uvarint(payload)
			key := string(payload[:n])
			payload = payload[n:]
			v, k := binary.Varint(payload)
			payload = payload[k:]
			counts[key] = v
		}
	}
}

// plainMap counts the generated words in a map[string]int64: the memory
// baseline.
func plainMap() {
	g := generator()
	// The keys in a Go map sized for them (growing, a map keeps its old
	// table while it moves entries to one twice the size), each holding
	// its count's place in a slice: counts[string(w)]++ on a
	// map[string]int64 converts the word for every update, and that
	// garbage let the heap grow to twice the live map before each
	// collection. The baseline is what holding the keys takes, no more.
	index := make(map[string]int32, *keys)
	counts := make([]int64, 0, *keys)
	var buf []byte
	lines := (*words + 9) / 10
	for i := range lines {
		buf = g.Line(i, buf)
		for rest := buf; len(rest) > 0; {
			j := bytes.IndexByte(rest, ' ')
			if j < 0 {
				j = len(rest)
			}
			if w := rest[:j]; len(w) > 0 {
				if at, ok := index[string(w)]; ok { // a lookup converts nothing
					counts[at]++
				} else {
					index[string(w)] = int32(len(counts)) // an exact-size copy of a new key
					counts = append(counts, 1)
				}
			}
			rest = rest[min(j+1, len(rest)):]
		}
	}
	if len(counts) == 0 {
		check(errors.New("no words"))
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is VmHWM of this process, in KiB.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb
		}
	}
	return 0
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func report(name string, xs []float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	fmt.Printf("%s=%.3f min=%.3f max=%.3f n=%d\n", name, median(s), s[0], s[len(s)-1], len(s))
}

// incrementalRatio measures the rocksdb backend's incremental checkpoints
// on -keys keys: a full native snapshot (timed, uploaded), a second once
// Pebble's compactions have settled, then 1% of the keys updated, then a
// third snapshot. R6 is the bytes the third adds to the second (SST files
// the second did not hold, plus its private files) ÷ its full size; RINC
// is the time to write and upload the third ÷ the time to write and upload
// the first, a full one (each timed from the trigger until every file is
// copied and fsynced). The "full" size printed is the third's.
func incrementalRatio(scratch string) {
	var r6, r63, rinc []float64
	for r := range *rounds {
		dir := filepath.Join(scratch, fmt.Sprintf("inc-%d", r))
		os.RemoveAll(dir)
		store, err := lsm.Open(lsm.Options{Dir: filepath.Join(dir, "db")})
		check(err)
		kgr := state.KeyGroupRange{Start: 0, End: 127}
		b := state.NewLSMBackend(store, state.SerializerFor[string](), 128, kgr)
		v, err := state.GetValueState[int64](b, "count", state.SerializerFor[int64]())
		check(err)
		for i := range *keys {
			b.SetCurrentKey(connectors.Word(i))
			v.Update(int64(i))
		}
		var snaps []*state.NativeSnapshot
		snap := func(id int64) (map[string]int64, time.Duration) {
			start := time.Now()
			n, err := b.TakeNativeSnapshot(id, filepath.Join(dir, fmt.Sprint("chk-", id)), true, true, os.RemoveAll)
			snaps = append(snaps, n)
			check(err)
			check(n.Wait())
			files := map[string]int64{}
			ents, err := os.ReadDir(n.Dir)
			check(err)
			for _, e := range ents {
				info, err := e.Info()
				check(err)
				files[e.Name()] = info.Size()
			}
			return files, time.Since(start)
		}
		upload := func(files map[string]int64, skip map[string]int64, src string) time.Duration {
			start := time.Now()
			for name := range files {
				if _, ok := skip[name]; ok && strings.HasSuffix(name, ".sst") {
					continue
				}
				in, err := os.ReadFile(filepath.Join(src, name))
				check(err)
				f, err := os.Create(filepath.Join(dir, "up-"+name))
				check(err)
				_, err = f.Write(in)
				check(err)
				check(f.Sync())
				check(f.Close())
			}
			return time.Since(start)
		}
		first, tFull := snap(1)
		upFull := upload(first, nil, filepath.Join(dir, "chk-1"))
		// A job that has run a while has changed keys at every
		// checkpoint, not only loaded them: 5 + round checkpoints a
		// second apart, each after another 1% of the keys changed, so
		// that what lies in Pebble's L0 and upper levels is the leftover
		// of ordinary checkpoints rather than of one bulk load, and the
		// rounds meet the compactions at different points of their cycle.
		for c := range 5 + r {
			for i := 1 + c; i < *keys; i += 100 {
				b.SetCurrentKey(connectors.Word(i))
				v.Update(-1)
			}
			snap(int64(100 + c))
			time.Sleep(*interval)
		}
		// The first snapshot flushed the loaded keys into Pebble, whose
		// compactions then rewrite them for a while: an incremental
		// snapshot taken meanwhile uploads their output, changed keys or
		// not (0.22 and 0.58 of the state in two rounds of one bench
		// run, whose full snapshots also differed in size; 0.010 in the
		// third and in every other run). R6 is about the keys that
		// changed, so it is measured against a second full snapshot of
		// the settled store, as a job that has run for a while has.
		// Settled: no flush or compaction seen in 20 polls in a row (one
		// poll can fall between two compactions).
		deadline := time.Now().Add(time.Minute)
		for idle := 0; idle < 20; {
			if idle++; store.Compacting() {
				idle = 0
			}
			if time.Now().After(deadline) {
				fmt.Println("# Pebble was still compacting after a minute: R6 may count its output")
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		settled, _ := snap(2)
		for i := 0; i < *keys; i += 100 { // 1% of the keys
			b.SetCurrentKey(connectors.Word(i))
			v.Update(-1)
		}
		third, tInc := snap(3)
		upInc := upload(third, settled, filepath.Join(dir, "chk-3"))
		// added is what a snapshot uploads beyond the one before it.
		added := func(prev, next map[string]int64) (total, added int64) {
			for name, size := range next {
				total += size
				if _, ok := prev[name]; !ok || !strings.HasSuffix(name, ".sst") {
					added += size
				}
			}
			return total, added
		}
		total, add3 := added(settled, third)
		// Two more snapshots a checkpoint interval apart, no key changed:
		// what the compactions the change set off rewrote is uploaded
		// there (R6_3 sums the three).
		sum, prev := add3, third
		for id := int64(4); id <= 5; id++ {
			time.Sleep(*interval)
			next, _ := snap(id)
			_, a := added(prev, next)
			sum, prev = sum+a, next
		}
		r6 = append(r6, float64(add3)/float64(total))
		r63 = append(r63, float64(sum)/float64(total))
		rinc = append(rinc, (tInc+upInc).Seconds()/(tFull+upFull).Seconds())
		fmt.Printf("# round %d: full %d MB in %v (+ upload %v); after 1%% of keys updated: %d of %d KB added, in %v (+ upload %v); %d KB over the three snapshots from then\n",
			r+1, total>>20, tFull.Round(time.Millisecond), upFull.Round(time.Millisecond), add3>>10, total>>10, tInc.Round(time.Millisecond), upInc.Round(time.Millisecond), sum>>10)
		// The store closes once its snapshots are released, and only then
		// may its directory go (Pebble still compacts until it is closed).
		for _, n := range snaps {
			n.Release()
		}
		check(b.Dispose())
		os.RemoveAll(dir)
	}
	report("R6", r6)
	report("R6_3", r63)
	report("RINC", rinc)
}

// changelogRatios compares word count with the changelog on and off, both
// checkpointing every -interval on hashmap (or -backend), in one run:
// checkpoint durations (p50 and p99 over every checkpoint of every round),
// throughput, recovery (restore until RUNNING, from a checkpoint taken
// 10 intervals in, so past one materialization with -materialize 6s), and
// the bytes on disk (checkpoint directory plus log) when that checkpoint
// completed.
func changelogRatios(scratch string) {
	durs, tails, steadies := map[bool][]float64{}, map[bool][]float64{}, map[bool][]float64{}
	var thr, rec, disk, replay, budget []float64
	for r := range *rounds {
		el := map[bool]float64{}
		for _, on := range []bool{r%2 == 0, r%2 != 0} {
			changelogOn = on
			cpu0 := processCPU()
			x, ds := runCollecting(scratch)
			cpu := processCPU() - cpu0
			el[on] = x.elapsed.Seconds()
			durs[on] = append(durs[on], ds...)
			tails[on] = append(tails[on], tail...)
			steadies[on] = append(steadies[on], steady...)
			fmt.Printf("# round %d changelog=%v: %.2fs (CPU %.2fs), %d checkpoints, median %.0f ms, max %.0f ms\n",
				r+1, on, x.elapsed.Seconds(), cpu.Seconds(), len(ds), median(ds), slices.Max(ds))
		}
		thr = append(thr, el[false]/el[true])
		// Both checkpoints are taken first, then each is restored
		// -restores times, the variants alternating, and the medians
		// compared. (One restore each, right after the job that wrote
		// its checkpoint, compared restores in different conditions:
		// the first restore after a 10-second job read 1.2–3× the next
		// ones, with thousands of page faults the next ones did not
		// have, and which variant paid more varied from run to run.)
		dirs, chks := map[bool]string{}, map[bool]string{}
		bytes := map[bool]int64{}
		for _, on := range []bool{r%2 == 0, r%2 != 0} {
			changelogOn = on
			dirs[on] = filepath.Join(scratch, fmt.Sprintf("rec-%d-%v", r, on))
			chks[on], bytes[on] = checkpointAfter(dirs[on], 10)
		}
		times := map[bool][]float64{}
		for k := range *restores {
			for _, on := range []bool{r%2 == 0, r%2 != 0} {
				changelogOn = on
				prof := on && k == 1 && r == 0 && *recProf != "" // not the first restore: see above
				if prof {
					f, err := os.Create(*recProf)
					check(err)
					check(pprof.StartCPUProfile(f))
				}
				times[on] = append(times[on], timeRunning(dirs[on], chks[on]).Seconds())
				if prof {
					pprof.StopCPUProfile()
				}
			}
		}
		records := logRecords(chks[true]) // before the checkpoints go
		for _, d := range dirs {
			os.RemoveAll(d)
		}
		ms := func(xs []float64) string {
			s := make([]string, len(xs))
			for i, x := range xs {
				s[i] = fmt.Sprintf("%.0f", x*1000)
			}
			return strings.Join(s, ", ") + " ms"
		}
		rec = append(rec, median(times[true])/median(times[false]))
		disk = append(disk, float64(bytes[true])/float64(bytes[false]))
		// What the log costs to replay: the restore's time beyond a plain
		// one, per million records replayed, and from it the
		// materialization interval that keeps the replay within a second
		// at this run's rate of changes (one record per word).
		extraMS := (median(times[true]) - median(times[false])) * 1000
		perM := extraMS / (float64(records) / 1e6)
		rate := float64(*words) / el[true]
		replay = append(replay, perM)
		budget = append(budget, 1000/(perM*rate/1e6))
		fmt.Printf("# round %d: %d log records replayed, %.0f ms beyond a plain restore: %.1f ms per million; at %.1f M changes/s, materializing every %.1f s keeps the replay within 1 s\n",
			r+1, records, extraMS, perM, rate/1e6, budget[len(budget)-1])
		fmt.Printf("# round %d: recovery until RUNNING %s with the changelog, %s without; on disk %d MB with, %d MB without\n",
			r+1, ms(times[true]), ms(times[false]), bytes[true]>>20, bytes[false]>>20)
	}
	p := func(xs []float64, q float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	fmt.Printf("# checkpoint duration without the changelog: p50 %.0f ms, p99 %.0f ms (%d checkpoints); with: p50 %.0f ms, p99 %.0f ms (%d)\n",
		p(durs[false], 0.5), p(durs[false], 0.99), len(durs[false]), p(durs[true], 0.5), p(durs[true], 0.99), len(durs[true]))
	fmt.Printf("# of which in a run's last second (the input ending): without %v ms, with %v ms\n", tails[false], tails[true])
	fmt.Printf("RCL_P50=%.3f\n", p(durs[true], 0.5)/max(1, p(durs[false], 0.5)))
	fmt.Printf("RCL_P99=%.3f\n", p(durs[true], 0.99)/max(1, p(durs[false], 0.99)))
	if len(steadies[true]) > 0 && len(steadies[false]) > 0 {
		fmt.Printf("RCL_P99_STEADY=%.3f\n", p(steadies[true], 0.99)/max(1, p(steadies[false], 0.99)))
	}
	report("RCL_THROUGHPUT", thr)
	report("RCL_RECOVERY", rec)
	report("RCL_DISK", disk)
	report("RCL_REPLAY_MS_PER_M", replay)
	report("RCL_INTERVAL_FOR_1S", budget)
}

// logRecords counts the changelog records a checkpoint's restore replays:
// those of every log file of every subtask, up to the size it covers.
func logRecords(chk string) int64 {
	resolved, err := restore.Resolve(vfs.Default, chk)
	check(err)
	var n int64
	for _, op := range resolved.Metadata.Operators {
		for _, st := range op.Subtasks {
			if st.Keyed == nil || st.Keyed.Changelog == nil {
				continue
			}
			for _, f := range st.Keyed.Changelog.Log {
				data, err := changelog.ReadFile(vfs.Default, nil, f.Path)
				check(err)
				check(changelog.Parse(data, f.Size, f.Path, func(changelog.Record) error { n++; return nil }))
			}
		}
	}
	return n
}

// runCollecting runs word count with checkpoints to its end and returns
// the duration of every checkpoint that completed (polled: the job's
// history holds only the newest).
func runCollecting(scratch string) (run, []float64) {
	ck := filepath.Join(scratch, "ck")
	os.RemoveAll(ck)
	os.RemoveAll(filepath.Join(scratch, "dstl"))
	sink := &gapSink{}
	g := wordCountJob(generator(), sink)
	start := time.Now()
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: conf(ck, true)})
	check(err)
	seen := map[int64]float64{}
	at := map[int64]int64{}
	collect := func() {
		for _, c := range j.Info().Checkpoints.History {
			if c.Status == "COMPLETED" && !c.IsSavepoint() {
				if _, ok := seen[c.ID]; !ok && *ckDetail {
					fmt.Printf("#   changelog=%v: checkpoint %d triggered at +%d ms took %d ms:", changelogOn, c.ID, c.TriggerTimestamp-start.UnixMilli(), c.EndToEndDuration)
					for _, st := range c.Subtasks {
						fmt.Printf(" [%.8s/%d sync %v async %v acked +%d ms]", st.VertexID, st.Subtask, st.Sync.Round(10*time.Microsecond), st.Async.Round(100*time.Microsecond), st.AckTimestamp-c.TriggerTimestamp)
					}
					fmt.Println()
				}
				seen[c.ID], at[c.ID] = float64(c.EndToEndDuration), c.TriggerTimestamp-start.UnixMilli()
			}
		}
	}
	defer func() {
		for id, d := range seen {
			if d > 50 {
				fmt.Printf("#   changelog=%v: checkpoint %d took %.0f ms, triggered at +%d ms\n", changelogOn, id, d, at[id])
			}
		}
	}()
	for done := false; !done; {
		select {
		case <-j.Done():
			done = true
		case <-time.After(200 * time.Millisecond):
		}
		collect()
	}
	res := j.Wait()
	if res.Status != engine.StatusFinished {
		check(fmt.Errorf("job ended %s: %v", res.Status, res.Err))
	}
	// Every checkpoint counts, those around the end of the input too: a
	// task whose input ended writes its state whole for later checkpoints,
	// which is what the run's last checkpoints cost (tailOf says which).
	ds := make([]float64, 0, len(seen))
	tail, steady = tail[:0], steady[:0]
	end := time.Since(start).Milliseconds() - 1000
	for id, d := range seen {
		ds = append(ds, d)
		if at[id] >= end {
			tail = append(tail, d)
		} else {
			steady = append(steady, d)
		}
	}
	if len(ds) == 0 {
		check(errors.New("no checkpoint completed: give more -words"))
	}
	return run{start: start, elapsed: time.Since(start), info: j.Info(), sink: sink}, ds
}

// tail holds the durations of the last run's checkpoints triggered in its
// last second (around the end of its input), steady the others'.
var tail, steady []float64

// checkpointAfter runs word count over unbounded text until checkpoint n
// has completed, measures what the job keeps on disk (checkpoints, shared
// files, log), cancels it with the checkpoint retained and returns it.
func checkpointAfter(scratch string, n int64) (string, int64) {
	ck := filepath.Join(scratch, "ck")
	g := wordCountJob(unbounded(), &gapSink{})
	c := conf(ck, true, "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c})
	check(err)
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) && j.Info().Checkpoints.Completed < n {
		time.Sleep(20 * time.Millisecond)
	}
	var onDisk int64
	filepath.WalkDir(scratch, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.Contains(p, string(filepath.Separator)+"lsm"+string(filepath.Separator)) {
			if info, err := d.Info(); err == nil {
				onDisk += info.Size()
			}
		}
		return nil
	})
	j.Cancel()
	res := j.Wait()
	if len(res.Retained) == 0 {
		check(errors.New("no checkpoint was retained"))
	}
	p, err := savepoint.LocalPath(res.Retained[len(res.Retained)-1])
	check(err)
	return p, onDisk
}

// timeRunning restores word count from chk, with the changelog as the
// variant has it, and times it until the job reports RUNNING (its state
// loaded, the log replayed).
func timeRunning(scratch, chk string) time.Duration {
	g := wordCountJob(unbounded(), &gapSink{})
	running := make(chan struct{})
	var once sync.Once
	start := time.Now()
	resolved, err := restore.Resolve(vfs.Default, chk)
	check(err)
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: conf(filepath.Join(scratch, "ck2"), true), Restore: resolved,
		OnStatus: func(s engine.JobStatus, _ time.Time) {
			if s == engine.StatusRunning {
				once.Do(func() { close(running) })
			}
		}})
	check(err)
	<-running
	d := time.Since(start)
	j.Cancel()
	j.Wait()
	return d
}

package crash

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/internal/testutil"
)

// eventTimeRun is one configuration of TestPropertyKillEventTimeJobs.
type eventTimeRun struct {
	job                string // tumbling, sliding or sessions
	backend, mode      string
	p1, p2             int
	idleness, lateness string
	lines              int
	bound              int64
	killAfter          time.Duration
	seed               uint64
}

const windowSize, windowSlide, sessionGap = 200, 50, 13

func (r eventTimeRun) args() []string {
	a := []string{"--input", "in.txt", "--output", "out", "--out-of-orderness", fmt.Sprint(r.bound, " ms")}
	if r.idleness != "" {
		a = append(a, "--idleness", r.idleness)
	}
	if r.lateness != "" {
		a = append(a, "--allowed-lateness", r.lateness)
	}
	switch r.job {
	case "tumbling":
		return append([]string{"windowwordcount"}, append(a, "--window", fmt.Sprint(windowSize, " ms"))...)
	case "sliding":
		return append([]string{"windowwordcount"}, append(a, "--window", fmt.Sprint(windowSize, " ms"), "--slide", fmt.Sprint(windowSlide, " ms"))...)
	}
	return append([]string{"sessionize"}, append(a, "--gap", fmt.Sprint(sessionGap, " ms"))...)
}

func (r eventTimeRun) conf(dir string) []string {
	c := []string{"-Dexecution.checkpointing.interval=20ms", "-Dexecution.checkpointing.dir=" + filepath.Join(dir, "ck"),
		"-Dpipeline.auto-watermark-interval=5ms", "-Dstate.backend.type=hashmap"}
	switch r.backend {
	case "rocksdb":
		c = append(c, "-Dstate.backend.type=rocksdb")
	case "changelog":
		c = append(c, "-Dstate.changelog.enabled=true", "-Dstate.changelog.storage=filesystem",
			"-Dstate.changelog.dstl.dfs.base-path="+filepath.Join(dir, "dstl"), "-Dstate.changelog.periodic-materialize.interval=30ms")
	}
	if r.mode == "unaligned" {
		c = append(c, "-Dexecution.checkpointing.unaligned.enabled=true")
	}
	return c
}

// timedWordLines are n lines "epochMillis,word", 3 ms apart, each moved
// back by an even amount below bound (even timestamps and an odd session
// gap: no two records are exactly a gap apart, where whether a session
// closed would depend on timing).
func timedWordLines(n int, bound int64, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 2))
	out := make([]string, n)
	for i := range out {
		ts := int64(i*3) - 2*r.Int64N(max(bound/2, 1))
		out[i] = fmt.Sprintf("%d,%s", ts, connectors.Word(r.IntN(7)))
	}
	return out
}

func floorMod(a, b int64) int64 { return ((a % b) + b) % b }

// eventTimeOracle computes the job's results over lines in batch.
func eventTimeOracle(job string, lines []string) []string {
	var out []string
	if job == "sessions" {
		by := map[string][]int64{}
		for _, l := range lines {
			ts, w := splitLine(l)
			by[w] = append(by[w], ts)
		}
		out = testutil.SessionLines(by, sessionGap)
	} else {
		slide := int64(windowSize)
		if job == "sliding" {
			slide = windowSlide
		}
		type win struct {
			w          string
			start, end int64
		}
		counts := map[win]int{}
		for _, l := range lines {
			ts, w := splitLine(l)
			for start := ts - floorMod(ts, slide); start > ts-windowSize; start -= slide {
				counts[win{w, start, start + windowSize}]++
			}
		}
		for k, c := range counts {
			out = append(out, fmt.Sprintf("(%s,%d,%d,%d)", k.w, c, k.start, k.end))
		}
	}
	slices.Sort(out)
	return out
}

func splitLine(l string) (int64, string) {
	ts, w, _ := strings.Cut(l, ",")
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		panic(err)
	}
	return n, w
}

// The built-in event-time jobs — tumbling and sliding window word count,
// sessionize — are killed with SIGKILL once they have completed a
// checkpoint and committed results, then restored from their newest
// checkpoint at another parallelism into the same output directory: the
// committed results equal a batch computation over the input, for random
// assigners, backends, checkpoint modes, parallelisms, idleness, allowed
// lateness, input sizes, out-of-orderness and kill moments. Each check starts
// two processes, so few run: 4 by default (1 under the race detector),
// -rapid.checks for more.
func TestPropertyKillEventTimeJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	if !rapidChecksSet() {
		n := "4"
		if testutil.RaceEnabled() {
			n = "1"
		}
		was := flag.Lookup("rapid.checks").Value.String()
		flag.Set("rapid.checks", n)
		defer flag.Set("rapid.checks", was)
	}
	rapid.Check(t, func(rt *rapid.T) {
		r := eventTimeRun{
			job:       rapid.SampledFrom([]string{"tumbling", "sliding", "sessions"}).Draw(rt, "job"),
			backend:   rapid.SampledFrom([]string{"hashmap", "rocksdb", "changelog"}).Draw(rt, "backend"),
			mode:      rapid.SampledFrom([]string{"aligned", "unaligned"}).Draw(rt, "mode"),
			p1:        rapid.IntRange(1, 3).Draw(rt, "p1"),
			idleness:  rapid.SampledFrom([]string{"", "50 ms"}).Draw(rt, "idleness"),
			lateness:  rapid.SampledFrom([]string{"", "30 ms"}).Draw(rt, "allowed lateness"),
			lines:     rapid.IntRange(1500, 5000).Draw(rt, "lines"),
			bound:     rapid.SampledFrom([]int64{2, 20, 60}).Draw(rt, "out-of-orderness"),
			killAfter: time.Duration(rapid.IntRange(0, 60).Draw(rt, "kill after ms")) * time.Millisecond,
			seed:      rapid.Uint64().Draw(rt, "seed"),
		}
		r.p2 = 1 + (r.p1+rapid.IntRange(0, 1).Draw(rt, "p2 step"))%3
		killAndRestore(rt, r)
	})
}

func rapidChecksSet() bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	return set
}

func killAndRestore(t *rapid.T, r eventTimeRun) {
	dir, err := os.MkdirTemp("", "gflink-kill-eventtime-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	lines := timedWordLines(r.lines, r.bound, r.seed)
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := eventTimeOracle(r.job, lines)
	out, ck := filepath.Join(dir, "out"), filepath.Join(dir, "ck")
	// 3,000 lines a second: 0.5 to 1.7 s of input, 3 ms of event time a line.
	first := append(append([]string{"run", "-p", strconv.Itoa(r.p1)}, r.conf(dir)...), r.args()...)
	first = append(first, "--rate", "3000")
	run := gflinkCmd(dir, first...)
	var errOut bytes.Buffer
	run.Stderr = &errOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	deadline := testutil.Deadline(30 * time.Second)
	finished := false
	for {
		metas, _ := filepath.Glob(filepath.Join(ck, "*", "chk-*", "_metadata"))
		if len(metas) > 0 && committedLines(out) > 0 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("%+v: the first run ended before it checkpointed and committed (%v):\n%s", r, err, errOut.String())
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			run.Process.Kill()
			<-exited
			t.Fatalf("%+v: no checkpoint and committed output within 30 s:\n%s", r, errOut.String())
		}
	}
	select {
	case err := <-exited:
		finished = err == nil
	case <-time.After(r.killAfter):
		run.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	if !finished {
		jobDirs, _ := filepath.Glob(filepath.Join(ck, "*"))
		if len(jobDirs) != 1 {
			t.Fatalf("%+v: job directories %v", r, jobDirs)
		}
		second := append(append([]string{"run", "-p", strconv.Itoa(r.p2), "-s", jobDirs[0]}, r.conf(dir)...), r.args()...)
		res := gflinkCmd(dir, second...)
		var resErr bytes.Buffer
		res.Stderr = &resErr
		if err := res.Run(); err != nil {
			t.Fatalf("%+v: restore: %v\n%s", r, err, resErr.String())
		}
	}
	var got []string
	files, _ := filepath.Glob(filepath.Join(out, "part-*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Fields(string(b))...)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%+v (finished before the kill: %v): %d results committed, %d computed in batch; they differ:\n got %v\nwant %v",
			r, finished, len(got), len(want), got[:min(6, len(got))], want[:min(6, len(want))])
	}
}

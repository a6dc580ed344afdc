package jobs

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/internal/testutil"
)

// submitJob builds job with args at parallelism p and submits it with
// the configuration conf.
func submitJob(t *testing.T, job Job, args []string, p int, conf map[string]string, stdout *lockedBuffer, log *lockedBuffer) *engine.Job {
	t.Helper()
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: p, Stdout: stdout})
	if err := job.Build(env, args); err != nil {
		t.Fatal(err)
	}
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := config.New()
	for k, v := range conf {
		c.SetString(k, v, "test")
	}
	o := engine.JobOptions{Config: c}
	if log != nil {
		o.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	j, err := engine.Submit(context.Background(), g, o)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// arrivals records when each line is written.
type arrivals struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines []string
	at    []time.Time
}

func (a *arrivals) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.buf.Write(p)
	for {
		i := bytes.IndexByte(a.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		a.lines = append(a.lines, string(a.buf.Next(i + 1)[:i]))
		a.at = append(a.at, time.Now())
	}
}

func (a *arrivals) get() ([]string, []time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.lines), slices.Clone(a.at)
}

// A paced, unbounded windowwordcount in ingestion time prints each window
// once event time has passed its end, and within the watermark interval
// (200 ms) of it, give or take the machine's scheduling: never early.
func TestWindowWordCountPacedWindowsCloseOnTime(t *testing.T) {
	out := &arrivals{}
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: out})
	if err := WindowWordCount().Build(env, []string{"--generate", "unbounded", "--rate", "2000", "--distinct", "5", "--window", "500 ms"}); err != nil {
		t.Fatal(err)
	}
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: config.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Cancel(); j.Wait() }()
	deadline := testutil.Deadline(20 * time.Second)
	ends := map[int64]bool{}
	for len(ends) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d windows closed within 20 s, want 4", len(ends))
		}
		select {
		case <-j.Done():
			t.Fatalf("the unbounded job ended: %v", j.Wait())
		case <-time.After(20 * time.Millisecond):
		}
		lines, _ := out.get()
		for _, l := range lines {
			f := strings.Split(strings.Trim(l, "()"), ",")
			end, _ := strconv.ParseInt(f[3], 10, 64)
			ends[end] = true
		}
	}
	lines, at := out.get()
	var late []time.Duration
	for i, l := range lines {
		f := strings.Split(strings.Trim(l, "()"), ",")
		end, err := strconv.ParseInt(f[3], 10, 64)
		if len(f) != 4 || err != nil {
			t.Fatalf("line %q: want (word,count,start,end)", l)
		}
		d := at[i].Sub(time.UnixMilli(end))
		if d < 0 {
			t.Fatalf("window ending %d printed %v before its end: %q", end, -d, l)
		}
		late = append(late, d)
	}
	slices.Sort(late)
	if med := late[len(late)/2]; med > testutil.Scale(200*time.Millisecond)+100*time.Millisecond {
		t.Fatalf("windows printed %v (median) after their end; want within the 200 ms watermark interval (all: %v)", med, late)
	}
}

// timedLines writes n lines "epochMillis,words" with timestamps out of
// order by less than bound, and returns them.
func writeTimedLines(t *testing.T, path string, n int, bound int64, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	var lines []string
	for i := range n {
		// Even timestamps: a session's gap is odd, never a distance
		// between two records (where whether a session has closed would
		// depend on timing).
		ts := int64(i*6) - 2*r.Int64N(bound/2)
		lines = append(lines, fmt.Sprintf("%d,%s", ts, connectors.Word(r.IntN(6))))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return lines
}

func floorMod(a, b int64) int64 { return ((a % b) + b) % b }

// The built-in windowwordcount (sliding windows) and sessionize jobs over
// timestamped lines, out of order within --out-of-orderness, write
// exactly what a batch computation over the lines gives, through an
// injected failure.
func TestEventTimeJobsMatchABatchComputation(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "in.txt")
	lines := writeTimedLines(t, input, 6000, 40, 7)
	const size, slide, gap = 300, 100, 13
	windows, sessions := map[string]int{}, map[string][]int64{}
	for _, l := range lines {
		ts, rest, _ := leadingMillis(l)
		for _, w := range strings.Fields(rest) {
			for start := ts - floorMod(ts, slide); start > ts-size; start -= slide {
				windows[fmt.Sprintf("(%s,%%d,%d,%d)", w, start, start+size)]++
			}
		}
		sessions[strings.TrimSpace(rest)] = append(sessions[strings.TrimSpace(rest)], ts)
	}
	var wantWindows []string
	for f, c := range windows {
		wantWindows = append(wantWindows, fmt.Sprintf(f, c))
	}
	wantSessions := testutil.SessionLines(sessions, gap)
	for _, tc := range []struct {
		job  Job
		args []string
		want []string
	}{
		{WindowWordCount(), []string{"--window", "300 ms", "--slide", "100 ms"}, wantWindows},
		{Sessionize(), []string{"--gap", "13 ms"}, wantSessions},
	} {
		t.Run(tc.job.Name, func(t *testing.T) {
			out := filepath.Join(dir, tc.job.Name)
			var log lockedBuffer
			args := append([]string{"--input", input, "--rate", "12000", "--out-of-orderness", "40 ms", "--output", out}, tc.args...)
			conf := testutil.FailingJob(dir, 2, 4000, 1, "pipeline.auto-watermark-interval", "5 ms",
				"execution.checkpointing.dir", filepath.Join(dir, tc.job.Name+"-chk"))
			j := submitJob(t, tc.job, args, 2, conf, nil, &log)
			if res := j.Wait(); res.Err != nil {
				t.Fatal(res.Err)
			}
			testutil.CheckRestores(t, log.String(), 1)
			got := testutil.CommittedLines(t, out)
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if len(want) < 50 || !slices.Equal(got, want) {
				t.Fatalf("%d results committed, %d computed in batch; they differ:\n got %v\nwant %v", len(got), len(want), got[:min(8, len(got))], want[:min(8, len(want))])
			}
		})
	}
}

package stream_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

var windowSchedules = flag.Int("window.schedules", 6, "how many random configurations TestWindowsRescaledExactly runs")

// windowRun is one random configuration of TestWindowsRescaledExactly.
type windowRun struct {
	assigner         string
	size, slide, gap int64
	lateness         int64 // of the first run
	lateness2        int64 // of the restored run
	backend, mode    string
	p1, p2           int
}

func (r windowRun) String() string {
	return fmt.Sprintf("%s/%s/%s/lateness=%d->%d/p%d->p%d", r.assigner, r.backend, r.mode, r.lateness, r.lateness2, r.p1, r.p2)
}

// oracle computes the windows of in in batch.
func (r windowRun) oracle(in []reading) []string {
	type win struct {
		key        string
		start, end int64
	}
	acc := map[win][2]int64{}
	if r.assigner == "session" {
		by := map[string][]reading{}
		for _, x := range in {
			by[x.Sensor] = append(by[x.Sensor], x)
		}
		for s, rs := range by {
			slices.SortFunc(rs, func(a, b reading) int { return int(a.TS - b.TS) })
			start := rs[0].TS
			var n, sum int64
			for i, x := range rs {
				if i > 0 && x.TS-rs[i-1].TS > r.gap {
					acc[win{s, start, rs[i-1].TS + r.gap}] = [2]int64{n, sum}
					start, n, sum = x.TS, 0, 0
				}
				n, sum = n+1, sum+x.Value
			}
			acc[win{s, start, rs[len(rs)-1].TS + r.gap}] = [2]int64{n, sum}
		}
	} else {
		for _, x := range in {
			for _, st := range windowStarts(x.TS, r.size, r.slide, 0) {
				c := acc[win{x.Sensor, st, st + r.size}]
				acc[win{x.Sensor, st, st + r.size}] = [2]int64{c[0] + 1, c[1] + x.Value}
			}
		}
	}
	var out []string
	for w, c := range acc {
		out = append(out, fmt.Sprintf("%s@%d-%d:%s/%d/%d", w.key, w.start, w.end, w.key, c[0], c[1]))
	}
	slices.Sort(out)
	return out
}

// Windows of every kind, in every state backend and checkpoint mode, are
// exact across a cancellation and a restore from the retained checkpoint
// at another parallelism: each window's result is committed once, equal
// to a batch computation's. The restored job may allow another lateness
// (no record is late here, so the results do not change): windows of an
// operator that sweeps them (no lateness) restore into one that sets
// timers, and back. -window.schedules sets how many random
// configurations run.
func TestWindowsRescaledExactly(t *testing.T) {
	const bound = 40
	in := sessionReadings(8000, 6, 0, bound, 17)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 5))
	n := *windowSchedules
	if testutil.RaceEnabled() && !flagSet("window.schedules") {
		n = 3 // one of each assigner: the race detector makes each run ~10× slower
	}
	for i := range n {
		r := windowRun{
			assigner:  []string{"tumbling", "sliding", "session"}[i%3],
			backend:   []string{"hashmap", "rocksdb", "changelog"}[rnd.IntN(3)],
			mode:      []string{"aligned", "unaligned"}[rnd.IntN(2)],
			lateness:  []int64{0, 50}[rnd.IntN(2)],
			lateness2: []int64{0, 50}[rnd.IntN(2)],
			p1:        1 + rnd.IntN(3),
		}
		r.p2 = 1 + (r.p1+rnd.IntN(2))%3 // another parallelism
		r.size, r.slide, r.gap = 200, 200, 101
		if r.assigner == "sliding" {
			r.slide = 50
		}
		t.Run(r.String(), func(t *testing.T) { runRescaledWindows(t, r, in, bound) })
	}
}

// committed reports whether the file sink has committed a part file.
func committed(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			return true
		}
	}
	return false
}

func runRescaledWindows(t *testing.T, r windowRun, in []reading, bound int64) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	build := func(env *stream.Environment, rate float64) {
		src := stream.FromSource[reading](env, heldElements(in, rate), "readings").UID("source")
		timed := src.AssignTimestampsAndWatermarks(stream.ForBoundedOutOfOrderness[reading](time.Duration(bound) * time.Millisecond).
			WithTimestampAssigner(func(x reading, _ int64) int64 { return x.TS })).UID("timestamps")
		a := stream.TumblingEventTimeWindows(time.Duration(r.size) * time.Millisecond)
		switch r.assigner {
		case "sliding":
			a = stream.SlidingEventTimeWindows(time.Duration(r.size)*time.Millisecond, time.Duration(r.slide)*time.Millisecond)
		case "session":
			a = stream.EventTimeSessionWindows(time.Duration(r.gap) * time.Millisecond)
		}
		lateness := r.lateness
		if rate == 0 {
			lateness = r.lateness2 // the restored run
		}
		w := stream.Window(stream.KeyBy(timed, func(x reading) string { return x.Sensor }), a).AllowedLateness(time.Duration(lateness) * time.Millisecond)
		stream.WindowAggregateProcess(w, countAgg{}, stream.ProcessWindowFunction[string, string, string](sessionLine{})).UID("windows").
			SinkTo(&connectors.FileSink[string]{Dir: out}).UID("sink")
	}
	want := r.oracle(in)
	got := cancelThenRestore(t, dir, r.backend, r.mode, r.p1, r.p2, 4000, len(want), out, build)
	if !slices.Equal(got, want) {
		t.Fatalf("%d windows committed, %d computed in batch; they differ:\n got %v\nwant %v", len(got), len(want), got[:min(6, len(got))], want[:min(6, len(want))])
	}
}

// flagSet reports whether the flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

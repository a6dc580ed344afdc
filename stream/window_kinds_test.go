package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// sessionReadings are n readings, 2 ms apart on even milliseconds from
// base, each sensor silent one second in three (so its sessions end), and
// each moved back by an even amount below bound: the distance between two
// readings of a sensor is even, never the gap (odd), where whether a
// session has fired already would depend on timing.
func sessionReadings(n, sensors int, base, bound int64, seed uint64) []reading {
	r := rand.New(rand.NewPCG(seed, 3))
	var out []reading
	for i := range n {
		ts := base + 2*int64(i)
		s := r.IntN(sensors)
		if floorMod(ts/1000+int64(s), 3) == 0 {
			continue
		}
		out = append(out, reading{TS: ts - 2*r.Int64N(bound/2), Sensor: fmt.Sprint("s", s), Value: r.Int64N(100)})
	}
	return out
}

// sessionLine renders a session's result with its key and window.
type sessionLine struct{}

func (sessionLine) Process(key string, w stream.TimeWindow, res []string, out stream.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s@%d-%d:%s", key, w.Start, w.End, res[0]))
	return nil
}

// Event-time session windows merge a key's records closer than the gap
// into one window and emit what a batch sessionization of the same records
// gives — under an injected failure, in each state backend.
func TestSessionWindowsMatchABatchComputation(t *testing.T) {
	const gap, bound = 301, 40
	in := sessionReadings(12000, 7, -5000, bound, 11)
	// The oracle: each sensor's timestamps sorted, cut where two are
	// more than the gap apart.
	bySensor := map[string][]reading{}
	for _, r := range in {
		bySensor[r.Sensor] = append(bySensor[r.Sensor], r)
	}
	var want []string
	for s, rs := range bySensor {
		slices.SortFunc(rs, func(a, b reading) int { return int(a.TS - b.TS) })
		start, n, sum := rs[0].TS, int64(0), int64(0)
		for i, r := range rs {
			if i > 0 && r.TS-rs[i-1].TS > gap {
				want = append(want, fmt.Sprintf("%s@%d-%d:%s/%d/%d", s, start, rs[i-1].TS+gap, s, n, sum))
				start, n, sum = r.TS, 0, 0
			}
			n, sum = n+1, sum+r.Value
		}
		want = append(want, fmt.Sprintf("%s@%d-%d:%s/%d/%d", s, start, rs[len(rs)-1].TS+gap, s, n, sum))
	}
	slices.Sort(want)
	if len(want) < 20 {
		t.Fatalf("the input has %d sessions: too few to test merging", len(want))
	}
	for _, backend := range [][]string{{"state.backend.type", "hashmap"}, {"state.backend.type", "rocksdb"},
		{"state.backend.type", "hashmap", "state.changelog.enabled", "true", "state.changelog.periodic-materialize.interval", "30 ms"}} {
		name := backend[1]
		if len(backend) > 2 {
			name = "changelog"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var log testutil.SyncBuffer
			extra := append([]string{"pipeline.auto-watermark-interval", "5 ms"}, backend...)
			if name == "changelog" {
				extra = append(extra, "state.changelog.dstl.dfs.base-path", filepath.Join(dir, "dstl"))
			}
			env, err := stream.NewEnvironment(stream.Options{Logger: slog.New(slog.NewTextHandler(&log, nil)),
				Config: testutil.FailingJob(dir, 2, 3000, 1, extra...)})
			if err != nil {
				t.Fatal(err)
			}
			src := stream.FromSource[reading](env, &connectors.Elements[reading]{Items: in, Rate: 8000}, "readings").UID("source")
			timed := src.AssignTimestampsAndWatermarks(stream.ForBoundedOutOfOrderness[reading](bound * time.Millisecond).
				WithTimestampAssigner(func(r reading, _ int64) int64 { return r.TS }))
			w := stream.Window(stream.KeyBy(timed, func(r reading) string { return r.Sensor }), stream.EventTimeSessionWindows(gap*time.Millisecond))
			stream.WindowAggregateProcess(w, countAgg{}, stream.ProcessWindowFunction[string, string, string](sessionLine{})).UID("sessions").
				SinkTo(&connectors.FileSink[string]{Dir: filepath.Join(dir, "out")}).UID("sink")
			if _, err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			testutil.CheckRestores(t, log.String(), 1)
			got := testutil.CommittedLines(t, filepath.Join(dir, "out"))
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%d sessions committed, %d computed in batch; they differ:\n got %.12v\nwant %.12v", len(got), len(want), got, want)
			}
		})
	}
}

// sizes emits the number of records of each firing.
type sizes struct{}

func (sizes) Process(key string, _ stream.TimeWindow, elements []reading, out stream.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s:%d", key, len(elements)))
	return nil
}

// A purging count trigger over global windows fires every n records of a
// key with exactly those n (Flink's countWindow), and never fires the
// rest. A continuous event-time trigger fires a window early, with the
// records so far, and last with all of them.
func TestWindowTriggers(t *testing.T) {
	in := readings(6000, 4, 0, 30, 21)
	perSensor := map[string]int{}
	for _, r := range in {
		perSensor[r.Sensor]++
	}
	t.Run("count", func(t *testing.T) {
		const n = 7
		out := &testutil.SyncBuffer{}
		env, err := stream.NewEnvironment(stream.Options{Stdout: out, Config: map[string]string{"parallelism.default": "2"}})
		if err != nil {
			t.Fatal(err)
		}
		src := stream.FromSource[reading](env, &connectors.Elements[reading]{Items: in}, "readings")
		w := stream.Window(stream.KeyBy(src, func(r reading) string { return r.Sensor }), stream.GlobalWindows()).
			Trigger(stream.PurgingTrigger(stream.CountTrigger[reading](n)))
		stream.WindowProcess(w, sizes{}).Print()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		fired := map[string]int{}
		for _, l := range strings.Fields(out.String()) {
			if strings.HasSuffix(l, ">") {
				continue // the print sink's "subtask> " prefix
			}
			key, size, _ := strings.Cut(l, ":")
			if size != strconv.Itoa(n) {
				t.Fatalf("a firing of %s elements (%q), want %d each", size, l, n)
			}
			fired[key]++
		}
		for s, c := range perSensor {
			if fired[s] != c/n {
				t.Errorf("sensor %s: %d records fired %d windows of %d, want %d", s, c, fired[s], n, c/n)
			}
		}
	})
	t.Run("continuous", func(t *testing.T) {
		const size = 200
		out := &testutil.SyncBuffer{}
		env, err := stream.NewEnvironment(stream.Options{Stdout: out, Config: map[string]string{"parallelism.default": "1",
			"pipeline.auto-watermark-interval": "0"}})
		if err != nil {
			t.Fatal(err)
		}
		src := stream.FromSource[reading](env, &connectors.Elements[reading]{Items: in}, "readings")
		timed := src.AssignTimestampsAndWatermarks(stream.ForGenerator(func() stream.WatermarkGenerator[reading] {
			return &punctuated{max: -1 << 62, bound: 30}
		}).WithTimestampAssigner(func(r reading, _ int64) int64 { return r.TS }))
		w := stream.Window(stream.KeyBy(timed, func(r reading) string { return r.Sensor }), stream.TumblingEventTimeWindows(size*time.Millisecond)).
			Trigger(stream.ContinuousEventTimeTrigger[reading](50 * time.Millisecond))
		stream.WindowProcess(w, countWindow{}).Print()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{}
		for _, r := range in {
			want[fmt.Sprintf("%s@%d", r.Sensor, r.TS-floorMod(r.TS, size))]++
		}
		last, firings := map[string]int{}, map[string]int{}
		for _, l := range strings.Fields(out.String()) {
			win, c, _ := strings.Cut(l, ":")
			n, _ := strconv.Atoi(c)
			if n < last[win] {
				t.Fatalf("window %s fired with %d records after %d", win, n, last[win])
			}
			last[win] = n
			firings[win]++
		}
		early := 0
		for win, n := range want {
			if last[win] != n {
				t.Errorf("window %s last fired with %d records, has %d", win, last[win], n)
			}
			early += firings[win] - 1
		}
		if len(last) != len(want) || early < len(want) {
			t.Fatalf("%d windows fired (want %d), %d early firings (want at least one a window)", len(last), len(want), early)
		}
	})
}

// WindowAll counts the whole stream's records per window in one subtask;
// processing-time windows count no record twice.
func TestWindowAllAndProcessingTimeWindows(t *testing.T) {
	const size = 100
	in := readings(5000, 4, 0, 20, 31)
	out := &testutil.SyncBuffer{}
	env, err := stream.NewEnvironment(stream.Options{Stdout: out, Config: map[string]string{"parallelism.default": "2",
		"pipeline.auto-watermark-interval": "5 ms"}})
	if err != nil {
		t.Fatal(err)
	}
	src := stream.FromSource[reading](env, &connectors.Elements[reading]{Items: in, Rate: 20000}, "readings")
	timed := src.AssignTimestampsAndWatermarks(stream.ForBoundedOutOfOrderness[reading](20 * time.Millisecond).
		WithTimestampAssigner(func(r reading, _ int64) int64 { return r.TS }))
	all := stream.WindowAllProcess(stream.WindowAll(timed, stream.TumblingEventTimeWindows(size*time.Millisecond)),
		allCount{})
	proc := stream.WindowAggregate(stream.Window(stream.KeyBy(src, func(r reading) string { return r.Sensor }),
		stream.TumblingProcessingTimeWindows(20*time.Millisecond)), countAgg{})
	stream.Union(all, stream.Map(proc, func(s string) string { return "proc:" + s })).Parallelism(1).Print().Parallelism(1)
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[int64]int{}
	perSensor := map[string]int64{}
	for _, r := range in {
		want[r.TS-floorMod(r.TS, size)]++
		perSensor[r.Sensor]++
	}
	got, procCount := map[int64]int{}, map[string]int64{}
	for _, l := range strings.Fields(out.String()) {
		if p, ok := strings.CutPrefix(l, "proc:"); ok {
			f := strings.Split(p, "/")
			n, _ := strconv.ParseInt(f[1], 10, 64)
			procCount[f[0]] += n
			continue
		}
		var start int64
		var n int
		if _, err := fmt.Sscanf(l, "all@%d:%d", &start, &n); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if _, dup := got[start]; dup {
			t.Fatalf("window %d fired twice", start)
		}
		got[start] = n
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("windowAll counts %v, want %v", got, want)
	}
	// Processing-time timers still pending when the input ends do not
	// fire (as in Flink's streaming mode): the last windows are lost.
	var counted int64
	for s, n := range procCount {
		if n > perSensor[s] {
			t.Errorf("processing-time windows counted %d records of sensor %s, which has %d", n, s, perSensor[s])
		}
		counted += n
	}
	if counted < int64(len(in))/2 {
		t.Errorf("processing-time windows counted %d of %d records", counted, len(in))
	}
}

type allCount struct{}

func (allCount) Process(w stream.TimeWindow, elements []reading, out stream.Collector[string]) error {
	out.Collect(fmt.Sprintf("all@%d:%d", w.Start, len(elements)))
	return nil
}

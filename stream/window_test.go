package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
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

// reading is an input record of the window tests: a sensor's value at a
// time.
type reading struct {
	TS     int64
	Sensor string
	Value  int64
}

// readings are n records over sensors, 1 ms apart from base on, each moved
// back by up to bound-1 ms.
func readings(n, sensors int, base, bound int64, seed uint64) []reading {
	r := rand.New(rand.NewPCG(seed, 9))
	out := make([]reading, n)
	for i := range out {
		out[i] = reading{TS: base + int64(i) - r.Int64N(bound), Sensor: fmt.Sprint("s", r.IntN(sensors)), Value: r.Int64N(100) - 20}
	}
	return out
}

// countAgg counts a window's records and sums their values.
type countAgg struct{}

// aggAcc is countAgg's accumulator.
type aggAcc struct {
	Sensor string
	N, Sum int64
}

func (countAgg) CreateAccumulator() aggAcc { return aggAcc{} }
func (countAgg) Add(in reading, acc aggAcc) aggAcc {
	return aggAcc{in.Sensor, acc.N + 1, acc.Sum + in.Value}
}
func (countAgg) Merge(a, b aggAcc) aggAcc { return aggAcc{a.Sensor, a.N + b.N, a.Sum + b.Sum} }
func (countAgg) GetResult(acc aggAcc) string {
	return fmt.Sprintf("%s/%d/%d", acc.Sensor, acc.N, acc.Sum)
}

func floorMod(a, b int64) int64 { return ((a % b) + b) % b }

// windowStarts is the oracle's own assignment of windows to a timestamp.
func windowStarts(ts, size, slide, offset int64) (s []int64) {
	for start := ts - floorMod(ts-offset, slide); start > ts-size; start -= slide {
		s = append(s, start)
	}
	return s
}

// listWindow emits a window's records' values, sorted, with its key and
// bounds.
type listWindow struct{}

func (listWindow) Process(key string, w stream.TimeWindow, elements []reading, out stream.Collector[string]) error {
	var vs []string
	for _, e := range elements {
		vs = append(vs, strconv.FormatInt(e.Value, 10))
	}
	slices.Sort(vs)
	out.Collect(fmt.Sprintf("%s@%d-%d:%s", key, w.Start, w.End, strings.Join(vs, "+")))
	return nil
}

// Tumbling and sliding event-time windows with an aggregate, a reduce and
// a process function emit exactly what a batch computation over all the
// records gives — each window once, under an injected failure, in both
// state backends, with timestamps before and after the epoch and an
// offset.
func TestEventTimeWindowsMatchABatchComputation(t *testing.T) {
	const size, slide, offset = 100, 25, 7
	in := readings(20000, 5, -8000, 40, 5)
	key := func(r reading) string { return r.Sensor }
	// The oracle: every window of every record, computed plainly.
	type win struct {
		key   string
		start int64
	}
	tumbling, sliding := map[win][2]int64{}, map[win]int64{}
	lists := map[win][]string{}
	for _, r := range in {
		for _, s := range windowStarts(r.TS, size, size, offset) {
			c := tumbling[win{r.Sensor, s}]
			tumbling[win{r.Sensor, s}] = [2]int64{c[0] + 1, c[1] + r.Value}
			lists[win{r.Sensor, s}] = append(lists[win{r.Sensor, s}], strconv.FormatInt(r.Value, 10))
		}
		for _, s := range windowStarts(r.TS, size, slide, 0) {
			sliding[win{r.Sensor, s}] += r.Value
		}
	}
	var want []string
	for w, c := range tumbling {
		want = append(want, fmt.Sprintf("agg:%s@%d:%d/%d", w.key, w.start, c[0], c[1]))
		vs := lists[w]
		slices.Sort(vs)
		want = append(want, fmt.Sprintf("list:%s@%d-%d:%s", w.key, w.start, w.start+size, strings.Join(vs, "+")))
	}
	for w, sum := range sliding {
		want = append(want, fmt.Sprintf("sum:%s@%d:%d", w.key, w.start, sum))
	}
	slices.Sort(want)

	for _, backend := range []string{"hashmap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			var log testutil.SyncBuffer
			env, err := stream.NewEnvironment(stream.Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Config: testutil.FailingJob(dir, 2, 4000, 1,
				"state.backend.type", backend, "pipeline.auto-watermark-interval", "5 ms")})
			if err != nil {
				t.Fatal(err)
			}
			src := stream.FromSource[reading](env, &connectors.Elements[reading]{Items: in, Rate: 10000}, "readings").UID("source")
			timed := src.AssignTimestampsAndWatermarks(stream.ForBoundedOutOfOrderness[reading](40 * time.Millisecond).
				WithTimestampAssigner(func(r reading, _ int64) int64 { return r.TS }))
			ks := stream.KeyBy(timed, key)
			agg := stream.WindowAggregate(stream.Window(ks, stream.TumblingEventTimeWindows(size*time.Millisecond).WithOffset(offset*time.Millisecond)), countAgg{}).UID("tumbling")
			// The aggregate's result is only the counts: its timestamp
			// (the window's last millisecond) says which window it was.
			tagged := stream.Process(stream.KeyBy(agg, func(r string) string { return r[:strings.IndexByte(r, '/')] }), tagWindow{size: size}).UID("tag")
			sums := stream.Window(stream.KeyBy(stream.Map(timed, func(r reading) reading { return r }), key),
				stream.SlidingEventTimeWindows(size*time.Millisecond, slide*time.Millisecond)).Reduce(func(a, b reading) reading {
				a.Value += b.Value
				return a
			}).UID("sliding")
			sumLines := stream.Process(stream.KeyBy(sums, key), tagSum{size: size}).UID("tag-sum")
			lists := stream.WindowProcess(stream.Window(ks, stream.TumblingEventTimeWindows(size*time.Millisecond).WithOffset(offset*time.Millisecond)), listWindow{}).UID("lists")
			listLines := stream.Map(lists, func(l string) string { return "list:" + l })
			stream.Union(tagged, sumLines, listLines).SinkTo(&connectors.FileSink[string]{Dir: filepath.Join(dir, "out")}).UID("sink")
			if _, err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			testutil.CheckRestores(t, log.String(), 1)
			got := testutil.CommittedLines(t, filepath.Join(dir, "out"))
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%d window results committed, %d computed in batch; they differ:\n got %.12v\nwant %.12v", len(got), len(want), got, want)
			}
		})
	}
}

// tagWindow tags an aggregate's result ("sensor/n/sum") with its window,
// which the result's timestamp (the window's last millisecond) gives.
type tagWindow struct{ size int64 }

func (f tagWindow) ProcessElement(ctx *stream.Context[string], res string, out stream.Collector[string]) error {
	p := strings.Split(res, "/")
	end := ctx.Timestamp() + 1
	out.Collect(fmt.Sprintf("agg:%s@%d:%s/%s", p[0], end-f.size, p[1], p[2]))
	return nil
}

// tagSum tags a sliding window's reduced reading with its window.
type tagSum struct{ size int64 }

func (f tagSum) ProcessElement(ctx *stream.Context[string], r reading, out stream.Collector[string]) error {
	end := ctx.Timestamp() + 1
	out.Collect(fmt.Sprintf("sum:%s@%d:%d", r.Sensor, end-f.size, r.Value))
	return nil
}

// punctuated emits a watermark with every record: the largest timestamp
// seen, less bound, less 1 ms.
type punctuated struct{ max, bound int64 }

func (g *punctuated) OnEvent(_ reading, ts int64, out stream.WatermarkOutput) {
	g.max = max(g.max, ts)
	out.EmitWatermark(g.max - g.bound - 1)
}
func (g *punctuated) OnPeriodicEmit(stream.WatermarkOutput) {}

// countWindow emits a window's key, start and number of records.
type countWindow struct{}

func (countWindow) Process(key string, w stream.TimeWindow, elements []reading, out stream.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s@%d:%d", key, w.Start, len(elements)))
	return nil
}

// With allowed lateness, a late record within it fires its window again
// with all the window's records, and one beyond it goes to the late side
// output — as a
// plain simulation of Flink's window operator over the same records and
// watermarks computes. Punctuated watermarks at parallelism 1 make the
// watermark at each record exact, so the simulation is exact.
func TestEventTimeWindowsAllowedLateness(t *testing.T) {
	const size, bound, lateness = 50, 10, 30
	r := rand.New(rand.NewPCG(8, 8))
	var in []reading
	for i := range 3000 {
		ts := int64(i) - r.Int64N(bound)
		if r.IntN(20) == 0 {
			ts -= bound + r.Int64N(60) // late: within the lateness or beyond it
		}
		in = append(in, reading{TS: ts, Sensor: fmt.Sprint("s", r.IntN(3))})
	}
	// The simulation.
	type win struct {
		key   string
		start int64
	}
	counts := map[win]int{}
	pending := map[win]bool{} // windows whose end has not fired yet
	var want []string
	refires, drops := 0, 0
	wm, maxTS := int64(math.MinInt64), int64(math.MinInt64)
	advance := func(to int64) {
		if to <= wm {
			return
		}
		wm = to
		var due []win
		for w := range pending {
			if w.start+size-1 <= wm {
				due = append(due, w)
			}
		}
		for _, w := range due {
			want = append(want, fmt.Sprintf("%s@%d:%d", w.key, w.start, counts[w]))
			delete(pending, w)
		}
		for w := range counts {
			if w.start+size-1+lateness <= wm && !pending[w] {
				delete(counts, w)
			}
		}
	}
	for _, rd := range in {
		start := rd.TS - floorMod(rd.TS, size)
		w := win{rd.Sensor, start}
		if start+size-1+lateness > wm {
			counts[w]++
			if start+size-1 <= wm {
				want = append(want, fmt.Sprintf("%s@%d:%d", w.key, w.start, counts[w]))
				refires++
			} else {
				pending[w] = true
			}
		} else {
			drops++
			want = append(want, fmt.Sprintf("late:%s@%d", rd.Sensor, rd.TS))
		}
		maxTS = max(maxTS, rd.TS)
		advance(maxTS - bound - 1)
	}
	advance(math.MaxInt64)
	slices.Sort(want)

	out := &testutil.SyncBuffer{}
	env, err := stream.NewEnvironment(stream.Options{Stdout: out, Config: map[string]string{
		"parallelism.default": "1", "pipeline.auto-watermark-interval": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	src := stream.FromSource[reading](env, &connectors.Elements[reading]{Items: in}, "readings").UID("source")
	timed := src.AssignTimestampsAndWatermarks(stream.ForGenerator(func() stream.WatermarkGenerator[reading] {
		return &punctuated{max: math.MinInt64 + bound + 1, bound: bound}
	}).WithTimestampAssigner(func(r reading, _ int64) int64 { return r.TS }))
	lateTag := stream.NewOutputTag[reading]("late")
	w := stream.Window(stream.KeyBy(timed, func(r reading) string { return r.Sensor }), stream.TumblingEventTimeWindows(size*time.Millisecond)).
		AllowedLateness(lateness * time.Millisecond).SideOutputLateData(lateTag)
	windows := stream.WindowProcess(w, countWindow{}).UID("windows")
	late := stream.Map(stream.GetSideOutput(windows, lateTag), func(r reading) string { return fmt.Sprintf("late:%s@%d", r.Sensor, r.TS) })
	stream.Union(windows, late).Print()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(out.String())
	slices.Sort(got)
	if refires == 0 || drops == 0 {
		t.Fatalf("the input has %d late records within the lateness and %d beyond it: it tests nothing", refires, drops)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%d window firings, %d simulated; they differ:\n got %.20v\nwant %.20v", len(got), len(want), got, want)
	}
}

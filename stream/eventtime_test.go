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
	"sync/atomic"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// event is an input record: "<timestamp ms>,<key>".
func event(ts int64, key string) string { return fmt.Sprintf("%d,%s", ts, key) }

func eventTime(e string, _ int64) int64 {
	ts, _ := strconv.ParseInt(e[:strings.IndexByte(e, ',')], 10, 64)
	return ts
}

func eventKey(e string) string { return e[strings.IndexByte(e, ',')+1:] }

// tumblingCount counts a key's records per tumbling event-time window of
// size ms, in map state, and emits "<key>,<window end>,<count>" when the
// watermark passes the window's end (an event-time timer at end-1, as
// Flink's window operator sets). A record behind the watermark is late:
// it is counted under the window end -1, so that the test sees it.
type tumblingCount struct {
	size   int64
	counts stream.MapState[int64, int64]
}

func (f *tumblingCount) Open(ctx *stream.Context[string]) (err error) {
	f.counts, err = stream.GetMapState[int64, int64](ctx, "windows")
	return err
}

func (f *tumblingCount) ProcessElement(ctx *stream.Context[string], e string, out stream.Collector[string]) error {
	// The record's timestamp came with it from the assigner, through the
	// chain and the network (and, after a restore, the checkpoint).
	ts := ctx.Timestamp()
	if want := eventTime(e, 0); ts != want {
		return fmt.Errorf("record %q has timestamp %d, want %d", e, ts, want)
	}
	end := ts - ts%f.size + f.size
	if end-1 <= ctx.TimerService().CurrentWatermark() {
		out.Collect(fmt.Sprintf("%s,-1,%d", ctx.CurrentKey(), ts))
		return nil
	}
	n, _ := f.counts.Get(end)
	f.counts.Put(end, n+1)
	ctx.TimerService().RegisterEventTimeTimer(end - 1)
	return nil
}

func (f *tumblingCount) OnTimer(ctx *stream.Context[string], ts int64, out stream.Collector[string]) error {
	if ctx.Timestamp() != ts {
		return fmt.Errorf("timer at %d has timestamp %d", ts, ctx.Timestamp())
	}
	end := ts + 1
	n, _ := f.counts.Get(end)
	f.counts.Remove(end)
	out.Collect(fmt.Sprintf("%s,%d,%d", ctx.CurrentKey(), end, n))
	return nil
}

// timerStamped checks, a keyed stage after tumblingCount, that a window's
// count carries the time of the timer that emitted it (its end - 1), as
// Flink's window results do, and passes it on.
type timerStamped struct{}

func (timerStamped) ProcessElement(ctx *stream.Context[string], w string, out stream.Collector[string]) error {
	p := strings.Split(w, ",")
	end, _ := strconv.ParseInt(p[1], 10, 64)
	if ctx.Timestamp() != end-1 {
		return fmt.Errorf("window %q has timestamp %d, want %d", w, ctx.Timestamp(), end-1)
	}
	out.Collect(w)
	return nil
}

// windowCounts is the batch oracle: the same counts computed over all the
// records at once.
func windowCounts(events []string, size int64) []string {
	counts := map[string]int64{}
	for _, e := range events {
		ts := eventTime(e, 0)
		counts[fmt.Sprintf("%s,%d", eventKey(e), ts-ts%size+size)]++
	}
	var out []string
	for k, n := range counts {
		out = append(out, fmt.Sprintf("%s,%d", k, n))
	}
	slices.Sort(out)
	return out
}

// outOfOrder makes n records over keys, with timestamps rising 1 ms a
// record and each moved back by up to bound-1 ms: out of order, but
// never by more than bound.
func outOfOrder(n, keys int, bound int64, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]string, n)
	for i := range out {
		ts := int64(i) + 1_000_000 - r.Int64N(bound)
		out[i] = event(ts, fmt.Sprint("k", r.IntN(keys)))
	}
	return out
}

// A window over a live, paced stream fires while the stream runs — as soon
// as the periodic watermark passes its end — not when the input ends.
func TestEventTimeWindowsFireOnALiveStream(t *testing.T) {
	const n = 3000 // 3 s at 1,000 records a second; event time runs 1 ms a record
	events := outOfOrder(n, 3, 20, 1)
	var emitted, atFirstWindow atomic.Int64
	out := &testutil.SyncBuffer{}
	env, err := stream.NewEnvironment(stream.Options{Stdout: out, Config: map[string]string{
		"parallelism.default": "1", "pipeline.auto-watermark-interval": "50 ms"}})
	if err != nil {
		t.Fatal(err)
	}
	src := stream.FromSource[string](env, &connectors.Elements[string]{Items: events, Rate: 1000}, "events").UID("source")
	counted := stream.Map(src, func(e string) string { emitted.Add(1); return e })
	withTime := counted.AssignTimestampsAndWatermarks(stream.ForBoundedOutOfOrderness[string](20 * time.Millisecond).WithTimestampAssigner(eventTime))
	windows := stream.Process(stream.KeyBy(withTime, eventKey), &tumblingCount{size: 100}).UID("windows")
	stream.Map(windows, func(w string) string { atFirstWindow.CompareAndSwap(0, emitted.Load()); return w }).Print()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := atFirstWindow.Load(); got == 0 || got > n/2 {
		t.Fatalf("the first window came out after %d of %d records: event time did not progress while the input ran", got, n)
	}
	got := strings.Fields(out.String())
	slices.Sort(got)
	if want := windowCounts(events, 100); !slices.Equal(got, want) {
		t.Fatalf("windows differ from the batch computation:\n got %v\nwant %v", got, want)
	}
}

// Windows fired by watermarks are exactly once under injected failures, in
// each state backend and with unaligned checkpoints: the committed counts
// equal the batch computation's, though the watermark starts again after
// each restore.
func TestEventTimeWindowsExactlyOnce(t *testing.T) {
	for _, tc := range []struct{ name, backend, unaligned string }{
		{"hashmap aligned", "hashmap", "false"},
		{"rocksdb unaligned", "rocksdb", "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 30000
			events := outOfOrder(n, 7, 50, 2)
			dir := t.TempDir()
			var log testutil.SyncBuffer
			// Each attempt fails after 8,000 records and one checkpoint of
			// its own. The input lasts 2 s, so that a restored attempt
			// still has records to emit after a checkpoint that takes most
			// of a second (unaligned rocksdb checkpoints took 600 ms on a
			// loaded CI machine, and the sources finished before the second
			// failure could come).
			env, err := stream.NewEnvironment(stream.Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Config: testutil.FailingJob(dir, 2, 8000, 2,
				"state.backend.type", tc.backend, "execution.checkpointing.unaligned.enabled", tc.unaligned,
				"pipeline.auto-watermark-interval", "5 ms", "fault-injection.after-checkpoints", "1")})
			if err != nil {
				t.Fatal(err)
			}
			src := stream.FromSource[string](env, &connectors.Elements[string]{Items: events, Rate: 15000}, "events").UID("source")
			withTime := src.AssignTimestampsAndWatermarks(stream.ForBoundedOutOfOrderness[string](50 * time.Millisecond).WithTimestampAssigner(eventTime))
			// A rebalance and a map on the way: timestamps cross a plain
			// exchange and a chain too.
			passed := stream.Map(withTime.Rebalance(), func(e string) string { return e })
			windows := stream.Process(stream.KeyBy(passed, eventKey), &tumblingCount{size: 100}).UID("windows")
			checked := stream.Process(stream.KeyBy(windows, func(w string) string { return w[:strings.IndexByte(w, ',')] }), timerStamped{}).UID("checked")
			checked.SinkTo(&connectors.FileSink[string]{Dir: filepath.Join(dir, "out")}).UID("sink")
			if _, err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			testutil.CheckRestores(t, log.String(), 2)
			got := testutil.CommittedLines(t, filepath.Join(dir, "out"))
			slices.Sort(got)
			if want := windowCounts(events, 100); !slices.Equal(got, want) {
				t.Fatalf("%d windows committed, %d computed in batch; they differ:\n got %.30v\nwant %.30v", len(got), len(want), got, want)
			}
		})
	}
}

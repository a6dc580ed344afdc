package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// order and payment are the inputs of the connect test.
type order struct {
	ID     int
	Amount int
}
type payment struct{ ID int }

// matcher pairs each order with its payment, whichever comes first,
// keeping the one waiting in keyed state.
type matcher struct {
	orders ValueStateOf[int]
	paid   ValueStateOf[bool]
}

// ValueStateOf is a shorthand of the tests.
type ValueStateOf[V any] = stream.ValueState[V]

func (m *matcher) Open(ctx *stream.Context[int]) (err error) {
	if m.orders, err = stream.GetValueState[int](ctx, "order"); err != nil {
		return err
	}
	m.paid, err = stream.GetValueState[bool](ctx, "paid")
	return err
}

func (m *matcher) ProcessElement1(ctx *stream.Context[int], o order, out stream.Collector[string]) error {
	if _, ok := m.paid.Value(); ok {
		m.paid.Clear()
		out.Collect(fmt.Sprintf("paid:%d:%d", o.ID, o.Amount))
		return nil
	}
	m.orders.Update(o.Amount)
	return nil
}

func (m *matcher) ProcessElement2(ctx *stream.Context[int], p payment, out stream.Collector[string]) error {
	if a, ok := m.orders.Value(); ok {
		m.orders.Clear()
		out.Collect(fmt.Sprintf("paid:%d:%d", p.ID, a))
		return nil
	}
	if p.ID%10 == 0 {
		stream.Output(ctx, unknownPayment, p.ID) // a side output
	}
	m.paid.Update(true)
	return nil
}

var unknownPayment = stream.NewOutputTag[int]("payment-first")

// sideCounter counts each side's records, not keyed.
type sideCounter struct{ a, b int }

func (c *sideCounter) ProcessElement1(order, stream.Collector[string]) error {
	c.a++
	return nil
}
func (c *sideCounter) ProcessElement2(payment, stream.Collector[string]) error {
	c.b++
	return nil
}

// A keyed co-process function sees both inputs' records of a key, with
// shared keyed state: every order is matched with its payment exactly
// once under an injected failure, whichever input brings its record
// first; a side output carries what the function emits to it.
func TestKeyedCoProcessMatchesBothInputs(t *testing.T) {
	const n = 6000
	var orders []order
	var payments []payment
	for i := range n {
		orders = append(orders, order{ID: i, Amount: i % 97})
		payments = append(payments, payment{ID: (i*7919 + 13) % n}) // another order
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("paid:%d:%d", i, i%97))
	}
	for _, backend := range []string{"hashmap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			var log testutil.SyncBuffer
			env, err := stream.NewEnvironment(stream.Options{Logger: slog.New(slog.NewTextHandler(&log, nil)),
				Config: testutil.FailingJob(dir, 2, 2000, 1, "state.backend.type", backend)})
			if err != nil {
				t.Fatal(err)
			}
			o := stream.FromSource[order](env, &connectors.Elements[order]{Items: orders, Rate: 6000}, "orders").UID("orders")
			p := stream.FromSource[payment](env, &connectors.Elements[payment]{Items: payments, Rate: 6000}, "payments").UID("payments")
			matched := stream.KeyedCoProcess(stream.KeyConnected(stream.Connect(o, p), func(o order) int { return o.ID }, func(p payment) int { return p.ID }),
				stream.KeyedCoProcessFunction[int, order, payment, string](&matcher{})).UID("match")
			first := stream.Map(stream.GetSideOutput(matched, unknownPayment), func(id int) string { return fmt.Sprint("early:", id) })
			stream.Union(matched, first).SinkTo(&connectors.FileSink[string]{Dir: filepath.Join(dir, "out")}).UID("sink")
			if _, err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			testutil.CheckRestores(t, log.String(), 1)
			got := testutil.CommittedLines(t, filepath.Join(dir, "out"))
			var paid []string
			early := 0
			for _, l := range got {
				if strings.HasPrefix(l, "early:") {
					early++
				} else {
					paid = append(paid, l)
				}
			}
			slices.Sort(paid)
			w := slices.Clone(want)
			slices.Sort(w)
			if !slices.Equal(paid, w) {
				t.Fatalf("%d matches committed, want %d; they differ:\n got %.10v\nwant %.10v", len(paid), len(w), paid, w)
			}
			if early == 0 || early > n/10 {
				t.Fatalf("%d payments came first and went to the side output; want some, at most %d", early, n/10)
			}
		})
	}
	t.Run("not keyed", func(t *testing.T) {
		env, err := stream.NewEnvironment(stream.Options{Config: map[string]string{"parallelism.default": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		c := &sideCounter{}
		o := stream.FromSource[order](env, &connectors.Elements[order]{Items: orders[:100]}, "orders")
		p := stream.FromSource[payment](env, &connectors.Elements[payment]{Items: payments[:30]}, "payments")
		stream.CoProcess(stream.Connect(o, p), stream.CoProcessFunction[order, payment, string](c)).Print()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Each subtask has its own copy: the original saw nothing.
		if c.a != 0 || c.b != 0 {
			t.Fatalf("the function object given to CoProcess counted %d and %d: subtasks must get copies", c.a, c.b)
		}
	})
}

// joinLine renders a joined pair.
func joinLine(a, b reading) string {
	return fmt.Sprintf("%s:%d/%d*%d/%d", a.Sensor, a.TS, a.Value, b.TS, b.Value)
}

// A tumbling window join and an interval join emit exactly the pairs a
// batch nested-loop join of the same records gives, under an injected
// failure, in both backends.
func TestJoinsMatchABatchJoin(t *testing.T) {
	const size, lower, upper, bound = 50, -15, 10, 20
	left := readings(3000, 5, 0, bound, 41)
	right := readings(3000, 5, 0, bound, 42)
	var wantWindow, wantInterval []string
	for _, a := range left {
		for _, b := range right {
			if a.Sensor != b.Sensor {
				continue
			}
			if a.TS-floorMod(a.TS, size) == b.TS-floorMod(b.TS, size) {
				wantWindow = append(wantWindow, "w:"+joinLine(a, b))
			}
			if b.TS >= a.TS+lower && b.TS <= a.TS+upper {
				wantInterval = append(wantInterval, fmt.Sprintf("i@%d:%s", max(a.TS, b.TS), joinLine(a, b)))
			}
		}
	}
	want := append(wantWindow, wantInterval...)
	slices.Sort(want)
	for _, backend := range []string{"hashmap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			var log testutil.SyncBuffer
			env, err := stream.NewEnvironment(stream.Options{Logger: slog.New(slog.NewTextHandler(&log, nil)),
				// One checkpoint before the failure: under the race
				// detector the LSM's checkpoints take seconds, and the
				// input would end before a second one.
				Config: testutil.FailingJob(dir, 2, 1000, 1, "state.backend.type", backend, "pipeline.auto-watermark-interval", "5 ms",
					"fault-injection.after-checkpoints", "1")})
			if err != nil {
				t.Fatal(err)
			}
			strategy := stream.ForBoundedOutOfOrderness[reading](bound * time.Millisecond).
				WithTimestampAssigner(func(r reading, _ int64) int64 { return r.TS })
			l := stream.FromSource[reading](env, &connectors.Elements[reading]{Items: left, Rate: 2000}, "left").UID("left").AssignTimestampsAndWatermarks(strategy)
			r := stream.FromSource[reading](env, &connectors.Elements[reading]{Items: right, Rate: 2000}, "right").UID("right").AssignTimestampsAndWatermarks(strategy)
			sensor := func(r reading) string { return r.Sensor }
			windowed := stream.JoinApply(stream.Join(l, r, sensor, sensor).Window(stream.TumblingEventTimeWindows(size*time.Millisecond)),
				func(a, b reading) string { return "w:" + joinLine(a, b) }).UID("window-join")
			interval := stream.IntervalJoinProcess(stream.IntervalJoin(stream.KeyBy(l, sensor), stream.KeyBy(r, sensor)).Between(lower*time.Millisecond, upper*time.Millisecond),
				func(a, b reading, ctx stream.JoinContext, out stream.Collector[string]) error {
					out.Collect(joinLine(a, b))
					return nil
				}).UID("interval-join")
			// The interval join's results carry the larger timestamp.
			stamped := stream.Process(stream.KeyBy(interval, func(s string) string { return s }), stampLine{}).UID("stamp")
			stream.Union(windowed, stamped).SinkTo(&connectors.FileSink[string]{Dir: filepath.Join(dir, "out")}).UID("sink")
			if _, err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			testutil.CheckRestores(t, log.String(), 1)
			got := testutil.CommittedLines(t, filepath.Join(dir, "out"))
			slices.Sort(got)
			if len(wantWindow) == 0 || len(wantInterval) == 0 || !slices.Equal(got, want) {
				t.Fatalf("%d joined pairs committed, %d (%d window, %d interval) joined in batch; they differ:\n got %.10v\nwant %.10v",
					len(got), len(want), len(wantWindow), len(wantInterval), got, want)
			}
		})
	}
}

// stampLine prefixes a record with its timestamp.
type stampLine struct{}

func (stampLine) ProcessElement(ctx *stream.Context[string], s string, out stream.Collector[string]) error {
	out.Collect(fmt.Sprintf("i@%d:%s", ctx.Timestamp(), s))
	return nil
}

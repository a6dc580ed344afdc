package kafka

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
	"github.com/twmb/franz-go/pkg/kgo"
)

// wmSampler records, every 20 ms of processing time, the watermark its
// keyed operator has — how far event time got — and counts the samples.
type wmSampler struct {
	wm, samples *atomic.Int64
	armed       stream.ValueState[bool]
}

func (s *wmSampler) Open(ctx *stream.Context[int]) (err error) {
	s.armed, err = stream.GetValueState[bool](ctx, "armed")
	return err
}

func (s *wmSampler) ProcessElement(ctx *stream.Context[int], _ string, _ stream.Collector[string]) error {
	if ok, _ := s.armed.Value(); !ok {
		s.armed.Update(true)
		ctx.TimerService().RegisterProcessingTimeTimer(ctx.TimerService().CurrentProcessingTime() + 20)
	}
	return nil
}

func (s *wmSampler) OnTimer(ctx *stream.Context[int], ts int64, _ stream.Collector[string]) error {
	s.wm.Store(ctx.TimerService().CurrentWatermark())
	s.samples.Add(1)
	ctx.TimerService().RegisterProcessingTimeTimer(ts + 20)
	return nil
}

// With a watermark strategy on the Kafka source, each partition has its
// own generator and event time is their minimum: a partition without
// records stalls the windows — as in Flink — unless the strategy has
// WithIdleness, which lets the active partition's watermark through.
// The records carry their Kafka timestamps, which are their event time.
func TestIdlePartitionStallsWindowsUnlessIdleness(t *testing.T) {
	brokers := cluster(t, 2, "events")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Partition 0 gets a record every 2 ms, 10 ms of event time apart,
	// while the test runs, so it stays active; partition 1 gets none.
	prodCtx, stopProducing := context.WithCancel(context.Background())
	produced := make(chan error, 1)
	go func() {
		for i := int64(0); ; i++ {
			r := &kgo.Record{Topic: "events", Partition: 0, Value: []byte(fmt.Sprint("e", i)), Timestamp: time.UnixMilli(i * 10)}
			if err := cl.ProduceSync(prodCtx, r).FirstErr(); err != nil {
				produced <- prodCtx.Err()
				return
			}
			select {
			case <-prodCtx.Done():
				produced <- nil
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	defer func() {
		stopProducing()
		if err := <-produced; err != nil && err != context.Canceled {
			t.Errorf("producing: %v", err)
		}
	}()
	const n = 300
	type run struct {
		out           *testutil.SyncBuffer
		read, samples atomic.Int64
		wm            atomic.Int64
		done          chan error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(group string, idleness time.Duration) *run {
		r := &run{out: &testutil.SyncBuffer{}, done: make(chan error, 1)}
		env, err := stream.NewEnvironment(stream.Options{Stdout: r.out, Config: map[string]string{"parallelism.default": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		src, err := ParseSourceURI("kafka://"+strings.Join(brokers, ",")+"/events?group="+group, Params{})
		if err != nil {
			t.Fatal(err)
		}
		strategy := stream.ForBoundedOutOfOrderness[string](0)
		if idleness > 0 {
			strategy = strategy.WithIdleness(idleness)
		}
		events := stream.Map(stream.FromSourceWithWatermarks[string](env, src, strategy, "events"), func(e string) string {
			r.read.Add(1)
			return e
		})
		w := stream.Window(stream.KeyBy(events, func(string) int { return 0 }), stream.TumblingEventTimeWindows(time.Second))
		stream.WindowProcess(w, stream.ProcessWindowFunc[string, int, string](func(_ int, win stream.TimeWindow, es []string, out stream.Collector[string]) error {
			out.Collect(fmt.Sprintf("%d:%d", win.Start, len(es)))
			return nil
		})).Print()
		r.wm.Store(math.MinInt64)
		stream.Process(stream.KeyBy(events, func(string) int { return 0 }), &wmSampler{wm: &r.wm, samples: &r.samples}).Print()
		go func() {
			_, err := env.Execute(ctx)
			r.done <- err
		}()
		return r
	}
	idle := start("with-idleness", 200*time.Millisecond)
	stalled := start("without", 0)
	deadline := testutil.Deadline(30 * time.Second)
	var after int64 = -1
	for {
		if time.Now().After(deadline) {
			t.Fatalf("within 30 s: with idleness %q (%d records read, watermark %d), without: %d records read, %d samples",
				idle.out.String(), idle.read.Load(), idle.wm.Load(), stalled.read.Load(), stalled.samples.Load())
		}
		if after < 0 && stalled.read.Load() >= n {
			after = stalled.samples.Load()
		}
		// Windows 0 and 1000 closed with idleness; without, the job has
		// read 300 records (3 s of event time) and sampled its watermark
		// 10 times since.
		if strings.Count(idle.out.String(), "\n") >= 2 && after >= 0 && stalled.samples.Load() >= after+10 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := idle.out.String(); !strings.Contains(got, "0:100\n") || !strings.Contains(got, "1000:100\n") {
		t.Errorf("with idleness, windows printed %q; want 0:100 and 1000:100", got)
	}
	if got, wm := stalled.out.String(), stalled.wm.Load(); got != "" || wm != math.MinInt64 {
		t.Errorf("without idleness, the empty partition should hold event time back: windows %q, watermark %d", got, wm)
	}
	cancel()
	for _, r := range []*run{idle, stalled} {
		if err := <-r.done; err != nil && !strings.Contains(err.Error(), "cancel") {
			t.Errorf("job: %v", err)
		}
	}
}

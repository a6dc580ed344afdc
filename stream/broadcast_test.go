package stream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// rule is a threshold in force from its time on: the broadcast input of
// the broadcast state test.
type rule struct {
	TS        int64
	Threshold int64
}

var rulesState = stream.NewMapStateDescriptor[int64, int64]("rules")

// ruleChecker flags each reading at or above the threshold in force at its
// time. The rules come on a broadcast input; a reading waits in keyed state
// until event time passes it, when every rule up to its time has come (the
// watermark is the minimum over both inputs).
type ruleChecker struct {
	pending stream.ListState[reading]
}

func (c *ruleChecker) Open(ctx *stream.Context[string]) (err error) {
	c.pending, err = stream.GetListState[reading](ctx, "pending")
	return err
}

func (c *ruleChecker) ProcessElement(ctx *stream.ReadOnlyContext[string], r reading, out stream.Collector[string]) error {
	c.pending.Add(r)
	ctx.TimerService().RegisterEventTimeTimer(r.TS)
	return nil
}

func (c *ruleChecker) ProcessBroadcastElement(ctx *stream.BroadcastContext[string], r rule, out stream.Collector[string]) error {
	rules, err := stream.GetBroadcastState(ctx, rulesState)
	if err != nil {
		return err
	}
	rules.Put(r.TS, r.Threshold)
	return nil
}

func (c *ruleChecker) OnTimer(ctx *stream.ReadOnlyContext[string], ts int64, out stream.Collector[string]) error {
	rules, err := stream.GetReadOnlyBroadcastState(ctx, rulesState)
	if err != nil {
		return err
	}
	var keep []reading
	for _, r := range c.pending.Get() {
		if r.TS > ts {
			keep = append(keep, r)
			continue
		}
		out.Collect(flagLine(r, inForce(rules.All(), r.TS)))
	}
	c.pending.Update(keep)
	return nil
}

// inForce is the threshold of the latest rule at or before ts (-1: none).
func inForce(rules func(func(int64, int64) bool), ts int64) int64 {
	at, th := int64(-1), int64(-1)
	for t, v := range rules {
		if t <= ts && t > at {
			at, th = t, v
		}
	}
	return th
}

func flagLine(r reading, threshold int64) string {
	return fmt.Sprintf("%s@%d:%d/%d:%v", r.Sensor, r.TS, r.Value, threshold, threshold >= 0 && r.Value >= threshold)
}

// A keyed stream connected to a broadcast stream of rules: every subtask
// keeps the rules in broadcast state and applies the one in force at each
// reading's time. Cancelled after some checkpoints and restored at another
// parallelism, in every backend and checkpoint mode, the flags equal a
// batch computation's: the rules that came before the checkpoint are not
// sent again, so they must come back from the broadcast state restored on
// every new subtask (and, unaligned, from the records in flight).
func TestKeyedBroadcastStateRescaled(t *testing.T) {
	const bound = 30
	in := readings(6000, 5, 0, bound, 51)
	rnd := rand.New(rand.NewPCG(51, 1))
	var rules []rule
	for ts := int64(0); ts < 6000; ts += 250 {
		rules = append(rules, rule{TS: ts + rnd.Int64N(50), Threshold: rnd.Int64N(80)})
	}
	var want []string
	for _, r := range in {
		th := inForce(func(yield func(int64, int64) bool) {
			for _, x := range rules {
				if !yield(x.TS, x.Threshold) {
					return
				}
			}
		}, r.TS)
		want = append(want, flagLine(r, th))
	}
	slices.Sort(want)
	configs := []struct {
		backend, mode string
		p1, p2        int
	}{{"changelog", "unaligned", 1, 2}, {"hashmap", "aligned", 2, 3}, {"rocksdb", "unaligned", 3, 1}}
	if testutil.RaceEnabled() {
		configs = configs[:1] // the race detector makes each run ~10× slower
	}
	for _, cfg := range configs {
		t.Run(fmt.Sprintf("%s/%s/p%d->p%d", cfg.backend, cfg.mode, cfg.p1, cfg.p2), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			build := func(env *stream.Environment, rate float64) {
				timed := stream.FromSource[reading](env, heldElements(in, rate), "readings").UID("readings").
					AssignTimestampsAndWatermarks(stream.ForBoundedOutOfOrderness[reading](bound * time.Millisecond).
						WithTimestampAssigner(func(x reading, _ int64) int64 { return x.TS })).UID("timestamps")
				// 1 ms of event time per reading: the rules keep pace.
				ruleRate := rate / 250
				ruleStream := stream.FromSource[rule](env, heldElements(rules, ruleRate), "rules").UID("rules").
					AssignTimestampsAndWatermarks(stream.ForMonotonousTimestamps[rule]().
						WithTimestampAssigner(func(x rule, _ int64) int64 { return x.TS })).UID("rule-timestamps")
				keyed := stream.KeyBy(timed, func(x reading) string { return x.Sensor })
				stream.KeyedBroadcastProcess(stream.ConnectBroadcast(keyed, stream.Broadcast(ruleStream, rulesState)),
					stream.KeyedBroadcastProcessFunction[string, reading, rule, string](&ruleChecker{})).UID("check").
					SinkTo(&connectors.FileSink[string]{Dir: out}).UID("sink")
			}
			got := cancelThenRestore(t, dir, cfg.backend, cfg.mode, cfg.p1, cfg.p2, 3000, len(want), out, build)
			if !slices.Equal(got, want) {
				t.Fatalf("%d flags committed, %d computed in batch; they differ:\n got %v\nwant %v", len(got), len(want), diffSample(got, want), len(want))
			}
		})
	}
}

// diffSample lists up to 6 lines of got that want lacks.
func diffSample(got, want []string) []string {
	var out []string
	for _, g := range got {
		if _, ok := slices.BinarySearch(want, g); !ok && len(out) < 6 {
			out = append(out, g)
		}
	}
	return out
}

// A broadcast state that the stream was not broadcast with is an error
// naming it, not a panic.
func TestBroadcastStateUndeclared(t *testing.T) {
	env, err := stream.NewEnvironment(stream.Options{Config: map[string]string{"parallelism.default": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	readingsIn := stream.FromSource[reading](env, &connectors.Elements[reading]{Items: readings(10, 2, 0, 1, 1)}, "readings")
	ruleStream := stream.FromSource[rule](env, &connectors.Elements[rule]{Items: []rule{{TS: 0, Threshold: 1}}}, "rules")
	keyed := stream.KeyBy(readingsIn, func(x reading) string { return x.Sensor })
	// Broadcast with no descriptor: ProcessBroadcastElement asks for "rules".
	stream.KeyedBroadcastProcess(stream.ConnectBroadcast(keyed, stream.Broadcast(ruleStream)),
		stream.KeyedBroadcastProcessFunction[string, reading, rule, string](&ruleChecker{})).Print()
	_, err = env.Execute(context.Background())
	if err == nil || !strings.Contains(err.Error(), `broadcast state "rules": the stream was not broadcast with this descriptor`) {
		t.Fatalf("Execute = %v, want the undeclared broadcast state named", err)
	}
}

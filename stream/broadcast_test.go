package stream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
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

// ruleJoiner flags each reading with the threshold of its rule (one per
// 250 ms of event time), which comes on a broadcast input: a reading whose
// rule has not come yet waits in operator state, and goes out when the
// rule does. What it emits does not depend on how the two inputs
// interleave.
type ruleJoiner struct {
	pending stream.ListState[reading]
}

func ruleID(r reading) int64 { return max(r.TS, 0) / 250 }

func (j *ruleJoiner) Open(rc *stream.RuntimeContext) (err error) {
	j.pending, err = stream.GetOperatorListState[reading](rc, "pending")
	return err
}

func (j *ruleJoiner) ProcessElement(ctx *stream.BroadcastProcessReadOnlyContext, r reading, out stream.Collector[string]) error {
	rules, err := stream.GetReadOnlyBroadcastState(ctx, rulesState)
	if err != nil {
		return err
	}
	if th, ok := rules.Get(ruleID(r)); ok {
		out.Collect(flagLine(r, th))
	} else {
		j.pending.Add(r)
	}
	return nil
}

func (j *ruleJoiner) ProcessBroadcastElement(ctx *stream.BroadcastProcessContext, x rule, out stream.Collector[string]) error {
	rules, err := stream.GetBroadcastState(ctx, rulesState)
	if err != nil {
		return err
	}
	rules.Put(x.TS, x.Threshold) // TS is the rule's id here
	var keep []reading
	for _, r := range j.pending.Get() {
		if ruleID(r) == x.TS {
			out.Collect(flagLine(r, x.Threshold))
		} else {
			keep = append(keep, r)
		}
	}
	j.pending.Update(keep)
	return nil
}

// A stream that is not keyed connected to a broadcast stream of rules
// (BroadcastProcess): cancelled after some checkpoints and restored at
// another parallelism, the flags equal a batch computation's. The rules
// that came before the checkpoint are not sent again, so they must come
// back from the broadcast state restored on every new subtask, and the
// readings waiting for later rules from the operator state.
func TestBroadcastProcessRescaled(t *testing.T) {
	in := readings(6000, 5, 0, 30, 52)
	rnd := rand.New(rand.NewPCG(52, 1))
	var rules []rule
	thresholds := map[int64]int64{}
	for id := int64(0); id <= 6000/250; id++ {
		rules = append(rules, rule{TS: id, Threshold: rnd.Int64N(80)})
		thresholds[id] = rules[len(rules)-1].Threshold
	}
	var want []string
	for _, r := range in {
		want = append(want, flagLine(r, thresholds[ruleID(r)]))
	}
	slices.Sort(want)
	configs := []struct {
		mode   string
		p1, p2 int
	}{{"aligned", 2, 3}, {"unaligned", 3, 1}}
	if testutil.RaceEnabled() {
		configs = configs[:1]
	}
	for _, cfg := range configs {
		t.Run(fmt.Sprintf("%s/p%d->p%d", cfg.mode, cfg.p1, cfg.p2), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			build := func(env *stream.Environment, rate float64) {
				readingsIn := stream.FromSource[reading](env, heldElements(in, rate), "readings").UID("readings")
				ruleStream := stream.FromSource[rule](env, heldElements(rules, rate/250), "rules").UID("rules")
				stream.BroadcastProcess(readingsIn, stream.Broadcast(ruleStream, rulesState),
					stream.BroadcastProcessFunction[reading, rule, string](&ruleJoiner{})).UID("join").
					SinkTo(&connectors.FileSink[string]{Dir: out}).UID("sink")
			}
			got := cancelThenRestore(t, dir, "hashmap", cfg.mode, cfg.p1, cfg.p2, 3000, len(want), out, build)
			if !slices.Equal(got, want) {
				t.Fatalf("%d flags committed, %d computed in batch; they differ:\n got %v\nwant %v", len(got), len(want), diffSample(got, want), len(want))
			}
		})
	}
}

// counterPurger counts readings per sensor in keyed state; a broadcast
// command makes every subtask report each of its keys' counts and clear
// them, through ApplyToKeyedState.
type counterPurger struct {
	count            stream.ValueState[int64]
	processed, early *atomic.Int64
}

func (c *counterPurger) Open(ctx *stream.Context[string]) (err error) {
	c.count, err = stream.GetValueState[int64](ctx, "count")
	return err
}

func (c *counterPurger) ProcessElement(ctx *stream.ReadOnlyContext[string], r reading, out stream.Collector[string]) error {
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	c.processed.Add(1)
	return nil
}

func (c *counterPurger) ProcessBroadcastElement(ctx *stream.BroadcastContext[string], cmd string, out stream.Collector[string]) error {
	if cmd == "early" {
		// Before any keyed record: no key is current, and there are none
		// to visit.
		defer c.early.Add(1)
		return ctx.ApplyToKeyedState("count", func(key string) error { return fmt.Errorf("early: key %q has state", key) })
	}
	return ctx.ApplyToKeyedState("count", func(key string) error {
		n, _ := c.count.Value()
		out.Collect(fmt.Sprintf("%s:%s=%d", cmd, key, n))
		c.count.Clear()
		return nil
	})
}

// gatedSource emits its items once open() says so.
type gatedSource[T any] struct {
	*connectors.Elements[T]
	open func() bool
}

func (s gatedSource[T]) CreateReader(ctx stream.SourceContext) (stream.SourceReader[T], error) {
	r, err := s.Elements.CreateReader(ctx)
	return &gatedReader[T]{SourceReader: r, open: s.open}, err
}

type gatedReader[T any] struct {
	stream.SourceReader[T]
	open func() bool
}

func (r *gatedReader[T]) PollNext(out stream.Collector[T]) (stream.InputStatus, error) {
	if !r.open() {
		return stream.NothingAvailable, nil
	}
	return r.SourceReader.PollNext(out)
}

// ApplyToKeyedState visits every key with state on every subtask, in every
// backend: a broadcast command before any reading finds no key (and no
// current key to fail on); once all readings are counted, two broadcast
// "report"s (from two source subtasks, in either order) list each
// sensor's count exactly once across the subtasks, as a batch count of the
// input says: the first clears what it reports, so that the second finds
// no key.
func TestApplyToKeyedState(t *testing.T) {
	in := readings(3000, 40, 0, 1, 53)
	want := map[string]int64{}
	for _, r := range in {
		want[r.Sensor]++
	}
	var wantLines []string
	for k, n := range want {
		wantLines = append(wantLines, fmt.Sprintf("report:%s=%d", k, n))
	}
	slices.Sort(wantLines)
	for _, backend := range []string{"hashmap", "rocksdb", "changelog"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			conf := rescaleConf(dir, backend, "aligned", 2)
			conf["restart-strategy.type"] = "none" // a failure is the test's
			env, err := stream.NewEnvironment(stream.Options{Config: conf})
			if err != nil {
				t.Fatal(err)
			}
			var processed, early atomic.Int64
			readingsIn := stream.FromSource[reading](env, gatedSource[reading]{&connectors.Elements[reading]{Items: in},
				func() bool { return early.Load() == 2 }}, "readings") // after both subtasks had "early"
			first := stream.FromSource[string](env, &connectors.Elements[string]{Items: []string{"early"}}, "early")
			reports := stream.FromSource[string](env, gatedSource[string]{&connectors.Elements[string]{Items: []string{"report", "report"}},
				func() bool { return processed.Load() == int64(len(in)) }}, "reports")
			keyed := stream.KeyBy(readingsIn, func(x reading) string { return x.Sensor })
			stream.KeyedBroadcastProcess(stream.ConnectBroadcast(keyed, stream.Broadcast(stream.Union(first, reports))),
				stream.KeyedBroadcastProcessFunction[string, reading, string, string](&counterPurger{processed: &processed, early: &early})).
				SinkTo(&connectors.FileSink[string]{Dir: out})
			if _, err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := testutil.CommittedLines(t, out)
			slices.Sort(got)
			if !slices.Equal(got, wantLines) {
				t.Fatalf("%d lines, want %d:\n got %.300v\nwant %.300v", len(got), len(wantLines), got, wantLines)
			}
		})
	}
}

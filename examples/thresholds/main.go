// Command thresholds is gflink with a broadcast-state job: sensor readings
// ("epochMillis,sensor,value" lines) checked against limits that change over
// time ("epochMillis,sensor,limit" lines of a second file). The limits are
// broadcast to every subtask of the keyed checker, which keeps them in
// broadcast state. A reading is checked against the limit in force at its
// own time: it waits in keyed state until event time passes it — the
// watermark is the minimum over both inputs, so by then every limit up to
// that time has come.
//
//	go run ./examples/thresholds run thresholds readings.txt limits.txt
package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/cli"
	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/stream"
)

func main() { cli.Main(Thresholds()) }

// Line is a parsed input line: a reading's value or a limit.
type Line struct {
	TS     int64
	Sensor string
	N      int64
}

// Parse turns "epochMillis,sensor,n" into a Line and drops lines that are
// not one.
func Parse(line string, out stream.Collector[Line]) {
	f := strings.Split(line, ",")
	if len(f) != 3 {
		return
	}
	ts, err1 := strconv.ParseInt(f[0], 10, 64)
	n, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 == nil && err2 == nil {
		out.Collect(Line{TS: ts, Sensor: f[1], N: n})
	}
}

// Limit is a sensor's limit from a time on.
type Limit struct{ From, Max int64 }

// limits is the broadcast state: each sensor's limits, by time.
var limits = stream.NewMapStateDescriptor[string, []Limit]("limits")

// Checker flags the readings above their sensor's limit.
type Checker struct {
	pending stream.ListState[Line]
}

func (c *Checker) Open(ctx *stream.Context[string]) (err error) {
	c.pending, err = stream.GetListState[Line](ctx, "pending")
	return err
}

func (c *Checker) ProcessElement(ctx *stream.ReadOnlyContext[string], r Line, out stream.Collector[string]) error {
	c.pending.Add(r)
	ctx.TimerService().RegisterEventTimeTimer(r.TS)
	return nil
}

// ProcessBroadcastElement adds a limit; every subtask does the same.
func (c *Checker) ProcessBroadcastElement(ctx *stream.BroadcastContext[string], l Line, out stream.Collector[string]) error {
	state, err := stream.GetBroadcastState(ctx, limits)
	if err != nil {
		return err
	}
	cur, _ := state.Get(l.Sensor)
	next := append(slices.Clone(cur), Limit{From: l.TS, Max: l.N})
	slices.SortStableFunc(next, func(a, b Limit) int { return int(a.From - b.From) })
	state.Put(l.Sensor, next)
	return nil
}

// OnTimer checks the readings event time has passed.
func (c *Checker) OnTimer(ctx *stream.ReadOnlyContext[string], ts int64, out stream.Collector[string]) error {
	state, err := stream.GetReadOnlyBroadcastState(ctx, limits)
	if err != nil {
		return err
	}
	all, _ := state.Get(ctx.CurrentKey())
	var keep []Line
	for _, r := range c.pending.Get() {
		if r.TS > ts {
			keep = append(keep, r)
			continue
		}
		if max, ok := InForce(all, r.TS); ok && r.N > max {
			out.Collect(fmt.Sprintf("ALERT %d %s %d > %d", r.TS, r.Sensor, r.N, max))
		}
	}
	c.pending.Update(keep)
	return nil
}

// InForce is the limit in force at ts: the latest from ts or before.
func InForce(ls []Limit, ts int64) (int64, bool) {
	max, ok := int64(0), false
	for _, l := range ls {
		if l.From <= ts {
			max, ok = l.Max, true
		}
	}
	return max, ok
}

func Thresholds() stream.Job {
	return stream.Job{Name: "thresholds", Build: func(env *stream.Environment, args []string) error {
		if len(args) != 2 {
			return &stream.UsageError{Msg: "usage: thresholds <readings file> <limits file>"}
		}
		timed := func(path, name string) stream.DataStream[Line] {
			lines := stream.FromSource[string](env, &connectors.TextFileSource{Paths: []string{path}}, name).UID(name)
			return stream.FlatMap(lines, Parse).AssignTimestampsAndWatermarks(
				stream.ForBoundedOutOfOrderness[Line](5 * time.Second).
					WithTimestampAssigner(func(l Line, _ int64) int64 { return l.TS }))
		}
		readings := stream.KeyBy(timed(args[0], "readings"), func(l Line) string { return l.Sensor })
		rules := stream.Broadcast(timed(args[1], "limits"), limits)
		stream.KeyedBroadcastProcess(stream.ConnectBroadcast(readings, rules),
			stream.KeyedBroadcastProcessFunction[string, Line, Line, string](&Checker{})).UID("checker").Print()
		return nil
	}}
}

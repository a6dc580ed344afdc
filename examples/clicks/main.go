// Command clicks is gflink with an event-time job: clicks per user per
// minute, from "epochMillis,user" lines that arrive up to 5 s out of
// order; clicks later than that go to a side output.
//
//	go run ./examples/clicks run clicks clicks.txt
package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/cli"
	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/stream"
)

func main() { cli.Main(Clicks()) }

// Click is a line "epochMillis,user".
type Click struct {
	TS   int64
	User string
}

// Parse turns a line into a Click and drops lines that are not one.
func Parse(line string, out stream.Collector[Click]) {
	ts, user, ok := strings.Cut(line, ",")
	if n, err := strconv.ParseInt(ts, 10, 64); ok && err == nil {
		out.Collect(Click{TS: n, User: user})
	}
}

// Count counts a window's clicks, keeping only the number.
type Count struct{}

func (Count) CreateAccumulator() int64   { return 0 }
func (Count) Add(_ Click, n int64) int64 { return n + 1 }
func (Count) GetResult(n int64) int64    { return n }
func (Count) Merge(a, b int64) int64     { return a + b }

// PerMinute renders a window's count with its user and start.
func PerMinute(user string, w stream.TimeWindow, n []int64, out stream.Collector[string]) error {
	out.Collect(fmt.Sprintf("%s %s %d", time.UnixMilli(w.Start).UTC().Format("15:04"), user, n[0]))
	return nil
}

var late = stream.NewOutputTag[Click]("late")

func Clicks() stream.Job {
	return stream.Job{Name: "clicks", Build: func(env *stream.Environment, args []string) error {
		if len(args) == 0 {
			return &stream.UsageError{Msg: "usage: clicks <file>..."}
		}
		lines := stream.FromSource[string](env, &connectors.TextFileSource{Paths: args}, "clicks").UID("source")
		clicks := stream.FlatMap(lines, Parse).AssignTimestampsAndWatermarks(
			stream.ForBoundedOutOfOrderness[Click](5 * time.Second).
				WithTimestampAssigner(func(c Click, _ int64) int64 { return c.TS }))
		w := stream.Window(stream.KeyBy(clicks, func(c Click) string { return c.User }),
			stream.TumblingEventTimeWindows(time.Minute)).SideOutputLateData(late)
		counts := stream.WindowAggregateProcess(w, Count{}, stream.ProcessWindowFunc[int64, string, string](PerMinute)).
			UID("per-minute")
		counts.Print()
		stream.Map(stream.GetSideOutput(counts, late), func(c Click) string { return "late " + c.User }).Print()
		return nil
	}}
}

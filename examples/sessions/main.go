// Command sessions is gflink with a job that finds sessions of activity per
// user: a keyed function with state and event-time timers. A session is a
// run of a user's clicks with no gap longer than --gap between two of them;
// it ends when the user has been quiet for --gap, which an event-time timer
// notices.
//
//	go build -o gflink-sessions ./examples/sessions
//	./gflink-sessions run sessions                    # the built-in sample
//	./gflink-sessions run -p 2 sessions --input clicks.txt --gap 30000
//
// An input line is "<user> <timestamp in ms>"; a user's clicks come in time
// order. Output: (user,start,end,clicks) per session.
package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gflink/gflink/cli"
	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/stream"
)

func main() { cli.Main(Job()) }

// Click is one input record.
type Click struct {
	User string
	TS   int64 // milliseconds
}

// Session is one output record.
type Session struct {
	User       string
	Start, End int64
	Clicks     int64
}

func (s Session) String() string {
	return fmt.Sprintf("(%s,%d,%d,%d)", s.User, s.Start, s.End, s.Clicks)
}

// Sample is the input when no --input is given.
var Sample = []string{
	"ann 1000", "bob 1500", "ann 2000", "ann 40000", "bob 90000", "ann 41000", "bob 95000", "cid 5",
}

// ParseClick turns "<user> <ms>" into a Click; it fails the job on a line
// that is not one, naming the line (a job that should skip bad lines would
// return nil instead).
func ParseClick(line string) (Click, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return Click{}, fmt.Errorf("line %q: want \"<user> <timestamp in ms>\"", line)
	}
	ts, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Click{}, fmt.Errorf("line %q: the timestamp: %w", line, err)
	}
	return Click{User: f[0], TS: ts}, nil
}

// Sessionizer keeps the open session of each user in keyed state, and an
// event-time timer at its last click + Gap. The timer closes the session
// when event time passes it (at the latest when the input ends); a click
// after a longer gap closes it first.
type Sessionizer struct {
	Gap    int64
	start  stream.ValueState[int64]
	last   stream.ValueState[int64]
	clicks stream.ValueState[int64]
}

// Open declares the state.
func (s *Sessionizer) Open(ctx *stream.Context[string]) (err error) {
	if s.start, err = stream.GetValueState[int64](ctx, "start"); err != nil {
		return err
	}
	if s.last, err = stream.GetValueState[int64](ctx, "last"); err != nil {
		return err
	}
	s.clicks, err = stream.GetValueState[int64](ctx, "clicks")
	return err
}

// ProcessElement extends the user's session or starts a new one.
func (s *Sessionizer) ProcessElement(ctx *stream.Context[string], c Click, out stream.Collector[Session]) error {
	timers := ctx.TimerService()
	last, open := s.last.Value()
	if open && c.TS > last+s.Gap {
		s.emit(ctx.CurrentKey(), out)
		timers.DeleteEventTimeTimer(last + s.Gap)
		open = false
	}
	if !open {
		s.start.Update(c.TS)
		s.clicks.Update(0)
	} else {
		timers.DeleteEventTimeTimer(last + s.Gap)
	}
	n, _ := s.clicks.Value()
	s.clicks.Update(n + 1)
	if !open || c.TS > last {
		last = c.TS
	}
	s.last.Update(last)
	timers.RegisterEventTimeTimer(last + s.Gap)
	return nil
}

// OnTimer closes the session whose quiet time has passed.
func (s *Sessionizer) OnTimer(ctx *stream.Context[string], ts int64, out stream.Collector[Session]) error {
	if last, ok := s.last.Value(); ok && last+s.Gap == ts {
		s.emit(ctx.CurrentKey(), out)
	}
	return nil
}

func (s *Sessionizer) emit(user string, out stream.Collector[Session]) {
	start, _ := s.start.Value()
	last, _ := s.last.Value()
	n, _ := s.clicks.Value()
	out.Collect(Session{User: user, Start: start, End: last, Clicks: n})
	s.start.Clear()
	s.last.Clear()
	s.clicks.Clear()
}

type paths []string

func (p *paths) String() string     { return strings.Join(*p, ",") }
func (p *paths) Set(v string) error { *p = append(*p, v); return nil }

type args struct {
	inputs paths
	output string
	gap    int64
	rate   float64
}

func flags(a *args) *flag.FlagSet {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&a.inputs, "input", "a text file of \"<user> <timestamp in ms>\" lines (repeatable); the built-in sample if none")
	fs.StringVar(&a.output, "output", "", "a directory for the sessions, committed at checkpoints (exactly once); stdout if not set")
	fs.Int64Var(&a.gap, "gap", 30_000, "the longest quiet time within a session, in milliseconds")
	fs.Float64Var(&a.rate, "rate", 0, "read at most this many lines per second (0: as fast as possible), to watch a job run")
	return fs
}

// Job is the sessions job.
func Job() stream.Job {
	return stream.Job{
		Name:        "sessions",
		DisplayName: "Sessions",
		Description: "Finds sessions of activity per user in \"<user> <timestamp in ms>\" lines.",
		Usage: func(w io.Writer) {
			fmt.Fprintln(w, "Usage: gflink run [OPTIONS] sessions [--input <file>]... [--output <dir>] [--gap <ms>] [--rate <lines/s>]")
			fs := flags(&args{})
			fs.SetOutput(w)
			fs.PrintDefaults()
		},
		Build: build,
	}
}

func build(env *stream.Environment, argv []string) error {
	var a args
	fs := flags(&a)
	if err := fs.Parse(argv); err != nil {
		return &stream.UsageError{Msg: "sessions: " + err.Error(), Help: err == flag.ErrHelp}
	}
	if fs.NArg() > 0 {
		return &stream.UsageError{Msg: fmt.Sprintf("sessions: unexpected argument %q", fs.Arg(0))}
	}
	if a.gap <= 0 {
		return &stream.UsageError{Msg: fmt.Sprintf("sessions: --gap must be a positive number of milliseconds, got %d", a.gap)}
	}
	env.SetJobName("Sessions")
	var lines stream.DataStream[string]
	if len(a.inputs) > 0 {
		if err := connectors.CheckInputFiles(a.inputs); err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		lines = stream.FromSource[string](env, &connectors.TextFileSource{Paths: a.inputs, Rate: a.rate}, "clicks").UID("source")
	} else {
		lines = stream.FromSource[string](env, &connectors.Elements[string]{Items: Sample, Rate: a.rate}, "sample-clicks").UID("source")
	}
	clicks := stream.MapErr(lines, ParseClick).Name("parse")
	sessions := stream.Process(stream.KeyBy(clicks, func(c Click) string { return c.User }), &Sessionizer{Gap: a.gap}).
		Name("sessionize").UID("sessions")
	if a.output != "" {
		sessions.SinkTo(&connectors.FileSink[Session]{Dir: a.output}).Name("file-sink").UID("sink")
	} else {
		sessions.Print().UID("sink")
	}
	return nil
}

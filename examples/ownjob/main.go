// Command ownjob is gflink with one more job compiled in: totals, which
// keeps a running total per key. It is built the way you build gflink with
// your own jobs: a module of your own that requires github.com/gflink/gflink
// (with a replace directive, as the module is not published) and a main that
// hands gflink's command line your jobs (cli.Main).
//
//	go build -o gflink .
//	./gflink run totals                              # the built-in sample input
//	./gflink run -p 2 totals --input amounts.txt --output /tmp/totals
//
// Every gflink command works on the resulting binary: run -d, savepoint,
// stop, run -s, list, and the built-in wordcount job as well.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gflink/gflink/cli"
	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/stream"
)

func main() { cli.Main(Totals()) }

// Amount is one input record: "<key> <amount>" parsed.
type Amount struct {
	Key   string
	Value int64
}

// Total is one output record: a key's running total. The print and file
// sinks write it with String.
type Total struct {
	Key   string
	Total int64
}

func (t Total) String() string { return "(" + t.Key + "," + strconv.FormatInt(t.Total, 10) + ")" }

// Sample is the input when no --input is given.
var Sample = []string{"alice 3", "bob 5", "alice 4", "carol 1", "bob -2", "not a record"}

// Parse turns a line "<key> <amount>" into an Amount and drops other lines.
func Parse(line string, out stream.Collector[Amount]) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return
	}
	v, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return
	}
	out.Collect(Amount{Key: f[0], Value: v})
}

// Summer keeps each key's total in keyed state: checkpointed, restored after
// a failure, and moved by key group when the job is restored at another
// parallelism. Each subtask gets its own copy of the struct.
type Summer struct {
	total stream.ValueState[int64]
}

// Open declares the state (stream.Opener).
func (s *Summer) Open(ctx *stream.Context[string]) error {
	var err error
	s.total, err = stream.GetValueState[int64](ctx, "total")
	return err
}

// ProcessElement adds one amount to its key's total and emits the new total.
func (s *Summer) ProcessElement(ctx *stream.Context[string], a Amount, out stream.Collector[Total]) error {
	t, _ := s.total.Value() // 0 for a key seen for the first time
	t += a.Value
	s.total.Update(t)
	out.Collect(Total{Key: a.Key, Total: t})
	return nil
}

type paths []string

func (p *paths) String() string     { return strings.Join(*p, ",") }
func (p *paths) Set(v string) error { *p = append(*p, v); return nil }

func totalsFlags(inputs *paths, output *string) *flag.FlagSet {
	fs := flag.NewFlagSet("totals", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(inputs, "input", "a text file of \"<key> <amount>\" lines (repeatable); the built-in sample if none")
	fs.StringVar(output, "output", "", "a directory for the totals, written as part files committed at checkpoints (exactly once); stdout if not set")
	return fs
}

// Totals is the job: lines → parse → keyBy(key) → running total → sink.
func Totals() stream.Job {
	return stream.Job{
		Name:        "totals",
		DisplayName: "Totals",
		Description: "Keeps a running total per key of \"<key> <amount>\" lines.",
		Usage: func(w io.Writer) {
			fmt.Fprintln(w, "Usage: gflink run [OPTIONS] totals [--input <file>]... [--output <dir>]")
			var in paths
			var out string
			fs := totalsFlags(&in, &out)
			fs.SetOutput(w)
			fs.PrintDefaults()
		},
		Build: func(env *stream.Environment, args []string) error {
			var inputs paths
			var output string
			fs := totalsFlags(&inputs, &output)
			if err := fs.Parse(args); err != nil {
				// gflink prints the usage with the message and exits 2, or
				// only the usage and exits 0 for -h/--help.
				return &stream.UsageError{Msg: "totals: " + err.Error(), Help: errors.Is(err, flag.ErrHelp)}
			}
			if fs.NArg() > 0 {
				return &stream.UsageError{Msg: fmt.Sprintf("totals: unexpected argument %q", fs.Arg(0))}
			}
			env.SetJobName("Totals")

			// Sources are replayable: their read positions are checkpointed.
			var lines stream.DataStream[string]
			if len(inputs) > 0 {
				if err := connectors.CheckInputFiles(inputs); err != nil {
					return fmt.Errorf("totals: %w", err)
				}
				lines = stream.FromSource[string](env, &connectors.TextFileSource{Paths: inputs}, "file-input").UID("source")
			} else {
				lines = stream.FromSource[string](env, &connectors.Elements[string]{Items: Sample}, "sample-input").UID("source")
			}
			amounts := stream.FlatMap(lines, Parse).Name("parse")
			// A stable uid on every stateful operator: snapshots store state
			// by uid, so a changed job still finds it.
			totals := stream.Process(stream.KeyBy(amounts, func(a Amount) string { return a.Key }), &Summer{}).
				Name("sum").UID("sum")
			if output != "" {
				totals.SinkTo(&connectors.FileSink[Total]{Dir: output}).Name("file-sink").UID("sink")
			} else {
				totals.Print().UID("sink")
			}
			return nil
		},
	}
}

// Command fanout is gflink with a job of two keyed stages and a fan-out:
// words are counted per word (stage one, at the job's parallelism); the
// counts go two ways — the words that reach --threshold occurrences are
// reported once each, and per first letter a second keyed stage (at
// parallelism 1) totals the words and the distinct words it has seen,
// reported when the input ends.
//
//	go build -o gflink-fanout ./examples/fanout
//	./gflink-fanout run -p 4 fanout --input book.txt --threshold 100
//
// Output lines: frequent(<word>,<threshold>) and letter(<c>,<distinct>,<total>).
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode"

	"github.com/gflink/gflink/cli"
	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/stream"
)

func main() { cli.Main(Job()) }

// WordCount is a word's count so far: stage one's output.
type WordCount struct {
	Word  string
	Count int64
}

// Output is either kind of result line.
type Output struct {
	Kind            string // "frequent" or "letter"
	Key             string
	Distinct, Total int64
}

func (o Output) String() string {
	if o.Kind == "frequent" {
		return fmt.Sprintf("frequent(%s,%d)", o.Key, o.Total)
	}
	return fmt.Sprintf("letter(%s,%d,%d)", o.Key, o.Distinct, o.Total)
}

// Sample is the input when no --input is given.
var Sample = []string{"to be or not to be", "that is the question", "to sleep perchance to dream"}

// Split emits the lower-cased words of a line.
func Split(line string, out stream.Collector[string]) {
	for _, w := range strings.FieldsFunc(line, func(r rune) bool { return !unicode.IsLetter(r) }) {
		out.Collect(strings.ToLower(w))
	}
}

// Counter is stage one: a running count per word.
type Counter struct{ n stream.ValueState[int64] }

func (c *Counter) Open(ctx *stream.Context[string]) (err error) {
	c.n, err = stream.GetValueState[int64](ctx, "count")
	return err
}

func (c *Counter) ProcessElement(ctx *stream.Context[string], w string, out stream.Collector[WordCount]) error {
	n, _ := c.n.Value()
	c.n.Update(n + 1)
	out.Collect(WordCount{Word: w, Count: n + 1})
	return nil
}

// Letters is stage two: per first letter, the distinct words (a count of 1
// is a word seen for the first time) and all words; it reports when event
// time ends, which is when the input does.
type Letters struct {
	distinct, total stream.ValueState[int64]
}

func (l *Letters) Open(ctx *stream.Context[string]) (err error) {
	if l.distinct, err = stream.GetValueState[int64](ctx, "distinct"); err != nil {
		return err
	}
	l.total, err = stream.GetValueState[int64](ctx, "total")
	return err
}

func (l *Letters) ProcessElement(ctx *stream.Context[string], wc WordCount, out stream.Collector[Output]) error {
	t, seen := l.total.Value()
	l.total.Update(t + 1)
	if wc.Count == 1 {
		d, _ := l.distinct.Value()
		l.distinct.Update(d + 1)
	}
	if !seen {
		ctx.TimerService().RegisterEventTimeTimer(math.MaxInt64)
	}
	return nil
}

func (l *Letters) OnTimer(ctx *stream.Context[string], _ int64, out stream.Collector[Output]) error {
	d, _ := l.distinct.Value()
	t, _ := l.total.Value()
	out.Collect(Output{Kind: "letter", Key: ctx.CurrentKey(), Distinct: d, Total: t})
	return nil
}

type args struct {
	inputs    []string
	output    string
	threshold int64
	rate      float64
}

func flags(a *args) *flag.FlagSet {
	fs := flag.NewFlagSet("fanout", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Func("input", "a text file (repeatable); the built-in sample if none", func(v string) error {
		a.inputs = append(a.inputs, v)
		return nil
	})
	fs.StringVar(&a.output, "output", "", "a directory for the results, committed at checkpoints (exactly once); stdout if not set")
	fs.Int64Var(&a.threshold, "threshold", 3, "report the words that occur this many times")
	fs.Float64Var(&a.rate, "rate", 0, "read at most this many lines per second (0: as fast as possible)")
	return fs
}

// Job is the fanout job.
func Job() stream.Job {
	return stream.Job{
		Name:        "fanout",
		DisplayName: "FanOut",
		Description: "Counts words, reports the frequent ones, and totals words per first letter.",
		Usage: func(w io.Writer) {
			fmt.Fprintln(w, "Usage: gflink run [OPTIONS] fanout [--input <file>]... [--output <dir>] [--threshold <n>] [--rate <lines/s>]")
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
		return &stream.UsageError{Msg: "fanout: " + err.Error(), Help: err == flag.ErrHelp}
	}
	if fs.NArg() > 0 {
		return &stream.UsageError{Msg: fmt.Sprintf("fanout: unexpected argument %q", fs.Arg(0))}
	}
	if a.threshold < 1 {
		return &stream.UsageError{Msg: fmt.Sprintf("fanout: --threshold must be at least 1, got %d", a.threshold)}
	}
	env.SetJobName("FanOut")
	var lines stream.DataStream[string]
	if len(a.inputs) > 0 {
		if err := connectors.CheckInputFiles(a.inputs); err != nil {
			return fmt.Errorf("fanout: %w", err)
		}
		lines = stream.FromSource[string](env, &connectors.TextFileSource{Paths: a.inputs, Rate: a.rate}, "lines").UID("source")
	} else {
		lines = stream.FromSource[string](env, &connectors.Elements[string]{Items: Sample}, "sample-lines").UID("source")
	}
	words := stream.FlatMap(lines, Split).Name("split")
	counts := stream.Process(stream.KeyBy(words, func(w string) string { return w }), &Counter{}).
		Name("count").UID("count")

	// The fan-out: counts feed a filter and a second keyed stage.
	threshold := a.threshold
	frequent := stream.Map(counts.Filter(func(wc WordCount) bool { return wc.Count == threshold }).Name("frequent"),
		func(wc WordCount) Output { return Output{Kind: "frequent", Key: wc.Word, Total: wc.Count} }).Name("as-frequent")
	letters := stream.Process(stream.KeyBy(counts, func(wc WordCount) string { return wc.Word[:1] }), &Letters{}).
		Name("letters").UID("letters").Parallelism(1)

	// One sink for both: their union, rebalanced to the sink's subtasks.
	results := stream.Union(frequent, letters).Rebalance()
	if a.output != "" {
		results.SinkTo(&connectors.FileSink[Output]{Dir: a.output}).Name("file-sink").UID("sink")
	} else {
		results.Print().UID("sink")
	}
	return nil
}

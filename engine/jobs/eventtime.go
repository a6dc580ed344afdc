package jobs

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/internal/apibridge"
	"github.com/gflink/gflink/stream"
)

// The event-time jobs read text lines as word count does, from any of its
// inputs, and write to any of its outputs. A line's event time is its
// leading "epochMillis," field when it has one; otherwise the time the
// source read it (ingestion time), and for a Kafka record without the
// field, the record's timestamp.

// eventTimeOptions are the event-time jobs' own arguments.
type eventTimeOptions struct {
	outOfOrderness, allowedLateness, idleness time.Duration
}

func durationFlag(fs *flag.FlagSet, d *time.Duration, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		v, err := config.ParseDuration(s)
		if err != nil {
			return err
		}
		if v < 0 {
			return fmt.Errorf("expected a duration >= 0, got %s", s)
		}
		*d = v
		return nil
	})
}

func (e *eventTimeOptions) flags(fs *flag.FlagSet) {
	durationFlag(fs, &e.outOfOrderness, "out-of-orderness", "how far records may come out of timestamp order: the watermark trails the largest timestamp by this much (default 0)")
	durationFlag(fs, &e.allowedLateness, "allowed-lateness", "keep each window this long past its end: a late record within it fires the window again (default 0)")
	durationFlag(fs, &e.idleness, "idleness", "mark a source subtask idle after this long without records, so that it does not hold back the watermark (default: never)")
}

// leadingMillis splits a line "epochMillis,rest" into its timestamp and
// the rest.
func leadingMillis(line string) (int64, string, bool) {
	i := strings.IndexByte(line, ',')
	if i <= 0 || i > 20 {
		return 0, line, false
	}
	ts, err := strconv.ParseInt(line[:i], 10, 64)
	if err != nil {
		return 0, line, false
	}
	return ts, line[i+1:], true
}

// lineTimestamp is the event time of a line (see above).
func lineTimestamp(line string, recordTimestamp int64) int64 {
	if ts, _, ok := leadingMillis(line); ok {
		return ts
	}
	if recordTimestamp != stream.NoTimestamp {
		return recordTimestamp
	}
	return time.Now().UnixMilli()
}

// timedLines reads o's input and gives its lines their event time and
// watermarks.
func timedLines(env *stream.Environment, o WordCountOptions, e eventTimeOptions) (stream.DataStream[string], error) {
	in, err := lineSource(o)
	if err != nil {
		return stream.DataStream[string]{}, err
	}
	strategy := stream.ForBoundedOutOfOrderness[string](e.outOfOrderness).WithTimestampAssigner(lineTimestamp)
	if e.idleness > 0 {
		strategy = strategy.WithIdleness(e.idleness)
	}
	// At the source: a Kafka partition's watermark is its own, and
	// --idleness lets an empty partition go idle rather than stall.
	lines := stream.FromSourceWithWatermarks(env, in.src, strategy, in.name).UID("source")
	if in.single {
		lines = lines.Parallelism(1)
	}
	return lines, nil
}

// sinkLines writes a job's results to o's output.
func sinkLines[T any](s stream.DataStream[T], o WordCountOptions, key, value, line func(T) string) error {
	out, err := outputSink(o, key, value, line)
	if err != nil {
		return err
	}
	if th := sinkThrottle(o); th != nil {
		s = stream.Map(s, func(r T) T {
			th.Wait()
			return r
		}).Name("sink-throttle").UID("sink-throttle")
	}
	if out.sink == nil {
		s.Print().UID("sink")
	} else {
		s.SinkTo(out.sink).Name(out.name).UID("sink")
	}
	return nil
}

// count is the aggregate that counts a window's records.
type count[T any] struct{}

func (count[T]) CreateAccumulator() int64  { return 0 }
func (count[T]) Add(_ T, acc int64) int64  { return acc + 1 }
func (count[T]) GetResult(acc int64) int64 { return acc }
func (count[T]) Merge(a, b int64) int64    { return a + b }
func millis(d time.Duration) string        { return strconv.FormatInt(d.Milliseconds(), 10) }

// printUsage prints an event-time job's usage: its own arguments, then
// all of its flags (word count's inputs and outputs included), then note.
func printUsage(w io.Writer, job, own string, flags func(fs *flag.FlagSet), note string) {
	fmt.Fprintf(w, "Usage: gflink run [OPTIONS] %s %s [--out-of-orderness <d>] [--allowed-lateness <d>] [--idleness <d>] [word count's --input/--output options]\n", job, own)
	var o WordCountOptions
	fs := ioFlags(job, &o)
	flags(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w, "  "+note)
}

// WindowedWordCount is a word's count in one window.
type WindowedWordCount struct {
	Word       string
	Count      int64
	Start, End int64 // the window, epoch milliseconds
}

// String renders the count like Flink's Tuple4: (word,count,start,end).
func (w WindowedWordCount) String() string {
	return "(" + w.Word + "," + strconv.FormatInt(w.Count, 10) + "," + strconv.FormatInt(w.Start, 10) + "," + strconv.FormatInt(w.End, 10) + ")"
}

const windowWordCountName = "WindowWordCount"

// WindowWordCount is the built-in windowed word count, like Flink's
// WindowWordCount example over event-time windows: the count of each word
// in each tumbling (or, with --slide, sliding) window.
func WindowWordCount() Job {
	type options struct {
		eventTimeOptions
		window, slide time.Duration
	}
	// flags adds the job's own flags, into a fresh options for each parse.
	flags := func(o *options) func(fs *flag.FlagSet) {
		return func(fs *flag.FlagSet) {
			o.eventTimeOptions.flags(fs)
			o.window = 10 * time.Second
			durationFlag(fs, &o.window, "window", "the windows' size (default 10 s)")
			durationFlag(fs, &o.slide, "slide", "start a window every slide: sliding windows (default: the size, tumbling windows)")
		}
	}
	return Job{
		Name:        "windowwordcount",
		DisplayName: windowWordCountName,
		Description: "Counts words per event-time window (tumbling, or sliding with --slide), emitting (word,count,windowStart,windowEnd) as each window closes.",
		Usage: func(w io.Writer) {
			printUsage(w, "windowwordcount", "[--window <duration>] [--slide <duration>]", flags(&options{}),
				"A line \"epochMillis,text\" has that event time; any other line the time it is read.")
		},
		Build: func(env *engine.Environment, args []string) error {
			var opts options
			o, err := parseIOArgs("windowwordcount", args, flags(&opts))
			if err != nil {
				return err
			}
			e, window, slide := opts.eventTimeOptions, opts.window, opts.slide
			if window < time.Millisecond || slide > window {
				return &UsageError{Msg: fmt.Sprintf("windowwordcount: --window %v and --slide %v: the window must be at least 1 ms, the slide at most the window", window, slide)}
			}
			assigner := stream.TumblingEventTimeWindows(window)
			if slide > 0 && slide < window {
				assigner = stream.SlidingEventTimeWindows(window, slide)
			}
			senv := apibridge.Wrap(env).(*stream.Environment)
			senv.SetJobName(windowWordCountName)
			lines, err := timedLines(senv, o, e)
			if err != nil {
				return err
			}
			words := stream.FlatMap(lines, Tokenize).Name("tokenizer").UID("tokenizer")
			w := stream.Window(stream.KeyBy(words, func(w string) string { return w }), assigner).AllowedLateness(e.allowedLateness)
			counts := stream.WindowAggregateProcess(w, count[string]{}, stream.ProcessWindowFunc[int64, string, WindowedWordCount](
				func(word string, win stream.TimeWindow, n []int64, out stream.Collector[WindowedWordCount]) error {
					out.Collect(WindowedWordCount{Word: word, Count: n[0], Start: win.Start, End: win.End})
					return nil
				})).UID("window")
			return sinkLines(counts, o, func(r WindowedWordCount) string { return r.Word + "@" + strconv.FormatInt(r.Start, 10) },
				func(r WindowedWordCount) string { return strconv.FormatInt(r.Count, 10) }, WindowedWordCount.String)
		},
	}
}

// Session is one key's session: its records from Start to the last one's
// timestamp plus the gap (End).
type Session struct {
	Key        string
	Start, End int64
	Count      int64
}

// String renders the session like Flink's Tuple4: (key,start,end,count).
func (s Session) String() string {
	return "(" + s.Key + "," + strconv.FormatInt(s.Start, 10) + "," + strconv.FormatInt(s.End, 10) + "," + strconv.FormatInt(s.Count, 10) + ")"
}

// sessionKey is the key of a sessionize line: after its timestamp, spaces
// trimmed.
func sessionKey(line string) string {
	_, rest, _ := leadingMillis(line)
	return strings.TrimSpace(rest)
}

// SessionSample is sessionize's built-in input: a morning of three users'
// clicks, "epochMillis,user".
var SessionSample = func() []string {
	base := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC).UnixMilli()
	var out []string
	for _, c := range []struct {
		user    string
		minutes []int
	}{
		{"alice", []int{0, 3, 4, 12, 80, 85, 86}},
		{"bob", []int{1, 2, 50, 51, 52, 53, 140}},
		{"carol", []int{5, 30, 55, 79, 104}},
	} {
		for _, m := range c.minutes {
			out = append(out, fmt.Sprintf("%d,%s", base+int64(m)*60_000, c.user))
		}
	}
	return out
}()

const sessionizeName = "Sessionize"

// Sessionize is the built-in sessionization: each key's records closer
// than --gap to one another make a session, printed once it closes.
func Sessionize() Job {
	type options struct {
		eventTimeOptions
		gap time.Duration
	}
	flags := func(o *options) func(fs *flag.FlagSet) {
		return func(fs *flag.FlagSet) {
			o.eventTimeOptions.flags(fs)
			o.gap = 30 * time.Minute
			durationFlag(fs, &o.gap, "gap", "a session ends after this long without a record of its key (default 30 min)")
		}
	}
	return Job{
		Name:        "sessionize",
		DisplayName: sessionizeName,
		Description: "Groups each key's \"epochMillis,key\" records into sessions (event-time session windows, --gap), emitting (key,start,end,count) as each session closes.",
		Usage: func(w io.Writer) {
			printUsage(w, "sessionize", "[--gap <duration>]", flags(&options{}),
				"Lines are \"epochMillis,key\"; a line without the timestamp is a key at the time it is read. Without an input, a built-in sample of three users' clicks; --generate makes keys of generated words.")
		},

		Build: func(env *engine.Environment, args []string) error {
			var opts options
			o, err := parseIOArgs("sessionize", args, flags(&opts))
			if err != nil {
				return err
			}
			e, gap := opts.eventTimeOptions, opts.gap
			if gap < time.Millisecond {
				return &UsageError{Msg: fmt.Sprintf("sessionize: --gap %v: a session gap is at least 1 ms", gap)}
			}
			o.builtinText, o.genWordsPerLine = SessionSample, 1
			senv := apibridge.Wrap(env).(*stream.Environment)
			senv.SetJobName(sessionizeName)
			lines, err := timedLines(senv, o, e)
			if err != nil {
				return err
			}
			keys := stream.Map(lines.Filter(func(l string) bool { return sessionKey(l) != "" }), sessionKey).Name("keys").UID("keys")
			w := stream.Window(stream.KeyBy(keys, func(k string) string { return k }), stream.EventTimeSessionWindows(gap)).AllowedLateness(e.allowedLateness)
			sessions := stream.WindowAggregateProcess(w, count[string]{}, stream.ProcessWindowFunc[int64, string, Session](
				func(key string, win stream.TimeWindow, n []int64, out stream.Collector[Session]) error {
					out.Collect(Session{Key: key, Start: win.Start, End: win.End, Count: n[0]})
					return nil
				})).UID("sessions")
			return sinkLines(sessions, o, func(s Session) string { return s.Key + "@" + strconv.FormatInt(s.Start, 10) },
				func(s Session) string { return strconv.FormatInt(s.Count, 10) }, Session.String)
		},
	}
}

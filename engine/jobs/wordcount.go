package jobs

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/connectors/kafka"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/savepoint"
)

// WordCountRecord is one update of the word count: the word's count so far.
type WordCountRecord struct {
	Word  string
	Count int64
}

// String renders the record like Flink's Tuple2: (word,count).
func (w WordCountRecord) String() string {
	return "(" + w.Word + "," + strconv.FormatInt(w.Count, 10) + ")"
}

// AppendTo appends String's bytes to dst (api.Appender): the print and
// file sinks render records with it, without a string per record.
func (w WordCountRecord) AppendTo(dst []byte) []byte {
	dst = append(dst, '(')
	dst = append(dst, w.Word...)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, w.Count, 10)
	return append(dst, ')')
}

// ParseWordCountRecord parses a line written by String.
func ParseWordCountRecord(line string) (WordCountRecord, bool) {
	s, ok := strings.CutPrefix(line, "(")
	if !ok {
		return WordCountRecord{}, false
	}
	s, ok = strings.CutSuffix(s, ")")
	if !ok {
		return WordCountRecord{}, false
	}
	i := strings.LastIndexByte(s, ',')
	if i < 0 {
		return WordCountRecord{}, false
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil {
		return WordCountRecord{}, false
	}
	return WordCountRecord{Word: s[:i], Count: n}, true
}

// Tokenize splits a line into lower-cased words: maximal runs of letters
// (Unicode letters, so "naïve" is one word); everything else separates.
// A word that is already lower-case ASCII — most words — is a substring of
// the line, not a copy: the record lives until the keyed task has counted
// it, and keyed state copies a new key's bytes into its own table (the
// hashmap backend's string table, RocksDB, the changelog) rather than
// keeping the record's string, so no state keeps a line alive. Other words
// are built in a buffer and copied once.
func Tokenize(line string, out api.Collector[string]) {
	var arr [64]byte
	buf := arr[:0]
	start, copied := -1, false // where the word began; whether buf holds it
	emit := func(end int) {
		if copied {
			out.Collect(string(buf))
		} else {
			out.Collect(line[start:end])
		}
		start, copied, buf = -1, false, buf[:0]
	}
	for i := 0; i < len(line); {
		c := line[i]
		if c < utf8.RuneSelf {
			switch {
			case 'a' <= c && c <= 'z':
				if start < 0 {
					start = i
				}
				if copied {
					buf = append(buf, c)
				}
			case 'A' <= c && c <= 'Z':
				if start < 0 {
					start = i
				}
				if !copied {
					buf, copied = append(buf[:0], line[start:i]...), true
				}
				buf = append(buf, c+('a'-'A'))
			default:
				if start >= 0 {
					emit(i)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(line[i:])
		if unicode.IsLetter(r) {
			if start < 0 {
				start = i
			}
			if !copied {
				buf, copied = append(buf[:0], line[start:i]...), true
			}
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
		} else if start >= 0 {
			emit(i)
		}
		i += size
	}
	if start >= 0 {
		emit(len(line))
	}
}

// CountWords counts the words of a line the way Tokenize splits them (for
// rate limiting by words).
func CountWords(line string) int {
	n, in := 0, false
	for _, r := range line {
		letter := r < utf8.RuneSelf && (r|0x20 >= 'a' && r|0x20 <= 'z') || r >= utf8.RuneSelf && unicode.IsLetter(r)
		if letter && !in {
			n++
		}
		in = letter
	}
	return n
}

// Counter keeps a count per word in keyed ValueState and emits every
// update.
type Counter struct {
	count api.ValueState[int64]
}

// Open declares the state.
func (c *Counter) Open(ctx *api.Context[string]) error {
	var err error
	c.count, err = api.GetValueState[int64](ctx, "count")
	return err
}

// ProcessElement counts one word.
func (c *Counter) ProcessElement(ctx *api.Context[string], word string, out api.Collector[WordCountRecord]) error {
	n, _ := c.count.Value()
	n++
	c.count.Update(n)
	out.Collect(WordCountRecord{Word: word, Count: n})
	return nil
}

// WordCountPipeline adds word count over lines to env and returns the
// stream of count updates: tokenizer, keyBy(word), counter.
func WordCountPipeline(lines engine.DataStream[string]) engine.DataStream[WordCountRecord] {
	words := engine.FlatMap(lines, Tokenize).Name("tokenizer").UID("tokenizer")
	return engine.Process(engine.KeyBy(words, func(w string) string { return w }), &Counter{}).
		Name("counter").UID("counter")
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// WordCountOptions are word count's arguments.
type WordCountOptions struct {
	Inputs   []string
	Output   string
	Upsert   string
	Discard  bool
	Rate     float64
	SinkRate float64 // counts per second the sink takes (0: no limit)
	Generate int64   // words; -1: unbounded; 0: not generating
	Distinct int
	Seed     uint64
	// KafkaSource and KafkaSink are Kafka parameters given as arguments
	// (--group g, --delivery-guarantee exactly-once, --properties.x v)
	// rather than in the kafka:// URIs.
	KafkaSource, KafkaSink kafka.Params
	// job names the job in messages.
	job string
	// builtinText is the text read without an input (Hamlet's if nil);
	// genWordsPerLine the generator's words per line (10 if 0).
	builtinText     []string
	genWordsPerLine int
}

func wordCountFlags(o *WordCountOptions) *flag.FlagSet { return ioFlags("wordcount", o) }

// ioFlags are the flags of the inputs and outputs every built-in job over
// text lines takes, word count's.
func ioFlags(job string, o *WordCountOptions) *flag.FlagSet {
	fs := flag.NewFlagSet(job, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var((*stringList)(&o.Inputs), "input", "a text file to count the words of (repeatable), Kafka topics as kafka://host:port[,host:port]/topic[,topic]?group=g&startup=earliest-offset&bounded=true (each partition a split, its offset in checkpoints), or lines from a TCP server as socket://host:port (not replayable: at most once); the built-in text if none")
	fs.StringVar(&o.Output, "output", "", "a directory to write the counts to, as part files committed at checkpoints (exactly once); stdout if not set")
	fs.StringVar(&o.Upsert, "upsert", "", "a file to keep the counts in as a word<TAB>count table, upserted idempotently (instead of --output)")
	fs.BoolVar(&o.Discard, "discard", false, "drop the counts (Flink's DiscardingSink): count without the cost of output (instead of --output or --upsert; --output discard is a directory named discard)")
	fs.Float64Var(&o.Rate, "rate", 0, "read at most this many words per second, from files, generated or built-in text (0: as fast as possible)")
	fs.Float64Var(&o.SinkRate, "sink-rate", 0, "write at most this many counts per second in all, like a slow database: the job is backpressured (0: no limit)")
	fs.Func("generate", "generate this many words instead of reading files, or 'unbounded'", func(s string) error {
		if s == "unbounded" {
			o.Generate = -1
			return nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("expected a positive number of words or 'unbounded', got %q", s)
		}
		o.Generate = n
		return nil
	})
	fs.IntVar(&o.Distinct, "distinct", 10000, "with --generate: the number of distinct words")
	fs.Uint64Var(&o.Seed, "seed", 1, "with --generate: the seed of the generated text")
	return fs
}

// ParseWordCountArgs parses word count's arguments.
func ParseWordCountArgs(args []string) (WordCountOptions, error) {
	return parseIOArgs("wordcount", args, nil)
}

// parseIOArgs parses the arguments of a job over text lines: the inputs
// and outputs word count takes, and the flags more adds.
func parseIOArgs(job string, args []string, more func(fs *flag.FlagSet)) (WordCountOptions, error) {
	o := WordCountOptions{job: job}
	// Kafka parameters are part of a URI, even given as arguments: a bad
	// one is a bad URI, exit 1 with the message alone, as the brokers'
	// errors are.
	args, src, sink, err := kafka.JobArgs(args)
	if err != nil {
		return o, fmt.Errorf(job+": %w", err)
	}
	o.KafkaSource, o.KafkaSink = src, sink
	fs := ioFlags(job, &o)
	if more != nil {
		more(fs)
	}
	if err := fs.Parse(args); err != nil {
		return o, &UsageError{Msg: job + ": " + err.Error(), Help: errors.Is(err, flag.ErrHelp)}
	}
	if fs.NArg() > 0 {
		return o, &UsageError{Msg: fmt.Sprintf(job+": unexpected argument %q", fs.Arg(0))}
	}
	if math.IsNaN(o.Rate) || o.Rate < 0 {
		return o, &UsageError{Msg: fmt.Sprintf(job+": invalid --rate %v: expected a number of words per second >= 0 (0 or Inf: as fast as possible)", o.Rate)}
	}
	if math.IsInf(o.Rate, 1) {
		o.Rate = 0 // an infinite rate is no limit
	}
	if math.IsNaN(o.SinkRate) || o.SinkRate < 0 {
		return o, &UsageError{Msg: fmt.Sprintf(job+": invalid --sink-rate %v: expected a number of counts per second >= 0 (0 or Inf: no limit)", o.SinkRate)}
	}
	if o.Generate != 0 && len(o.Inputs) > 0 {
		return o, &UsageError{Msg: job + ": use --input or --generate, not both"}
	}
	// Files may be given as paths or file: URIs (file:///x), as everywhere
	// gflink takes a path; other URIs are inputs and outputs of their own.
	for i, in := range o.Inputs {
		if isFileArg(in) {
			p, err := savepoint.FilePath(in, "--input")
			if err != nil {
				return o, &UsageError{Msg: job + ": " + err.Error()}
			}
			o.Inputs[i] = p
		}
	}
	for _, f := range []struct {
		name string
		p    *string
	}{{"--output", &o.Output}, {"--upsert", &o.Upsert}} {
		if *f.p != "" && isFileArg(*f.p) {
			p, err := savepoint.FilePath(*f.p, f.name)
			if err != nil {
				return o, &UsageError{Msg: job + ": " + err.Error()}
			}
			*f.p = p
		}
	}
	if o.Distinct <= 0 {
		return o, &UsageError{Msg: job + ": --distinct must be > 0"}
	}
	if o.Upsert != "" && o.Output != "" {
		return o, &UsageError{Msg: job + ": use --output or --upsert, not both"}
	}
	if o.Discard && (o.Output != "" || o.Upsert != "") {
		return o, &UsageError{Msg: job + ": --discard drops the counts; use it without --output and --upsert"}
	}
	kafkaIn := len(o.Inputs) > 0 && kafka.IsURI(o.Inputs[0])
	if a := o.KafkaSource.OnlySource(); a != "" && !kafkaIn {
		return o, fmt.Errorf(job+": %s configures a Kafka input, but --input is not a kafka:// URI", a)
	}
	if a := o.KafkaSink.OnlySink(); a != "" && !kafka.IsURI(o.Output) {
		return o, fmt.Errorf(job+": %s configures a Kafka output, but --output is not a kafka:// URI", a)
	}
	if a := o.KafkaSource.Any(); a != "" && !kafkaIn && !kafka.IsURI(o.Output) {
		return o, fmt.Errorf(job+": %s configures a Kafka connection, but neither --input nor --output is a kafka:// URI", a)
	}
	return o, nil
}

// wordCountName is the name word count runs under, as Flink's example does.
const wordCountName = "WordCount"

// WordCount is the built-in word count job, like Flink's WordCount
// example.
func WordCount() Job {
	return Job{
		Name:        "wordcount",
		DisplayName: wordCountName,
		Description: "Counts words in text files, generated text, or a built-in text (Hamlet's soliloquy), emitting (word,count) updates.",
		Usage: func(w io.Writer) {
			fmt.Fprintln(w, "Usage: gflink run [OPTIONS] wordcount [--input <file>]... [--output <dir> | --upsert <file> | --discard] [--rate <words/s>] [--sink-rate <counts/s>] [--generate <words>|unbounded [--distinct <n>] [--seed <n>]]")
			var o WordCountOptions
			fs := wordCountFlags(&o)
			fs.SetOutput(w)
			fs.PrintDefaults()
			fmt.Fprintln(w, "  Any parameter of a kafka:// URI may also be given as an argument, --name value (e.g. --group g --bounded --delivery-guarantee exactly-once --transactional-id-prefix p), as may Kafka client properties (--properties.security.protocol SASL_SSL).")
		},
		Build: func(env *engine.Environment, args []string) error {
			o, err := ParseWordCountArgs(args)
			if err != nil {
				return err
			}
			env.SetJobName(wordCountName)
			in, err := lineSource(o)
			if err != nil {
				return err
			}
			lines := engine.FromSource[string](env, in.src, in.name).UID("source")
			if in.single {
				lines = lines.Parallelism(1)
			}
			out, err := outputSink(o, func(r WordCountRecord) string { return r.Word }, func(r WordCountRecord) string { return strconv.FormatInt(r.Count, 10) },
				WordCountRecord.String)
			if err != nil {
				return err
			}
			counts := WordCountPipeline(lines)
			if th := sinkThrottle(o); th != nil {
				counts = engine.Map(counts, func(r WordCountRecord) WordCountRecord {
					th.Wait()
					return r
				}).Name("sink-throttle").UID("sink-throttle")
			}
			if out.sink == nil {
				counts.Print().UID("sink")
			} else {
				counts.SinkTo(out.sink).Name(out.name).UID("sink")
			}
			return nil
		},
	}
}

// lineInput is the source of a job's text lines and its name; single:
// it runs with parallelism 1 (a socket).
type lineInput struct {
	src    api.Source[string]
	name   string
	single bool
}

// lineSource is the source o's inputs name: generated words, a socket,
// Kafka topics, text files, or the built-in text.
func lineSource(o WordCountOptions) (lineInput, error) {
	switch {
	case o.Generate != 0:
		g := &connectors.WordGenerator{Distinct: o.Distinct, Seed: o.Seed, Rate: o.Rate, WordsPerLine: o.wordsPerLine()}
		if o.Generate > 0 {
			g.Words = o.Generate
		}
		return lineInput{g, "generator", false}, nil
	case len(o.Inputs) > 0 && strings.HasPrefix(o.Inputs[0], "socket://"):
		src, err := socketInput(o)
		return lineInput{src, "socket-input", true}, err
	case len(o.Inputs) > 0 && kafka.IsURI(o.Inputs[0]):
		src, err := kafkaInput(o)
		return lineInput{src, "kafka-input", false}, err
	case len(o.Inputs) > 0:
		if err := connectors.CheckInputFiles(o.Inputs); err != nil {
			return lineInput{}, fmt.Errorf("%s: %w", o.job, err)
		}
		return lineInput{&connectors.TextFileSource{Paths: o.Inputs, Rate: o.Rate, Weigh: CountWords}, "file-input", false}, nil
	}
	text := o.builtinText
	if text == nil {
		text = HamletLines
	}
	return lineInput{&connectors.Elements[string]{Items: text, Rate: o.Rate, Weigh: CountWords}, "in-memory-input", false}, nil
}

// wordsPerLine is the generator's: word count's text has 10 words a line.
func (o WordCountOptions) wordsPerLine() int {
	if o.genWordsPerLine > 0 {
		return o.genWordsPerLine
	}
	return 10
}

// lineOutput is the sink o's outputs name, nil for stdout.
type lineOutput[T any] struct {
	sink api.Sink[T]
	name string
}

// outputSink is the sink o's outputs name for records of T: an upsert
// table keeps value(r) under key(r), Kafka gets key(r) and line(r). The
// paths are checked now, so that a bad one is an error before the job is
// submitted (without creating anything: run --check builds the job too).
func outputSink[T any](o WordCountOptions, key, value, line func(T) string) (lineOutput[T], error) {
	if o.Output != "" && !kafka.IsURI(o.Output) {
		if err := connectors.CheckCreatableDir(o.Output); err != nil {
			return lineOutput[T]{}, fmt.Errorf("%s: cannot create the --output directory %s: %w", o.job, o.Output, err)
		}
	}
	if o.Upsert != "" {
		if err := connectors.CheckUpsertPath(o.Upsert); err != nil {
			return lineOutput[T]{}, fmt.Errorf("%s: cannot use --upsert %s: %w", o.job, o.Upsert, err)
		}
	}
	switch {
	case kafka.IsURI(o.Output):
		sink, err := kafkaOutput(o, func(r T) ([]byte, []byte) { return []byte(key(r)), []byte(line(r)) })
		return lineOutput[T]{sink, "kafka-sink"}, err
	case o.Output != "":
		return lineOutput[T]{&connectors.FileSink[T]{Dir: o.Output}, "file-sink"}, nil
	case o.Upsert != "":
		return lineOutput[T]{&connectors.UpsertFileSink[T]{Path: o.Upsert, Key: key, Value: value}, "upsert-sink"}, nil
	case o.Discard:
		return lineOutput[T]{connectors.DiscardingSink[T]{}, "discarding-sink"}, nil
	}
	return lineOutput[T]{}, nil
}

// sinkThrottle is the pace of --sink-rate, nil without one.
func sinkThrottle(o WordCountOptions) *connectors.Throttle {
	if o.SinkRate > 0 && !math.IsInf(o.SinkRate, 1) {
		return connectors.NewThrottle(o.SinkRate)
	}
	return nil
}

// kafkaCheckTimeout bounds the metadata request that checks a Kafka input
// before the job is submitted.
const kafkaCheckTimeout = 10 * time.Second

// isFileArg reports whether an --input or --output is a URI to turn into a
// file's path: a file: URI, or one of a scheme gflink does not read (which
// FilePath refuses by name) — not a Kafka topic, a socket, or a plain path
// (kept as given).
func isFileArg(a string) bool {
	i := strings.Index(a, ":")
	uri := i > 1 && !strings.ContainsAny(a[:i], `/\`)
	return uri && !kafka.IsURI(a) && !strings.HasPrefix(a, "socket://")
}

// kafkaInput is the Kafka source an --input kafka://... URI names, checked
// against the brokers: an unreachable broker or a missing topic is an
// error before the job runs.
func kafkaInput(o WordCountOptions) (*kafka.Source, error) {
	if len(o.Inputs) > 1 {
		return nil, &UsageError{Msg: o.job + ": a kafka:// --input reads every topic it names (kafka://host:port/t1,t2); give it alone"}
	}
	if o.Rate > 0 {
		return nil, &UsageError{Msg: o.job + ": --rate paces files and generated text, not a Kafka input"}
	}
	src, err := kafka.ParseSourceURI(o.Inputs[0], o.KafkaSource)
	if err != nil {
		return nil, fmt.Errorf(o.job+": --input %w", err)
	}
	if err := src.Check(context.Background(), kafkaCheckTimeout); err != nil {
		return nil, fmt.Errorf(o.job+": --input %s: %w (brokers %s, within %s)", kafka.Redact(o.Inputs[0]), err, strings.Join(src.Brokers, ","), kafkaCheckTimeout)
	}
	return src, nil
}

// kafkaOutput is the Kafka sink an --output kafka://... URI names: each
// update a record keyed by its word, valued (word,count); checked against
// the brokers before the job runs.
func kafkaOutput[T any](o WordCountOptions, record func(T) ([]byte, []byte)) (*kafka.Sink[T], error) {
	c, err := kafka.ParseSinkURI(o.Output, o.KafkaSink)
	if err != nil {
		return nil, fmt.Errorf(o.job+": --output %w", err)
	}
	if err := c.Check(context.Background(), kafkaCheckTimeout); err != nil {
		return nil, fmt.Errorf(o.job+": --output %s: %w (brokers %s, within %s)", kafka.Redact(o.Output), err, strings.Join(c.Brokers, ","), kafkaCheckTimeout)
	}
	return kafka.NewSink(c, record), nil
}

// socketInput is the socket source a --input socket://host:port[?retries=N&retry-delay=D]
// names (Flink's socketTextStream, e.g. fed by nc -lk 9999).
func socketInput(o WordCountOptions) (*connectors.SocketSource, error) {
	if len(o.Inputs) > 1 || o.Rate > 0 {
		return nil, &UsageError{Msg: fmt.Sprintf(o.job+": --input %s: a socket input is given alone, without --rate", o.Inputs[0])}
	}
	// A bad URI is an error of its own (exit 1), as for Kafka.
	usage := func(format string, args ...any) error {
		return fmt.Errorf(o.job+": --input "+format, args...)
	}
	u, err := url.Parse(o.Inputs[0])
	if err != nil || u.Port() == "" || u.Hostname() == "" {
		return nil, usage("%s: expected socket://host:port", o.Inputs[0])
	}
	src := &connectors.SocketSource{Addr: u.Host, MaxRetry: 5, RetryDelay: time.Second}
	for k, vs := range u.Query() {
		switch v := vs[len(vs)-1]; k {
		case "retries":
			if src.MaxRetry, err = strconv.Atoi(v); err != nil || src.MaxRetry < 0 {
				return nil, usage("%s: retries=%s: expected a number >= 0", o.Inputs[0], v)
			}
		case "retry-delay":
			if src.RetryDelay, err = config.ParseDuration(v); err != nil {
				return nil, usage("%s: retry-delay=%s: %v", o.Inputs[0], v, err)
			}
		default:
			return nil, usage("%s: unknown parameter %q; accepted: retries, retry-delay", o.Inputs[0], k)
		}
	}
	return src, nil
}

// HamletLines is the built-in text of word count: the lines of Hamlet's
// soliloquy that Flink's WordCount example uses.
var HamletLines = []string{
	"To be, or not to be,--that is the question:--",
	"Whether 'tis nobler in the mind to suffer",
	"The slings and arrows of outrageous fortune",
	"Or to take arms against a sea of troubles,",
	"And by opposing end them?--To die,--to sleep,--",
	"No more; and by a sleep to say we end",
	"The heartache, and the thousand natural shocks",
	"That flesh is heir to,--'tis a consummation",
	"Devoutly to be wish'd. To die,--to sleep;--",
	"To sleep! perchance to dream:--ay, there's the rub;",
	"For in that sleep of death what dreams may come,",
	"When we have shuffled off this mortal coil,",
	"Must give us pause: there's the respect",
	"That makes calamity of so long life;",
	"For who would bear the whips and scorns of time,",
	"The oppressor's wrong, the proud man's contumely,",
	"The pangs of despis'd love, the law's delay,",
	"The insolence of office, and the spurns",
	"That patient merit of the unworthy takes,",
	"When he himself might his quietus make",
	"With a bare bodkin? who would these fardels bear,",
	"To grunt and sweat under a weary life,",
	"But that the dread of something after death,--",
	"The undiscover'd country, from whose bourn",
	"No traveller returns,--puzzles the will,",
	"And makes us rather bear those ills we have",
	"Than fly to others that we know not of?",
	"Thus conscience does make cowards of us all;",
	"And thus the native hue of resolution",
	"Is sicklied o'er with the pale cast of thought;",
	"And enterprises of great pith and moment,",
	"With this regard, their currents turn awry,",
	"And lose the name of action.--Soft you now!",
	"The fair Ophelia!--Nymph, in thy orisons",
	"Be all my sins remember'd.",
}

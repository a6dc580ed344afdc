package kafka

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// role says which side of a job a parameter configures.
type role uint8

const (
	forSource role = 1 << iota
	forSink
	forBoth = forSource | forSink
)

func (r role) String() string {
	switch r {
	case forSource:
		return "a Kafka input (source)"
	case forSink:
		return "a Kafka output (sink)"
	}
	return "a Kafka input or output"
}

// param is one setting of a Kafka input or output. It is named the same
// wherever it is given — in a kafka:// URI's query, as a job argument
// (--name value), or with Flink SQL's "properties." prefix — and, where
// the Kafka Java client has the setting, by that client's property name,
// so that a Flink user's properties carry over. opt, when set, turns the
// value into the franz-go option that does the same.
type param struct {
	name    string   // canonical: the Kafka client property where there is one
	aliases []string // gflink's short names, Flink SQL's connector options
	role    role
	isBool  bool
	opt     func(v string) (kgo.Opt, error)
}

// params are every parameter gflink knows. A Kafka client property that is
// not here is an error naming these, not silently ignored: gflink cannot
// honour what franz-go has no option for.
var params = []param{
	// The source (Flink's KafkaSource and its SQL connector).
	{name: "group.id", aliases: []string{"group"}, role: forSource},
	{name: "scan.startup.mode", aliases: []string{"startup"}, role: forSource},
	{name: "scan.startup.timestamp-millis", aliases: []string{"timestamp"}, role: forSource},
	{name: "auto.offset.reset", aliases: []string{"reset"}, role: forSource},
	{name: "bounded", role: forSource, isBool: true},
	{name: "partition.discovery.interval.ms", aliases: []string{"discovery"}, role: forSource},
	{name: "isolation.level", role: forSource},
	{name: "commit.offsets.on.checkpoint", role: forSource, isBool: true},
	{name: "fetch.min.bytes", role: forSource, opt: bytesOpt(func(n int32) kgo.Opt { return kgo.FetchMinBytes(n) })},
	{name: "fetch.max.bytes", role: forSource, opt: bytesOpt(func(n int32) kgo.Opt { return kgo.FetchMaxBytes(n) })},
	{name: "max.partition.fetch.bytes", role: forSource, opt: bytesOpt(func(n int32) kgo.Opt { return kgo.FetchMaxPartitionBytes(n) })},
	{name: "fetch.max.wait.ms", role: forSource, opt: msOpt(func(d time.Duration) kgo.Opt { return kgo.FetchMaxWait(d) })},
	{name: "client.rack", role: forSource, opt: func(v string) (kgo.Opt, error) { return kgo.Rack(v), nil }},

	// The sink (Flink's KafkaSink).
	{name: "sink.delivery-guarantee", aliases: []string{"delivery-guarantee"}, role: forSink},
	{name: "sink.transactional-id-prefix", aliases: []string{"transactional-id-prefix"}, role: forSink},
	{name: "transaction.timeout.ms", role: forSink},
	{name: "acks", role: forSink},
	{name: "enable.idempotence", role: forSink, isBool: true},
	{name: "linger.ms", role: forSink, opt: func(v string) (kgo.Opt, error) {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("expected a number of milliseconds >= 0")
		}
		return kgo.ProducerLinger(time.Duration(ms) * time.Millisecond), nil
	}},
	// The Java client's batch.size is a target that a bigger record
	// exceeds; franz-go's batch limit fails such a record. max.request.size
	// is the limit that means the same in both.
	{name: "max.request.size", role: forSink, opt: bytesOpt(func(n int32) kgo.Opt { return kgo.ProducerBatchMaxBytes(n) })},
	{name: "buffer.memory", role: forSink, opt: bytesOpt(func(n int32) kgo.Opt { return kgo.MaxBufferedBytes(int(n)) })},
	{name: "compression.type", role: forSink, opt: compressionOpt},
	{name: "delivery.timeout.ms", role: forSink, opt: msOpt(func(d time.Duration) kgo.Opt { return kgo.RecordDeliveryTimeout(d) })},

	// Both: the connection and its security.
	{name: "client.id", role: forBoth, opt: func(v string) (kgo.Opt, error) { return kgo.ClientID(v), nil }},
	// franz-go deadlines a request at its own timeout plus this overhead;
	// the Java client's request.timeout.ms is the closest setting.
	{name: "request.timeout.ms", role: forBoth, opt: msOpt(func(d time.Duration) kgo.Opt { return kgo.RequestTimeoutOverhead(d) })},
	{name: "socket.connection.setup.timeout.ms", role: forBoth, opt: msOpt(func(d time.Duration) kgo.Opt { return kgo.DialTimeout(d) })},
	{name: "metadata.max.age.ms", role: forBoth, opt: msOpt(func(d time.Duration) kgo.Opt { return kgo.MetadataMaxAge(d) })},
	{name: "connections.max.idle.ms", role: forBoth, opt: msOpt(func(d time.Duration) kgo.Opt { return kgo.ConnIdleTimeout(d) })},
	{name: "retry.backoff.ms", role: forBoth, opt: msOpt(func(d time.Duration) kgo.Opt {
		return kgo.RetryBackoffFn(func(int) time.Duration { return d })
	})},
	{name: "security.protocol", role: forBoth},
	{name: "tls", role: forBoth, isBool: true},
	{name: "sasl.mechanism", role: forBoth},
	{name: "sasl.username", role: forBoth},
	{name: "sasl.password", role: forBoth},
	{name: "sasl.jaas.config", role: forBoth},
	{name: "ssl.truststore.location", role: forBoth},
	{name: "ssl.truststore.type", role: forBoth},
	{name: "ssl.keystore.location", role: forBoth},
	{name: "ssl.keystore.type", role: forBoth},
	{name: "ssl.endpoint.identification.algorithm", role: forBoth},
}

// lookup finds a parameter by any of its names, with or without Flink
// SQL's "properties." prefix.
func lookup(name string) *param {
	name = strings.TrimPrefix(name, "properties.")
	for i := range params {
		if params[i].name == name || slices.Contains(params[i].aliases, name) {
			return &params[i]
		}
	}
	return nil
}

// accepted lists the names of the parameters of a side, for errors.
func accepted(r role) string {
	var names []string
	for _, p := range params {
		if p.role&r != 0 {
			n := p.name
			if len(p.aliases) > 0 {
				n += " (" + strings.Join(p.aliases, ", ") + ")"
			}
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// Params are the settings of a Kafka input or output gathered from where
// they were given, by canonical name. A setting given twice with different
// values is an error naming both places, rather than one silently winning.
type Params struct {
	vals  map[string]string
	where map[string]string // how and where each was given, for errors
}

// set records one setting; where says how it was given.
func (p *Params) set(r role, where, name, value string) error {
	pa := lookup(name)
	if pa == nil {
		if strings.TrimPrefix(name, "properties.") == "bootstrap.servers" {
			return fmt.Errorf("%s: bootstrap.servers is the URI's host part (kafka://host:port,host:port/topic)", where)
		}
		return fmt.Errorf("%s: unknown parameter %q; accepted for %s: %s", where, name, r, accepted(r))
	}
	if pa.role&r == 0 {
		return fmt.Errorf("%s: %s configures %s, not %s", where, name, pa.role, r)
	}
	if pa.isBool {
		if _, err := strconv.ParseBool(value); err != nil {
			return fmt.Errorf("%s: %s=%s: accepted: true, false", where, name, shown(pa.name, value))
		}
	}
	if p.vals == nil {
		p.vals, p.where = map[string]string{}, map[string]string{}
	}
	if old, ok := p.vals[pa.name]; ok && old != value {
		return fmt.Errorf("%s: %s=%s, but %s gives %s", where, name, shown(pa.name, value), p.where[pa.name], shown(pa.name, old))
	}
	p.vals[pa.name] = value
	p.where[pa.name] = fmt.Sprintf("%s (%s)", where, name)
	return nil
}

// clone is a copy that set does not share with p.
func (p Params) clone() Params {
	c := Params{vals: map[string]string{}, where: map[string]string{}}
	for k, v := range p.vals {
		c.vals[k], c.where[k] = v, p.where[k]
	}
	return c
}

// get returns a setting by its canonical name.
func (p *Params) get(name string) (string, bool) {
	v, ok := p.vals[name]
	return v, ok
}

// bool returns a boolean setting (validated when set).
func (p *Params) bool(name string) bool {
	v, _ := strconv.ParseBool(p.vals[name])
	return v
}

// errorf is an error about the setting name, saying where it was given.
func (p *Params) errorf(name, format string, args ...any) error {
	return fmt.Errorf("%s: %s=%s: %s", p.where[name], name, shown(name, p.vals[name]), fmt.Sprintf(format, args...))
}

// shown is a setting's value as errors show it: secrets masked, as Flink
// masks them in its logs (a JAAS line keeps all but its password).
func shown(name, value string) string {
	switch strings.TrimPrefix(name, "properties.") {
	case "sasl.password", "ssl.key.password":
		return "******"
	case "sasl.jaas.config":
		return jaasPassword.ReplaceAllString(value, `${1}"******"`)
	}
	return value
}

var (
	jaasPassword = regexp.MustCompile(`(\bpassword\s*=\s*)"(?:[^"\\]|\\.)*"`)
	uriSecret    = regexp.MustCompile(`((?:^|[?&])(?:properties\.)?sasl\.(?:password|jaas\.config)=)[^&#]*`)
)

// Redact is a kafka:// URI as errors and logs show it: the values of
// sasl.password and sasl.jaas.config masked.
func Redact(uri string) string { return uriSecret.ReplaceAllString(uri, "${1}******") }

// addQuery records a URI's query parameters.
func (p *Params) addQuery(r role, uri string, q url.Values) error {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad parameter is the same on every run
	where := "kafka URI " + Redact(uri)
	for _, k := range keys {
		if len(q[k]) > 1 {
			// One URI, one value: which should win is not for gflink to guess.
			return fmt.Errorf("%s: %s is given %d times", where, k, len(q[k]))
		}
		if err := p.set(r, where, k, q[k][0]); err != nil {
			return err
		}
	}
	return nil
}

// simpleOpts turns the parameters that map one to one onto client options
// into those options, in the table's order.
func (p *Params) simpleOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	for _, pa := range params {
		v, ok := p.vals[pa.name]
		if !ok || pa.opt == nil {
			continue
		}
		o, err := pa.opt(v)
		if err != nil {
			return nil, p.errorf(pa.name, "%v", err)
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// JobArgs takes the Kafka parameters out of a job's arguments: any
// parameter a kafka:// URI accepts may be given as --name value or
// --name=value (booleans as --name or --name=false, as Go's flags), so a
// long URI can be split up or a secret kept out of it. It returns the
// other arguments, in order, and the parameters by side; that a side's
// parameters have a Kafka input or output to apply to is the job's check.
func JobArgs(args []string) (rest []string, source, sink Params, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i:]...), source, sink, nil
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		pa := lookup(name)
		if strings.HasPrefix(a, "-") && pa == nil && strings.HasPrefix(name, "properties.") {
			// Meant for Kafka: say what is accepted, not Go's "flag
			// provided but not defined".
			var unknown Params
			return nil, source, sink, unknown.set(forBoth, "argument --"+name, name, value)
		}
		if !strings.HasPrefix(a, "-") || pa == nil {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			switch {
			case pa.isBool && i+1 < len(args) && (args[i+1] == "true" || args[i+1] == "false"):
				// --enable.idempotence false: as a Kafka property is
				// written, where Go's flags would want =false.
				i++
				value = args[i]
			case pa.isBool:
				value = "true"
			case i+1 < len(args):
				i++
				value = args[i]
			default:
				return nil, source, sink, fmt.Errorf("argument --%s needs a value", name)
			}
		}
		where := "argument --" + name
		if pa.role&forSource != 0 {
			if err := source.set(forSource, where, name, value); err != nil {
				return nil, source, sink, err
			}
		}
		if pa.role&forSink != 0 {
			if err := sink.set(forSink, where, name, value); err != nil {
				return nil, source, sink, err
			}
		}
	}
	return rest, source, sink, nil
}

// only reports the first setting that is only for side r, "" if none: the
// job uses it to refuse a source parameter when its input is not Kafka.
func (p *Params) only(r role) string {
	names := make([]string, 0, len(p.vals))
	for n := range p.vals {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if lookup(n).role&r == lookup(n).role {
			return p.where[n]
		}
	}
	return ""
}

// OnlySource and OnlySink name a setting that applies only to a Kafka
// input or only to a Kafka output ("" if none).
func (p *Params) OnlySource() string { return p.only(forSource) }
func (p *Params) OnlySink() string   { return p.only(forSink) }

// Any names one setting, "" if there are none.
func (p *Params) Any() string { return p.only(forBoth) }

func msOpt(f func(time.Duration) kgo.Opt) func(string) (kgo.Opt, error) {
	return func(v string) (kgo.Opt, error) {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("expected a positive number of milliseconds")
		}
		return f(time.Duration(ms) * time.Millisecond), nil
	}
}

func bytesOpt(f func(int32) kgo.Opt) func(string) (kgo.Opt, error) {
	return func(v string) (kgo.Opt, error) {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("expected a positive number of bytes below 2 GiB")
		}
		return f(int32(n)), nil
	}
}

func compressionOpt(v string) (kgo.Opt, error) {
	c, ok := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}[strings.ToLower(v)]
	if !ok {
		return nil, fmt.Errorf("accepted: none, gzip, snappy, lz4, zstd")
	}
	// A compressor built here, not ProducerBatchCompression: that option
	// holds its codecs in a slice every client it is given to rewrites in
	// place (kgo.DefaultCompressor), and one sink's subtasks each make a
	// client with the same options, at once. A compressor is safe to
	// share.
	comp, err := kgo.DefaultCompressor(c)
	if err != nil {
		return nil, err
	}
	return kgo.WithCompressor(comp), nil
}

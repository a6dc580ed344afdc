package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/engine/config"
	"github.com/twmb/franz-go/pkg/kgo"
)

// IsURI reports whether s names Kafka rather than a file.
func IsURI(s string) bool { return strings.HasPrefix(s, "kafka://") }

// ParseSourceURI reads kafka://broker1:9092,broker2:9092/topic1,topic2?...
// into a Source; args are further parameters from the job's arguments
// (JobArgs).
func ParseSourceURI(s string, args Params) (*Source, error) {
	u, err := parseURI(s)
	if err != nil {
		return nil, err
	}
	p := args.clone()
	if err := p.addQuery(forSource, s, u.query); err != nil {
		return nil, err
	}
	src := &Source{Brokers: u.brokers, Topics: u.topics, Discovery: 5 * time.Minute}
	src.Group, _ = p.get("group.id")
	if v, ok := p.get("scan.startup.mode"); ok {
		if src.Startup, err = startupMode(v); err != nil {
			return nil, p.errorf("scan.startup.mode", "%v", err)
		}
	}
	if v, ok := p.get("auto.offset.reset"); ok {
		// Kafka's own values (earliest, latest) and Flink's.
		if src.Reset, err = startupMode(v); err != nil || (src.Reset != StartEarliest && src.Reset != StartLatest) {
			return nil, p.errorf("auto.offset.reset", "accepted: earliest-offset, latest-offset (or earliest, latest)")
		}
	}
	ts, tsSet := p.get("scan.startup.timestamp-millis")
	if tsSet {
		if src.Timestamp, err = strconv.ParseInt(ts, 10, 64); err != nil {
			return nil, p.errorf("scan.startup.timestamp-millis", "not a number of milliseconds since the epoch")
		}
	}
	src.Bounded = p.bool("bounded")
	if v, ok := p.get("partition.discovery.interval.ms"); ok {
		if src.Discovery, err = config.ParseDuration(v); err != nil {
			return nil, p.errorf("partition.discovery.interval.ms", "%v (0 turns discovery off)", err)
		}
	}
	switch v, _ := p.get("isolation.level"); v {
	case "", "read_committed":
	case "read_uncommitted":
		src.ReadUncommitted = true
	default:
		return nil, p.errorf("isolation.level", "accepted: read_committed, read_uncommitted")
	}
	if _, ok := p.get("commit.offsets.on.checkpoint"); ok && !p.bool("commit.offsets.on.checkpoint") {
		src.NoOffsetCommit = true
	}
	if _, ok := p.get("auto.offset.reset"); ok && src.Startup != StartGroup {
		return nil, p.errorf("auto.offset.reset", "applies with startup=group-offsets only (where a partition has no committed offset)")
	}
	if tsSet && src.Startup != StartTimestamp {
		return nil, p.errorf("scan.startup.timestamp-millis", "applies with startup=timestamp only")
	}
	if src.Startup == StartTimestamp && !tsSet {
		return nil, fmt.Errorf("kafka URI %s: startup=timestamp needs timestamp=<milliseconds>", Redact(s))
	}
	if src.Startup == StartGroup && src.Group == "" {
		return nil, fmt.Errorf("kafka URI %s: startup=group-offsets needs group=<consumer group>", Redact(s))
	}
	if src.Options, err = p.clientOptions(); err != nil {
		return nil, err
	}
	return src, nil
}

type parsedURI struct {
	brokers, topics []string
	query           url.Values
}

func parseURI(s string) (*parsedURI, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "kafka" {
		return nil, fmt.Errorf("%q is not a Kafka URI: expected kafka://host:port[,host:port...]/topic[?...]", Redact(s))
	}
	// Query() would drop a pair with a ';' in silence (a JAAS line ends
	// with one); ParseQuery says so.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("kafka URI %s: %v (write ';' as %%3B, e.g. in sasl.jaas.config, or give that parameter as a job argument)", Redact(s), err)
	}
	// What url.Parse keeps aside would be lost without a word: a user and
	// password before the host, or a '#' in a value (a fragment).
	if u.User != nil {
		return nil, fmt.Errorf("kafka URI %s: credentials go in sasl.username and sasl.password (or sasl.jaas.config), not before the host", Redact(s))
	}
	if u.Fragment != "" || strings.HasSuffix(s, "#") {
		return nil, fmt.Errorf("kafka URI %s: a '#' ends the URI there; write it as %%23", Redact(s))
	}
	p := &parsedURI{query: q}
	for _, b := range strings.Split(u.Host, ",") {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return nil, fmt.Errorf("kafka URI %s: broker %q is not host:port", Redact(s), b)
		}
		p.brokers = append(p.brokers, b)
	}
	for _, t := range strings.Split(strings.Trim(u.Path, "/"), ",") {
		if t != "" {
			p.topics = append(p.topics, t)
		}
	}
	if len(p.topics) == 0 {
		return nil, fmt.Errorf("kafka URI %s names no topic: expected kafka://host:port/topic", Redact(s))
	}
	return p, nil
}

func startupMode(v string) (string, error) {
	m := strings.ToLower(v)
	if !strings.HasSuffix(m, "-offset") && !strings.HasSuffix(m, "-offsets") && m != "timestamp" {
		if m == "group" {
			m = "group-offsets"
		} else {
			m += "-offset"
		}
	}
	switch m {
	case StartEarliest, StartLatest, StartGroup, StartTimestamp:
		return m, nil
	}
	return "", errors.New("accepted: earliest-offset, latest-offset, group-offsets, timestamp")
}

// clientOptions are the client options the parameters give: security,
// then those that map one to one (fetch and producer tuning, timeouts).
func (p *Params) clientOptions() ([]kgo.Opt, error) {
	opts, err := p.security()
	if err != nil {
		return nil, err
	}
	more, err := p.simpleOpts()
	return append(opts, more...), err
}

// SinkConfig is a sink URI's settings; NewSink makes the sink for a type.
type SinkConfig struct {
	Brokers               []string
	Topic                 string
	Guarantee             string
	TransactionalIDPrefix string
	TransactionTimeout    time.Duration
	Options               []kgo.Opt
}

// ParseSinkURI reads kafka://broker:9092/topic?delivery-guarantee=...&
// transactional-id-prefix=... (Flink's sink.delivery-guarantee, default
// at-least-once); args are further parameters from the job's arguments.
func ParseSinkURI(s string, args Params) (*SinkConfig, error) {
	u, err := parseURI(s)
	if err != nil {
		return nil, err
	}
	if len(u.topics) != 1 {
		return nil, fmt.Errorf("kafka URI %s: a sink writes one topic", Redact(s))
	}
	p := args.clone()
	if err := p.addQuery(forSink, s, u.query); err != nil {
		return nil, err
	}
	c := &SinkConfig{Brokers: u.brokers, Topic: u.topics[0], Guarantee: AtLeastOnce}
	switch v, _ := p.get("sink.delivery-guarantee"); v {
	case "":
	case ExactlyOnce, AtLeastOnce, None:
		c.Guarantee = v
	default:
		return nil, p.errorf("sink.delivery-guarantee", "accepted: exactly-once, at-least-once, none")
	}
	c.TransactionalIDPrefix, _ = p.get("sink.transactional-id-prefix")
	if v, ok := p.get("transaction.timeout.ms"); ok {
		ms, err := strconv.ParseInt(v, 10, 32) // the protocol's field is an int32
		if err != nil || ms <= 0 {
			return nil, p.errorf("transaction.timeout.ms", "expected a positive number of milliseconds (at most 2147483647; the brokers' transaction.max.timeout.ms, 15 min by default, bounds it too)")
		}
		c.TransactionTimeout = time.Duration(ms) * time.Millisecond
	}
	if c.Guarantee == ExactlyOnce && c.TransactionalIDPrefix == "" {
		return nil, fmt.Errorf("kafka URI %s: delivery-guarantee=exactly-once needs transactional-id-prefix=<prefix>, unique to the job (Flink requires it too)", Redact(s))
	}
	if c.Options, err = p.clientOptions(); err != nil {
		return nil, err
	}
	// Transactions are idempotent writes acknowledged by all in-sync
	// replicas; weaker settings are for the other guarantees.
	weak := false
	if v, ok := p.get("acks"); ok {
		switch v {
		case "all", "-1":
			c.Options = append(c.Options, kgo.RequiredAcks(kgo.AllISRAcks()))
		case "1", "0":
			weak = true
			acks := kgo.LeaderAck()
			if v == "0" {
				acks = kgo.NoAck()
			}
			c.Options = append(c.Options, kgo.RequiredAcks(acks))
		default:
			return nil, p.errorf("acks", "accepted: all (-1), 1, 0")
		}
	}
	if _, ok := p.get("enable.idempotence"); ok {
		if p.bool("enable.idempotence") && weak {
			// The Java client refuses this too: idempotence needs acks=all.
			return nil, p.errorf("acks", "enable.idempotence=true needs acks=all")
		}
		weak = weak || !p.bool("enable.idempotence")
	}
	if weak {
		if c.Guarantee == ExactlyOnce {
			return nil, fmt.Errorf("kafka URI %s: delivery-guarantee=exactly-once writes transactions, which need acks=all and enable.idempotence=true", Redact(s))
		}
		c.Options = append(c.Options, kgo.DisableIdempotentWrite())
	}
	return c, nil
}

// NewSink makes the sink c describes for records of type T.
func NewSink[T any](c *SinkConfig, record func(T) (key, value []byte)) *Sink[T] {
	return &Sink[T]{Brokers: c.Brokers, Topic: c.Topic, Guarantee: c.Guarantee, TransactionalIDPrefix: c.TransactionalIDPrefix,
		TransactionTimeout: c.TransactionTimeout, Record: record, Options: c.Options}
}

// Check asks the brokers for the sink's topic within the timeout.
func (c *SinkConfig) Check(ctx context.Context, timeout time.Duration) error {
	return (&Source{Brokers: c.Brokers, Topics: []string{c.Topic}, Options: c.Options}).Check(ctx, timeout)
}

package kafka

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/engine/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// IsURI reports whether s names Kafka rather than a file.
func IsURI(s string) bool { return strings.HasPrefix(s, "kafka://") }

// sourceParams are the query parameters ParseSourceURI accepts, for the
// error that names them.
const sourceParams = "group, startup (earliest-offset, latest-offset, group-offsets, timestamp), timestamp, reset (earliest-offset, latest-offset), bounded, discovery, isolation.level (read_committed, read_uncommitted), tls, sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sasl.username, sasl.password"

// ParseSourceURI reads kafka://broker1:9092,broker2:9092/topic1,topic2?...
// into a Source.
func ParseSourceURI(s string) (*Source, error) {
	u, err := parseURI(s)
	if err != nil {
		return nil, err
	}
	src := &Source{Brokers: u.brokers, Topics: u.topics, Discovery: 5 * time.Minute}
	for k, vs := range u.query {
		v := vs[len(vs)-1]
		switch k {
		case "group":
			src.Group = v
		case "startup", "scan.startup.mode":
			if src.Startup, err = startupMode(k, v); err != nil {
				return nil, err
			}
		case "reset":
			if src.Reset, err = startupMode(k, v); err != nil {
				return nil, err
			}
			if src.Reset != StartEarliest && src.Reset != StartLatest {
				return nil, fmt.Errorf("kafka URI %s: reset=%s: accepted: earliest-offset, latest-offset", s, v)
			}
		case "timestamp", "scan.startup.timestamp-millis":
			if src.Timestamp, err = strconv.ParseInt(v, 10, 64); err != nil {
				return nil, fmt.Errorf("kafka URI %s: timestamp=%s is not a number of milliseconds since the epoch", s, v)
			}
		case "bounded":
			if src.Bounded, err = strconv.ParseBool(v); err != nil {
				return nil, fmt.Errorf("kafka URI %s: bounded=%s: accepted: true, false", s, v)
			}
		case "discovery", "partition.discovery.interval":
			d, err := config.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("kafka URI %s: discovery=%s: %v (0 turns discovery off)", s, v, err)
			}
			src.Discovery = d
		case "isolation.level":
			switch v {
			case "read_committed":
			case "read_uncommitted":
				src.ReadUncommitted = true
			default:
				return nil, fmt.Errorf("kafka URI %s: isolation.level=%s: accepted: read_committed, read_uncommitted", s, v)
			}
		case "tls", "sasl.mechanism", "sasl.username", "sasl.password":
		default:
			return nil, fmt.Errorf("kafka URI %s: unknown parameter %q; accepted: %s", s, k, sourceParams)
		}
	}
	if src.Startup == StartTimestamp && u.query.Get("timestamp") == "" && u.query.Get("scan.startup.timestamp-millis") == "" {
		return nil, fmt.Errorf("kafka URI %s: startup=timestamp needs timestamp=<milliseconds>", s)
	}
	if src.Startup == StartGroup && src.Group == "" {
		return nil, fmt.Errorf("kafka URI %s: startup=group-offsets needs group=<consumer group>", s)
	}
	if src.Options, err = clientOptions(s, u.query); err != nil {
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
		return nil, fmt.Errorf("%q is not a Kafka URI: expected kafka://host:port[,host:port...]/topic[?...]", s)
	}
	p := &parsedURI{query: u.Query()}
	for _, b := range strings.Split(u.Host, ",") {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return nil, fmt.Errorf("kafka URI %s: broker %q is not host:port", s, b)
		}
		p.brokers = append(p.brokers, b)
	}
	for _, t := range strings.Split(strings.Trim(u.Path, "/"), ",") {
		if t != "" {
			p.topics = append(p.topics, t)
		}
	}
	if len(p.topics) == 0 {
		return nil, fmt.Errorf("kafka URI %s names no topic: expected kafka://host:port/topic", s)
	}
	return p, nil
}

func startupMode(key, v string) (string, error) {
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
	return "", fmt.Errorf("kafka URI: %s=%s: accepted: earliest-offset, latest-offset, group-offsets, timestamp", key, v)
}

// clientOptions turns the URI's security parameters into client options:
// tls=true, and SASL PLAIN or SCRAM with a user name and password.
func clientOptions(s string, q url.Values) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if v := q.Get("tls"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("kafka URI %s: tls=%s: accepted: true, false", s, v)
		}
		if on {
			opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
		}
	}
	mech, user, pass := q.Get("sasl.mechanism"), q.Get("sasl.username"), q.Get("sasl.password")
	switch strings.ToUpper(mech) {
	case "":
		if user != "" {
			return nil, fmt.Errorf("kafka URI %s: sasl.username without sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", s)
		}
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("kafka URI %s: sasl.mechanism=%s: accepted: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", s, mech)
	}
	return opts, nil
}

// sinkParams are the query parameters ParseSinkURI accepts.
const sinkParams = "delivery-guarantee (exactly-once, at-least-once, none), transactional-id-prefix, transaction.timeout.ms, tls, sasl.mechanism, sasl.username, sasl.password"

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
// at-least-once).
func ParseSinkURI(s string) (*SinkConfig, error) {
	u, err := parseURI(s)
	if err != nil {
		return nil, err
	}
	if len(u.topics) != 1 {
		return nil, fmt.Errorf("kafka URI %s: a sink writes one topic", s)
	}
	c := &SinkConfig{Brokers: u.brokers, Topic: u.topics[0], Guarantee: AtLeastOnce}
	for k, vs := range u.query {
		v := vs[len(vs)-1]
		switch k {
		case "delivery-guarantee", "sink.delivery-guarantee":
			switch v {
			case ExactlyOnce, AtLeastOnce, None:
				c.Guarantee = v
			default:
				return nil, fmt.Errorf("kafka URI %s: delivery-guarantee=%s: accepted: exactly-once, at-least-once, none", s, v)
			}
		case "transactional-id-prefix", "sink.transactional-id-prefix":
			c.TransactionalIDPrefix = v
		case "transaction.timeout.ms", "properties.transaction.timeout.ms":
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms <= 0 {
				return nil, fmt.Errorf("kafka URI %s: transaction.timeout.ms=%s: expected a positive number of milliseconds", s, v)
			}
			c.TransactionTimeout = time.Duration(ms) * time.Millisecond
		case "tls", "sasl.mechanism", "sasl.username", "sasl.password":
		default:
			return nil, fmt.Errorf("kafka URI %s: unknown parameter %q; accepted: %s", s, k, sinkParams)
		}
	}
	if c.Guarantee == ExactlyOnce && c.TransactionalIDPrefix == "" {
		return nil, fmt.Errorf("kafka URI %s: delivery-guarantee=exactly-once needs transactional-id-prefix=<prefix>, unique to the job (Flink requires it too)", s)
	}
	if c.Options, err = clientOptions(s, u.query); err != nil {
		return nil, err
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

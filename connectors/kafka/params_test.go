package kafka

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/api"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestJobArgs(t *testing.T) {
	rest, src, sink, err := JobArgs([]string{"--input", "kafka://b:1/t", "--group", "g", "-bounded", "--tls=false",
		"--delivery-guarantee=exactly-once", "--properties.client.id", "c", "--rate", "5", "--", "--group", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--input", "kafka://b:1/t", "--rate", "5", "--", "--group", "x"}; !slices.Equal(rest, want) {
		t.Errorf("rest = %q, want %q", rest, want)
	}
	for name, want := range map[string]string{"group.id": "g", "bounded": "true", "tls": "false", "client.id": "c"} {
		if v, _ := src.get(name); v != want {
			t.Errorf("source %s = %q, want %q", name, v, want)
		}
	}
	if _, ok := src.get("sink.delivery-guarantee"); ok {
		t.Error("a sink parameter went to the source")
	}
	for name, want := range map[string]string{"sink.delivery-guarantee": "exactly-once", "tls": "false", "client.id": "c"} {
		if v, _ := sink.get(name); v != want {
			t.Errorf("sink %s = %q, want %q", name, v, want)
		}
	}
	if _, ok := sink.get("group.id"); ok {
		t.Error("a source parameter went to the sink")
	}
	if got, want := src.OnlySource(), "argument --bounded (bounded)"; got != want {
		t.Errorf("OnlySource = %q, want %q", got, want)
	}
	for _, bad := range [][]string{{"--group"}, {"--group", "a", "--group.id", "b"}, {"--bounded=maybe"}, {"--properties.max.poll.records", "5"}} {
		if _, _, _, err := JobArgs(bad); err == nil {
			t.Errorf("JobArgs(%q): no error", bad)
		}
	}
	// A Kafka boolean written as a property is, with its value apart.
	rest, _, sink, err = JobArgs([]string{"--enable.idempotence", "false", "--discard"})
	if v, _ := sink.get("enable.idempotence"); err != nil || v != "false" || !slices.Equal(rest, []string{"--discard"}) {
		t.Errorf("--enable.idempotence false: %q, rest %q, %v", v, rest, err)
	}
}

// TestSecretsAreMasked: errors never show a password.
func TestSecretsAreMasked(t *testing.T) {
	for _, uri := range []string{
		"kafka://b:1/t?sasl.password=s3cret&tls=maybe",
		"kafka://b:1/t?security.protocol=SASL_PLAINTEXT&sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"s3cret\"%3B",
		"kafka://b:1/t?sasl.mechanism=PLAIN&sasl.username=u&properties.sasl.password=s3cret&nope=1",
	} {
		_, err := ParseSourceURI(uri, Params{})
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "******") {
			t.Errorf("%s: %v", uri, err)
		}
	}
	if got := Redact("kafka://b:1/t?group=g&sasl.password=s3cret&tls=true"); got != "kafka://b:1/t?group=g&sasl.password=******&tls=true" {
		t.Errorf("Redact: %s", got)
	}
}

func TestSourceURIParameters(t *testing.T) {
	src, err := ParseSourceURI("kafka://b:9092,c:9093/t1,t2?startup=group&properties.group.id=g&discovery=30s&commit.offsets.on.checkpoint=false&fetch.max.wait.ms=20&auto.offset.reset=earliest", Params{})
	if err != nil {
		t.Fatal(err)
	}
	if src.Startup != StartGroup || src.Group != "g" || src.Discovery != 30*time.Second || !src.NoOffsetCommit || src.commits() ||
		src.Reset != StartEarliest || len(src.Options) != 1 || !slices.Equal(src.Brokers, []string{"b:9092", "c:9093"}) {
		t.Errorf("parsed %+v", src)
	}
	_, args, _, err := JobArgs([]string{"--startup", "timestamp", "--timestamp", "1700000000000"})
	if err != nil {
		t.Fatal(err)
	}
	if src, err = ParseSourceURI("kafka://b:1/t", args); err != nil || src.Startup != StartTimestamp || src.Timestamp != 1700000000000 {
		t.Errorf("timestamp from arguments: %+v, %v", src, err)
	}
	// The URI and the arguments may repeat a value, not contradict it.
	if _, err := ParseSourceURI("kafka://b:1/t?startup=timestamp&timestamp=1700000000000", args); err != nil {
		t.Errorf("same values twice: %v", err)
	}
	for uri, want := range map[string]string{
		"kafka://b:1/t?startup=sometime":              "scan.startup.mode=sometime: accepted: earliest-offset",
		"kafka://b:1/t?startup=latest&reset=earliest": "auto.offset.reset=earliest: applies with startup=group-offsets only",
		"kafka://b:1/t?timestamp=1":                   "scan.startup.timestamp-millis=1: applies with startup=timestamp only",
		"kafka://b:1/t?group=a&group=b":               "group is given 2 times",
		"kafka://u:pw@b:1/t":                          "credentials go in sasl.username and sasl.password",
		"kafka://b:1/t?group=a#b":                     "write it as %23",
		"kafka://b:1/t?sasl.mechanism=PLAIN&sasl.password=x&sasl.jaas.config=x required password=\"y\"": "both give the credentials",
		"kafka://b:1/t?reset=group":                                                                        "auto.offset.reset=group: accepted: earliest-offset, latest-offset",
		"kafka://b:1/t?startup=timestamp":                                                                  "startup=timestamp needs timestamp=<milliseconds>",
		"kafka://b:1/t?startup=group-offsets":                                                              "startup=group-offsets needs group=<consumer group>",
		"kafka://b:1/t?isolation.level=dirty":                                                              "accepted: read_committed, read_uncommitted",
		"kafka://b:1/t?discovery=soon":                                                                     "partition.discovery.interval.ms=soon",
		"kafka://b:1/t?fetch.max.wait.ms=0":                                                                "fetch.max.wait.ms=0: expected a positive number of milliseconds",
		"kafka://b:1/t?linger.ms=5":                                                                        "linger.ms configures a Kafka output (sink), not a Kafka input (source)",
		"kafka://b:1/t?max.poll.records=5":                                                                 `unknown parameter "max.poll.records"`,
		"kafka://b:1/t?tls=true&security.protocol=PLAINTEXT":                                               "contradicts",
		"kafka://b:1/t?security.protocol=SSL&sasl.mechanism=PLAIN":                                         "security.protocol=SSL does not use SASL",
		"kafka://b:1/t?sasl.mechanism=GSSAPI&sasl.username=u":                                              "GSSAPI and OAUTHBEARER are not supported",
		"kafka://b:1/t?sasl.mechanism=PLAIN":                                                               "SASL PLAIN needs a user",
		"kafka://b:1/t?sasl.username=u":                                                                    "the connection does not use SASL",
		"kafka://b:1/t?tls=true&ssl.endpoint.identification.algorithm=ldap":                                "accepted: https",
		"kafka://b:1/t?tls=true&ssl.truststore.location=/nonexistent":                                      "no such file",
		"kafka://b:1/t?sasl.mechanism=PLAIN&sasl.username=u&sasl.jaas.config=x required username=\"u\";":   "write ';' as %3B",
		"kafka://b:1/t?sasl.mechanism=PLAIN&sasl.username=u&sasl.jaas.config=x required username=\"u\"%3B": "both give the credentials",
		"kafka://b:1/t?security.protocol=SASL_PLAINTEXT&sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule": "needs sasl.mechanism=SCRAM-SHA-256",
	} {
		if _, err := ParseSourceURI(uri, Params{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", uri, err, want)
		}
	}
}

func TestJAASCredentials(t *testing.T) {
	p := Params{}
	for k, v := range map[string]string{"sasl.mechanism": "PLAIN",
		"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="al ice" password="p\"w=1";`} {
		if err := p.set(forSource, "test", k, v); err != nil {
			t.Fatal(err)
		}
	}
	m, err := p.sasl("PLAIN")
	if err != nil {
		t.Fatal(err)
	}
	_, msg, err := m.Authenticate(t.Context(), "b:1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(msg), "\x00al ice\x00p\"w=1"; got != want {
		t.Errorf("PLAIN message %q, want %q", got, want)
	}
}

func TestSinkURIParameters(t *testing.T) {
	c, err := ParseSinkURI("kafka://b:1/out?acks=1&linger.ms=0&compression.type=LZ4&max.request.size=65536", Params{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Guarantee != AtLeastOnce || len(c.Options) != 5 { // linger, batch, compression, acks, no idempotence
		t.Errorf("parsed %+v (%d options)", c, len(c.Options))
	}
	for uri, want := range map[string]string{
		"kafka://b:1/a,b":                                 "a sink writes one topic",
		"kafka://b:1/out?delivery-guarantee=twice":        "accepted: exactly-once, at-least-once, none",
		"kafka://b:1/out?delivery-guarantee=exactly-once": "needs transactional-id-prefix",
		"kafka://b:1/out?delivery-guarantee=exactly-once&transactional-id-prefix=p&enable.idempotence=false": "need acks=all and enable.idempotence=true",
		"kafka://b:1/out?acks=2":                            "acks=2: accepted: all (-1), 1, 0",
		"kafka://b:1/out?acks=1&enable.idempotence=true":    "enable.idempotence=true needs acks=all",
		"kafka://b:1/out?transaction.timeout.ms=4294997296": "at most 2147483647",
		"kafka://b:1/out?batch.size=16384":                  `unknown parameter "batch.size"`,
		"kafka://b:1/out?compression.type=brotli":           "accepted: none, gzip, snappy, lz4, zstd",
		"kafka://b:1/out?transaction.timeout.ms=0":          "expected a positive number of milliseconds",
		"kafka://b:1/out?group=g":                           "group configures a Kafka input (source), not a Kafka output (sink)",
	} {
		if _, err := ParseSinkURI(uri, Params{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", uri, err, want)
		}
	}
}

func TestCheckCheckpointTiming(t *testing.T) {
	s := &Sink[string]{Topic: "out", Guarantee: ExactlyOnce, TransactionTimeout: time.Minute}
	for _, c := range []struct {
		interval, minPause, timeout time.Duration
		want                        string
	}{
		{0, 0, 20 * time.Second, "checkpointing is off"},
		{10 * time.Second, 0, 20 * time.Second, ""},
		{30 * time.Second, 0, 20 * time.Second, ""},
		{31 * time.Second, 0, 20 * time.Second, "execution.checkpointing.interval (31s) approaches transaction.timeout.ms (60000)"},
		{time.Minute, 0, 20 * time.Second, "execution.checkpointing.interval (1m0s) is not below transaction.timeout.ms (60000)"},
		{10 * time.Second, 2 * time.Minute, 20 * time.Second, "execution.checkpointing.min-pause (2m0s) is not below"},
		{10 * time.Second, 0, 10 * time.Minute, "a checkpoint slower than 50s loses its records"},
	} {
		got := strings.Join(s.CheckCheckpointTiming(api.CheckpointTiming{Interval: c.interval, MinPause: c.minPause, Timeout: c.timeout}), "")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("interval %s: %q, want %q", c.interval, got, c.want)
		}
	}
	if w := (&Sink[string]{Guarantee: AtLeastOnce}).CheckCheckpointTiming(api.CheckpointTiming{}); w != nil {
		t.Errorf("at-least-once warned: %q", w)
	}
}

// TestCompressionOptionIsSharedSafely: the sink's subtasks make their
// clients with the same options, concurrently; compression.type's must
// not be rewritten by each of them (go test -race).
func TestCompressionOptionIsSharedSafely(t *testing.T) {
	opt, err := compressionOpt("lz4")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), opt)
			if err != nil {
				t.Error(err)
				return
			}
			cl.Close()
		}()
	}
	wg.Wait()
}

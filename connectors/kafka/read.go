package kafka

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadToEnd reads every record value of topic up to its end as it is now —
// the last stable offset for a read_committed reader (committed), the high
// watermark otherwise — as a consumer of the sink's output would: for
// tests and the guarantee measurements.
func ReadToEnd(ctx context.Context, brokers []string, topic string, committed bool, opts ...kgo.Opt) ([]string, error) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil {
		return nil, err
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []string
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %s: %d partitions not read to their end: %w", topic, len(left), ctx.Err())
		}
		// Control records (transaction markers) move the position too.
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, string(r.Value))
			}
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return out, nil
}

// ProduceLines writes r's lines to topic as record values, round robin
// over its partitions, and waits for every one to be acknowledged: how
// the tests and scripts feed a Kafka input.
func ProduceLines(ctx context.Context, brokers []string, topic string, r io.Reader, opts ...kgo.Opt) (int, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}, opts...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var recs []*kgo.Record
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		recs = append(recs, &kgo.Record{Value: []byte(sc.Text())})
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return len(recs), cl.ProduceSync(ctx, recs...).FirstErr()
}

// Package kafka is gflink's Kafka connector, on franz-go: a replayable
// source whose splits are topic partitions with their offsets (Flink's
// KafkaSource), and a transactional sink.
package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gflink/gflink/stream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Startup modes of a fresh job (Flink's scan.startup.mode).
const (
	StartEarliest  = "earliest-offset"
	StartLatest    = "latest-offset"
	StartGroup     = "group-offsets"
	StartTimestamp = "timestamp"
)

// Source reads topics as a replayable source: each partition is a split
// whose state is the offset of its next record, so a restored job resumes
// every partition exactly where its checkpoint was taken, at any
// parallelism. Progress is in the checkpoint; offsets are committed to the
// consumer group only for monitoring, when a checkpoint completes.
type Source struct {
	Brokers []string
	Topics  []string
	// Group is the consumer group offsets are committed to (and read from
	// with StartGroup); "" commits nothing.
	Group string
	// Startup is where a fresh job starts; a restored one always resumes
	// from its checkpointed offsets. Timestamp is the milliseconds for
	// StartTimestamp; Reset is where a partition without a committed offset
	// starts with StartGroup (StartEarliest or StartLatest).
	Startup   string
	Timestamp int64
	Reset     string
	// Bounded stops each partition at the offset that was latest (last
	// stable, read_committed) when the job started, so the job finishes.
	Bounded bool
	// Discovery is how often new partitions are looked for (0: never;
	// bounded sources never discover).
	Discovery time.Duration
	// ReadUncommitted reads records of open and aborted transactions too
	// (isolation.level=read_uncommitted); the default is read_committed.
	ReadUncommitted bool
	// NoOffsetCommit keeps the offsets out of the group even when Group is
	// set (Flink's commit.offsets.on.checkpoint=false).
	NoOffsetCommit bool
	// Options are further client options (TLS, SASL, fetch tuning, ...);
	// they come after gflink's own, so a user's fetch.max.wait.ms wins.
	Options []kgo.Opt
}

// split is a partition with the offset of its next record and, bounded,
// the offset it stops at (-1: never).
type split struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Stop      int64  `json:"stop"`
	// out is the split's collector, with a watermark strategy on the
	// source (stream.SplitCollector): its own generator.
	out stream.TimestampedCollector[string]
}

// id names the split to the source's per-split watermarks.
func (s split) id() string { return s.Topic + "-" + strconv.Itoa(int(s.Partition)) }

func (s split) key() topicPartition { return topicPartition{s.Topic, s.Partition} }

type topicPartition struct {
	topic     string
	partition int32
}

// UnionSplits implements stream.UnionSplitSource: a reader tells a newly
// discovered partition from another reader's only by seeing every split.
func (*Source) UnionSplits() bool { return true }

// owner is the subtask that reads a partition at a parallelism: the
// topic's partitions go round the subtasks from a start that depends on
// the topic (Flink's KafkaSourceEnumerator), so several topics spread out.
func owner(tp topicPartition, parallelism int) int {
	h := fnv.New32a()
	h.Write([]byte(tp.topic))
	start := int(h.Sum32()&0x7fffffff) % parallelism
	return (start + int(tp.partition)) % parallelism
}

// commits reports whether completed checkpoints' offsets go to the group.
func (s *Source) commits() bool { return s.Group != "" && !s.NoOffsetCommit }

func (s *Source) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.Brokers...)}, extra...)
	return append(opts, s.Options...)
}

// requestTimeout bounds each metadata and offset request.
const requestTimeout = 10 * time.Second

// Check asks the brokers for the topics' metadata within the timeout: an
// unreachable broker or a missing topic is an error before the job runs.
func (s *Source) Check(ctx context.Context, timeout time.Duration) error {
	cl, err := kgo.NewClient(s.clientOpts()...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = partitionsOf(ctx, kadm.NewClient(cl), s.Topics)
	return err
}

// partitionsOf lists the topics' partitions.
func partitionsOf(ctx context.Context, adm *kadm.Client, topics []string) ([]topicPartition, error) {
	md, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("kafka: list topics %v: %w", topics, err)
	}
	var out []topicPartition
	for _, t := range topics {
		td, ok := md[t]
		if !ok || td.Err != nil {
			why := "it does not exist"
			if ok {
				why = td.Err.Error()
			}
			return nil, fmt.Errorf("kafka: topic %q: %s", t, why)
		}
		for p := range td.Partitions {
			out = append(out, topicPartition{t, p})
		}
	}
	slices.SortFunc(out, func(a, b topicPartition) int {
		if a.topic != b.topic {
			if a.topic < b.topic {
				return -1
			}
			return 1
		}
		return int(a.partition - b.partition)
	})
	return out, nil
}

// Splits implements stream.Source: every partition with the offset the
// startup mode resolves to now — concrete offsets, so that a checkpoint
// taken before a partition's first record still resumes from the same
// place — and, bounded, its stopping offset.
func (s *Source) Splits(int) ([][]byte, error) {
	cl, err := kgo.NewClient(s.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	tps, err := partitionsOf(ctx, adm, s.Topics)
	if err != nil {
		return nil, err
	}
	starts, err := s.startOffsets(ctx, adm)
	if err != nil {
		return nil, err
	}
	var stops kadm.ListedOffsets
	if s.Bounded {
		if s.ReadUncommitted {
			stops, err = adm.ListEndOffsets(ctx, s.Topics...)
		} else {
			stops, err = adm.ListCommittedOffsets(ctx, s.Topics...)
		}
		if err != nil {
			return nil, fmt.Errorf("kafka: list the stopping offsets: %w", err)
		}
	}
	var out [][]byte
	for _, tp := range tps {
		sp := split{Topic: tp.topic, Partition: tp.partition, Offset: starts[tp], Stop: -1}
		if s.Bounded {
			o, ok := stops.Lookup(tp.topic, tp.partition)
			if !ok || o.Err != nil {
				return nil, fmt.Errorf("kafka: no stopping offset for %s/%d", tp.topic, tp.partition)
			}
			sp.Stop = o.Offset
		}
		b, _ := json.Marshal(sp)
		out = append(out, b)
	}
	return out, nil
}

func (s *Source) startOffsets(ctx context.Context, adm *kadm.Client) (map[topicPartition]int64, error) {
	list := func(l kadm.ListedOffsets, err error) (map[topicPartition]int64, error) {
		if err != nil {
			return nil, fmt.Errorf("kafka: list the starting offsets: %w", err)
		}
		m := map[topicPartition]int64{}
		l.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				m[topicPartition{o.Topic, o.Partition}] = o.Offset
			}
		})
		return m, nil
	}
	end := adm.ListCommittedOffsets
	if s.ReadUncommitted {
		end = adm.ListEndOffsets
	}
	switch s.Startup {
	case "", StartEarliest:
		return list(adm.ListStartOffsets(ctx, s.Topics...))
	case StartLatest:
		return list(end(ctx, s.Topics...))
	case StartTimestamp:
		m, err := list(adm.ListOffsetsAfterMilli(ctx, s.Timestamp, s.Topics...))
		if err != nil {
			return nil, err
		}
		// A partition with nothing after the time starts at its end.
		ends, err := list(end(ctx, s.Topics...))
		if err != nil {
			return nil, err
		}
		for tp, o := range ends {
			if v, ok := m[tp]; !ok || v < 0 {
				m[tp] = o
			}
		}
		return m, nil
	case StartGroup:
		if s.Group == "" {
			return nil, errors.New("kafka: startup mode group-offsets needs a consumer group (group=...)")
		}
		reset := adm.ListStartOffsets
		if s.Reset == StartLatest {
			reset = end
		}
		m, err := list(reset(ctx, s.Topics...))
		if err != nil {
			return nil, err
		}
		committed, err := adm.FetchOffsets(ctx, s.Group)
		if err != nil {
			return nil, fmt.Errorf("kafka: fetch the offsets of group %s: %w", s.Group, err)
		}
		committed.Each(func(o kadm.OffsetResponse) {
			tp := topicPartition{o.Topic, o.Partition}
			if _, ok := m[tp]; ok && o.Err == nil && o.At >= 0 {
				m[tp] = o.At
			}
		})
		return m, nil
	}
	return nil, fmt.Errorf("kafka: unknown startup mode %q: use earliest-offset, latest-offset, group-offsets or timestamp", s.Startup)
}

// CheckRestoredSplits implements stream.RestoredSplitsChecker: a restored
// job reads the partitions in its snapshot; they must be of its topics.
func (s *Source) CheckRestoredSplits(items [][]byte) error {
	for _, b := range items {
		var sp split
		if err := json.Unmarshal(b, &sp); err != nil {
			return fmt.Errorf("not a Kafka split: %w", err)
		}
		if !slices.Contains(s.Topics, sp.Topic) {
			return fmt.Errorf("the snapshot reads Kafka topic %q, which this job does not (it reads %v)", sp.Topic, s.Topics)
		}
	}
	return nil
}

// CreateReader implements stream.Source.
func (s *Source) CreateReader(ctx stream.SourceContext) (stream.SourceReader[string], error) {
	return &reader{src: s, subtask: ctx.Subtask, parallelism: ctx.Parallelism,
		splits: map[topicPartition]*split{}, known: map[topicPartition]bool{}, pending: map[int64]map[topicPartition]int64{}}, nil
}

// reader reads the partitions one subtask owns.
type reader struct {
	src                  *Source
	subtask, parallelism int
	cl                   *kgo.Client
	splits               map[topicPartition]*split // owned, not finished
	finished             map[topicPartition]*split // bounded, read to the stop
	known                map[topicPartition]bool   // every partition any reader holds
	buf                  []*kgo.Record

	nextDiscovery time.Time
	discovered    chan []topicPartition
	discovering   bool

	// pending are the offsets of checkpoints not yet complete, to commit
	// to the group when they are.
	pending map[int64]map[topicPartition]int64
	commits sync.WaitGroup
	closed  bool
	// sc is the reader's collector when it takes records per split
	// (stream.SplitCollector); newSplits: splits were added since the
	// last poll, which get their collectors then.
	sc        stream.SplitCollector[string]
	newSplits bool
	// end is, per partition, the offset up to which records can be read
	// (the last stable offset under read_committed, else the high
	// watermark), from the latest fetch of it: pendingRecords.
	end map[topicPartition]int64
	// bytes is the size of the keys and values of the records read
	// (numBytesIn).
	bytes int64
}

// NumBytesIn implements stream.BytesInReader: the bytes of the keys and
// values of the records read.
func (r *reader) NumBytesIn() int64 { return r.bytes }

// PendingRecords implements stream.PendingRecordsReader: FLIP-33's
// pendingRecords, the records between each owned partition's position and
// its end at its latest fetch (the consumer lag Flink's KafkaSource
// reports), up to a bounded partition's stop.
func (r *reader) PendingRecords() (int64, bool) {
	var n int64
	known := false
	for tp, sp := range r.splits {
		end, ok := r.end[tp]
		if !ok {
			continue
		}
		if sp.Stop >= 0 {
			end = min(end, sp.Stop)
		}
		n, known = n+max(end-sp.Offset, 0), true
	}
	return n, known
}

// AddSplits implements stream.SourceReader: it is given every split (union
// state) and keeps the ones it owns at the current parallelism.
func (r *reader) AddSplits(items [][]byte) error {
	start := map[string]map[int32]kgo.Offset{}
	for _, b := range items {
		var sp split
		if err := json.Unmarshal(b, &sp); err != nil {
			return fmt.Errorf("kafka: restored split: %w", err)
		}
		tp := sp.key()
		r.known[tp] = true
		if owner(tp, r.parallelism) != r.subtask {
			continue
		}
		if sp.Stop >= 0 && sp.Offset >= sp.Stop {
			if r.finished == nil {
				r.finished = map[topicPartition]*split{}
			}
			r.finished[tp] = &sp
			continue
		}
		r.splits[tp] = &sp
		r.newSplits = true
		if start[sp.Topic] == nil {
			start[sp.Topic] = map[int32]kgo.Offset{}
		}
		start[sp.Topic][sp.Partition] = kgo.NewOffset().At(sp.Offset)
	}
	iso := kgo.ReadCommitted()
	if r.src.ReadUncommitted {
		iso = kgo.ReadUncommitted()
	}
	// Control records (transaction markers) occupy offsets too: kept, so
	// that a split's offset moves past them and a bounded split reaches
	// its stop.
	cl, err := kgo.NewClient(r.src.clientOpts(kgo.ConsumePartitions(start), kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	r.cl = cl
	if r.src.Discovery > 0 && !r.src.Bounded {
		r.nextDiscovery = time.Now().Add(r.src.Discovery)
	}
	return nil
}

// maxPoll is how many records one PollNext emits at most.
const maxPoll = 256

// PollNext implements stream.SourceReader. It never blocks: it takes what
// the client has fetched in the background.
func (r *reader) PollNext(out stream.Collector[string]) (stream.InputStatus, error) {
	r.checkDiscovery()
	if sc, ok := out.(stream.SplitCollector[string]); ok && (r.sc == nil || r.newSplits) {
		// Every partition gets its generator now, records or not: an
		// empty partition holds event time back (unless idle), as in
		// Flink.
		r.sc, r.newSplits = sc, false
		for _, sp := range r.splits {
			if sp.out == nil {
				sp.out, _ = sc.ForSplit(sp.id()).(stream.TimestampedCollector[string])
			}
		}
	}
	if len(r.buf) == 0 {
		fs := r.cl.PollRecords(nil, maxPoll)
		if err := fetchError(fs); err != nil {
			return 0, err
		}
		r.buf = fs.Records()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			end := p.HighWatermark
			if p.LastStableOffset >= 0 && p.LastStableOffset < end {
				end = p.LastStableOffset
			}
			if end >= 0 {
				if r.end == nil {
					r.end = map[topicPartition]int64{}
				}
				r.end[topicPartition{p.Topic, p.Partition}] = end
			}
		})
	}
	outTS, _ := out.(stream.TimestampedCollector[string]) // once a poll, not per record
	n := 0
	for len(r.buf) > 0 && n < maxPoll {
		rec := r.buf[0]
		r.buf = r.buf[1:]
		sp := r.splits[topicPartition{rec.Topic, rec.Partition}]
		if sp == nil || rec.Offset < sp.Offset {
			continue // finished, or before the position (a refetch)
		}
		if sp.Stop >= 0 && rec.Offset >= sp.Stop {
			r.finish(sp)
			continue
		}
		sp.Offset = rec.Offset + 1
		if !rec.Attrs.IsControl() {
			// The record's Kafka timestamp (its producer's, or the log
			// append time) is its event time unless an assigner says
			// otherwise, as Flink's KafkaSource gives it.
			r.bytes += int64(len(rec.Key) + len(rec.Value))
			switch v, ts := string(rec.Value), rec.Timestamp.UnixMilli(); {
			case sp.out != nil:
				sp.out.CollectWithTimestamp(v, ts)
			case outTS != nil:
				outTS.CollectWithTimestamp(v, ts)
			default:
				out.Collect(v)
			}
			n++
		}
		if sp.Stop >= 0 && sp.Offset >= sp.Stop {
			r.finish(sp)
		}
	}
	if r.src.Bounded && len(r.splits) == 0 {
		return stream.EndOfInput, nil
	}
	if len(r.buf) > 0 || n > 0 {
		return stream.MoreAvailable, nil
	}
	return stream.NothingAvailable, nil
}

func (r *reader) finish(sp *split) {
	tp := sp.key()
	delete(r.splits, tp)
	if r.sc != nil && sp.out != nil {
		r.sc.ReleaseSplit(sp.id())
	}
	if r.finished == nil {
		r.finished = map[topicPartition]*split{}
	}
	r.finished[tp] = sp
	r.cl.RemoveConsumePartitions(map[string][]int32{sp.Topic: {sp.Partition}})
}

func fetchError(fs kgo.Fetches) error {
	var err error
	fs.EachError(func(t string, p int32, e error) {
		if err == nil && !errors.Is(e, context.Canceled) {
			err = fmt.Errorf("kafka: fetch %s/%d: %w", t, p, e)
		}
	})
	return err
}

// NextPollTime implements stream.AvailabilityWaiter: the client fetches in
// the background, so a short pause is enough.
func (r *reader) NextPollTime() time.Time { return time.Now().Add(2 * time.Millisecond) }

// checkDiscovery starts a metadata request in the background at the
// discovery interval, and takes the new partitions it owns from a finished
// one, starting at their earliest offset (Flink's behaviour for
// partitions that appear while running).
func (r *reader) checkDiscovery() {
	if r.discovering {
		select {
		case tps := <-r.discovered:
			r.discovering = false
			add := map[string]map[int32]kgo.Offset{}
			for _, tp := range tps {
				if r.known[tp] {
					continue
				}
				r.known[tp] = true
				if owner(tp, r.parallelism) != r.subtask {
					continue
				}
				r.splits[tp] = &split{Topic: tp.topic, Partition: tp.partition, Offset: 0, Stop: -1}
				r.newSplits = true
				if add[tp.topic] == nil {
					add[tp.topic] = map[int32]kgo.Offset{}
				}
				add[tp.topic][tp.partition] = kgo.NewOffset().AtStart()
			}
			if len(add) > 0 {
				r.cl.AddConsumePartitions(add)
			}
		default:
		}
		return
	}
	if r.nextDiscovery.IsZero() || time.Now().Before(r.nextDiscovery) {
		return
	}
	r.nextDiscovery = time.Now().Add(r.src.Discovery)
	r.discovering = true
	if r.discovered == nil {
		r.discovered = make(chan []topicPartition, 1)
	}
	r.commits.Add(1)
	go func() {
		defer r.commits.Done()
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		tps, err := partitionsOf(ctx, kadm.NewClient(r.cl), r.src.Topics)
		if err != nil {
			tps = nil // try again at the next interval
		}
		r.discovered <- tps
	}()
}

// SnapshotState implements stream.SourceReader: the owned splits with
// their offsets (finished ones too, so that a restore does not take them
// for new partitions).
func (r *reader) SnapshotState(id int64) ([][]byte, error) {
	var out [][]byte
	offsets := map[topicPartition]int64{}
	for _, m := range []map[topicPartition]*split{r.splits, r.finished} {
		for tp, sp := range m {
			b, _ := json.Marshal(sp)
			out = append(out, b)
			offsets[tp] = sp.Offset
		}
	}
	if r.src.commits() {
		r.pending[id] = offsets
	}
	return out, nil
}

// NotifyCheckpointComplete implements stream.SourceCheckpointListener: the
// checkpoint's offsets go to the consumer group, in the background, for
// monitoring only — a failed commit changes nothing about recovery.
func (r *reader) NotifyCheckpointComplete(id int64) error {
	offsets, ok := r.pending[id]
	for old := range r.pending {
		if old <= id {
			delete(r.pending, old)
		}
	}
	if !ok || !r.src.commits() || r.closed {
		return nil
	}
	os := kadm.Offsets{}
	for tp, o := range offsets {
		os.AddOffset(tp.topic, tp.partition, o, -1)
	}
	r.commits.Add(1)
	go func() {
		defer r.commits.Done()
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		_, _ = kadm.NewClient(r.cl).CommitOffsets(ctx, r.src.Group, os)
	}()
	return nil
}

// Close implements stream.SourceReader.
func (r *reader) Close() error {
	r.closed = true
	if r.cl != nil {
		r.commits.Wait()
		r.cl.Close()
	}
	return nil
}

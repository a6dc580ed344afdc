package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster starts an in-process Kafka (kfake, over real TCP on a free
// loopback port) with topic "in" of partitions partitions.
func cluster(t *testing.T, partitions int32, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// produce writes lines "<prefix>-<i>" round-robin over the partitions,
// synchronously.
func produce(t *testing.T, brokers []string, topic, prefix string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	var want []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v)})
		want = append(want, v)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return want
}

type collector struct{ out []string }

func (c *collector) Collect(s string) { c.out = append(c.out, s) }

// readers makes the readers of a parallelism, each given every split.
func readers(t *testing.T, src *Source, p int, items [][]byte) []api.SourceReader[string] {
	t.Helper()
	var rs []api.SourceReader[string]
	for i := range p {
		r, err := src.CreateReader(api.SourceContext{Subtask: i, Parallelism: p})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.AddSplits(items); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		rs = append(rs, r)
	}
	return rs
}

// pollUntil polls every reader until done says so or the deadline passes.
func pollUntil(t *testing.T, rs []api.SourceReader[string], c *collector, within time.Duration, done func(ended int) bool) {
	t.Helper()
	deadline := testutil.Deadline(within)
	for {
		ended := 0
		for _, r := range rs {
			st, err := r.PollNext(c)
			if err != nil {
				t.Fatal(err)
			}
			if st == api.EndOfInput {
				ended++
			}
		}
		if done(ended) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done within %v: %d records read", within, len(c.out))
		}
		time.Sleep(time.Millisecond)
	}
}

func snapshot(t *testing.T, rs []api.SourceReader[string], id int64) [][]byte {
	t.Helper()
	var items [][]byte
	for _, r := range rs {
		s, err := r.SnapshotState(id)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, s...)
	}
	return items
}

func sameElements(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s: read %d records, want %d (first read: %v)", what, len(g), len(w), g[:min(5, len(g))])
	}
}

// TestSourceResumesEachPartitionAtAnyParallelism: readers at p=2 read part
// of 8 partitions and snapshot; more records are produced; readers at p=3
// restored from the snapshot (union state: each keeps what it owns) read
// the rest, bounded: every record exactly once.
func TestSourceResumesEachPartitionAtAnyParallelism(t *testing.T) {
	brokers := cluster(t, 8, "in")
	want := produce(t, brokers, "in", "a", 400)
	src := &Source{Brokers: brokers, Topics: []string{"in"}}
	items, err := src.Splits(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 8 {
		t.Fatalf("%d splits for 8 partitions", len(items))
	}
	c := &collector{}
	rs := readers(t, src, 2, items)
	pollUntil(t, rs, c, 10*time.Second, func(int) bool { return len(c.out) >= 150 })
	snap := snapshot(t, rs, 1)
	for _, r := range rs {
		r.Close()
	}
	want = append(want, produce(t, brokers, "in", "b", 300)...)
	// Bounded from here on: the restored splits keep their offsets; the
	// stop is where the topic ends now.
	bounded := &Source{Brokers: brokers, Topics: []string{"in"}, Bounded: true}
	stops, err := bounded.Splits(3)
	if err != nil {
		t.Fatal(err)
	}
	snap = withStops(t, snap, stops)
	rs = readers(t, bounded, 3, snap)
	pollUntil(t, rs, c, 10*time.Second, func(ended int) bool { return ended == 3 })
	sameElements(t, "after a restore at p=3", c.out, want)
}

// withStops gives restored splits the stopping offsets of fresh ones.
func withStops(t *testing.T, restored, fresh [][]byte) [][]byte {
	t.Helper()
	stop := map[topicPartition]int64{}
	for _, b := range fresh {
		sp := mustSplit(t, b)
		stop[sp.key()] = sp.Stop
	}
	var out [][]byte
	for _, b := range restored {
		sp := mustSplit(t, b)
		sp.Stop = stop[sp.key()]
		out = append(out, mustJSON(sp))
	}
	return out
}

func TestBoundedSourceEndsAtTheOffsetsOfItsStart(t *testing.T) {
	brokers := cluster(t, 4, "in")
	want := produce(t, brokers, "in", "a", 100)
	src := &Source{Brokers: brokers, Topics: []string{"in"}, Bounded: true}
	items, err := src.Splits(2)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, brokers, "in", "late", 50) // after the start: not read
	c := &collector{}
	pollUntil(t, readers(t, src, 2, items), c, 10*time.Second, func(ended int) bool { return ended == 2 })
	sameElements(t, "bounded", c.out, want)
}

// TestBoundedReadCommittedPassesTransactionMarkers: a transactional
// producer's commit and abort markers take offsets; a bounded reader moves
// past them to its stop, and sees only committed records.
func TestBoundedReadCommittedPassesTransactionMarkers(t *testing.T) {
	brokers := cluster(t, 2, "in")
	txn, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("t1"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	var committed []string
	for i, commit := range []bool{true, false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 10 {
			v := fmt.Sprintf("t%d-%d", i, j)
			if err := txn.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if commit {
				committed = append(committed, v)
			}
		}
		if err := txn.EndTransaction(context.Background(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	src := &Source{Brokers: brokers, Topics: []string{"in"}, Bounded: true}
	items, err := src.Splits(1)
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	pollUntil(t, readers(t, src, 1, items), c, 10*time.Second, func(ended int) bool { return ended == 1 })
	sameElements(t, "read_committed", c.out, committed)

	unc := &Source{Brokers: brokers, Topics: []string{"in"}, Bounded: true, ReadUncommitted: true}
	items, err = unc.Splits(1)
	if err != nil {
		t.Fatal(err)
	}
	c2 := &collector{}
	pollUntil(t, readers(t, unc, 1, items), c2, 10*time.Second, func(ended int) bool { return ended == 1 })
	if len(c2.out) != 30 {
		t.Fatalf("read_uncommitted read %d records; want all 30, the aborted ones too", len(c2.out))
	}
}

func TestDiscoveredPartitionIsRead(t *testing.T) {
	brokers := cluster(t, 2, "in")
	want := produce(t, brokers, "in", "a", 20)
	src := &Source{Brokers: brokers, Topics: []string{"in"}, Discovery: 20 * time.Millisecond, Options: []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond)}}
	items, err := src.Splits(2)
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	rs := readers(t, src, 2, items)
	pollUntil(t, rs, c, 10*time.Second, func(int) bool { return len(c.out) == 20 })
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreatePartitions(context.Background(), 2, "in"); err != nil {
		t.Fatal(err)
	}
	// Into the new partitions only.
	var recs []*kgo.Record
	for i := range 10 {
		v := fmt.Sprintf("new-%d", i)
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(2 + i%2), Value: []byte(v)})
		want = append(want, v)
	}
	man, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer man.Close()
	if err := man.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, rs, c, 10*time.Second, func(int) bool { return len(c.out) == 30 })
	sameElements(t, "with two discovered partitions", c.out, want)
	// Each new partition is read by exactly one reader and snapshotted by it.
	snap := snapshot(t, rs, 1)
	if len(snap) != 4 {
		t.Fatalf("snapshot holds %d splits; want 4", len(snap))
	}
}

func TestStartupModes(t *testing.T) {
	brokers := cluster(t, 2, "in")
	old := produce(t, brokers, "in", "old", 10)
	latest := &Source{Brokers: brokers, Topics: []string{"in"}, Startup: StartLatest}
	items, err := latest.Splits(1)
	if err != nil {
		t.Fatal(err)
	}
	fresh := produce(t, brokers, "in", "fresh", 10)
	c := &collector{}
	pollUntil(t, readers(t, latest, 1, items), c, 10*time.Second, func(int) bool { return len(c.out) == 10 })
	sameElements(t, "latest-offset", c.out, fresh)

	// Group offsets: commit half of the partitions' offsets, reset the
	// rest to the earliest.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	os := kadm.Offsets{}
	os.AddOffset("in", 0, 10, -1) // partition 0 fully read
	if _, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "g", os); err != nil {
		t.Fatal(err)
	}
	group := &Source{Brokers: brokers, Topics: []string{"in"}, Startup: StartGroup, Group: "g", Bounded: true}
	items, err = group.Splits(1)
	if err != nil {
		t.Fatal(err)
	}
	c = &collector{}
	pollUntil(t, readers(t, group, 1, items), c, 10*time.Second, func(ended int) bool { return ended == 1 })
	if len(c.out) != 10 || len(old)+len(fresh) != 20 {
		t.Fatalf("group-offsets read %v; want partition 1's 10 records (partition 0's committed offset is its end)", c.out)
	}
	if _, err := (&Source{Brokers: brokers, Topics: []string{"in"}, Startup: StartGroup}).Splits(1); err == nil || !strings.Contains(err.Error(), "consumer group") {
		t.Fatalf("group-offsets without a group: %v", err)
	}
}

func TestMissingTopicAndUnreachableBrokerAreErrors(t *testing.T) {
	brokers := cluster(t, 1, "in")
	err := (&Source{Brokers: brokers, Topics: []string{"nope"}}).Check(context.Background(), 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("missing topic: %v", err)
	}
	start := time.Now()
	err = (&Source{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"in"}}).Check(context.Background(), time.Second)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("unreachable broker: %v after %v", err, time.Since(start))
	}
}

func mustSplit(t *testing.T, b []byte) split {
	t.Helper()
	var sp split
	if err := json.Unmarshal(b, &sp); err != nil {
		t.Fatal(err)
	}
	return sp
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestPendingRecordsIsTheLag: a reader's pendingRecords (FLIP-33) is what
// its partitions hold beyond its positions, as of its latest fetches: 0
// once everything is read, more again once more is produced and fetched.
func TestPendingRecordsIsTheLag(t *testing.T) {
	brokers := cluster(t, 2, "in")
	produce(t, brokers, "in", "a", 300)
	src := &Source{Brokers: brokers, Topics: []string{"in"}}
	items, err := src.Splits(1)
	if err != nil {
		t.Fatal(err)
	}
	rs := readers(t, src, 1, items)
	pr := rs[0].(api.PendingRecordsReader)
	if n, ok := pr.PendingRecords(); ok {
		t.Errorf("before any fetch: %d, known; want unknown", n)
	}
	c := &collector{}
	pollUntil(t, rs, c, 10*time.Second, func(int) bool { return len(c.out) == 300 })
	if n, ok := pr.PendingRecords(); !ok || n != 0 {
		t.Errorf("after reading everything: %d, %v; want 0, known", n, ok)
	}
	produce(t, brokers, "in", "b", 100)
	pollUntil(t, rs, c, 10*time.Second, func(int) bool { return len(c.out) == 400 })
	if n, ok := pr.PendingRecords(); !ok || n != 0 {
		t.Errorf("after reading the second batch: %d, %v; want 0, known", n, ok)
	}
	// A fresh reader takes at most maxPoll records a poll: while it works
	// through them it lags, by no more than it has not read. Each
	// partition holds more than maxPoll, so that the lag shows however
	// the client groups its fetches (one partition per fetch, whole,
	// would otherwise be read in one poll).
	total := 2 * (maxPoll + 100)
	produce(t, brokers, "in", "c", total-400)
	r2 := readers(t, src, 1, items)[0]
	c2 := &collector{}
	lagged := false
	deadline := testutil.Deadline(10 * time.Second)
	for len(c2.out) < total {
		if _, err := r2.PollNext(c2); err != nil {
			t.Fatal(err)
		}
		if n, ok := r2.(api.PendingRecordsReader).PendingRecords(); ok {
			if n+int64(len(c2.out)) > int64(total) {
				t.Fatalf("%d read and %d pending of %d", len(c2.out), n, total)
			}
			lagged = lagged || n > 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("a fresh reader read %d of %d in 10 s", len(c2.out), total)
		}
	}
	if !lagged {
		t.Errorf("a fresh reader of %d records never reported any pending", total)
	}
	if n, ok := r2.(api.PendingRecordsReader).PendingRecords(); !ok || n != 0 {
		t.Errorf("the fresh reader at the end: %d, %v; want 0", n, ok)
	}
}

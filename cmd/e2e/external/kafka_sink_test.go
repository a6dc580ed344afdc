package external

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors/kafka"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
)

// readTopic reads every record of topic up to its end — the last stable
// offset for read_committed — and returns the values.
func readTopic(t *testing.T, brokers []string, topic string, committed bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := kafka.ReadToEnd(ctx, brokers, topic, committed)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// updates checks what a reader of the output saw against the input's
// final counts: no update missing, every final count exact; it returns
// how many updates came more than once.
func updates(t *testing.T, what string, values []string, want map[string]int64) (dups int) {
	t.Helper()
	seen := map[string]int{}
	final := map[string]int64{}
	for _, v := range values {
		r, ok := jobs.ParseWordCountRecord(v)
		if !ok {
			t.Fatalf("%s: %q is not a word count update", what, v)
		}
		seen[v]++
		final[r.Word] = max(final[r.Word], r.Count)
	}
	for w, n := range want {
		if final[w] != n {
			t.Fatalf("%s: final count of %q = %d; want %d", what, w, final[w], n)
		}
		for i := int64(1); i <= n; i++ {
			if seen[fmt.Sprintf("(%s,%d)", w, i)] == 0 {
				t.Fatalf("%s: update (%s,%d) is missing", what, w, i)
			}
		}
	}
	for _, n := range seen {
		dups += n - 1
	}
	return dups
}

func kafkaCluster(t *testing.T, topics ...string) []string {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return kc.ListenAddrs()
}

// TestKafkaToKafkaWithFailures: word count from 8 partitions to a topic,
// with three injected failures, at p=1 and p=4. Exactly-once: a
// read_committed reader sees every update exactly once, while a
// read_uncommitted one also sees what the failed attempts wrote in
// transactions that were aborted. At-least-once: nothing is lost, and the
// replayed updates come twice.
func TestKafkaToKafkaWithFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gflink processes")
	}
	for _, p := range []string{"1", "4"} {
		for _, guarantee := range []string{"exactly-once", "at-least-once"} {
			t.Run(p+"/"+guarantee, func(t *testing.T) {
				brokers := kafkaCluster(t, "lines", "counts")
				dir := t.TempDir()
				// Long enough that the pipeline's buffers fill before the first
				// failure, so that checkpoints complete in between.
				lines := map[string]int64{"1": 8000, "4": 16000}[p]
				want := writeWords(t, filepath.Join(dir, "words.txt"), lines, 300)
				produceLines(t, brokers, "lines", filepath.Join(dir, "words.txt"))
				in := "kafka://" + strings.Join(brokers, ",") + "/lines?bounded=true"
				out := "kafka://" + strings.Join(brokers, ",") + "/counts?delivery-guarantee=" + guarantee + "&transactional-id-prefix=wc"
				c := gflinkCmd(dir, "run", "-p", p, "-Dexecution.checkpointing.interval=50ms", "-Dexecution.checkpointing.unaligned.enabled=true", "-Dexecution.checkpointing.dir="+filepath.Join(dir, "ck"),
					"-Dfault-injection.fail-after-records="+map[string]string{"1": "1500", "4": "12000"}[p], "-Dfault-injection.max-failures=3",
					"-Drestart-strategy.type=fixed-delay", "-Drestart-strategy.fixed-delay.attempts=5", "-Drestart-strategy.fixed-delay.delay=10ms",
					"wordcount", "--input", in, "--output", out, "--sink-rate", "80000")
				res, err := c.CombinedOutput()
				if err != nil || !strings.Contains(string(res), "has finished") {
					t.Fatalf("gflink run: %v\n%s", err, res)
				}
				if n := strings.Count(string(res), "Restoring job"); n == 0 {
					t.Fatalf("no failure restored from a checkpoint:\n%s", res)
				}
				committed := readTopic(t, brokers, "counts", true)
				dups := updates(t, "read_committed", committed, want)
				all := readTopic(t, brokers, "counts", false)
				t.Logf("p=%s %s: read_committed %d updates (%d twice), read_uncommitted %d", p, guarantee, len(committed), dups, len(all))
				if guarantee == "exactly-once" {
					if dups != 0 {
						t.Fatalf("exactly-once: %d updates reached a read_committed reader more than once", dups)
					}
					if len(all) <= len(committed) {
						t.Errorf("read_uncommitted saw %d updates, read_committed %d: the failed attempts' aborted transactions should show", len(all), len(committed))
					}
				} else if dups == 0 {
					t.Errorf("at-least-once after three failures: no update came twice")
				}
			})
		}
	}
}

// TestKafkaExactlyOnceKillAndRestore: the job, at p=1 and p=4 over 8
// partitions, is killed with SIGKILL while it writes to Kafka, then started with -s on its checkpoint directory:
// its lingering transactions are aborted, the restored ones committed, and
// a read_committed reader sees every update exactly once.
func TestKafkaExactlyOnceKillAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gflink processes")
	}
	for _, p := range []string{"1", "4"} {
		t.Run("p="+p, func(t *testing.T) { kafkaKillAndRestore(t, p) })
	}
}

func kafkaKillAndRestore(t *testing.T, p string) {
	brokers := kafkaCluster(t, "lines", "counts")
	dir := t.TempDir()
	// Less input than the pipeline's buffers hold: the sources read it all
	// at once and end, and the checkpoints (unaligned) store what they
	// sent as records in flight — the restore replays it.
	want := writeWords(t, filepath.Join(dir, "words.txt"), 4000, 300)
	produceLines(t, brokers, "lines", filepath.Join(dir, "words.txt"))
	in := "kafka://" + strings.Join(brokers, ",") + "/lines?bounded=true"
	out := "kafka://" + strings.Join(brokers, ",") + "/counts?delivery-guarantee=exactly-once&transactional-id-prefix=wc"
	ck := filepath.Join(dir, "ck")
	args := []string{"-p", p, "-Dexecution.checkpointing.interval=50ms", "-Dexecution.checkpointing.unaligned.enabled=true", "-Dexecution.checkpointing.dir=" + ck}
	// Slowed by a throttled sink so that the kill lands mid-stream.
	run := gflinkCmd(dir, append(append([]string{"run"}, args...), "wordcount", "--input", in, "--output", out, "--sink-rate", "30000")...)
	var stderr syncBuffer
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the killed run's log:\n%s", stderr.String())
		}
	}()
	deadline := testutil.Deadline(30 * time.Second)
	for n := 0; n < 2000; n = len(readTopic(t, brokers, "counts", true)) {
		if time.Now().After(deadline) {
			t.Fatal("nothing committed within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	run.Process.Signal(syscall.SIGKILL)
	run.Wait()
	total := int64(0)
	for _, n := range want {
		total += n
	}
	if n := len(readTopic(t, brokers, "counts", true)); int64(n) >= total {
		t.Fatalf("the kill came after all %d updates were committed: it tests nothing", n)
	}
	jobDirs, _ := filepath.Glob(filepath.Join(ck, "*"))
	if len(jobDirs) != 1 {
		t.Fatalf("job directories %v", jobDirs)
	}
	res, err := gflinkCmd(dir, append(append([]string{"run", "-s", jobDirs[0]}, args...), "wordcount", "--input", in, "--output", out)...).CombinedOutput()
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, res)
	}
	if dups := updates(t, "read_committed after kill -9 and run -s", readTopic(t, brokers, "counts", true), want); dups != 0 {
		t.Fatalf("%d updates more than once", dups)
	}
}

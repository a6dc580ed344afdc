package external

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors/kafka"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
)

// produceLines writes the file's lines to topic, round robin over its
// partitions.
func produceLines(t *testing.T, brokers []string, topic, file string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := kafka.ProduceLines(context.Background(), brokers, topic, f); err != nil {
		t.Fatal(err)
	}
}

// TestKafkaSourceStopAndRestoreAtAnotherParallelism: word count reads 8
// partitions at p=2 into the exactly-once file sink; it is stopped with a
// savepoint, more lines are produced, and it is restored at p=3: every
// partition continues exactly where it stopped, so the finished part files
// hold every update of both batches exactly once.
func TestKafkaSourceStopAndRestoreAtAnotherParallelism(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gflink processes")
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, "lines"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	dir := t.TempDir()
	uri := "kafka://" + strings.Join(kc.ListenAddrs(), ",") + "/lines?group=wc"
	first := writeWords(t, filepath.Join(dir, "a.txt"), 2000, 200)
	produceLines(t, kc.ListenAddrs(), "lines", filepath.Join(dir, "a.txt"))
	run := func(args ...string) string {
		t.Helper()
		c := gflinkCmd(dir, args...)
		var out, errOut bytes.Buffer
		c.Stdout, c.Stderr = &out, &errOut
		if err := c.Run(); err != nil {
			t.Fatalf("gflink %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}
	jobID := regexp.MustCompile(`JobID ([0-9a-f]{32})`)
	ckpt := []string{"-Dexecution.checkpointing.interval=100ms", "-Dexecution.checkpointing.dir=" + filepath.Join(dir, "ck")}
	out := filepath.Join(dir, "out")
	// stopWhen stops the job with a savepoint once the committed files
	// hold want's final counts.
	stopWhen := func(id string, want map[string]int64) string {
		t.Helper()
		deadline := testutil.Deadline(60 * time.Second)
		for !committedReach(out, want) {
			if time.Now().After(deadline) {
				t.Fatalf("the committed counts did not reach the input's within 60 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		res := run("stop", "--savepointPath", filepath.Join(dir, "sp"), id)
		m := regexp.MustCompile(`Savepoint completed. Path: (\S+)`).FindStringSubmatch(res)
		if m == nil {
			t.Fatalf("stop: %s", res)
		}
		return m[1]
	}
	m := jobID.FindStringSubmatch(run(append(append([]string{"run", "-d", "-p", "2"}, ckpt...), "wordcount", "--input", uri, "--output", out)...))
	sp := stopWhen(m[1], first)

	second := writeWords(t, filepath.Join(dir, "b.txt"), 1500, 200)
	produceLines(t, kc.ListenAddrs(), "lines", filepath.Join(dir, "b.txt"))
	both := map[string]int64{}
	for w, n := range first {
		both[w] += n
	}
	for w, n := range second {
		both[w] += n
	}
	m = jobID.FindStringSubmatch(run(append(append([]string{"run", "-d", "-p", "3", "-s", sp}, ckpt...), "wordcount", "--input", uri, "--output", out)...))
	stopWhen(m[1], both)
	checkCommittedOnce(t, "after a stop at p=2 and a restore at p=3", out, both)
}

// committedReach reports whether the finished part files hold want's
// final counts.
func committedReach(out string, want map[string]int64) bool {
	got := map[string]int64{}
	parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
	for _, f := range parts {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			if r, ok := jobs.ParseWordCountRecord(l); ok {
				got[r.Word] = max(got[r.Word], r.Count)
			}
		}
	}
	for w, n := range want {
		if got[w] != n {
			return false
		}
	}
	return true
}

package engine_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/restore"
)

// completedCheckpoints matches a completed unaligned checkpoint's log line:
// its id and the bytes of records in flight it stored.
var completedCheckpoints = regexp.MustCompile(`Completed checkpoint (\d+) for job \w+ \([^)]*?(?:persistedData=(\d+) bytes)?\)`)

// unalignedConf is checkpointConf with unaligned checkpoints.
func unalignedConf(dir string, extra ...string) map[string]string {
	return checkpointConf(dir, append([]string{"execution.checkpointing.unaligned.enabled", "true"}, extra...)...)
}

// TestUnalignedCheckpointRescales: under backpressure (a slowed counter)
// an unaligned checkpoint holds records in flight — the tokenizer's unsent
// output and the counter's unprocessed input — and restoring it, at the
// same parallelism or rescaled, gives the exact counts: the in-flight
// records of the keyed exchange go to the subtask owning their key group.
func TestUnalignedCheckpointRescales(t *testing.T) {
	// The input outlasts the first checkpoint on any machine: the
	// failure waits for one, and a source done before it fails nothing.
	base := wcRun{p: 2, lines: 40000, distinct: 500, slow: 20000}
	first := base
	first.conf = unalignedConf(t.TempDir(), "restart-strategy.type", "none",
		"execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION",
		"fault-injection.fail-after-records", "6000")
	resolved, out1 := failWithCheckpoint(t, first)
	chk := resolved.Dir
	m := resolved.Metadata
	if !m.HasChannelState() || m.Version != 2 {
		t.Fatalf("%s (version %d) holds no records in flight; the counter was slowed so that it must", filepath.Base(chk), m.Version)
	}
	var in, out int64
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			for _, h := range st.InputChannels {
				in += h.Records
			}
			for _, h := range st.OutputChannels {
				out += h.Records
			}
		}
	}
	t.Logf("%s: %d records in flight at inputs, %d at outputs, %d bytes", filepath.Base(chk), in, out, m.ChannelStateSize())
	if in == 0 {
		t.Fatal("no input channel state: the counter's queue was full")
	}
	for _, p := range []int{2, 3, 1} {
		t.Run("p="+strconv.Itoa(p), func(t *testing.T) {
			second := base
			second.p, second.slow = p, 0
			continueFrom(t, second, resolved, finalCounts(t, out1))
		})
	}
}

// TestUnalignedExactlyOnceUnderBackpressure: injected failures while the
// keyed exchange is backpressured, with unaligned checkpoints every 20 ms,
// end with the exact counts.
func TestUnalignedExactlyOnceUnderBackpressure(t *testing.T) {
	for _, tc := range []struct{ p, failures, after int }{{1, 2, 8000}, {2, 3, 8000}, {4, 3, 8000}} {
		t.Run(fmt.Sprintf("p=%d/failures=%d", tc.p, tc.failures), func(t *testing.T) {
			r := wcRun{p: tc.p, lines: 20000, distinct: 2000, sinkRate: 300_000, log: &syncBuffer{},
				conf: unalignedConf(t.TempDir(),
					"fault-injection.fail-after-records", strconv.Itoa(tc.after),
					"fault-injection.max-failures", strconv.Itoa(tc.failures))}
			res, out := r.run(t)
			if res.Status != engine.StatusFinished {
				t.Fatalf("status %s: %v", res.Status, res.Err)
			}
			// The failures restored unaligned checkpoints, and the
			// checkpoints taken while records were queued stored them in
			// flight: the backpressure was real. Those without come last,
			// once the counter has drained what the finished sources sent
			// (with an alignment timeout, a short drain may also align in
			// time).
			log := r.log.String()
			if !strings.Contains(log, "Restoring job") {
				t.Fatalf("no failure restored a checkpoint:\n%s", log)
			}
			completed := completedCheckpoints.FindAllStringSubmatch(log, -1)
			inFlight := func(c []string) bool { n, _ := strconv.Atoi(c[2]); return n > 0 }
			drained := len(completed)
			for drained > 0 && !inFlight(completed[drained-1]) {
				drained--
			}
			if drained < 3 {
				t.Fatalf("%d checkpoints stored records in flight; the test needs some while reading:\n%s", drained, log)
			}
			for _, c := range completed[:drained] {
				if !inFlight(c) && *alignedTimeout == "" {
					t.Fatalf("checkpoint %s stored no records in flight: %s", c[1], c[0])
				}
			}
			compareCounts(t, finalCounts(t, out), expected(r), false)
			// Updates printed twice show the failures happened: the
			// print sink is not transactional, so a restart replays some.
			if n := strings.Count(out, "\n"); n <= int(r.lines)*10 {
				t.Fatalf("%d updates printed for %d words: no failure replayed any", n, r.lines*10)
			}
		})
	}
}

// TestUnalignedCheckpointAfterSourcesEnded: bounded sources read their
// whole (small) input into output the throttled sink holds back, and end.
// Their barriers must still overtake that output — stored as channel
// state — rather than wait for it to drain: the first checkpoint completes
// at once with records in flight, and the counts are exact. Under
// -aligned-timeout the ended sources' barriers are announced and turn
// unaligned at the timeout; checkpoints after the sources have finished
// are triggered at the counters directly (TestKillUnalignedAfterSourcesFinished
// in cmd restores one).
func TestUnalignedCheckpointAfterSourcesEnded(t *testing.T) {
	r := wcRun{p: 2, lines: 400, distinct: 300, sinkRate: 8000, log: &syncBuffer{}, conf: unalignedConf(t.TempDir())}
	res, out := r.run(t)
	if res.Status != engine.StatusFinished {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	// 4,000 updates at 8,000 a second: half a second of draining.
	// Waiting for the drain, the first checkpoint would take all of it
	// and store nothing in flight.
	first := regexp.MustCompile(`Completed checkpoint 1 for job \w+ \([^)]*checkpointDuration=(\d+) ms[^)]*persistedData=(\d+) bytes`).FindStringSubmatch(r.log.String())
	if first == nil {
		t.Fatalf("checkpoint 1 did not complete unaligned:\n%s", r.log.String())
	}
	if d, _ := strconv.Atoi(first[1]); d > 200 {
		t.Errorf("checkpoint 1 took %d ms: it waited for the ended sources' output to drain", d)
	}
	if n, _ := strconv.Atoi(first[2]); n == 0 {
		t.Errorf("checkpoint 1 stored no records in flight:\n%s", r.log.String())
	}
	compareCounts(t, finalCounts(t, out), expected(r), false)
}

// TestAlignedCheckpointTimeout: with aligned-checkpoint-timeout, a job
// without backpressure keeps aligned checkpoints (no records in flight
// stored), and a backpressured one turns them unaligned (records in
// flight stored); both restore exactly.
func TestAlignedCheckpointTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		slow      int
		timeout   string
		unaligned bool
	}{{"light load", 0, "10 s", false}, {"backpressure", 20000, "5 ms", true}} {
		t.Run(tc.name, func(t *testing.T) {
			// Paced for a second: the failure waits for a checkpoint.
			base := wcRun{p: 2, lines: 40000, distinct: 500, slow: tc.slow, rate: 400_000}
			first := base
			first.conf = unalignedConf(t.TempDir(), "restart-strategy.type", "none",
				"execution.checkpointing.aligned-checkpoint-timeout", tc.timeout,
				"execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION",
				"fault-injection.fail-after-records", "6000")
			resolved, out1 := failWithCheckpoint(t, first)
			chk := resolved.Dir
			if got := resolved.Metadata.HasChannelState(); got != tc.unaligned {
				t.Fatalf("%s holds records in flight: %v; want %v", filepath.Base(chk), got, tc.unaligned)
			}
			second := base
			second.slow, second.rate = 0, 0
			continueFrom(t, second, resolved, finalCounts(t, out1))
		})
	}
}

// continueFrom runs r restored from resolved to its end: with the counts
// the first run printed (before), its final counts are the whole text's.
func continueFrom(t *testing.T, r wcRun, resolved *restore.Resolved, before map[string]int64) {
	t.Helper()
	r.conf = checkpointConf(t.TempDir())
	r.restore = resolved
	res, out := r.run(t)
	if res.Status != engine.StatusFinished {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	got := finalCounts(t, out)
	for w, c := range before {
		if got[w] < c {
			got[w] = c // words not updated after the restore
		}
	}
	compareCounts(t, got, expected(r), false)
}

package crash

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint/vfs"
)

// TestKillUnaligned kills gflink (SIGKILL) while a throttled sink
// backpressures word count and unaligned checkpoints store the records in
// flight, then restores the job's newest complete checkpoint at another
// parallelism into the same output directory: the committed part files
// hold every update exactly once. Each run is checked to have restored
// records in flight, so the test cannot pass on aligned checkpoints.
func TestKillUnaligned(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	dir := t.TempDir()
	want := writeWords(t, filepath.Join(dir, "words.txt"), 8000, 500)
	for i, p := range [][2]string{{"2", "3"}, {"2", "1"}, {"4", "2"}} {
		out := filepath.Join(dir, fmt.Sprintf("out%d", i))
		ck := filepath.Join(dir, fmt.Sprintf("ck%d", i))
		run := gflinkCmd(dir, "run", "-p", p[0], "-Dexecution.checkpointing.interval=20ms",
			"-Dexecution.checkpointing.unaligned.enabled=true", "-Dexecution.checkpointing.dir="+ck,
			"wordcount", "--input", "words.txt", "--sink-rate", "30000", "--output", out)
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once a checkpoint with records in flight is complete (a
		// little later each time).
		deadline := testutil.Deadline(30 * time.Second)
		for inFlightCheckpoints(ck) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(i*40) * time.Millisecond)
		run.Process.Signal(syscall.SIGKILL)
		run.Wait()
		jobDirs, _ := filepath.Glob(filepath.Join(ck, "*"))
		if len(jobDirs) != 1 {
			t.Fatalf("attempt %d: job directories %v", i, jobDirs)
		}
		r, err := restore.Resolve(vfs.Default, jobDirs[0])
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if !r.Metadata.HasChannelState() {
			t.Fatalf("attempt %d: the newest checkpoint %s holds no records in flight", i, r.Dir)
		}
		res := gflinkCmd(dir, "run", "-p", p[1], "-s", jobDirs[0], "wordcount", "--input", "words.txt", "--output", out)
		var errOut bytes.Buffer
		res.Stderr = &errOut
		if err := res.Run(); err != nil {
			t.Fatalf("attempt %d: restore: %v\n%s", i, err, errOut.String())
		}
		checkCommittedOnce(t, fmt.Sprintf("attempt %d (p=%s then %s)", i, p[0], p[1]), out, want)
	}
}

// inFlightCheckpoints counts the complete checkpoints under ck that hold
// records in flight.
func inFlightCheckpoints(ck string) int {
	n := 0
	metas, _ := filepath.Glob(filepath.Join(ck, "*", "chk-*", "_metadata"))
	for _, m := range metas {
		r, err := restore.Resolve(vfs.Default, filepath.Dir(m))
		if err == nil && r.Metadata.HasChannelState() {
			n++
		}
	}
	return n
}

// TestKillUnalignedAfterSourcesFinished: the sources read their small
// input at once and finish while a throttled sink still drains what they
// sent. The checkpoints after that are triggered at the counters directly
// (no barrier can come from a finished task) and store the queued records
// as in flight at once, instead of waiting for the drain — so the file
// sink commits while it drains. gflink is killed then and restored from its
// newest checkpoint at another parallelism: every update is committed
// exactly once.
func TestKillUnalignedAfterSourcesFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	// Unaligned from the start, and aligned first with a 5 ms timeout;
	// then with more input than the exchange's buffers hold, so that the
	// sources' writers still hold records back when their input ends (their
	// final snapshot stores them in flight) and the kill comes after they
	// finished: a later checkpoint must not store those records again.
	for _, c := range []struct {
		timeout             string
		lines               int64
		sinkRate, killAfter int
	}{{"0", 400, 2000, 1000}, {"5ms", 400, 2000, 1000}, {"0", 1000, 5000, 7500}} {
		t.Run(fmt.Sprintf("aligned-checkpoint-timeout=%s/lines=%d", c.timeout, c.lines), func(t *testing.T) {
			killAfterSourcesFinished(t, c.timeout, c.lines, c.sinkRate, c.killAfter)
		})
	}
}

func killAfterSourcesFinished(t *testing.T, alignedTimeout string, lines int64, sinkRate, killAfter int) {
	dir := t.TempDir()
	want := writeWords(t, filepath.Join(dir, "words.txt"), lines, 300)
	out, ck := filepath.Join(dir, "out"), filepath.Join(dir, "ck")
	run := gflinkCmd(dir, "run", "-p", "2", "-Dexecution.checkpointing.interval=20ms",
		"-Dexecution.checkpointing.unaligned.enabled=true", "-Dexecution.checkpointing.aligned-checkpoint-timeout="+alignedTimeout,
		"-Dexecution.checkpointing.dir="+ck,
		"wordcount", "--input", "words.txt", "--sink-rate", strconv.Itoa(sinkRate), "--output", out)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// 400 lines: 4,000 updates at 2,000 a second, two seconds of draining,
	// while the sources finished in the first milliseconds. Were the
	// checkpoints to wait for the drain, nothing would be committed before
	// its end. 1,000 lines at 5,000 a second: the source ends with records
	// held back and finishes when about 6,000 updates are left; the kill
	// comes with 2,500 left, after checkpoints that take its final snapshot
	// (which found 3 of 3 runs counting some words twice before that
	// snapshot's records in flight were left out of later checkpoints).
	total := int(lines) * 10
	deadline := testutil.Deadline(30 * time.Second)
	for committedLines(out) < killAfter && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	run.Process.Signal(syscall.SIGKILL)
	run.Wait()
	if n := committedLines(out); n < killAfter || n >= total {
		t.Fatalf("%d of %d updates committed at the kill; want %d or more while the sink drained", n, total, killAfter)
	}
	jobDirs, _ := filepath.Glob(filepath.Join(ck, "*"))
	if len(jobDirs) != 1 {
		t.Fatalf("job directories %v", jobDirs)
	}
	r, err := restore.Resolve(vfs.Default, jobDirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !r.Metadata.HasChannelState() {
		t.Fatalf("the newest checkpoint %s holds no records in flight", r.Dir)
	}
	res := gflinkCmd(dir, "run", "-p", "3", "-s", jobDirs[0], "wordcount", "--input", "words.txt", "--output", out)
	var errOut bytes.Buffer
	res.Stderr = &errOut
	if err := res.Run(); err != nil {
		t.Fatalf("restore: %v\n%s", err, errOut.String())
	}
	checkCommittedOnce(t, "restored after the sources finished (p=2 then 3)", out, want)
}

// committedLines counts the lines of the finished part files in out.
func committedLines(out string) int {
	n := 0
	files, _ := filepath.Glob(filepath.Join(out, "part-*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		n += bytes.Count(b, []byte("\n"))
	}
	return n
}

package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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
		deadline := time.Now().Add(30 * time.Second)
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
	// Unaligned from the start, and aligned first with a 5 ms timeout.
	for _, timeout := range []string{"0", "5ms"} {
		t.Run("aligned-checkpoint-timeout="+timeout, func(t *testing.T) { killAfterSourcesFinished(t, timeout) })
	}
}

func killAfterSourcesFinished(t *testing.T, alignedTimeout string) {
	dir := t.TempDir()
	want := writeWords(t, filepath.Join(dir, "words.txt"), 400, 300)
	out, ck := filepath.Join(dir, "out"), filepath.Join(dir, "ck")
	run := gflinkCmd(dir, "run", "-p", "2", "-Dexecution.checkpointing.interval=20ms",
		"-Dexecution.checkpointing.unaligned.enabled=true", "-Dexecution.checkpointing.aligned-checkpoint-timeout="+alignedTimeout,
		"-Dexecution.checkpointing.dir="+ck,
		"wordcount", "--input", "words.txt", "--sink-rate", "2000", "--output", out)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// 4,000 updates at 2,000 a second: two seconds of draining, while the
	// sources (400 lines) finished in the first milliseconds. Were the
	// checkpoints to wait for the drain, nothing would be committed before
	// its end.
	deadline := time.Now().Add(30 * time.Second)
	for committedLines(out) < 1000 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	run.Process.Signal(syscall.SIGKILL)
	run.Wait()
	if n := committedLines(out); n < 1000 || n >= 4000 {
		t.Fatalf("%d of 4000 updates committed at the kill; want 1000 or more while the sink drained", n)
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

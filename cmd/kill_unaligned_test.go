package cmd

import (
	"bytes"
	"fmt"
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

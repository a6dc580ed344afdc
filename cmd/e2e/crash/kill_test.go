package crash

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// TestKillDuringCheckpoint kills gflink with SIGKILL at varying moments
// while it checkpoints, until a kill has caught a checkpoint half-written
// (a chk-N without _metadata). After every kill, each chk-N that has a
// _metadata must read, pass its checksums and restore; restoring the job
// directory picks the newest complete one and ends with the exact counts.
func TestKillDuringCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	dir := t.TempDir()
	want := writeWords(t, filepath.Join(dir, "words.txt"), 30000, 30000)
	sawHalfWritten := false
	for attempt := 0; attempt < 12 && !sawHalfWritten; attempt++ {
		ck := filepath.Join(dir, "ck", strings.Repeat("x", attempt+1))
		run := gflinkCmd(dir, "run", "-p", "2",
			"-Dexecution.checkpointing.interval=20ms",
			"-Dexecution.checkpointing.dir="+ck,
			"-Dexecution.checkpointing.data-inline-threshold=0",
			"-Dexecution.checkpointing.num-retained=3",
			"wordcount", "--input", "words.txt", "--rate", "150000")
		var out bytes.Buffer
		run.Stdout = &out
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for a first complete checkpoint, then kill a little later
		// each attempt.
		deadline := testutil.Deadline(30 * time.Second)
		var jobDir string
		for jobDir == "" && time.Now().Before(deadline) {
			m, _ := filepath.Glob(filepath.Join(ck, "*", "chk-*", "_metadata"))
			if len(m) > 0 {
				jobDir = filepath.Dir(filepath.Dir(m[0]))
			}
			time.Sleep(time.Millisecond)
		}
		if jobDir == "" {
			run.Process.Kill()
			run.Wait()
			t.Fatal("no checkpoint within 30 s")
		}
		time.Sleep(time.Duration(attempt*7) * time.Millisecond)
		run.Process.Signal(syscall.SIGKILL)
		run.Wait()

		ids, err := restore.CheckpointIDs(vfs.Default, jobDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			chk := savepoint.CheckpointDir(jobDir, id)
			meta := filepath.Join(chk, savepoint.MetadataFileName)
			if _, err := os.Stat(meta); err != nil {
				sawHalfWritten = true
				continue
			}
			r, err := restore.Resolve(vfs.Default, chk)
			if err != nil {
				t.Fatalf("attempt %d: %s has _metadata but does not read: %v", attempt, chk, err)
			}
			if err := restore.VerifyStateFiles(vfs.Default, r.Dir, r.Metadata); err != nil {
				t.Fatalf("attempt %d: %s has _metadata but its state is damaged: %v", attempt, chk, err)
			}
		}
		// Restore from the job's checkpoint directory: the newest complete
		// chk-N; the two runs' updates together give the exact counts.
		res := gflinkCmd(dir, "run", "-p", "2", "-s", jobDir, "wordcount", "--input", "words.txt")
		var out2, errOut bytes.Buffer
		res.Stdout, res.Stderr = &out2, &errOut
		if err := res.Run(); err != nil {
			t.Fatalf("attempt %d: restore from %s failed: %v\n%s", attempt, jobDir, err, errOut.String())
		}
		got := countsOf(out.String(), out2.String())
		for w, n := range want {
			if got[w] != n {
				t.Fatalf("attempt %d: count of %q after kill and restore = %d; want %d", attempt, w, got[w], n)
			}
		}
	}
	if !sawHalfWritten {
		t.Log("no kill caught a checkpoint half-written in 12 attempts; the invariant held for every complete one")
	}
}

// TestKillWithFileSink kills gflink (SIGKILL) while it writes word counts
// through the two-phase-commit file sink, then starts it again with -s on
// the job's checkpoint directory (its newest complete checkpoint), into the
// same output directory: the finished part files hold every update exactly
// once and nothing else. Repeated at several kill moments, p=1 and p=4.
func TestKillWithFileSink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	dir := t.TempDir()
	want := writeWords(t, filepath.Join(dir, "words.txt"), 20000, 3000)
	for i, p := range []string{"1", "4", "4"} {
		out := filepath.Join(dir, fmt.Sprintf("out%d", i))
		ck := filepath.Join(dir, fmt.Sprintf("ck%d", i))
		run := gflinkCmd(dir, "run", "-p", p, "-Dexecution.checkpointing.interval=30ms",
			"-Dexecution.checkpointing.dir="+ck, "wordcount", "--input", "words.txt", "--rate", "200000", "--output", out)
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once some output has been committed (a little later each time).
		deadline := testutil.Deadline(30 * time.Second)
		for {
			m, _ := filepath.Glob(filepath.Join(out, "part-*"))
			if len(m) >= 1+i || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		run.Process.Signal(syscall.SIGKILL)
		run.Wait()
		jobDirs, _ := filepath.Glob(filepath.Join(ck, "*"))
		if len(jobDirs) != 1 {
			t.Fatalf("attempt %d: job directories %v", i, jobDirs)
		}
		res := gflinkCmd(dir, "run", "-p", p, "-s", jobDirs[0], "wordcount", "--input", "words.txt", "--output", out)
		var errOut bytes.Buffer
		res.Stderr = &errOut
		if err := res.Run(); err != nil {
			t.Fatalf("attempt %d: restore: %v\n%s", i, err, errOut.String())
		}
		checkCommittedOnce(t, fmt.Sprintf("attempt %d (p=%s)", i, p), out, want)
	}
}

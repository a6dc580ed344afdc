package crash

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// TestKillIncrementalRocksDB kills gflink (SIGKILL) while the rocksdb
// backend takes incremental checkpoints, deletes nothing by hand, and
// restores every retained chk-N on its own: each must have all its files
// (its own and the shared ones earlier checkpoints uploaded) and end with
// the exact counts. Repeated at several kill moments.
func TestKillIncrementalRocksDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	dir := t.TempDir()
	want := writeWords(t, filepath.Join(dir, "words.txt"), 20000, 20000)
	for attempt := range 3 {
		ck := filepath.Join(dir, "ck", string(rune('a'+attempt)))
		run := gflinkCmd(dir, "run", "-p", "2",
			"-Dstate.backend.type=rocksdb",
			"-Dexecution.checkpointing.incremental=true",
			"-Dexecution.checkpointing.interval=30ms",
			"-Dexecution.checkpointing.dir="+ck,
			"-Dexecution.checkpointing.num-retained=3",
			// 2 s of input: the job is killed after a few checkpoints,
			// long before it ends (at 100,000 words/s a loaded CI machine
			// under -race finished the input, and deleted the
			// checkpoints of the finished job, before the loop saw two).
			"wordcount", "--input", "words.txt", "--rate", "10000")
		var out bytes.Buffer
		run.Stdout = &out
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once a few checkpoints have completed (later each attempt),
		// so that the retained ones share files. Completed ones are
		// counted as they appear: at most num-retained are there at once.
		deadline := testutil.Deadline(60 * time.Second)
		var metas []string
		completed := map[string]bool{}
		for len(completed) < 2+attempt && time.Now().Before(deadline) {
			metas, _ = filepath.Glob(filepath.Join(ck, "*", "chk-*", "_metadata"))
			for _, m := range metas {
				completed[m] = true
			}
			time.Sleep(time.Millisecond)
		}
		run.Process.Signal(syscall.SIGKILL)
		run.Wait()
		if metas, _ = filepath.Glob(filepath.Join(ck, "*", "chk-*", "_metadata")); len(metas) == 0 {
			t.Fatalf("attempt %d: no checkpoint retained when killed (%d seen complete within 60 s)", attempt, len(completed))
		}
		jobDir := filepath.Dir(filepath.Dir(metas[0]))
		shared := 0
		restored := restoreRetained(t, dir, jobDir, out.String(), want, func(_ int, chk string, md *savepoint.Metadata) []string {
			shared += len(md.SharedFiles())
			if err := restore.VerifyStateFiles(vfs.Default, chk, md); err != nil {
				t.Fatalf("attempt %d: %s has _metadata but a file is missing or damaged: %v", attempt, chk, err)
			}
			return []string{"-p", "3", "-Dstate.backend.type=rocksdb"}
		})
		if restored == 0 {
			t.Fatalf("attempt %d: no complete checkpoint in %s", attempt, jobDir)
		}
		if shared == 0 {
			t.Fatalf("attempt %d: no retained checkpoint refers to a shared file: not incremental", attempt)
		}
	}
}

// TestSharedFilesFollowRetention: a job with incremental checkpoints,
// several subsumptions and then cancelled with RETAIN_ON_CANCELLATION leaves
// in shared/ exactly the files its retained checkpoints refer to.
func TestSharedFilesFollowRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	writeWords(t, filepath.Join(dir, "words.txt"), 20000, 5000)
	ck := filepath.Join(dir, "ck")
	jobID := runRocksDBDetached(t, dir, "-Dexecution.checkpointing.interval=20ms",
		"-Dexecution.checkpointing.dir="+ck, "-Dexecution.checkpointing.num-retained=2")
	jobDir := filepath.Join(ck, jobID)
	waitCheckpoint(t, jobDir, 12) // ten subsumptions and more
	if out, err := gflinkCmd(dir, "cancel", jobID).CombinedOutput(); err != nil {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	ids, err := restore.CheckpointIDs(vfs.Default, jobDir)
	if err != nil {
		t.Fatal(err)
	}
	var referenced []string
	for _, id := range ids {
		r, err := restore.Resolve(vfs.Default, savepoint.CheckpointDir(jobDir, id))
		if err != nil {
			t.Fatalf("retained chk-%d: %v", id, err)
		}
		for _, f := range r.Metadata.SharedFiles() {
			if p := filepath.Base(f); !slices.Contains(referenced, p) {
				referenced = append(referenced, p)
			}
		}
	}
	ents, err := os.ReadDir(filepath.Join(jobDir, savepoint.SharedDirName))
	if err != nil {
		t.Fatal(err)
	}
	var present []string
	for _, e := range ents {
		present = append(present, e.Name())
	}
	slices.Sort(referenced)
	slices.Sort(present)
	if len(ids) == 0 || len(referenced) == 0 {
		t.Fatalf("retained %v, referring to %d shared files: nothing to check", ids, len(referenced))
	}
	if !slices.Equal(present, referenced) {
		t.Fatalf("shared/ holds %v; the retained checkpoints %v refer to %v", present, ids, referenced)
	}
}

// TestIncrementalAfterFullCheckpoint drives `checkpoint --full` between
// incremental checkpoints through the CLI: the full one uploads all its
// files anew and subsumes the one before it, whose other shared files go;
// the next incremental checkpoint refers only to the full one's, and every
// retained checkpoint keeps all its files. Compactions often replace those
// files before the next checkpoint, so a regression shows here only
// sometimes; TestNativeIncremental (engine/state/lsm) and
// TestIncrementalCheckpointAfterAFullOne (engine) check the contract.
func TestIncrementalAfterFullCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	writeWords(t, filepath.Join(dir, "words.txt"), 40000, 5000)
	ck := filepath.Join(dir, "ck")
	jobID := runRocksDBDetached(t, dir, "-Dexecution.checkpointing.interval=50ms", "-Dexecution.checkpointing.dir="+ck)
	jobDir := filepath.Join(ck, jobID)
	waitCheckpoint(t, jobDir, 3)
	full, err := gflinkCmd(dir, "checkpoint", "--full", jobID).CombinedOutput()
	if err != nil {
		t.Fatalf("checkpoint --full: %v\n%s", err, full)
	}
	// Each checkpoint after the full one, checked as soon as it completes
	// (before compactions replace the files it refers to): a retained one
	// must have every file. One that fails the check but has lost its
	// _metadata meanwhile was subsumed, not broken.
	ids, _ := restore.CheckpointIDs(vfs.Default, jobDir)
	for id := ids[len(ids)-1] + 1; id <= ids[len(ids)-1]+5; id++ {
		if !waitCheckpoint(t, jobDir, id) {
			continue // subsumed before it was seen (a loaded machine)
		}
		chk := savepoint.CheckpointDir(jobDir, id)
		r, err := restore.Resolve(vfs.Default, chk)
		if err != nil {
			continue // subsumed already
		}
		if err := restore.VerifyStateFiles(vfs.Default, r.Dir, r.Metadata); err != nil {
			if _, serr := os.Stat(filepath.Join(chk, savepoint.MetadataFileName)); serr == nil {
				t.Fatalf("chk-%d, retained, after a full checkpoint: %v", id, err)
			}
		}
	}
	if out, err := gflinkCmd(dir, "cancel", jobID).CombinedOutput(); err != nil {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	ids, err = restore.CheckpointIDs(vfs.Default, jobDir)
	if err != nil || len(ids) == 0 {
		t.Fatalf("retained %v, %v", ids, err)
	}
	for _, id := range ids {
		r, err := restore.Resolve(vfs.Default, savepoint.CheckpointDir(jobDir, id))
		if err != nil {
			t.Fatalf("chk-%d: %v", id, err)
		}
		if err := restore.VerifyStateFiles(vfs.Default, r.Dir, r.Metadata); err != nil {
			t.Fatalf("retained chk-%d after a full checkpoint: %v", id, err)
		}
	}
}

// waitCheckpoint waits until the job directory holds a complete checkpoint
// numbered n or higher, and reports whether chk-n itself was seen complete:
// with few checkpoints retained, one lives only until the next completes,
// and on a loaded machine a poll can miss it.
func waitCheckpoint(t *testing.T, jobDir string, n int64) bool {
	t.Helper()
	deadline := testutil.Deadline(60 * time.Second)
	for time.Now().Before(deadline) {
		ids, _ := restore.CheckpointIDs(vfs.Default, jobDir)
		for i := len(ids) - 1; i >= 0 && ids[i] >= n; i-- {
			if _, err := os.Stat(filepath.Join(savepoint.CheckpointDir(jobDir, ids[i]), savepoint.MetadataFileName)); err == nil {
				if ids[i] == n {
					return true
				}
				_, err := os.Stat(filepath.Join(savepoint.CheckpointDir(jobDir, n), savepoint.MetadataFileName))
				return err == nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no checkpoint numbered %d or higher completed in %s within 60 s (scaled)", n, jobDir)
	return false
}

// runRocksDBDetached starts word count over words.txt on the rocksdb backend with
// incremental checkpoints retained on cancellation, detached, and returns
// its job id; conf adds or overrides -D options.
func runRocksDBDetached(t *testing.T, dir string, conf ...string) string {
	t.Helper()
	args := append([]string{"run", "-d",
		"-Dstate.backend.type=rocksdb",
		"-Dexecution.checkpointing.incremental=true",
		"-Dexecution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION"}, conf...)
	args = append(args, "wordcount", "--input", "words.txt", "--rate", "20000", "--discard")
	out, err := gflinkCmd(dir, args...).Output()
	if err != nil {
		t.Fatalf("run -d: %v", err)
	}
	m := submittedJobID.FindSubmatch(out)
	if m == nil {
		t.Fatalf("run -d printed no job id:\n%s", out)
	}
	return string(m[1])
}

var submittedJobID = regexp.MustCompile(`Job has been submitted with JobID ([0-9a-f]{32})`)

// restoreRetained restores every complete chk-N of jobDir on its own, with
// `gflink run <args> -s chk-N wordcount --input words.txt` (args says what
// else, and may check the snapshot first), and checks that what the killed
// run printed (before) and the restored run's output add up to exactly
// want. It returns how many it restored; half-written ones are skipped.
func restoreRetained(t *testing.T, dir, jobDir, before string, want map[string]int64, args func(i int, chk string, md *savepoint.Metadata) []string) int {
	t.Helper()
	ids, err := restore.CheckpointIDs(vfs.Default, jobDir)
	if err != nil {
		t.Fatal(err)
	}
	restored := 0
	for i, id := range ids {
		chk := savepoint.CheckpointDir(jobDir, id)
		r, err := restore.Resolve(vfs.Default, chk)
		if err != nil {
			continue // half-written when killed
		}
		a := append([]string{"run"}, args(i, r.Dir, r.Metadata)...)
		res := gflinkCmd(dir, append(a, "-s", chk, "wordcount", "--input", "words.txt")...)
		var out, errOut bytes.Buffer
		res.Stdout, res.Stderr = &out, &errOut
		if err := res.Run(); err != nil {
			t.Fatalf("restore from %s failed: %v\n%s", chk, err, errOut.String())
		}
		got := countsOf(before, out.String())
		for w, n := range want {
			if got[w] != n {
				t.Fatalf("count of %q after kill and restore from %s = %d; want %d", w, chk, got[w], n)
			}
		}
		restored++
	}
	return restored
}

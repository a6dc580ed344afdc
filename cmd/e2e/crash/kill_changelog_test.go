package crash

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// TestKillChangelog kills gflink (SIGKILL) while the changelog state
// backend writes its log and materializes (every 150 ms, checkpoints every
// 30 ms), over both backends, deletes nothing by hand, and restores every
// retained chk-N on its own at another parallelism — with the changelog on
// and, alternately, off — to the exact counts. The retained checkpoints
// must between them refer to a materialization and to log files, or the
// test did not test the changelog.
func TestKillChangelog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	dir := t.TempDir()
	want := writeWords(t, filepath.Join(dir, "words.txt"), 20000, 20000)
	for _, backend := range []string{"hashmap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "rocksdb" && testutil.Quick() {
				t.Skip("-short or -race: over hashmap only (the plain run covers rocksdb)")
			}
			materialized, logged := false, false
			for attempt := range 3 {
				ck := filepath.Join(dir, backend, "ck", fmt.Sprint(attempt))
				base := filepath.Join(dir, backend, "dstl", fmt.Sprint(attempt))
				conf := changelogConf(backend, base)
				run := gflinkCmd(dir, append(append([]string{"run", "-p", "2"}, conf...),
					"-Dstate.changelog.periodic-materialize.interval=150ms",
					"-Dexecution.checkpointing.interval=30ms",
					"-Dexecution.checkpointing.dir="+ck,
					"-Dexecution.checkpointing.num-retained=3",
					"wordcount", "--input", "words.txt", "--rate", "60000")...)
				var out, errOut bytes.Buffer
				run.Stdout, run.Stderr = &out, &errOut
				if err := run.Start(); err != nil {
					t.Fatal(err)
				}
				deadline := testutil.Deadline(60 * time.Second)
				// Kill once checkpoint 3, 6 or 9 has completed (several
				// materializations in); the last attempt also waits for a
				// checkpoint that refers to a materialization, which on a
				// busy machine may take longer than 9 checkpoints (rocksdb
				// uploads its files), so that the test always tests one.
				var metas []string
				for time.Now().Before(deadline) {
					metas, _ = filepath.Glob(filepath.Join(ck, "*", "chk-*", "_metadata"))
					if slices.ContainsFunc(metas, func(m string) bool {
						id, _ := savepoint.ParseCheckpointDirName(filepath.Base(filepath.Dir(m)))
						return id >= int64(3+3*attempt) && (attempt < 2 || materialized || refersToMaterialization(m))
					}) {
						break
					}
					time.Sleep(time.Millisecond)
				}
				run.Process.Signal(syscall.SIGKILL)
				run.Wait()
				if len(metas) == 0 {
					t.Fatalf("no checkpoint within 60 s\n%s", errOut.String())
				}
				jobDir := filepath.Dir(filepath.Dir(metas[0]))
				restored := restoreRetained(t, dir, jobDir, out.String(), want, func(i int, chk string, md *savepoint.Metadata) []string {
					for _, op := range md.Operators {
						for _, st := range op.Subtasks {
							if c := st.Keyed; c != nil && c.Changelog != nil {
								materialized = materialized || c.Changelog.MaterializationID > 0
								logged = logged || len(c.Changelog.Log) > 0
								// rocksdb materializes its own files, hashmap
								// canonical blocks.
								if c.Changelog.MaterializationID > 0 && (c.Native != nil) != (backend == "rocksdb") {
									t.Fatalf("%s: a %s materialization with native files: %v", chk, backend, c.Native != nil)
								}
							}
						}
					}
					// Restore with the changelog on (its own log, at another
					// parallelism) and off (replayed into the plain backend).
					args := []string{"-p", "3", "-Dstate.backend.type=" + backend}
					if i%2 == 0 {
						args = append(args, changelogConf(backend, filepath.Join(dir, backend, "dstl-restore"))...)
						args = append(args, "-Dexecution.checkpointing.interval=50ms", "-Dexecution.checkpointing.dir="+filepath.Join(dir, backend, "ck-restore"))
					}
					return args
				})
				if restored == 0 {
					t.Fatalf("attempt %d: no complete checkpoint in %s", attempt, jobDir)
				}
			}
			if !materialized || !logged {
				t.Fatalf("the retained checkpoints refer to a materialization: %v, to log files: %v; want both", materialized, logged)
			}
		})
	}
	// The restores ran to the end: they leave nothing under their base path.
	for _, backend := range []string{"hashmap", "rocksdb"} {
		left, _ := filepath.Glob(filepath.Join(dir, backend, "dstl-restore", "*", "dstl", "*"))
		if len(left) > 0 {
			t.Errorf("%s: finished restores left log files: %v", backend, left)
		}
	}
}

// refersToMaterialization reports whether the checkpoint whose _metadata
// is file refers to a materialization (false while it cannot be read: it
// may be written right now).
func refersToMaterialization(file string) bool {
	md, err := savepoint.ReadMetadata(vfs.Default, file)
	if err != nil {
		return false
	}
	for _, op := range md.Operators {
		for _, st := range op.Subtasks {
			if c := st.Keyed; c != nil && c.Changelog != nil && c.Changelog.MaterializationID > 0 {
				return true
			}
		}
	}
	return false
}

// changelogConf is the -D options of the changelog on the filesystem.
func changelogConf(backend, base string) []string {
	return []string{"-Dstate.backend.type=" + backend,
		"-Dstate.changelog.enabled=true",
		"-Dstate.changelog.storage=filesystem",
		"-Dstate.changelog.dstl.dfs.base-path=" + base}
}

package engine_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/changelog"
	"github.com/gflink/gflink/savepoint/vfs"
)

// snapshotKinds are the kinds of checkpoint whose files a restore reads:
// canonical state files (hashmap), an LSM's own files (rocksdb, full and
// incremental: SST files in shared/), and the changelog's log files with
// its materializations (over hashmap: canonical blocks in shared/; over
// rocksdb: LSM files in shared/).
var snapshotKinds = []struct {
	name string
	conf []string
}{
	{"hashmap", []string{"state.backend.type", "hashmap"}},
	{"rocksdb", []string{"state.backend.type", "rocksdb"}},
	{"rocksdb-incremental", []string{"state.backend.type", "rocksdb", "execution.checkpointing.incremental", "true"}},
	{"changelog-hashmap", []string{"state.backend.type", "hashmap", "state.changelog.enabled", "true"}},
	{"changelog-rocksdb", []string{"state.backend.type", "rocksdb", "state.changelog.enabled", "true"}},
}

// retainedCheckpoints runs word count with kind's configuration until it
// fails after a few checkpoints, and returns the retained ones, oldest
// first.
func retainedCheckpoints(t *testing.T, conf []string) []*restore.Resolved {
	t.Helper()
	dir := t.TempDir()
	extra := append([]string{"restart-strategy.type", "none",
		"execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION",
		"execution.checkpointing.num-retained", "3",
		"fault-injection.fail-after-records", "15000", "fault-injection.after-checkpoints", "3",
		"state.backend.rocksdb.localdir", t.TempDir(),
		"state.changelog.storage", "filesystem",
		"state.changelog.dstl.dfs.base-path", t.TempDir(),
		"state.changelog.periodic-materialize.interval", "20 ms"}, conf...)
	// The input outlasts any machine (about 70 s at this rate): the
	// injected failure, which waits for 3 completed checkpoints, ends the
	// run. With 20,000 lines a loaded machine finished the input first.
	r := wcRun{p: 2, lines: 2_000_000, distinct: 2000, rate: 300_000, conf: checkpointConf(dir, extra...)}
	res, _ := r.run(t)
	if res.Status != engine.StatusFailed || len(res.Retained) == 0 {
		t.Fatalf("status %s (%v), retained %v; want FAILED with checkpoints", res.Status, res.Err, res.Retained)
	}
	var out []*restore.Resolved
	for _, uri := range res.Retained {
		chk, err := savepoint.LocalPath(uri)
		if err != nil {
			t.Fatal(err)
		}
		resolved, err := restore.Resolve(vfs.Default, chk)
		if err != nil {
			t.Fatal(err)
		}
		if err := restore.VerifyStateFiles(vfs.Default, resolved.Dir, resolved.Metadata); err != nil {
			t.Fatalf("a checkpoint as written fails its checks: %v", err)
		}
		out = append(out, resolved)
	}
	return out
}

// snapshotFiles lists every file a snapshot references, absolute, but
// _metadata: state files, native files (its own and shared), changelog
// files.
func snapshotFiles(r *restore.Resolved) []string {
	var out []string
	for _, f := range r.Metadata.Files() {
		out = append(out, filepath.Clean(filepath.Join(r.Dir, f)))
	}
	for _, op := range r.Metadata.Operators {
		for _, st := range op.Subtasks {
			if st.Keyed != nil && st.Keyed.Stream != nil && st.Keyed.Stream.Path != "" {
				p := filepath.Clean(filepath.Join(r.Dir, st.Keyed.Stream.Path))
				if !slices.Contains(out, p) {
					out = append(out, p) // a changelog's materialization
				}
			}
		}
	}
	return append(out, r.Metadata.ChangelogFiles()...)
}

// flipPositions are where a file of size n gets a byte flipped: every
// byte of a small file (a manifest, a log), else its first and last bytes
// and 24 spread between.
func flipPositions(n int) []int {
	if n <= 256 {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := []int{0, 1, 2, 3, 8, 11, 12, n - 4, n - 1}
	for i := 1; i <= 24; i++ {
		out = append(out, i*n/25)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestByteFlipsAreRefused flips one byte at a time in every file a real
// checkpoint of each kind references — MANIFEST, SST, OPTIONS, shared
// files, state files, changelog files — and checks that the checks every
// restore path runs first (restore.VerifyStateFiles: run -s, run --check,
// inspect, HA recovery, the choice of the newest complete chk-N) refuse
// it, naming the file. Before files had checksums in _metadata, a flipped
// byte in a MANIFEST restored silently with wrong counts.
func TestByteFlipsAreRefused(t *testing.T) {
	if *stateBackend != "" || *stateChangelog || *unaligned {
		t.Skip("runs each backend itself")
	}
	for _, kind := range snapshotKinds {
		t.Run(kind.name, func(t *testing.T) {
			chks := retainedCheckpoints(t, kind.conf)
			r := chks[len(chks)-1]
			files := snapshotFiles(r)
			var sawManifest, sawShared, sawLog bool
			for _, file := range files {
				base := filepath.Base(file)
				sawManifest = sawManifest || strings.Contains(base, "MANIFEST")
				sawShared = sawShared || filepath.Base(filepath.Dir(file)) == savepoint.SharedDirName
				sawLog = sawLog || changelog.IsLogPath(file)
				orig, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				for _, pos := range flipPositions(len(orig)) {
					b := slices.Clone(orig)
					b[pos] ^= 0xff
					if err := os.WriteFile(file, b, 0o600); err != nil {
						t.Fatal(err)
					}
					err := restore.VerifyStateFiles(vfs.Default, r.Dir, r.Metadata)
					if err == nil || !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), base) {
						t.Errorf("%s with byte %d of %d flipped: %v; want a refusal naming it", file, pos, len(orig), err)
					}
				}
				if err := os.WriteFile(file, orig, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			switch {
			case strings.HasPrefix(kind.name, "rocksdb") && !sawManifest:
				t.Errorf("no MANIFEST among %v", files)
			case strings.HasSuffix(kind.name, "incremental") && !sawShared:
				t.Errorf("no shared file among %v", files)
			case strings.HasPrefix(kind.name, "changelog") && !sawLog:
				t.Errorf("no log file among %v", files)
			}
			// Intact again, it passes.
			if err := restore.VerifyStateFiles(vfs.Default, r.Dir, r.Metadata); err != nil {
				t.Fatalf("restored files: %v", err)
			}
			// _metadata: its own checksum refuses a flip.
			meta := filepath.Join(r.Dir, savepoint.MetadataFileName)
			orig, err := os.ReadFile(meta)
			if err != nil {
				t.Fatal(err)
			}
			for _, pos := range flipPositions(len(orig)) {
				b := slices.Clone(orig)
				b[pos] ^= 0xff
				if err := os.WriteFile(meta, b, 0o600); err != nil {
					t.Fatal(err)
				}
				if _, err := restore.Resolve(vfs.Default, r.Dir); err == nil || !strings.Contains(err.Error(), savepoint.MetadataFileName) {
					t.Errorf("_metadata with byte %d of %d flipped: %v; want a refusal naming it", pos, len(orig), err)
				}
			}
			if err := os.WriteFile(meta, orig, 0o600); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSwappedManifestIsRefused puts an older checkpoint's MANIFEST in the
// place of the newest one's and edits the size _metadata records to match
// (its checksum recomputed): the recorded checksum refuses it. Pebble
// would open the older manifest without a word and restore older counts.
func TestSwappedManifestIsRefused(t *testing.T) {
	if *stateBackend != "" || *stateChangelog || *unaligned {
		t.Skip("runs its backend itself")
	}
	chks := retainedCheckpoints(t, []string{"state.backend.type", "rocksdb", "execution.checkpointing.incremental", "true"})
	if len(chks) < 2 {
		t.Fatalf("%d retained checkpoints; want 2 at least", len(chks))
	}
	old, cur := chks[0], chks[len(chks)-1]
	manifest := func(r *restore.Resolved, index int) (*savepoint.NativeFile, string) {
		for i := range r.Metadata.Operators {
			for j := range r.Metadata.Operators[i].Subtasks {
				st := &r.Metadata.Operators[i].Subtasks[j]
				if st.Keyed == nil || st.Keyed.Native == nil || st.Index != index {
					continue
				}
				for k := range st.Keyed.Native.Files {
					if f := &st.Keyed.Native.Files[k]; strings.HasPrefix(f.Name, "MANIFEST") {
						p, err := savepoint.NativeFilePath(r.Dir, *f)
						if err != nil {
							t.Fatal(err)
						}
						return f, p
					}
				}
			}
		}
		t.Fatalf("%s has no MANIFEST for subtask %d", r.Dir, index)
		return nil, ""
	}
	_, oldPath := manifest(old, 0)
	f, curPath := manifest(cur, 0)
	older, err := os.ReadFile(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	if newer, _ := os.ReadFile(curPath); string(newer) == string(older) {
		t.Fatalf("the manifests of %s and %s are the same: nothing to swap", old.Dir, cur.Dir)
	}
	if err := os.WriteFile(curPath, older, 0o600); err != nil {
		t.Fatal(err)
	}
	// A careful forgery: the subtask's size adds up again.
	for i := range cur.Metadata.Operators {
		for j := range cur.Metadata.Operators[i].Subtasks {
			if st := &cur.Metadata.Operators[i].Subtasks[j]; st.Keyed != nil && st.Keyed.Native != nil && st.Index == 0 {
				st.Bytes += int64(len(older)) - f.Size
			}
		}
	}
	f.Size = int64(len(older))
	if err := savepoint.WriteMetadata(vfs.Default, cur.Dir, cur.Metadata); err != nil {
		t.Fatal(err)
	}
	r, err := restore.Resolve(vfs.Default, cur.Dir)
	if err != nil {
		t.Fatal(err)
	}
	err = restore.VerifyStateFiles(vfs.Default, r.Dir, r.Metadata)
	if err == nil || !strings.Contains(err.Error(), filepath.Base(curPath)) || !strings.Contains(err.Error(), "CRC-32C") {
		t.Fatalf("a swapped MANIFEST with an edited size: %v; want a refusal naming it and its checksum", err)
	}
	// The newest complete checkpoint of the job directory is then the one
	// before, with a note naming the damaged one.
	latest, notes, err := restore.LatestCheckpoint(vfs.Default, filepath.Dir(cur.Dir))
	if err != nil || latest == nil || latest.Dir == cur.Dir {
		t.Fatalf("latest %+v, %v; want an older checkpoint than %s", latest, err, cur.Dir)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "Skipping "+cur.Dir) || !strings.Contains(notes[0], filepath.Base(curPath)) {
		t.Fatalf("notes %q; want one skipping %s, naming the file", notes, cur.Dir)
	}
}

// corruptSST flips a byte in the middle of every SST file of a restored
// native checkpoint (those in shared/ too), and with strip removes the
// checksums from its _metadata, as a snapshot written before checksums
// has none.
func corruptSST(t *testing.T, r *restore.Resolved, strip bool) []string {
	t.Helper()
	var corrupted []string
	for i := range r.Metadata.Operators {
		for j := range r.Metadata.Operators[i].Subtasks {
			st := &r.Metadata.Operators[i].Subtasks[j]
			if st.Keyed == nil || st.Keyed.Native == nil {
				continue
			}
			for k := range st.Keyed.Native.Files {
				f := &st.Keyed.Native.Files[k]
				if strip {
					f.CRC32C = ""
				}
				if !strings.HasSuffix(f.Name, ".sst") {
					continue
				}
				p, err := savepoint.NativeFilePath(r.Dir, *f)
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				b[len(b)/3] ^= 0xff
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
				corrupted = append(corrupted, p)
			}
		}
	}
	if len(corrupted) == 0 {
		t.Fatalf("%s has no SST file", r.Dir)
	}
	if err := savepoint.WriteMetadata(vfs.Default, r.Dir, r.Metadata); err != nil {
		t.Fatal(err)
	}
	return corrupted
}

// TestCorruptSSTFailsTheTask restores a rocksdb checkpoint whose SST files
// were damaged after it was verified (or, without checksums, as a
// snapshot written before them is): no panic may escape (Pebble's logger
// used to panic, ending the process), the task fails with a message naming
// the file, the restart strategy applies, and no LSM working directory is
// left behind.
func TestCorruptSSTFailsTheTask(t *testing.T) {
	if *stateBackend != "" || *stateChangelog || *unaligned {
		t.Skip("runs its backend itself")
	}
	for _, strip := range []bool{false, true} {
		t.Run(fmt.Sprintf("checksums=%v", !strip), func(t *testing.T) {
			chks := retainedCheckpoints(t, []string{"state.backend.type", "rocksdb"})
			r := chks[len(chks)-1]
			corrupted := corruptSST(t, r, strip)
			r, err := restore.Resolve(vfs.Default, r.Dir)
			if err != nil {
				t.Fatal(err)
			}
			localDir := t.TempDir()
			log := &syncBuffer{}
			second := wcRun{p: 2, lines: 2_000_000, distinct: 2000, restore: r, log: log,
				conf: checkpointConf(t.TempDir(), "restart-strategy.fixed-delay.attempts", "2",
					"state.backend.type", "rocksdb", "state.backend.rocksdb.localdir", localDir)}
			res, _ := second.run(t)
			if res.Status != engine.StatusFailed {
				t.Fatalf("status %s; want FAILED", res.Status)
			}
			msg := res.Err.Error()
			t.Logf("failed with: %s", msg)
			named := slices.ContainsFunc(corrupted, func(p string) bool { return strings.Contains(msg, p) })
			if !named || strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") {
				t.Errorf("the job failed with %q; want a message naming the damaged file (one of %v), no panic", msg, corrupted)
			}
			if n := strings.Count(log.String(), "to RESTARTING"); n != 2 {
				t.Errorf("restarted %d times; want the strategy's 2 attempts", n)
			}
			left, _ := filepath.Glob(filepath.Join(localDir, "*"))
			if len(left) > 0 {
				t.Errorf("left in state.backend.rocksdb.localdir: %v", left)
			}
		})
	}
}

// TestImpossibleMetadataIsRefused edits real checkpoints' _metadata into
// what no build writes, its checksum recomputed: each edit used to restore
// without a word (an operator's state with no subtask restored empty while
// the sources resumed). The checks every restore path runs first refuse
// each, naming the operator and what is wrong.
func TestImpossibleMetadataIsRefused(t *testing.T) {
	if *stateBackend != "" || *stateChangelog || *unaligned {
		t.Skip("runs each backend itself")
	}
	counter := func(m *savepoint.Metadata) *savepoint.OperatorState {
		for i := range m.Operators {
			for _, d := range m.Operators[i].States {
				if d.Kind == "value" {
					return &m.Operators[i]
				}
			}
		}
		t.Fatal("no operator with keyed value state")
		return nil
	}
	edits := map[string]struct {
		kinds []string // snapshot kinds it applies to
		edit  func(m *savepoint.Metadata)
		want  string
	}{
		"no subtasks": {[]string{"hashmap", "rocksdb", "changelog-hashmap"},
			func(m *savepoint.Metadata) { counter(m).Subtasks = []savepoint.SubtaskState{} }, `"subtasks" is empty`},
		"keyed handle dropped": {[]string{"hashmap", "rocksdb", "changelog-rocksdb"},
			func(m *savepoint.Metadata) { counter(m).Subtasks[1].Keyed = nil }, `operator counter, subtask 1: "bytes" is`},
		"empty log": {[]string{"changelog-hashmap", "changelog-rocksdb"},
			func(m *savepoint.Metadata) {
				for i := range counter(m).Subtasks {
					counter(m).Subtasks[i].Keyed.Changelog.Log = []savepoint.ChangelogFile{}
				}
			}, `operator counter, subtask 0: "bytes" is`},
		"log file twice": {[]string{"changelog-hashmap"},
			func(m *savepoint.Metadata) {
				c := counter(m).Subtasks[0].Keyed.Changelog
				c.Log = append(c.Log, c.Log[0])
			}, "is listed twice: its changes would be replayed twice"},
		"operators null": {[]string{"hashmap"},
			func(m *savepoint.Metadata) { m.Operators = nil }, `"operators" is empty or null`},
		"negative parallelism": {[]string{"hashmap", "rocksdb"},
			func(m *savepoint.Metadata) { counter(m).Parallelism = -2 }, `operator counter: "parallelism" is -2`},
		"max parallelism too high": {[]string{"rocksdb"},
			func(m *savepoint.Metadata) { counter(m).MaxParallelism = 1 << 16 }, `operator counter: "maxParallelism" is 65536`},
		"key groups shifted": {[]string{"hashmap"},
			func(m *savepoint.Metadata) { counter(m).Subtasks[0].Keyed.End-- },
			"the key groups of operator counter do not cover [0, 128) exactly once"},
		"negative entries": {[]string{"changelog-rocksdb"},
			func(m *savepoint.Metadata) { counter(m).States[0].Entries = -1 }, "entries"},
	}
	for _, kind := range snapshotKinds {
		t.Run(kind.name, func(t *testing.T) {
			var names []string
			for name, e := range edits {
				if slices.Contains(e.kinds, kind.name) {
					names = append(names, name)
				}
			}
			if len(names) == 0 {
				t.Skip("no edit for this kind")
			}
			chks := retainedCheckpoints(t, kind.conf)
			r := chks[len(chks)-1]
			for _, name := range names {
				t.Run(name, func(t *testing.T) {
					m, err := savepoint.ReadMetadata(vfs.Default, filepath.Join(r.Dir, savepoint.MetadataFileName))
					if err != nil {
						t.Fatal(err)
					}
					edits[name].edit(m)
					dir := filepath.Join(filepath.Dir(r.Dir), "chk-"+strings.ReplaceAll(name, " ", "-"))
					if err := os.Mkdir(dir, 0o700); err != nil {
						t.Fatal(err)
					}
					// The same files, under the edited _metadata.
					for _, f := range r.Metadata.Files() {
						if !strings.HasPrefix(f, "..") {
							if err := os.Link(filepath.Join(r.Dir, f), filepath.Join(dir, f)); err != nil {
								t.Fatal(err)
							}
						}
					}
					if err := savepoint.WriteMetadata(vfs.Default, dir, m); err != nil {
						t.Fatal(err)
					}
					edited, err := restore.Resolve(vfs.Default, dir)
					if err != nil {
						t.Fatalf("the edited _metadata must decode (its checksum is recomputed): %v", err)
					}
					err = restore.VerifyStateFiles(vfs.Default, edited.Dir, edited.Metadata)
					if err == nil || !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), edits[name].want) ||
						!strings.Contains(err.Error(), filepath.Join(dir, savepoint.MetadataFileName)) {
						t.Fatalf("%s: %v; want a refusal naming _metadata and saying %q", name, err, edits[name].want)
					}
				})
			}
		})
	}
}

package task

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/changelog"
	"github.com/gflink/gflink/savepoint/vfs"
)

// Where the changelog keeps its log (state.changelog.storage).
const (
	ChangelogStorageMemory     = "memory"
	ChangelogStorageFilesystem = "filesystem"
)

// The changelog state backend's options: Flink 1.20's names, with the
// 1.15–1.19 names (state.backend.changelog.*, dstl.dfs.*) as deprecated
// keys.
var (
	ChangelogEnabled = config.Bool("state.changelog.enabled").WithDefault(false).
				WithDeprecatedKeys("state.backend.changelog.enabled").
				WithDescription("Wrap the state backend (hashmap or rocksdb) with the changelog: every state change is also appended to a log written continuously under state.changelog.dstl.dfs.base-path, the state is materialized periodically, and a checkpoint persists only the log's tail, so its duration no longer grows with the state.")
	ChangelogStorage = config.Enum("state.changelog.storage", "StateChangelogStorage", ChangelogStorageMemory, ChangelogStorageFilesystem).
				WithDefault(ChangelogStorageMemory).WithDeprecatedKeys("state.backend.changelog.storage").
				WithDescription("Where the changelog goes: filesystem (files under state.changelog.dstl.dfs.base-path) or memory (this process's memory, for tests: checkpoints are lost with the process).")
	ChangelogBasePath = config.String("state.changelog.dstl.dfs.base-path").WithDeprecatedKeys("dstl.dfs.base-path").
				WithCheck(checkLocalDir).WithAccepted("a directory, as a path or a file: URI").
				WithDescription("Where filesystem changelog storage writes its files: <base-path>/<jobId>/dstl/.")
	ChangelogMaterializeInterval = config.Duration("state.changelog.periodic-materialize.interval").WithDefault(10 * time.Minute).
					WithDeprecatedKeys("state.backend.changelog.periodic-materialize.interval").
					WithCheck(func(d time.Duration) error {
			if d <= 0 {
				return fmt.Errorf("must be positive")
			}
			return nil
		}).WithAccepted("a positive duration").
		WithDescription("How often the wrapped backend's state is materialized (not as part of a checkpoint: each starts right after the checkpoint that completes when it is due, so as not to fall on one); the log before a materialization is then no longer needed.")
	ChangelogMaterializeEnabled = config.Bool("state.changelog.periodic-materialize.enabled").WithDefault(true).
					WithDeprecatedKeys("state.backend.changelog.periodic-materialize.enabled").
					WithDescription("false: never materialize periodically (only once after a restore); the log then grows for the job's life.")
	ChangelogMaxFailures = config.Int("state.changelog.max-failures-allowed").WithDefault(3).
				WithDeprecatedKeys("state.backend.changelog.max-failures-allowed").
				WithCheck(config.NonNegative).WithAccepted("an integer >= 0").
				WithDescription("Materialization failures in a row a subtask tolerates before the job fails over.")
	ChangelogPersistDelay = config.Duration("state.changelog.dstl.dfs.batch.persist-delay").WithDefault(10 * time.Millisecond).
				WithDeprecatedKeys("dstl.dfs.batch.persist-delay").
				WithDescription("How long changes wait in memory before they are written to the log (unless a size threshold is reached first).")
	ChangelogPersistSize = config.Memory("state.changelog.dstl.dfs.batch.persist-size-threshold").WithDefault(config.MemorySize(10 << 20)).
				WithDeprecatedKeys("dstl.dfs.batch.persist-size-threshold").WithCheck(positiveMemory).
				WithDescription("Changes buffered beyond this size are written at once, without waiting for the persist delay.")
	ChangelogPreemptive = config.Memory("state.changelog.dstl.dfs.preemptive-persist-threshold").WithDefault(config.MemorySize(5 << 20)).
				WithDeprecatedKeys("dstl.dfs.preemptive-persist-threshold").WithCheck(positiveMemory).
				WithDescription("A subtask's changes beyond this size are written pre-emptively, before its checkpoint asks for them.")
	ChangelogMaxAttempts = config.Int("state.changelog.dstl.dfs.upload.max-attempts").WithDefault(3).
				WithDeprecatedKeys("dstl.dfs.upload.max-attempts").WithCheck(config.Positive).WithAccepted("an integer >= 1").
				WithDescription("Attempts to write a log file; one that still fails fails the checkpoints that need it, and the subtask materializes at once so that later checkpoints do not.")
	ChangelogMaxInFlight = config.Memory("state.changelog.dstl.dfs.upload.max-in-flight").WithDefault(config.MemorySize(100 << 20)).
				WithDeprecatedKeys("dstl.dfs.upload.max-in-flight").WithCheck(positiveMemory).
				WithDescription("Changes handed over but not yet written, per subtask, beyond which the subtask waits (backpressure).")
)

// ChangelogOptions lists the changelog's options.
func ChangelogOptions() []config.AnyOption {
	return []config.AnyOption{ChangelogEnabled, ChangelogStorage, ChangelogBasePath, ChangelogMaterializeInterval,
		ChangelogMaterializeEnabled, ChangelogMaxFailures, ChangelogPersistDelay, ChangelogPersistSize, ChangelogPreemptive, ChangelogMaxAttempts, ChangelogMaxInFlight}
}

// ChangelogInfo is what REST reports of the changelog: whether the job
// uses it, and the configured storage and materialization interval (0:
// periodic materialization off).
type ChangelogInfo struct {
	Enabled  bool
	Storage  string
	Interval time.Duration
}

// NewChangelogInfo describes the changelog's settings for the job's
// configuration and statistics (cc nil: the changelog is off).
func NewChangelogInfo(c *config.Configuration, cc *ChangelogConfig) ChangelogInfo {
	storage, _ := ChangelogStorage.Get(c)
	interval, _ := ChangelogMaterializeInterval.Get(c)
	if periodic, _ := ChangelogMaterializeEnabled.Get(c); !periodic {
		interval = 0
	}
	return ChangelogInfo{Enabled: cc != nil, Storage: storage, Interval: interval}
}

// ChangelogConfig is a job's changelog configuration; nil when off.
type ChangelogConfig struct {
	storage      string
	Dir          string        // <base-path>/<jobId>/dstl (filesystem)
	Interval     time.Duration // 0: no periodic materialization
	ckPeriod     time.Duration // how often checkpoints come (materializations start after one)
	maxFailures  int
	persistDelay time.Duration
	handOff      int
	inFlight     int
	attempts     int
}

// ChangelogFrom reads the changelog's options and checks its limits
// before the job starts: each error says what to change.
func ChangelogFrom(c *config.Configuration, cp checkpoint.Config, jobID string) (*ChangelogConfig, []string, error) {
	on, err := ChangelogEnabled.Get(c)
	if err != nil || !on {
		return nil, nil, err
	}
	var warnings []string
	cc := &ChangelogConfig{ckPeriod: max(cp.Interval, cp.MinPause)}
	if cc.storage, err = ChangelogStorage.Get(c); err != nil {
		return nil, nil, err
	}
	base, err := ChangelogBasePath.Get(c)
	if err != nil {
		return nil, nil, err
	}
	interval, err := ChangelogMaterializeInterval.Get(c)
	if err != nil {
		return nil, nil, err
	}
	periodic, err := ChangelogMaterializeEnabled.Get(c)
	if err != nil {
		return nil, nil, err
	}
	if periodic {
		cc.Interval = interval
	}
	if cc.maxFailures, err = ChangelogMaxFailures.Get(c); err != nil {
		return nil, nil, err
	}
	if cc.persistDelay, err = ChangelogPersistDelay.Get(c); err != nil {
		return nil, nil, err
	}
	size, err := ChangelogPersistSize.Get(c)
	if err != nil {
		return nil, nil, err
	}
	pre, err := ChangelogPreemptive.Get(c)
	if err != nil {
		return nil, nil, err
	}
	inFlight, err := ChangelogMaxInFlight.Get(c)
	if err != nil {
		return nil, nil, err
	}
	cc.handOff, cc.inFlight = int(min(size, pre)), int(inFlight)
	if cc.attempts, err = ChangelogMaxAttempts.Get(c); err != nil {
		return nil, nil, err
	}

	if cp.MaxConcurrent != 1 {
		return nil, nil, fmt.Errorf("state.changelog.enabled: true needs execution.checkpointing.max-concurrent-checkpoints: 1 (it is %d): a checkpoint ends the changelog's current file, so two cannot be in progress at once. Set execution.checkpointing.max-concurrent-checkpoints: 1 or turn the changelog off", cp.MaxConcurrent)
	}
	if !cp.Enabled() {
		warnings = append(warnings, "state.changelog.enabled: true has no effect while checkpointing is off (execution.checkpointing.interval): the changelog is not written.")
		return nil, warnings, nil
	}
	if cp.Storage != checkpoint.StorageFilesystem {
		if _, set, _ := checkpoint.StorageOption.Lookup(c); set {
			return nil, nil, fmt.Errorf("state.changelog.enabled: true needs checkpoint storage 'filesystem', where materialized state is written, but %s is %s (from %s): set it to filesystem with execution.checkpointing.dir, or turn the changelog off",
				checkpoint.StorageOption.Key(), cp.Storage, checkpoint.StorageOption.Origin(c))
		}
		return nil, nil, fmt.Errorf("state.changelog.enabled: true needs checkpoint storage 'filesystem', where materialized state is written: set execution.checkpointing.dir (or state.checkpoints.dir)")
	}
	switch cc.storage {
	case ChangelogStorageFilesystem:
		if base == "" {
			return nil, nil, fmt.Errorf("state.changelog.storage: filesystem needs a directory for the log: set state.changelog.dstl.dfs.base-path (old key dstl.dfs.base-path), e.g. to a directory beside execution.checkpointing.dir")
		}
		p, err := savepoint.FilePath(base, "directory") // checked by the option
		if err != nil {
			return nil, nil, err
		}
		cc.Dir = filepath.Join(p, jobID, changelog.DirName)
	case ChangelogStorageMemory:
		warnings = append(warnings, "state.changelog.storage: memory keeps the changelog in this process's memory, for tests: its checkpoints restore within this process (failover) but are lost with it. Use state.changelog.storage: filesystem and state.changelog.dstl.dfs.base-path for checkpoints that outlive the process.")
	}
	return cc, warnings, nil
}

// checkLocalDir accepts a directory given as a path or a file: URI.
func checkLocalDir(s string) error {
	if s == "" {
		return nil
	}
	_, err := savepoint.FilePath(s, "directory")
	return err
}

// Init creates the log's directory.
func (cc *ChangelogConfig) Init(fsys vfs.FS) error {
	if cc == nil || cc.Dir == "" {
		return nil
	}
	if err := fsys.MkdirAll(cc.Dir, vfs.PrivateDirMode); err != nil {
		return fmt.Errorf("create the changelog directory: %w", err)
	}
	return nil
}

// Where says where the log goes, for the start-up line.
func (cc *ChangelogConfig) Where() string {
	if cc.storage == ChangelogStorageMemory {
		return "memory (this process)"
	}
	return cc.Dir
}

// withChangelog wraps a keyed subtask's backend: with the changelog on,
// to log every change; with it off, only when the restored checkpoint has
// a log to replay (the changelog was on when it was taken).
func withChangelog[K comparable](be state.Backend[K], cc *ChangelogConfig, keySer state.KeySerializer[K], t *Task, uid string, restoring bool, log *slog.Logger) state.Backend[K] {
	if cc == nil && !restoring {
		return be
	}
	o := state.ChangelogOptions{Logging: cc != nil, Now: t.svc.Clock}
	if cc != nil {
		var storage changelog.Storage = t.svc.Backends.ChangelogMemory
		if cc.storage == ChangelogStorageFilesystem {
			storage = changelog.FSStorage{FS: t.svc.FS, Dir: cc.Dir}
		}
		o.Writer = changelog.WriterOptions{Storage: storage, Prefix: fmt.Sprintf("s%d-%s", t.Subtask, randomID()),
			PersistDelay: cc.persistDelay, HandOff: cc.handOff, InFlight: cc.inFlight, MaxAttempts: cc.attempts}
		o.Interval, o.MaxFailures, o.CheckpointPeriod = cc.Interval, cc.maxFailures, cc.ckPeriod
		storageOf := t.svc.Storage
		o.Materialize = func(s state.Snapshot, id int64) (*savepoint.KeyedStateHandle, int64, error) {
			if n, ok := s.(*state.NativeSnapshot); ok {
				return storageOf.UploadMaterialized(id, &checkpoint.NativeFiles{Wait: n.Wait, Dir: n.Dir, BackendID: n.BackendID,
					Incremental: n.Incremental, Shared: n.Shared, Uploaded: n.Uploaded})
			}
			r := s.KeyGroupRange()
			return storageOf.WriteMaterialized(r.Start, r.End, yieldingEncoder{s})
		}
		if sb := t.svc.Backends; sb != nil && sb.dir != nil {
			// rocksdb: materializations are the LSM's own files, and
			// each uploads only the SST files the last one did not.
			o.MaterializeOptions = func(id int64) state.SnapshotOptions {
				return state.SnapshotOptions{ID: -id, Native: true, Incremental: true, RemoveDir: os.RemoveAll,
					LocalDir: sb.dir.SnapshotDir(uid, t.Subtask, t.svc.Attempt, -id)}
			}
		}
		o.OnMaterialized = func(id, size int64, took time.Duration, err error) {
			if err != nil {
				log.Warn(fmt.Sprintf("Materialization %d of %s (subtask %d) failed", id, uid, t.Subtask), "error", err)
				return
			}
			log.Debug(fmt.Sprintf("Materialized the state of %s (subtask %d)", uid, t.Subtask), "materialization", id, "bytes", size, "took", took)
		}
	}
	return state.NewChangelogBackend(be, keySer, o)
}

// yieldingEncoder gives the processor back between key groups, as the
// checkpoint encoder does (see abortableEncoder).
type yieldingEncoder struct{ s state.Snapshot }

func (e yieldingEncoder) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	dst, err := e.s.EncodeKeyGroup(dst, kg)
	runtime.Gosched()
	return dst, err
}

func randomID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// restoreChangelog reads the log files a subtask replays and hands them to
// its changelog backend.
func restoreChangelog[K comparable](be state.Backend[K], fsys vfs.FS, mem *changelog.MemoryStorage, logs []restore.ChangelogRestore) error {
	if len(logs) == 0 {
		return nil
	}
	cb, ok := be.(*state.ChangelogBackend[K])
	if !ok {
		return fmt.Errorf("the restored snapshot has a state changelog, which this backend cannot replay")
	}
	// The files are read by the workers that index them, on every core.
	out := make([]state.RestoredLog, len(logs))
	for i, l := range logs {
		for _, f := range l.Log {
			sum, has, err := savepoint.ParseCRC32C(f.CRC32C)
			if err != nil {
				return fmt.Errorf("changelog file %s: %w: %w", f.Path, err, savepoint.ErrCorrupt)
			}
			read := func(buf *[]byte) ([]byte, error) { return changelog.ReadFileInto(fsys, mem, f.Path, buf) }
			out[i].Files = append(out[i].Files, state.RestoredFile{Name: f.Path, Read: read, Size: f.Size, CRC32C: sum, HasCRC: has})
		}
	}
	return cb.RestoreChangelog(out)
}

// changelogCapture describes a changelog checkpoint for WriteSubtask.
func changelogCapture(c *state.ChangelogSnapshot) func() (*savepoint.KeyedStateHandle, *savepoint.ChangelogStateHandle, int64, error) {
	return func() (*savepoint.KeyedStateHandle, *savepoint.ChangelogStateHandle, int64, error) {
		st, err := c.Wait()
		if err != nil {
			return nil, nil, 0, err
		}
		h := &savepoint.ChangelogStateHandle{MaterializationID: st.MaterializationID, MaterializedSize: st.MaterializedSize,
			MaterializedAdded: st.MaterializedAdded, Log: st.Log}
		size := st.MaterializedSize
		for _, f := range st.Log {
			size += f.Size
		}
		return st.Materialized, h, size, nil
	}
}

package task

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/engine/state/lsm"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/changelog"
	"github.com/gflink/gflink/savepoint/vfs"
)

// StateBackendKind names a state backend (state.backend.type).
type StateBackendKind string

// The state backends: Go maps in memory, and an embedded LSM tree (Pebble)
// under Flink's name for its LSM backend.
const (
	StateBackendHashMap StateBackendKind = "hashmap"
	StateBackendRocksDB StateBackendKind = "rocksdb"
)

func parseStateBackend(s string) (StateBackendKind, error) {
	switch lower := toLower(s); lower {
	case "hashmap", "jobmanager", "filesystem":
		// Flink 1.x's legacy backend names meant the heap backend too.
		return StateBackendHashMap, nil
	case "rocksdb":
		return StateBackendRocksDB, nil
	case "forst":
		return "", fmt.Errorf("the %s state backend is not available in gflink", lower)
	}
	return "", fmt.Errorf("unknown state backend '%s'", s)
}

func positiveMemory(m config.MemorySize) error {
	if m <= 0 {
		return fmt.Errorf("must be positive")
	}
	return nil
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// The state backends' options.
var (
	StateBackend = config.NewOption("state.backend.type", parseStateBackend, func(k StateBackendKind) string { return string(k) },
		"hashmap or rocksdb (jobmanager and filesystem, Flink 1.x's legacy names, mean hashmap too)").
		WithDefault(StateBackendHashMap).WithDeprecatedKeys("state.backend").
		WithDescription("Where keyed state lives while the job runs: hashmap keeps it in Go maps, rocksdb in an embedded LSM tree per stateful subtask (Pebble), bounded by disk rather than memory.")
	RocksDBLocalDir = config.String("state.backend.rocksdb.localdir").
			WithAccepted("a directory").
			WithDescription("Where the rocksdb backend keeps its working directories (one per job, removed when the job ends). Default: the first of io.tmp.dirs, else $GFLINK_HOME/tmp.")
	IOTmpDirs = config.String("io.tmp.dirs").
			WithAccepted("directories separated by ',' or '" + string(os.PathListSeparator) + "'").
			WithDescription("Directories for temporary files; the rocksdb backend uses the first unless state.backend.rocksdb.localdir is set.")
	RocksDBBlockCacheSize = config.Memory("state.backend.rocksdb.block.cache-size").WithDefault(config.MemorySize(8 << 20)).
				WithCheck(positiveMemory).
				WithDescription("The block cache of each rocksdb subtask's LSM, when state.backend.rocksdb.memory.managed is false.")
	RocksDBWriteBufferSize = config.Memory("state.backend.rocksdb.writebuffer.size").WithDefault(config.MemorySize(64 << 20)).
				WithCheck(positiveMemory).
				WithDescription("The size of one memtable of each rocksdb subtask's LSM (at most two exist at once, plus a write buffer of the same size in front of them), when state.backend.rocksdb.memory.managed is false.")
	RocksDBRowCacheSize = config.Memory("state.backend.rocksdb.row-cache.size").WithDefault(config.MemorySize(64 << 20)).
				WithCheck(positiveMemory).
				WithDescription("gflink: the row cache of each rocksdb subtask's LSM, when state.backend.rocksdb.memory.managed is false: the values of recently used keys, read and written without Pebble (beyond the written ones the write buffer holds).")
	RocksDBRowCacheRatio = config.Float("state.backend.rocksdb.memory.row-cache-ratio").WithDefault(0.9).
				WithCheck(func(f float64) error {
			if f < 0 || f >= 1 {
				return fmt.Errorf("must be at least 0 and less than 1")
			}
			return nil
		}).WithAccepted("a number at least 0 and less than 1").
		WithDescription("gflink: the most of what the write buffers leave of the managed memory that the row caches may take (split among the subtasks), reserved in the block cache, which has the rest; a row cache gives its room back while more than half of its reads go to the LSM, and takes it again below a third.")
	RocksDBManagedMemory = config.Bool("state.backend.rocksdb.memory.managed").WithDefault(true).
				WithDescription("The rocksdb backend's subtasks share one memory budget, taskmanager.memory.managed.size, as Flink's managed memory: a block cache shared by all of the job's LSMs, and write buffers split among them (state.backend.rocksdb.memory.write-buffer-ratio). false: each subtask gets state.backend.rocksdb.block.cache-size and state.backend.rocksdb.writebuffer.size.")
	ManagedMemorySize = config.Memory("taskmanager.memory.managed.size").WithDefault(config.MemorySize(256 << 20)).
				WithCheck(positiveMemory).
				WithDescription("gflink: the memory the rocksdb backend's LSMs share (the process is the one TaskManager).")
	RocksDBWriteBufferRatio = config.Float("state.backend.rocksdb.memory.write-buffer-ratio").WithDefault(0.25).
				WithCheck(func(f float64) error {
			if f <= 0 || f >= 1 {
				return fmt.Errorf("must be between 0 and 1, exclusive")
			}
			return nil
		}).WithAccepted("a number between 0 and 1, exclusive").
		WithDescription("The share of the managed memory the write buffers take (each subtask's dirty rows and two memtables); the block cache has the rest, of which the row caches may take up to state.backend.rocksdb.memory.row-cache-ratio. gflink's default is half Flink's 0.5: the dirty rows, not the memtables, absorb the updates between checkpoints, and what the memtables give up serves reads (docs/performance.md).")
	RocksDBMaxSizeLevelBase = config.Memory("state.backend.rocksdb.compaction.level.max-size-level-base").WithDefault(config.MemorySize(lsm.DefaultLBaseMaxBytes)).
				WithCheck(positiveMemory).
				WithDescription("The most data the LSM's base level (the first below L0) holds; each level below holds ten times the one above. gflink's default is small (Flink's is 256 mb): keys are updated uniformly, so a compaction from L0 rewrites the whole base level, and an incremental checkpoint uploads it; with a state smaller than the base level, that is the whole state.")
	RocksDBTimerService = config.Enum("state.backend.rocksdb.timer-service.factory", "PriorityQueueStateType", "ROCKSDB", "HEAP").
				WithDefault("ROCKSDB").
				WithDescription("Where the rocksdb backend keeps timers. gflink keeps them in the LSM, with their order in a heap in memory, in both modes.")
	Incremental = config.Bool("execution.checkpointing.incremental").WithDefault(false).
			WithDeprecatedKeys("state.backend.incremental").
			WithDescription("With the rocksdb backend, a checkpoint uploads only the SST files the last completed checkpoint did not hold, into <dir>/<jobId>/shared/, and refers to the others. The hashmap backend's checkpoints are always full.")
)

// StateBackends makes the keyed state backends of a job's operators, as
// state.backend.type says: Go maps (hashmap), or one embedded LSM per
// stateful subtask (rocksdb), in a working directory of the job's that is
// removed when the job ends.
type StateBackends struct {
	kind        StateBackendKind
	incremental bool        // execution.checkpointing.incremental
	dir         *lsm.JobDir // rocksdb only
	// jobDir is the job's checkpoint directory, and claim whether the job
	// was restored in CLAIM mode: then an incremental checkpoint may refer
	// to the restored checkpoint's shared files.
	jobDir      string
	claim       bool
	cacheSize   int64
	writeBuffer int64
	rowCache    int64 // per subtask
	levelBase   int64 // state.backend.rocksdb.compaction.level.max-size-level-base
	// cache is the block cache all the job's LSMs share (managed memory),
	// nil when each has its own.
	cache       *lsm.Cache
	cacheBudget int64
	// Changelog wraps every keyed backend when state.changelog.enabled.
	Changelog *ChangelogConfig
	// ChangelogMemory holds the job's log files of memory storage; a
	// restore of the job (after a failure) reads them back.
	ChangelogMemory *changelog.MemoryStorage
}

// changelogConfig is the job's changelog configuration, nil when off.
func (b *StateBackends) changelogConfig() *ChangelogConfig {
	if b == nil {
		return nil
	}
	return b.Changelog
}

// BackendsOptions says what the state backends of a job are for.
type BackendsOptions struct {
	JobID string
	// JobDir is the job's checkpoint directory.
	JobDir string
	// Restored is the snapshot the job restores ("" for none), and claim
	// whether it restores it in CLAIM mode.
	Restored string
	Claim    bool
	// KeyedSubtasks is the number of keyed subtasks, among which managed
	// memory is split.
	KeyedSubtasks int
	Log           *slog.Logger
	// TmpDir is where working directories go when neither
	// state.backend.rocksdb.localdir nor io.tmp.dirs is set
	// ($GFLINK_HOME/tmp).
	TmpDir string
}

// NewStateBackends reads the backend's options; for rocksdb it creates the
// job's working directory (removing those that killed processes left).
func NewStateBackends(c *config.Configuration, o BackendsOptions) (*StateBackends, error) {
	jobID, jobDir, restored, claim, subtasks, log := o.JobID, o.JobDir, o.Restored, o.Claim, o.KeyedSubtasks, o.Log
	kind, err := StateBackend.Get(c)
	if err != nil {
		return nil, err
	}
	b := &StateBackends{kind: kind, jobDir: jobDir, claim: claim && restored != "", ChangelogMemory: changelog.NewMemoryStorage()}
	if kind != StateBackendRocksDB {
		return b, nil
	}
	cache, err := RocksDBBlockCacheSize.Get(c)
	if err != nil {
		return nil, err
	}
	wb, err := RocksDBWriteBufferSize.Get(c)
	if err != nil {
		return nil, err
	}
	rc, err := RocksDBRowCacheSize.Get(c)
	if err != nil {
		return nil, err
	}
	levelBase, err := RocksDBMaxSizeLevelBase.Get(c)
	if err != nil {
		return nil, err
	}
	b.cacheSize, b.writeBuffer, b.rowCache, b.levelBase = int64(cache), int64(wb), int64(rc), int64(levelBase)
	managed, err := RocksDBManagedMemory.Get(c)
	if err != nil {
		return nil, err
	}
	if managed {
		// One budget for the job, as Flink's managed memory: each
		// subtask's write buffers (two memtables and the store's dirty
		// rows: three of this size) take their part of the write-buffer
		// share; the rest is the block cache, shared, of which the row
		// caches may take up to their share.
		size, err := ManagedMemorySize.Get(c)
		if err != nil {
			return nil, err
		}
		ratio, err := RocksDBWriteBufferRatio.Get(c)
		if err != nil {
			return nil, err
		}
		rowRatio, err := RocksDBRowCacheRatio.Get(c)
		if err != nil {
			return nil, err
		}
		n := int64(max(1, subtasks))
		wbShare := int64(float64(size) * ratio)
		// The row caches reserve their room in the block cache, and give
		// it back when the block cache serves reads better (lsm.Store's
		// adapt).
		rowShare := int64(float64(int64(size)-wbShare) * rowRatio)
		b.cacheBudget = int64(size) - wbShare
		b.writeBuffer = max(1<<20, wbShare/(3*n)&^(1<<20-1))
		b.cache = lsm.NewCache(b.cacheBudget, b.writeBuffer, int(n))
		if b.rowCache = rowShare / n &^ (1<<20 - 1); b.rowCache == 0 {
			b.rowCache = -1 // none, rather than the store's default
		}
	}
	if b.incremental, err = Incremental.Get(c); err != nil {
		return nil, err
	}
	root, err := LSMLocalDir(c, o.TmpDir)
	if err != nil {
		return nil, err
	}
	dir, removed, err := lsm.NewJobDir(root, jobID)
	for _, r := range removed {
		log.Info("Removed the LSM working directory of a job that is no longer running: " + r)
	}
	if err != nil {
		return nil, err
	}
	b.dir = dir
	mem := fmt.Sprintf("block cache %s, row cache %s and write buffers %s per subtask", config.MemorySize(b.cacheSize), config.MemorySize(max(0, b.rowCache)), config.MemorySize(b.writeBuffer))
	if b.cache != nil {
		mem = fmt.Sprintf("managed memory: a block cache of %s shared by all subtasks, of which a row cache may take up to %s per subtask, and write buffers %s per subtask", config.MemorySize(b.cacheBudget), config.MemorySize(max(0, b.rowCache)), config.MemorySize(b.writeBuffer))
	}
	log.Info("Using the embedded LSM state backend (Pebble) for state.backend.type=rocksdb", "dir", dir.Path(), "memory", mem)
	switch {
	case b.incremental && b.claim:
		log.Info("Incremental checkpoints may refer to the shared files of " + restored + " (CLAIM): the job owns them now and deletes each once no checkpoint of the job refers to it; subtasks restored at another parallelism upload their state anew.")
	case b.incremental && restored != "":
		// Not CLAIM: the restored files are not the job's, so the first
		// checkpoint uploads everything and refers to nothing of them.
		log.Info("The first checkpoint after restoring " + restored + " will be full: it refers to nothing of the restored snapshot, which may be deleted once that checkpoint completes.")
	}
	return b, nil
}

// LSMLocalDir is state.backend.rocksdb.localdir, else the first of
// io.tmp.dirs, else tmpDir ($GFLINK_HOME/tmp).
// A directory may be a path or a file: URI, as everywhere gflink takes one.
func LSMLocalDir(c *config.Configuration, tmpDir string) (string, error) {
	if d, ok, err := RocksDBLocalDir.Lookup(c); err != nil || ok && d != "" {
		if err != nil {
			return "", err
		}
		return savepoint.FilePath(d, RocksDBLocalDir.Key())
	}
	if ds, ok, err := IOTmpDirs.Lookup(c); err != nil {
		return "", err
	} else if ok {
		// Flink separates the directories with ',' or the path list
		// separator (':'), which a file: URI's own ':' must survive.
		for _, part := range strings.Split(ds, ",") {
			dirs := []string{part}
			if !strings.HasPrefix(strings.TrimSpace(part), "file:") {
				dirs = strings.Split(part, string(os.PathListSeparator))
			}
			for _, d := range dirs {
				if d = strings.TrimSpace(d); d != "" {
					return savepoint.FilePath(d, IOTmpDirs.Key())
				}
			}
		}
	}
	return tmpDir, nil
}

// Name is the backend's name (hashmap or rocksdb).
func (b *StateBackends) Name() StateBackendKind {
	if b == nil {
		return StateBackendHashMap
	}
	return b.kind
}

// IsIncremental: rocksdb with incremental checkpoints.
func (b *StateBackends) IsIncremental() bool {
	return b != nil && b.kind == StateBackendRocksDB && b.incremental
}

// Close removes the job's working directory.
func (b *StateBackends) Close() error {
	if b == nil || b.dir == nil {
		return nil
	}
	if b.cache != nil {
		b.cache.Unref() // every store using it is closed
	}
	return b.dir.Close()
}

// keyedBackendOptions says which keyed operator subtask a backend is for,
// and what it restores.
type keyedBackendOptions struct {
	maxPar           int
	keyGroups        state.KeyGroupRange
	uid              string
	subtask, attempt int
	// fs and snapshotDir are where the restored snapshot is; native lists
	// its LSM files to restore.
	fs          vfs.FS
	snapshotDir string
	native      []restore.NativeRestore
}

// newKeyedBackend makes the backend of one keyed operator subtask. native
// lists the old subtasks' LSM files to restore (in the snapshot directory
// snapDir of fsys): the files of one old subtask with exactly this key-group
// range are opened as they are; otherwise (rescaling) each old subtask's
// files are opened on the side and the key groups of this subtask copied
// over. Canonical blocks are restored later (RestoreKeyGroups).
func newKeyedBackend[K comparable](b *StateBackends, keySer state.KeySerializer[K], o keyedBackendOptions) (state.Backend[K], error) {
	maxPar, kgr, uid, subtask, attempt, fsys, snapDir, native := o.maxPar, o.keyGroups, o.uid, o.subtask, o.attempt, o.fs, o.snapshotDir, o.native
	if b == nil || b.kind != StateBackendRocksDB {
		if len(native) > 0 {
			return nil, fmt.Errorf("operator %s has native rocksdb state, which the %s backend cannot restore", uid, b.Name())
		}
		return state.NewKeyedBackend(keySer, maxPar, kgr), nil
	}
	dir := b.dir.SubtaskDir(uid, subtask, attempt)
	// restored names the files of a restored snapshot where they came
	// from, for errors about a corrupt one.
	open := func(dir string, restored map[string]string) (*lsm.Store, error) {
		store, err := lsm.Open(lsm.Options{Dir: dir, Cache: b.cache, BlockCacheSize: b.cacheSize, WriteBufferSize: b.writeBuffer, RowCacheSize: b.rowCache, LBaseMaxBytes: b.levelBase, Restored: restored})
		if err != nil {
			return nil, fmt.Errorf("open the LSM state backend of %s (subtask %d): %w", uid, subtask, err)
		}
		return store, nil
	}
	if len(native) == 1 && native[0].Start == kgr.Start && native[0].End == kgr.End {
		if err := download(fsys, snapDir, native[0].Handle, dir); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("restore operator %s (subtask %d): %w", uid, subtask, err)
		}
		store, err := open(dir, origins(snapDir, native[0].Handle))
		if err != nil {
			return nil, err
		}
		be, err := state.OpenLSMBackend(store, keySer, maxPar, kgr)
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("restore operator %s (subtask %d): %w", uid, subtask, err)
		}
		if b.incremental && b.claim && b.jobDir != "" {
			be.SeedShared(ClaimedShared(snapDir, native[0].Handle, b.jobDir))
		}
		return be, nil
	}
	store, err := open(dir, nil)
	if err != nil {
		return nil, err
	}
	be := state.NewLSMBackend(store, keySer, maxPar, kgr)
	for i, n := range native {
		if err := copyKeyGroups(be, fsys, snapDir, n.Handle, fmt.Sprintf("%s-restore-%d", dir, i), open); err != nil {
			be.Dispose()
			return nil, fmt.Errorf("restore operator %s (subtask %d) from key groups [%d, %d]: %w", uid, subtask, n.Start, n.End, err)
		}
	}
	return be, nil
}

// ClaimedShared returns where the restored checkpoint's shared SST files
// are, relative to a checkpoint directory of the job in jobDir: a CLAIM
// restore lets the job's incremental checkpoints refer to them. Files that
// cannot be referred to that way (another base directory, or private to
// the restored checkpoint, which CLAIM deletes once subsumed) are left
// out: the first checkpoint uploads them again.
func ClaimedShared(snapDir string, h *savepoint.NativeStateHandle, jobDir string) map[string]savepoint.NativeFile {
	out := map[string]savepoint.NativeFile{}
	for _, f := range h.Files {
		if !strings.HasPrefix(filepath.ToSlash(f.Path), "../") {
			continue // in the restored checkpoint's own directory
		}
		chk := filepath.Join(jobDir, savepoint.CheckpointDirPrefix+"0")
		rel, err := filepath.Rel(chk, filepath.Join(snapDir, f.Path))
		if err != nil {
			continue
		}
		if _, err := savepoint.NativeFilePath(chk, savepoint.NativeFile{Path: rel}); err != nil {
			continue // not a shared/ directory beside this job's
		}
		out[f.Name] = savepoint.NativeFile{Name: f.Name, Path: rel, Size: f.Size, CRC32C: f.CRC32C}
	}
	return out
}

// origins names where each native file of a snapshot lies, by its name in
// the working directory it is downloaded to.
func origins(snapDir string, h *savepoint.NativeStateHandle) map[string]string {
	out := make(map[string]string, len(h.Files))
	for _, f := range h.Files {
		if p, err := savepoint.NativeFilePath(snapDir, f); err == nil {
			out[f.Name] = p
		}
	}
	return out
}

// download copies the native files of a snapshot into dir.
func download(fsys vfs.FS, snapDir string, h *savepoint.NativeStateHandle, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range h.Files {
		if f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." {
			return fmt.Errorf("native state file name '%s' is not a plain name: %w", f.Name, savepoint.ErrCorrupt)
		}
		if err := savepoint.CopyNativeFile(fsys, snapDir, f, filepath.Join(dir, f.Name)); err != nil {
			return err
		}
	}
	return nil
}

// copyKeyGroups opens an old subtask's files in tmp and copies this
// backend's key groups out of them.
func copyKeyGroups[K comparable](be *state.LSMBackend[K], fsys vfs.FS, snapDir string, h *savepoint.NativeStateHandle, tmp string, open func(string, map[string]string) (*lsm.Store, error)) error {
	if err := download(fsys, snapDir, h, tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	src, err := open(tmp, origins(snapDir, h))
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return errors.Join(be.CopyKeyGroups(src), src.Close())
}

package engine

import (
	"fmt"
	"os"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/restart"
	"github.com/gflink/gflink/engine/state"
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

// Options honoured by the engine itself.
var (
	Parallelism = config.Int("parallelism.default").WithDefault(1).
			WithCheck(config.Positive).WithAccepted("an integer >= 1").
			WithDescription("The parallelism of operators that do not set one.")
	MaxParallelism = config.Int("pipeline.max-parallelism").WithDefault(-1).
			WithCheck(func(n int) error {
			if n == -1 || n >= 1 && n <= state.UpperBoundMaxParallelism {
				return nil
			}
			return fmt.Errorf("must be -1 or between 1 and %d", state.UpperBoundMaxParallelism)
		}).
		WithAccepted(fmt.Sprintf("-1 (derive it from each operator's parallelism) or an integer between 1 and %d", state.UpperBoundMaxParallelism)).
		WithDescription("The number of key groups, which bounds rescaling. -1: min(max(roundUpToPowerOfTwo(p + p/2), 128), 32768) per operator.")
	PipelineName = config.String("pipeline.name").
			WithDescription("The job's name. Default: the name the job gives itself.")
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
	RocksDBManagedMemory = config.Bool("state.backend.rocksdb.memory.managed").WithDefault(true).
				WithDescription("The rocksdb backend's subtasks share one memory budget, taskmanager.memory.managed.size, as Flink's managed memory: a block cache shared by all of the job's LSMs, and write buffers split among them (state.backend.rocksdb.memory.write-buffer-ratio). false: each subtask gets state.backend.rocksdb.block.cache-size and state.backend.rocksdb.writebuffer.size.")
	ManagedMemorySize = config.Memory("taskmanager.memory.managed.size").WithDefault(config.MemorySize(256 << 20)).
				WithCheck(positiveMemory).
				WithDescription("gflink: the memory the rocksdb backend's LSMs share (the process is the one TaskManager).")
	RocksDBWriteBufferRatio = config.Float("state.backend.rocksdb.memory.write-buffer-ratio").WithDefault(0.5).
				WithCheck(func(f float64) error {
			if f <= 0 || f >= 1 {
				return fmt.Errorf("must be between 0 and 1, exclusive")
			}
			return nil
		}).WithAccepted("a number between 0 and 1, exclusive").
		WithDescription("The share of the managed memory the write buffers (memtables) take; the block cache has the rest.")
	RocksDBTimerService = config.Enum("state.backend.rocksdb.timer-service.factory", "PriorityQueueStateType", "ROCKSDB", "HEAP").
				WithDefault("ROCKSDB").
				WithDescription("Where the rocksdb backend keeps timers. gflink keeps them in the LSM, with their order in a heap in memory, in both modes.")
	Incremental = config.Bool("execution.checkpointing.incremental").WithDefault(false).
			WithDeprecatedKeys("state.backend.incremental").
			WithDescription("With the rocksdb backend, a checkpoint uploads only the SST files the last completed checkpoint did not hold, into <dir>/<jobId>/shared/, and refers to the others. The hashmap backend's checkpoints are always full.")
	FaultFailAfterRecords = config.Int("fault-injection.fail-after-records").WithDefault(0).
				WithCheck(config.NonNegative).WithAccepted("an integer >= 0 (0 disables fault injection)").
				WithDescription("gflink only, for rehearsing recovery: a task fails once the job's sources have emitted this many records in the current attempt (summed over all source subtasks). 0 (the default) disables it.")
	FaultMaxFailures = config.Int("fault-injection.max-failures").WithDefault(1).
				WithCheck(config.NonNegative).WithAccepted("an integer >= 0").
				WithDescription("gflink only: how many failures fault injection causes in the job's life.")
	FaultAfterCheckpoints = config.Int("fault-injection.after-checkpoints").WithDefault(0).
				WithCheck(config.NonNegative).WithAccepted("an integer >= 0").
				WithDescription("gflink only: fault injection also waits until this many checkpoints have completed in the current attempt, so that the failure has a checkpoint to restore however fast the sources are; it comes with the next record a source emits after that (a bounded job whose sources finish first is not failed). 0 (the default): it does not wait.")
)

// EngineOptions lists the engine's own options.
func EngineOptions() []config.AnyOption {
	return []config.AnyOption{Parallelism, MaxParallelism, PipelineName, StateBackend,
		RocksDBLocalDir, IOTmpDirs, RocksDBBlockCacheSize, RocksDBWriteBufferSize, RocksDBTimerService, Incremental,
		RocksDBManagedMemory, ManagedMemorySize, RocksDBWriteBufferRatio,
		FaultFailAfterRecords, FaultMaxFailures, FaultAfterCheckpoints}
}

// Options lists every option gflink's engine honours, for validation up
// front and for documentation.
func Options() []config.AnyOption {
	var out []config.AnyOption
	out = append(out, EngineOptions()...)
	out = append(out, ChangelogOptions()...)
	out = append(out, RecoveryOptions()...)
	out = append(out, checkpoint.Options()...)
	out = append(out, restart.Options()...)
	return out
}

// NewEnvironmentFromConfig makes an environment with the configured
// parallelism, max parallelism and job name.
func NewEnvironmentFromConfig(c *config.Configuration, o EnvironmentOptions) (*Environment, error) {
	p, err := Parallelism.Get(c)
	if err != nil {
		return nil, err
	}
	maxP, err := MaxParallelism.Get(c)
	if err != nil {
		return nil, err
	}
	name, err := PipelineName.Get(c)
	if err != nil {
		return nil, err
	}
	o.Parallelism, o.MaxParallelism, o.JobName = p, maxP, name
	return NewEnvironment(o), nil
}

// RecoveryClaimMode says who owns a restored snapshot
// (execution.state-recovery.claim-mode, Flink's RecoveryClaimMode).
type RecoveryClaimMode string

// Claim modes.
const (
	// ClaimModeClaim: the job owns the snapshot, and deletes it once a
	// newer checkpoint subsumes it.
	ClaimModeClaim RecoveryClaimMode = "CLAIM"
	// ClaimModeNoClaim: the snapshot is never touched; the first
	// checkpoint is a full one.
	ClaimModeNoClaim RecoveryClaimMode = "NO_CLAIM"
	// ClaimModeLegacy: deprecated; never deleted, but its shared files may
	// be referred to.
	ClaimModeLegacy RecoveryClaimMode = "LEGACY"
)

// State recovery options: what `run -s`, `-n` and `-cm` set.
var (
	StateRecoveryPath = config.String("execution.state-recovery.path").
				WithDeprecatedKeys("execution.savepoint.path").
				WithAccepted("a checkpoint or savepoint directory, its _metadata file, or a job's checkpoint directory, as a path or a file: URI").
				WithDescription("The snapshot to restore from; what `run -s` sets.")
	IgnoreUnclaimedState = config.Bool("execution.state-recovery.ignore-unclaimed-state").WithDefault(false).
				WithDeprecatedKeys("execution.savepoint.ignore-unclaimed-state").
				WithDescription("Start even if the snapshot holds state of operators the job no longer has (dropping it); what `run -n` sets.")
	ClaimMode = config.EnumOf("execution.state-recovery.claim-mode", "RecoveryClaimMode", ClaimModeClaim, ClaimModeNoClaim, ClaimModeLegacy).
			WithDefault(ClaimModeNoClaim).WithDeprecatedKeys("execution.savepoint-restore-mode").
			WithDescription("Who owns the restored snapshot: NO_CLAIM (never touched), CLAIM (the job's own: deleted when subsumed), LEGACY (deprecated; never deleted).")
)

// RecoveryOptions lists the state recovery options.
func RecoveryOptions() []config.AnyOption {
	return []config.AnyOption{StateRecoveryPath, IgnoreUnclaimedState, ClaimMode}
}

package jobmaster

import (
	"errors"
	"fmt"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/engine/restart"
	"github.com/gflink/gflink/engine/state"
)

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
	AutoWatermarkInterval = config.Duration("pipeline.auto-watermark-interval").WithDefault(200 * time.Millisecond).
				WithCheck(func(d time.Duration) error {
			if d < 0 {
				return errors.New("the interval must not be negative")
			}
			return nil
		}).
		WithAccepted("a duration, e.g. '200 ms' or '1 s'; 0 disables periodic watermarks").
		WithDescription("How often periodic watermark generators (AssignTimestampsAndWatermarks) emit a watermark. 0 disables periodic watermarks: only punctuated ones are emitted.")
	PipelineName = config.String("pipeline.name").
			WithDescription("The job's name. Default: the name the job gives itself.")
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
	return []config.AnyOption{Parallelism, MaxParallelism, PipelineName, AutoWatermarkInterval, task.StateBackend,
		task.RocksDBLocalDir, task.IOTmpDirs, task.RocksDBBlockCacheSize, task.RocksDBWriteBufferSize, task.RocksDBTimerService, task.Incremental,
		task.RocksDBManagedMemory, task.ManagedMemorySize, task.RocksDBWriteBufferRatio, task.RocksDBRowCacheSize, task.RocksDBRowCacheRatio, task.RocksDBMaxSizeLevelBase,
		FaultFailAfterRecords, FaultMaxFailures, FaultAfterCheckpoints}
}

// Options lists every option gflink's engine honours, for validation up
// front and for documentation.
func Options() []config.AnyOption {
	var out []config.AnyOption
	out = append(out, EngineOptions()...)
	out = append(out, task.ChangelogOptions()...)
	out = append(out, RecoveryOptions()...)
	out = append(out, checkpoint.Options()...)
	out = append(out, restart.Options()...)
	return out
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

// Package checkpoint holds the checkpoint coordinator — a deterministic
// state machine fed with events (time, acks, declines, task lifecycle) that
// returns decisions (trigger, finalize, abort, complete, fail the job) — and
// the checkpoint storages (jobmanager memory and filesystem) that carry out
// its decisions on disk.
package checkpoint

import (
	"errors"
	"fmt"
	"time"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/savepoint"
)

// CheckpointingMode is the checkpointing mode
// (execution.checkpointing.mode).
type CheckpointingMode string

// Checkpointing modes.
const (
	// ExactlyOnce aligns barriers: a snapshot holds exactly the effect of
	// the records before its barrier.
	ExactlyOnce CheckpointingMode = "EXACTLY_ONCE"
	// AtLeastOnce does not: records after one input's barrier may be in
	// the snapshot and replayed.
	AtLeastOnce CheckpointingMode = "AT_LEAST_ONCE"
)

// ExternalizedCheckpointRetention says which checkpoints outlive the job
// (execution.checkpointing.externalized-checkpoint-retention).
type ExternalizedCheckpointRetention string

// Retention policies.
const (
	NoExternalized       ExternalizedCheckpointRetention = "NO_EXTERNALIZED_CHECKPOINTS"
	RetainOnCancellation ExternalizedCheckpointRetention = "RETAIN_ON_CANCELLATION"
	DeleteOnCancellation ExternalizedCheckpointRetention = "DELETE_ON_CANCELLATION"
)

// StorageKind is where checkpoints go (execution.checkpointing.storage).
type StorageKind string

// Checkpoint storages.
const (
	StorageJobManager StorageKind = "jobmanager"
	StorageFilesystem StorageKind = "filesystem"
)

func checkLocalPath(p string) error {
	_, err := savepoint.LocalPath(p)
	return err
}

// The checkpointing options gflink honours, with Flink's keys, deprecated
// keys and defaults.
var (
	Interval = config.Duration("execution.checkpointing.interval").
			WithCheck(func(d time.Duration) error {
			if d > 0 && d < 10*time.Millisecond {
				return errors.New("Checkpoint interval must be larger than or equal to 10 ms")
			}
			return nil
		}).
		WithAccepted("a duration of at least 10 ms, e.g. '10 s' or '500 ms' (a bare number means milliseconds); unset or 0 disables checkpointing").
		WithDescription("How often checkpoints are triggered. Unset (the default) or 0 disables checkpointing.")
	Mode = config.EnumOf("execution.checkpointing.mode", "CheckpointingMode", ExactlyOnce, AtLeastOnce).
		WithDefault(ExactlyOnce).
		WithDescription("EXACTLY_ONCE aligns barriers (tasks with several inputs block the inputs whose barrier arrived); AT_LEAST_ONCE does not block, so records after a barrier may be counted twice after recovery.")
	Timeout = config.Duration("execution.checkpointing.timeout").WithDefault(10 * time.Minute).
		WithCheck(func(d time.Duration) error {
			if d < 10*time.Millisecond {
				return errors.New("Checkpoint timeout must be larger than or equal to 10 ms")
			}
			return nil
		}).
		WithDescription("A checkpoint that has not completed after this long is aborted (it counts as a failed checkpoint).")
	MinPause = config.Duration("execution.checkpointing.min-pause").WithDefault(0).
			WithDescription("The least time between the end of one checkpoint and the start of the next.")
	MaxConcurrent = config.Int("execution.checkpointing.max-concurrent-checkpoints").WithDefault(1).
			WithCheck(func(n int) error {
			if n < 1 {
				return errors.New("The maximum number of concurrent attempts must be at least one")
			}
			return nil
		}).
		WithAccepted("an integer >= 1").
		WithDescription("How many checkpoints may be in progress at once.")
	TolerableFailed = config.Int("execution.checkpointing.tolerable-failed-checkpoints").WithDefault(0).
			WithCheck(config.NonNegative).WithAccepted("an integer >= 0").
			WithDescription("How many consecutive checkpoint failures (expiry, storage errors, failed async writes) are tolerated before the job fails.")
	Retention = config.EnumOf("execution.checkpointing.externalized-checkpoint-retention", "ExternalizedCheckpointRetention",
		NoExternalized, RetainOnCancellation, DeleteOnCancellation).
		WithDefault(NoExternalized).
		WithDescription("Which checkpoints survive the job: NO_EXTERNALIZED_CHECKPOINTS deletes them whenever the job ends; DELETE_ON_CANCELLATION keeps them when the job FAILED; RETAIN_ON_CANCELLATION keeps them when it FAILED or was CANCELED. All are deleted when the job FINISHES.")
	NumRetained = config.Int("execution.checkpointing.num-retained").WithDefault(1).
			WithDeprecatedKeys("state.checkpoints.num-retained").
			WithDescription("How many completed checkpoints are kept; older ones are subsumed and deleted. A value <= 0 means 1 (with a warning).")
	Dir = config.String("execution.checkpointing.dir").
		WithDeprecatedKeys("state.checkpoints.dir", "state.backend.fs.checkpointdir").
		WithCheck(checkLocalPath).
		WithAccepted("a local directory, as a path or a file: URI").
		WithDescription("Where checkpoints are written: <dir>/<jobId>/chk-N/_metadata. Setting it selects the filesystem storage.")
	SavepointDir = config.String("execution.checkpointing.savepoint-dir").
			WithDeprecatedKeys("state.savepoints.dir", "savepoints.state.backend.fs.dir").
			WithCheck(checkLocalPath).
			WithAccepted("a local directory, as a path or a file: URI").
			WithDescription("The default directory for savepoints.")
	StorageOption = config.EnumOf("execution.checkpointing.storage", "CheckpointStorage", StorageJobManager, StorageFilesystem).
			WithDeprecatedKeys("state.checkpoint-storage").
			WithDescription("jobmanager keeps checkpoints in memory (lost with the process); filesystem writes them under execution.checkpointing.dir. Unset: filesystem if a directory is set, else jobmanager.")
	AfterTasksFinish = config.Bool("execution.checkpointing.checkpoints-after-tasks-finish").WithDefault(true).
				WithDeprecatedKeys("execution.checkpointing.checkpoints-after-tasks-finish.enabled").
				WithDescription("Keep checkpointing after some tasks have finished, and take a final checkpoint before the job FINISHES so that two-phase-commit sinks commit the tail of their output.")
	Unaligned = config.Bool("execution.checkpointing.unaligned.enabled").WithDefault(false).
			WithDeprecatedKeys("execution.checkpointing.unaligned").
			WithDescription("Unaligned checkpoints (EXACTLY_ONCE only): a checkpoint barrier overtakes the records in flight, which are stored with the checkpoint; savepoints stay aligned.")
	AlignedTimeout = config.Duration("execution.checkpointing.aligned-checkpoint-timeout").WithDefault(0).
			WithDeprecatedKeys("execution.checkpointing.alignment-timeout").
			WithDescription("With unaligned checkpoints: how long a checkpoint stays aligned before it switches to unaligned (0: unaligned from the start).")
	UnalignedForced = config.Bool("execution.checkpointing.unaligned.forced").WithDefault(false).
			WithDescription("Unaligned checkpoints even where Flink would fall back to aligned ones.")
	InlineThreshold = config.Memory("execution.checkpointing.data-inline-threshold").WithDefault(20<<10).
			WithDeprecatedKeys("state.storage.fs.memory-threshold", "state.backend.fs.memory-threshold").
			WithCheck(func(m config.MemorySize) error {
			if m > 1<<20 {
				return errors.New("the threshold must not exceed 1 mb")
			}
			return nil
		}).
		WithDescription("A subtask's state smaller than this is stored inside _metadata instead of a file of its own.")
)

// Options lists the checkpointing options, for validation and docs.
func Options() []config.AnyOption {
	return []config.AnyOption{Interval, Mode, Timeout, MinPause, MaxConcurrent, TolerableFailed,
		Retention, NumRetained, Dir, SavepointDir, StorageOption, AfterTasksFinish, InlineThreshold,
		Unaligned, AlignedTimeout, UnalignedForced}
}

// Config is the checkpointing configuration of a job.
type Config struct {
	Interval         time.Duration // 0: periodic checkpoints disabled
	Mode             CheckpointingMode
	Timeout          time.Duration
	MinPause         time.Duration
	MaxConcurrent    int
	TolerableFailed  int
	Retention        ExternalizedCheckpointRetention
	NumRetained      int
	Dir              string // local absolute path, "" if none
	SavepointDir     string // local absolute path, "" if none
	Storage          StorageKind
	AfterTasksFinish bool
	InlineThreshold  int64
	// Unaligned: checkpoints (not savepoints) are unaligned; EXACTLY_ONCE only.
	Unaligned bool
	// AlignedTimeout > 0: an unaligned checkpoint starts aligned and turns
	// unaligned where its alignment lasts longer.
	AlignedTimeout time.Duration
}

// Enabled reports whether periodic checkpointing is on.
func (c Config) Enabled() bool { return c.Interval > 0 }

// ConfigFrom reads the checkpointing configuration. Warnings are for values
// that work but are probably not what was meant.
func ConfigFrom(c *config.Configuration) (Config, []string, error) {
	var cfg Config
	var warnings []string
	var errs []error
	get := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	cfg.Interval, err = Interval.Get(c)
	get(err)
	cfg.Mode, err = Mode.Get(c)
	get(err)
	cfg.Timeout, err = Timeout.Get(c)
	get(err)
	cfg.MinPause, err = MinPause.Get(c)
	get(err)
	cfg.MaxConcurrent, err = MaxConcurrent.Get(c)
	get(err)
	cfg.TolerableFailed, err = TolerableFailed.Get(c)
	get(err)
	cfg.Retention, err = Retention.Get(c)
	get(err)
	cfg.NumRetained, err = NumRetained.Get(c)
	get(err)
	if err == nil && cfg.NumRetained <= 0 {
		warnings = append(warnings, fmt.Sprintf("Invalid value for maxNumberOfCheckpointsToRetain (execution.checkpointing.num-retained = %d); using 1 (the default).", cfg.NumRetained))
		cfg.NumRetained = 1
	}
	var dir, spDir string
	dir, err = Dir.Get(c)
	get(err)
	if dir != "" && err == nil {
		cfg.Dir, _ = savepoint.LocalPath(dir)
	}
	spDir, err = SavepointDir.Get(c)
	get(err)
	if spDir != "" && err == nil {
		cfg.SavepointDir, _ = savepoint.LocalPath(spDir)
	}
	storage, set, err := StorageOption.Lookup(c)
	get(err)
	switch {
	case set:
		cfg.Storage = storage
	case cfg.Dir != "":
		cfg.Storage = StorageFilesystem
	default:
		cfg.Storage = StorageJobManager
	}
	if err == nil && cfg.Storage == StorageFilesystem && cfg.Dir == "" {
		errs = append(errs, fmt.Errorf("Checkpoint storage 'filesystem' needs a directory: set execution.checkpointing.dir (or state.checkpoints.dir)."))
	}
	cfg.AfterTasksFinish, err = AfterTasksFinish.Get(c)
	get(err)
	var th config.MemorySize
	th, err = InlineThreshold.Get(c)
	get(err)
	cfg.InlineThreshold = int64(th)
	unaligned, err := Unaligned.Get(c)
	get(err)
	alignedTimeout, err := AlignedTimeout.Get(c)
	get(err)
	forced, err := UnalignedForced.Get(c)
	get(err)
	switch {
	case unaligned && cfg.Mode == AtLeastOnce:
		// Flink logs this and turns unaligned checkpoints off; gflink
		// refuses, as for any pair of keys that contradict each other.
		errs = append(errs, errors.New("execution.checkpointing.unaligned.enabled: true needs execution.checkpointing.mode: EXACTLY_ONCE (it is AT_LEAST_ONCE): "+
			"at-least-once checkpoints never wait for alignment, so there is nothing to unalign. Set execution.checkpointing.mode: EXACTLY_ONCE or execution.checkpointing.unaligned.enabled: false"))
	case unaligned && cfg.MaxConcurrent != 1:
		// Flink's rule too: a task records one checkpoint's records in
		// flight at a time, and tags what it sends after a barrier with it.
		errs = append(errs, fmt.Errorf("execution.checkpointing.unaligned.enabled: true needs execution.checkpointing.max-concurrent-checkpoints: 1 (it is %d): "+
			"the records in flight of one checkpoint are told from the next one's by the order of their barriers. Set execution.checkpointing.max-concurrent-checkpoints: 1 or execution.checkpointing.unaligned.enabled: false", cfg.MaxConcurrent))
	case unaligned:
		cfg.Unaligned, cfg.AlignedTimeout = true, alignedTimeout
	case !unaligned && (alignedTimeout > 0 || forced):
		warnings = append(warnings, "execution.checkpointing.aligned-checkpoint-timeout and execution.checkpointing.unaligned.forced have no effect without execution.checkpointing.unaligned.enabled: true.")
	}
	if cfg.Retention != NoExternalized && cfg.Storage == StorageJobManager && cfg.Dir == "" && cfg.Enabled() {
		warnings = append(warnings, "execution.checkpointing.externalized-checkpoint-retention is "+string(cfg.Retention)+
			" but checkpoints are kept in memory (no execution.checkpointing.dir): nothing will outlive the process.")
	}
	return cfg, warnings, errors.Join(errs...)
}

package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/internal/apibridge"
	"github.com/gflink/gflink/savepoint/vfs"
)

func init() {
	apibridge.Wrap = func(env *engine.Environment) any { return &Environment{e: env} }
}

// Environment is where a job is assembled (Flink's
// StreamExecutionEnvironment). Under gflink's command line a job is handed
// one, configured from the command line and the configuration file; a Go
// program makes its own with NewEnvironment and runs it with Execute.
type Environment struct {
	e    *engine.Environment
	conf *config.Configuration // nil when the command line owns the run
	log  *slog.Logger
	ran  bool
}

// Options configure an Environment made by NewEnvironment.
type Options struct {
	// Config holds Flink configuration keys and their values, as in
	// config.yaml or -D: "parallelism.default", "execution.checkpointing.interval",
	// "state.backend.type", "execution.checkpointing.dir", "restart-strategy.type", …
	Config map[string]string
	// Stdout receives what Print sinks write (os.Stdout if nil).
	Stdout io.Writer
	// Logger receives the job's log: status changes, checkpoints, failures
	// (nothing is logged if nil).
	Logger *slog.Logger
}

// NewEnvironment returns an environment for a job run with Execute.
func NewEnvironment(o Options) (*Environment, error) {
	conf := config.New()
	keys := make([]string, 0, len(o.Config))
	for k := range o.Config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		conf.Set(k, o.Config[k], config.Origin{Layer: config.LayerDynamic, Flag: "stream.Options.Config"})
	}
	e, err := engine.NewEnvironmentFromConfig(conf, engine.EnvironmentOptions{Stdout: o.Stdout})
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Environment{e: e, conf: conf, log: log}, nil
}

// Parallelism is the default parallelism of the job's operators
// (parallelism.default, or run -p).
func (env *Environment) Parallelism() int { return env.e.Parallelism() }

// SetJobName names the job, unless pipeline.name already did.
func (env *Environment) SetJobName(name string) { env.e.SetJobName(name) }

// JobName is the job's name: pipeline.name, else the name the job set,
// else Flink's default, "Flink Streaming Job".
func (env *Environment) JobName() string { return env.e.JobName() }

// Stdout is where Print sinks write.
func (env *Environment) Stdout() io.Writer { return env.e.Stdout() }

// JobExecutionResult is how a job run by Execute ended.
type JobExecutionResult struct {
	JobID   string
	JobName string
	// Status is FINISHED, FAILED or CANCELED.
	Status  string
	Runtime time.Duration
	// Retained lists the checkpoints the retention policy left behind
	// (execution.checkpointing.externalized-checkpoint-retention), newest
	// last, as file: URIs: what a later run restores from with
	// execution.state-recovery.path.
	Retained []string
}

// Execute runs the job in this process until it ends: its bounded inputs
// are read to their end, it fails beyond what its restart strategy allows,
// or ctx is cancelled (the job is cancelled; Execute returns once every
// task has stopped). It returns an error unless the job FINISHED. With
// execution.state-recovery.path set it starts from that checkpoint or
// savepoint, as `run -s` does (execution.state-recovery.claim-mode,
// execution.state-recovery.ignore-unclaimed-state apply). An
// environment runs one job, once; Execute is not available to jobs run by
// gflink's command line, which runs them itself.
func (env *Environment) Execute(ctx context.Context) (JobExecutionResult, error) {
	if env.ran {
		return JobExecutionResult{}, errors.New("Execute: this environment has run its job already; build the job again on a new environment to run it again")
	}
	if env.conf == nil {
		return JobExecutionResult{}, errors.New("Execute: this environment belongs to gflink's command line, which runs the job itself; return from the job's Build instead")
	}
	g, err := env.e.Build()
	if err != nil {
		return JobExecutionResult{}, err
	}
	conf := env.conf
	env.ran = true // one run per environment: the graph's operators are now in use
	opts := engine.JobOptions{Config: conf, Logger: env.log}
	src, err := engine.ResolveRestore(vfs.Default, conf, env.log)
	if err != nil {
		return JobExecutionResult{}, err
	}
	if src != nil {
		opts.Restore, opts.AllowNonRestoredState, opts.ClaimMode = src.Resolved, src.AllowNonRestoredState, src.ClaimMode
	}
	j, err := engine.Submit(ctx, g, opts)
	if err != nil {
		return JobExecutionResult{}, err
	}
	stop := context.AfterFunc(ctx, j.Cancel)
	defer stop()
	r := j.Wait()
	res := JobExecutionResult{JobID: r.JobID, JobName: r.Name, Status: string(r.Status),
		Runtime: r.End.Sub(r.Start), Retained: r.Retained}
	switch {
	case r.Status == engine.StatusFinished:
		return res, nil
	case r.Err != nil:
		return res, fmt.Errorf("job %s %s: %w", r.JobID, r.Status, r.Err)
	case ctx.Err() != nil:
		return res, fmt.Errorf("job %s %s: %w", r.JobID, r.Status, context.Cause(ctx))
	}
	return res, fmt.Errorf("job %s ended %s", r.JobID, r.Status)
}

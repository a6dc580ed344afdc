package cmd

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/engine/rest"
	"github.com/gflink/gflink/restore"
	"github.com/spf13/cobra"
)

// RunOptions are the options of `gflink run`.
type RunOptions struct {
	Global                *globalOptions
	Job                   string
	Args                  []string
	Parallelism           string
	FromSavepoint         string
	AllowNonRestoredState bool
	ClaimMode             string
	RestoreMode           string
	ShutdownOnExit        bool
	Detached              bool
}

func newRunCmd(f *Factory, g *globalOptions) *cobra.Command {
	o := &RunOptions{Global: g}
	c := &cobra.Command{
		Use: "run",
		Long: "Runs a job in this process with Flink's fault tolerance: checkpoints, restarts and restore. " +
			"<job> is the name of a registered job (built in: wordcount); the arguments after it are the job's.",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("No job specified. Specify the name of a job (built in: %s).", strings.Join(f.Registry.Names(), ", "))
			}
			o.Job, o.Args = args[0], args[1:]
			return runRun(f, o)
		},
	}
	c.Flags().SetInterspersed(false)
	fl := c.Flags()
	fl.StringVarP(&o.Parallelism, "parallelism", "p", "", "The parallelism with which to run the program. Optional flag to override the default value specified in the configuration.")
	fl.SetAnnotation("parallelism", "argname", []string{"parallelism"})
	fl.StringVarP(&o.FromSavepoint, "fromSavepoint", "s", "", "Path to a savepoint or checkpoint to restore the job from (a chk-N or savepoint directory, its _metadata file, or a job's checkpoint directory to take its newest complete checkpoint), as a path or a file: URI.")
	fl.SetAnnotation("fromSavepoint", "argname", []string{"savepointPath"})
	fl.BoolVarP(&o.AllowNonRestoredState, "allowNonRestoredState", "n", false, "Allow to skip savepoint state that cannot be restored. You need to allow this if you removed an operator from your program that was part of the program when the savepoint was triggered.")
	fl.StringVar(&o.ClaimMode, "claimMode", "", "Defines how should we restore from the given savepoint. Supported options: [claim - claim ownership of the savepoint and delete once it is subsumed, no_claim (default) - do not claim ownership, the first checkpoint will not reuse any files from the restored one, legacy (deprecated) - the old behaviour, do not assume ownership of the savepoint files, but can reuse some shared files.")
	fl.StringVar(&o.RestoreMode, "restoreMode", "", "This option is deprecated, please use 'claimMode' instead.")
	fl.BoolVarP(&o.Detached, "detached", "d", false, "If present, runs the job in detached mode: in a background process, with its log in $GFLINK_HOME/log/<jobId>.log; gflink returns once the job is RUNNING.")
	fl.BoolVar(&o.ShutdownOnExit, "shutdownOnAttachedExit", false, "If the job is submitted in attached mode, perform a best-effort cluster shutdown when the CLI is terminated abruptly, e.g., in response to a user interrupt, such as typing Ctrl + C. (gflink always cancels its in-process job on Ctrl + C.)")
	return c
}

// applyRunFlags writes run's flags into the configuration; explicit flags
// override -D and the file.
func applyRunFlags(c *config.Configuration, o *RunOptions, out io.Writer) error {
	if o.Parallelism != "" {
		p, err := strconv.Atoi(o.Parallelism)
		if err != nil || p <= 0 {
			return usageErrorf("The parallelism must be a positive number: %s", o.Parallelism)
		}
		c.SetString(engine.Parallelism.Key(), o.Parallelism, "-p")
	}
	if o.FromSavepoint != "" {
		c.SetString(engine.StateRecoveryPath.Key(), o.FromSavepoint, "-s")
	}
	if o.AllowNonRestoredState {
		c.SetString(engine.IgnoreUnclaimedState.Key(), "true", "-n")
	}
	mode, flag := o.ClaimMode, "-cm"
	if o.RestoreMode != "" {
		fmt.Fprintln(out, "The option 'restoreMode' is deprecated. Please use 'claimMode' instead.")
		if mode == "" {
			mode, flag = o.RestoreMode, "-rm"
		}
	}
	if mode != "" {
		if _, err := engine.ClaimMode.Get(func() *config.Configuration {
			t := config.New()
			t.SetString(engine.ClaimMode.Key(), mode, flag)
			return t
		}()); err != nil {
			return fmt.Errorf("Could not parse value for enum class org.apache.flink.core.execution.RecoveryClaimMode. Expected one of: [[CLAIM, NO_CLAIM, LEGACY]] (%s %s)", flag, mode)
		}
		c.SetString(engine.ClaimMode.Key(), mode, flag)
	}
	return nil
}

func runRun(f *Factory, o *RunOptions) error {
	out, err := newOutput(f, o.Global)
	if err != nil {
		return err
	}
	child := f.Getenv(detachedChildEnv) == "1"
	var report *childReport
	if child {
		report = openChildReport()
		defer report.close()
	}
	err = runJob(f, o, out, report)
	if child && err != nil {
		report.failed(err)
	}
	return err
}

func runJob(f *Factory, o *RunOptions, out output, report *childReport) error {
	log := newLogger(f.IO.ErrOut, logLevel(f))
	conf, err := loadConfig(f, o.Global, log)
	if err != nil {
		return err
	}
	if err := applyRunFlags(conf, o, f.IO.Out); err != nil {
		return err
	}
	if err := validateConfig(conf, log); err != nil {
		return err
	}
	job, ok := f.Registry.Lookup(o.Job)
	if !ok {
		return usageErrorf("Could not find job %q. Available jobs: %s.", o.Job, strings.Join(f.Registry.Names(), ", "))
	}
	stdout := f.IO.Out
	if out.json {
		stdout = f.IO.ErrOut // stdout carries the one JSON object
	}
	env, err := engine.NewEnvironmentFromConfig(conf, engine.EnvironmentOptions{Stdout: stdout})
	if err != nil {
		return err
	}
	if err := job.Build(env, o.Args); err != nil {
		var u *jobs.UsageError
		if errors.As(err, &u) && job.Usage != nil {
			var b strings.Builder
			job.Usage(&b)
			return usageErrorf("%s\n\n%s", u.Msg, strings.TrimRight(b.String(), "\n"))
		}
		return err
	}
	graph, err := env.Build()
	if err != nil {
		return err
	}
	if o.Detached && report == nil {
		return runDetached(f, o, out, conf)
	}

	jobID := f.Getenv(jobIDEnv)
	if jobID == "" {
		jobID = engine.NewJobID()
	}
	opts := engine.JobOptions{JobID: jobID, Config: conf, FS: f.FS, Logger: log}
	if path, _ := engine.StateRecoveryPath.Get(conf); path != "" {
		resolved, err := restore.Resolve(f.FS, path)
		for _, n := range resolvedNotes(resolved) {
			log.Warn(n)
		}
		if err != nil {
			return err
		}
		if err := restore.VerifyStateFiles(f.FS, resolved.Dir, resolved.Metadata); err != nil {
			return fmt.Errorf("Failed to read checkpoint/savepoint '%s': %w", path, err)
		}
		opts.Restore = resolved
		opts.AllowNonRestoredState, _ = engine.IgnoreUnclaimedState.Get(conf)
	}

	// The REST endpoint: bound before the job starts, so that a busy port
	// range is an error before anything runs.
	addr, _ := rest.BindAddress.Get(conf)
	ports, _ := rest.BindPort.Get(conf)
	listener, err := rest.Listen(addr, ports)
	if err != nil {
		return err
	}
	reg := newRegistration(f, jobID, graph.Name, "http://"+listener.Addr().String(), f.Getenv(logFileEnv))
	running := make(chan struct{})
	var once sync.Once
	opts.OnStatus = func(st engine.JobStatus, at time.Time) {
		reg.update(st, at)
		if st == engine.StatusRunning || st.IsGloballyTerminal() {
			once.Do(func() { close(running) })
		}
	}
	j, err := engine.Submit(f.Context, graph, opts)
	if err != nil {
		listener.Close()
		return err
	}
	storeFor, _ := rest.AsyncStoreDuration.Get(conf)
	srv := rest.NewServer(j, rest.ServerOptions{Version: "gflink " + Version, Revision: revision(), FS: f.FS, StoreDuration: storeFor})
	srv.Serve(listener)
	defer srv.Close()
	reg.update(j.Status(), time.Now())
	<-running
	if report != nil {
		report.running(jobID, j.Status())
	}
	out.println("Job has been submitted with JobID %s", jobID)
	res := j.Wait()
	// Stay reachable until whoever asked for a stop or savepoint has its
	// answer, then go.
	srv.WaitFetched(10 * time.Second)
	return reportResult(f, out, res)
}

func resolvedNotes(r *restore.Resolved) []string {
	if r == nil {
		return nil
	}
	return r.Notes
}

// reportResult prints how an attached job ended, with Flink's lines, and
// picks the exit code: 0 FINISHED, 1 FAILED, 130 cancelled by Ctrl-C.
func reportResult(f *Factory, out output, res engine.JobResult) error {
	runtime := res.End.Sub(res.Start).Milliseconds()
	result := map[string]any{"jobId": res.JobID, "status": string(res.Status), "runtimeMs": runtime}
	if len(res.Retained) > 0 {
		result["retainedCheckpoint"] = res.Retained[len(res.Retained)-1]
	}
	if res.Err != nil {
		result["error"] = res.Err.Error()
	}
	out.result(result)
	switch res.Status {
	case engine.StatusFinished:
		out.println("Program execution finished\nJob with JobID %s has finished.\nJob Runtime: %d ms", res.JobID, runtime)
		return nil
	case engine.StatusCanceled:
		fmt.Fprintf(f.IO.ErrOut, "Job %s was cancelled.\n", res.JobID)
		printRetained(f, res)
		return &SilentError{Code: ExitCanceled}
	default:
		fmt.Fprintf(f.IO.ErrOut, "\n------------------------------------------------------------\n The program finished with the following exception:\n\n")
		for i, line := range causeChain(res.Err) {
			if i > 0 {
				line = "Caused by: " + line
			}
			fmt.Fprintln(f.IO.ErrOut, line)
		}
		printRetained(f, res)
		return &SilentError{Code: ExitFailure}
	}
}

func printRetained(f *Factory, res engine.JobResult) {
	if n := len(res.Retained); n > 0 {
		fmt.Fprintf(f.IO.ErrOut, "\nThe job's latest checkpoint was retained: %s\nResume from it with: gflink run -s %s <job> [arguments]\n",
			res.Retained[n-1], res.Retained[n-1])
	}
}

// causeChain splits an error wrapped with ": %w" into one line per cause.
func causeChain(err error) []string {
	var lines []string
	for err != nil {
		msg := err.Error()
		inner := errors.Unwrap(err)
		if inner != nil && strings.HasSuffix(msg, ": "+inner.Error()) {
			lines = append(lines, strings.TrimSuffix(msg, ": "+inner.Error()))
			err = inner
			continue
		}
		lines = append(lines, msg)
		break
	}
	return lines
}

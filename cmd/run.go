package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/cluster"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/engine/rest"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/spf13/cobra"
)

// RunOptions are the options of `gflink run`.
type RunOptions struct {
	Global        *globalOptions
	Job           string
	Args          []string
	Parallelism   string
	FromSavepoint string
	// FromSavepointSet: -s was given, even as "" (what
	// -s "$(gflink checkpoints --latest dir)" gives when there is none).
	FromSavepointSet      bool
	AllowNonRestoredState bool
	ClaimMode             string
	RestoreMode           string
	ShutdownOnExit        bool
	Detached              bool
	Check                 bool
	// Verbose: an attached run on a terminal logs each checkpoint instead
	// of showing a live status line.
	Verbose bool
	// Flink's options for what gflink does not run (refused with what it
	// runs instead): -t/--target (local only), -e/--executor, -c/--class,
	// -C/--classpath, -py/--python, -pym/--pyModule.
	Target, Executor, Class, Python, PyModule string
	Classpath                                 []string
}

func newRunCmd(f *Factory, g *globalOptions, runF func(*RunOptions) error) *cobra.Command {
	o := &RunOptions{Global: g}
	c := &cobra.Command{
		Use: "run",
		Long: "Runs a job in this process with Flink's fault tolerance: checkpoints, restarts and restore. " +
			"<job> is the name of a registered job (built in: wordcount); the arguments after it are the job's.",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				if err := checkRunProgram(o); err != nil {
					return err // a Python program or Java class instead of a job
				}
				return usageErrorf("No job specified. Specify the name of a job (available: %s).", strings.Join(f.Registry.Names(), ", "))
			}
			o.Job, o.Args = args[0], args[1:]
			o.FromSavepointSet = c.Flags().Changed("fromSavepoint")
			if runF != nil {
				return runF(o)
			}
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
	fl.BoolVar(&o.Check, "check", false, "Check the restore without running: resolve -s against the job and report, per operator uid, whether its state matches, is missing from the job, or the operator is new; exit 0 if the restore would succeed, 1 if not.")
	fl.BoolVarP(&o.Verbose, "verbose", "v", false, "On a terminal, log each completed checkpoint instead of showing a live status line (records/s, last checkpoint, back pressure) below the job's log.")
	fl.BoolVarP(&o.Detached, "detached", "d", false, "If present, runs the job in detached mode: in a background process, with its log in $GFLINK_HOME/log/<jobId>.log; gflink returns once the job is RUNNING.")
	fl.StringVarP(&o.Target, "target", "t", "", "The deployment target: local (gflink runs the job in this process; Flink's remote, yarn-* and kubernetes-* targets are not available).")
	fl.StringVarP(&o.Executor, "executor", "e", "", "Deprecated: use -t/--target.")
	fl.StringVarP(&o.Class, "class", "c", "", "Flink's program entry class: not available (gflink runs Go jobs).")
	fl.StringArrayVarP(&o.Classpath, "classpath", "C", nil, "Flink's class path: not available (gflink runs Go jobs).")
	fl.StringVar(&o.Python, "python", "", "Flink's Python program: not available (gflink runs Go jobs).")
	fl.StringVar(&o.PyModule, "pyModule", "", "Flink's Python module: not available (gflink runs Go jobs).")
	for _, n := range []string{"executor", "class", "classpath", "python", "pyModule"} {
		fl.MarkHidden(n)
	}
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
	if o.FromSavepointSet && strings.TrimSpace(o.FromSavepoint) == "" {
		// Starting fresh instead would lose the state a script meant to
		// restore, and exit 0 under set -e.
		return usageErrorf("The savepoint path given with -s/--fromSavepoint is empty. Give a savepoint or checkpoint directory, its _metadata file, or a job's checkpoint directory; omit -s to start without state.")
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
	for _, check := range []func(*RunOptions) error{checkRunTarget, checkRunProgram, checkRunJobManager} {
		if err := check(o); err != nil {
			return err
		}
	}
	child := f.Getenv(cluster.DetachedChildEnv) == "1"
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

// runJob runs one job in this process, or, detached, starts the process
// that does. Each step below is one function, taken in the order the user
// sees their effects: what can be decided (configuration, job graph,
// restore, notices) is decided and checked before anything is bound or
// started, so that a bad flag or snapshot never starts a job; the steps
// that bind, register, submit and wait come last.
func runJob(f *Factory, o *RunOptions, out output, report *childReport) error {
	logOut := io.Writer(f.IO.ErrOut)
	log := newLogger(logOut, logLevel(f))
	conf, err := runConfig(f, o, log)
	if err != nil {
		return err
	}
	graph, err := buildGraph(f, o, conf, out)
	if err != nil {
		return err
	}
	// An attached run on a terminal shows its status on one live line,
	// unless its printed output shares the terminal.
	var status *statusLine
	if f.IO.ErrTTY && !o.Verbose && !o.Detached && report == nil && !o.Check && !(f.IO.OutTTY && printsToStdout(graph)) {
		status = &statusLine{w: f.IO.ErrOut}
		log = newQuietLogger(status, logLevel(f))
	}
	for _, w := range uidWarnings(graph.Operators()) {
		log.Warn(w)
	}
	srvOpts, err := rest.ServerOptionsFrom(conf)
	if err != nil {
		return err
	}
	if srvOpts.DisableAuthentication && !o.Check {
		log.Warn("rest.authentication.enabled is false: the job's REST endpoint serves every request without a token, so every local user who can reach its port can cancel or stop the job and write savepoints as you.")
	}
	var haCfg *ha.Config
	if !o.Check {
		if haCfg, err = cluster.HAConfig(conf, log); err != nil {
			return err
		}
	}
	if o.Detached && report == nil && !o.Check {
		// The parent: everything from here on is the child's.
		return runDetached(f, o, out, conf, haCfg)
	}
	src, err := engine.ResolveRestore(f.FS, conf, log)
	if err != nil {
		return err
	}
	if status != nil && src == nil {
		// A fresh run of a bounded input: progress from its sources'
		// total (a restored one starts part way, at positions the total
		// does not know).
		status.count = func() (int64, bool) { return engine.TotalSourceRecords(graph) }
	}
	if o.Check {
		if src == nil {
			out.println("Nothing to restore (no -s): the job and its configuration are valid.")
			out.result(map[string]any{"ok": true, "snapshot": nil})
			return nil
		}
		return checkRestore(f, out, graph, src)
	}
	jobID := f.Getenv(cluster.JobIDEnv) // a detached child runs the id its parent chose
	if jobID == "" {
		jobID = engine.NewJobID()
	}
	if haCfg != nil {
		jobID = haCfg.JobID // the cluster's, in every process of it
	}
	srvOpts.Version, srvOpts.Revision, srvOpts.FS = "gflink "+Version, revision(), f.FS
	sub := &cluster.Submission{Graph: graph, Job: o.Job, Args: o.Args, Parallelism: o.Parallelism,
		Options: engine.JobOptions{JobID: jobID, Config: conf, FS: f.FS, Logger: log}, Server: srvOpts,
		Home: jobregistry.Home(f.Getenv), LogFile: f.Getenv(cluster.LogFileEnv), Stderr: f.IO.ErrOut,
		Events: runEvents{out: out, report: report, log: log},
		Watch: func(j *engine.Job) func() {
			if status == nil {
				return func() {}
			}
			return status.watch(j)
		},
		Rebuild: func(job string, args []string, parallelism string) (*engine.JobGraph, error) {
			so := *o
			so.Job, so.Args, so.Parallelism = job, args, parallelism
			return buildGraph(f, &so, conf, out)
		}}
	if src != nil {
		sub.Options.Restore, sub.Options.AllowNonRestoredState, sub.Options.ClaimMode = src.Resolved, src.AllowNonRestoredState, src.ClaimMode
		sub.Notices = cluster.RestoreNotices(src, conf)
	}
	var res *engine.JobResult
	if haCfg != nil {
		res, err = cluster.RunHA(f.Context, sub, haCfg, src, log)
		if errors.Is(err, cluster.ErrCanceled) {
			return canceled(f.Context)
		}
	} else {
		var r engine.JobResult
		r, err = cluster.Run(f.Context, sub)
		res = &r
	}
	if err != nil || res == nil {
		return err // nil, nil: the job had ended under another leader
	}
	return reportResult(f, out, *res)
}

// runEvents tells the user, or a detached child's parent, what the run
// reached: the notices and Flink's submission line when the job is
// accepted (attached) or runs (detached: the parent prints it), and why
// this process does not run the job.
type runEvents struct {
	out    output
	report *childReport // a detached child's pipe to its parent, or nil
	log    *slog.Logger
}

func (e runEvents) Accepted(jobID string, notices []string) {
	for _, n := range notices {
		if e.out.json {
			e.log.Info(n)
		} else {
			e.out.println("%s", n)
		}
	}
	if e.report == nil {
		e.out.println("Job has been submitted with JobID %s", jobID)
	}
}

func (e runEvents) Running(jobID string, st engine.JobStatus, notices []string, endpoint string) {
	if e.report != nil {
		e.report.Running(jobID, st, notices, endpoint)
		e.out.println("Job has been submitted with JobID %s", jobID)
	}
}

func (e runEvents) StandingBy(jobID, msg string) {
	if e.report != nil {
		e.report.StandingBy(jobID, msg)
	}
	e.out.println("%s", msg)
	if e.out.json {
		e.log.Info(msg) // stdout carries the one JSON object
	}
}

func (e runEvents) AlreadyEnded(jobID string, status engine.JobStatus, msg string) {
	if e.report != nil {
		e.report.StandingBy(jobID, msg)
	}
	e.out.println("%s", msg)
	e.out.result(map[string]any{"jobId": jobID, "status": status, "alreadyEnded": true})
}

// runConfig is the job's configuration: the file, -D, then run's flags,
// which override both; every honoured option is checked before the job is
// even built.
func runConfig(f *Factory, o *RunOptions, log *slog.Logger) (*config.Configuration, error) {
	conf, err := loadConfig(f, o.Global, log)
	if err != nil {
		return nil, err
	}
	notices := f.IO.Out // Flink prints its deprecation notice on stdout
	if o.Global.Output == "json" {
		notices = f.IO.ErrOut // where the one JSON object goes alone
	}
	if err := applyRunFlags(conf, o, notices); err != nil {
		return nil, err
	}
	if err := validateConfig(conf, log); err != nil {
		return nil, err
	}
	return conf, nil
}

// buildGraph looks the job up in the registry and builds its graph with
// the job's own arguments. A job's usage error comes with the job's usage,
// as Flink prints a program's.
func buildGraph(f *Factory, o *RunOptions, conf *config.Configuration, out output) (*engine.JobGraph, error) {
	job, ok := f.Registry.Lookup(o.Job)
	if !ok {
		return nil, usageErrorf("Could not find job %q. Available jobs: %s.", o.Job, strings.Join(f.Registry.Names(), ", "))
	}
	stdout := f.IO.Out
	if out.json {
		stdout = f.IO.ErrOut // stdout carries the one JSON object
	}
	env, err := engine.NewEnvironmentFromConfig(conf, engine.EnvironmentOptions{Stdout: stdout})
	if err != nil {
		return nil, err
	}
	if err := job.Build(env, o.Args); err != nil {
		var u *jobs.UsageError
		if errors.As(err, &u) && u.Help && job.Usage != nil {
			job.Usage(f.IO.Out)
			return nil, &SilentError{Code: ExitOK}
		}
		if errors.As(err, &u) {
			msg := u.Msg
			if hint := runOptionHint(o.Job, o.Args); hint != "" {
				msg += "\n" + hint
			}
			if job.Usage == nil {
				return nil, errors.New(msg)
			}
			var b strings.Builder
			job.Usage(&b)
			return nil, usageErrorf("%s\n\n%s", msg, strings.TrimRight(b.String(), "\n"))
		}
		return nil, err
	}
	return env.Build()
}

// uidWarnings warn of stateful operators without an explicit uid: their
// state is saved under a uid derived from the job's structure, which a
// changed job would not find ("Cannot map checkpoint/savepoint state").
func uidWarnings(ops []engine.OperatorInfo) []string {
	var ws []string
	for _, op := range ops {
		if op.Stateful && !op.UIDExplicit {
			ws = append(ws, fmt.Sprintf("Operator %q has state but no uid: its state is saved under the uid %s derived from the job's structure, which changes when the structure does, and a changed job would not find it. Set one with .UID(...).", op.Name, op.UID))
		}
	}
	return ws
}

// checkRestore reports, without running anything, how a snapshot maps onto
// the job: per operator uid, matched, missing from the job, or new.
// restore.Check decides; this gathers the engine's findings and prints.
func checkRestore(f *Factory, out output, g *engine.JobGraph, src *engine.RestoreSource) error {
	r, allowNonRestored := src.Resolved, src.AllowNonRestoredState
	ptr := savepoint.URI(r.Dir)
	// The plan with -n lists every uid the job lacks; the real restore,
	// with the user's -n, gives the verdict and its message.
	plan, perr := engine.MapRestore(g, f.FS, r, true, src.StateBackend)
	_, rerr := engine.PlanRestore(g, f.FS, r, allowNonRestored, src.StateBackend)
	rep := restore.Check(plan, checkedJob(g), restore.CheckOptions{AllowNonRestoredState: allowNonRestored,
		PlanErr: perr, SourceMismatch: sourceMismatches(g, plan), RestoreErr: rerr})
	type row struct {
		UID    string `json:"uid"`
		Status string `json:"status"` // matched, missing, new, mismatch
		Name   string `json:"name,omitempty"`
		States string `json:"states,omitempty"`
		// Problem says why a matched source's state does not fit.
		Problem string `json:"problem,omitempty"`
	}
	var rows []row
	out.println("Checking the restore of %s from %s (checkpoint %d, %s):", g.Name, ptr, r.Metadata.CheckpointID, strings.ToLower(string(r.Metadata.Kind)))
	for _, x := range rep.Rows {
		states := ""
		if x.State != nil {
			states = cluster.StateNames(x.State)
		}
		problem := ""
		if x.Problem != nil {
			problem = x.Problem.Error()
		}
		rows = append(rows, row{x.UID, x.Status, x.Name, states, problem})
		switch x.Status {
		case restore.CheckMatched:
			out.println("  %-34s matched: %s", x.UID, states)
		case restore.CheckMissing:
			how := "the restore fails (use -n to drop it)"
			if allowNonRestored {
				how = "dropped (-n)"
			}
			out.println("  %-34s missing from the job: %s; %s", x.UID, states, how)
		case restore.CheckNew:
			out.println("  %-34s new: starts empty", x.UID)
		case restore.CheckMismatch:
			out.println("  %-34s does not fit: %s; the restore fails", x.UID, problem)
		}
	}
	res := map[string]any{"snapshot": ptr, "checkpointId": r.Metadata.CheckpointID, "operators": rows, "ok": rep.OK}
	if rep.OK {
		out.println("The restore would succeed.")
		out.result(res)
		return nil
	}
	if rep.Err != nil {
		res["error"] = rep.Err.Error()
	}
	out.println("The restore would fail: %v", rep.Err)
	out.result(res)
	return &SilentError{Code: ExitFailure}
}

// checkedJob describes the job's operators as far as restore.Check reads
// them: uid, name and whether they keep state.
func checkedJob(g *engine.JobGraph) restore.Job {
	var j restore.Job
	for _, op := range g.Operators() {
		j.Operators = append(j.Operators, restore.Operator{UID: op.UID, Name: op.Name, Stateful: op.Stateful})
	}
	return j
}

// sourceMismatches asks the engine, for each matched uid, whether the
// restored state of a source fits the job's source.
func sourceMismatches(g *engine.JobGraph, plan *restore.Plan) map[string]error {
	if plan == nil {
		return nil
	}
	m := map[string]error{}
	for _, uid := range plan.Matched {
		if err := engine.RestoredSourceMismatch(g, plan, uid); err != nil {
			m[uid] = err
		}
	}
	return m
}

// reportResult prints how an attached job ended, with Flink's lines, and
// picks the exit code: 0 FINISHED, 1 FAILED, 130 cancelled by Ctrl-C, 141
// cancelled because stdout's reader went away.
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
		why := ""
		if cause := context.Cause(f.Context); errors.Is(cause, errStdoutClosed) {
			why = ": " + cause.Error()
		}
		fmt.Fprintf(f.IO.ErrOut, "Job %s was cancelled%s.\n", res.JobID, why)
		printRetained(f, res)
		return canceled(f.Context)
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
		switch err.(type) {
		case *fs.PathError, *os.LinkError, *os.SyscallError:
			// "open /x: no such file or directory" reads as one cause.
			inner = nil
		}
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

package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
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

// runJob runs one job in this process, or, detached, starts the process
// that does. Each step below is one function, taken in the order the user
// sees their effects: what can be decided (configuration, job graph,
// restore, notices) is decided and checked before anything is bound or
// started, so that a bad flag or snapshot never starts a job; the steps
// that bind, register, submit and wait come last.
func runJob(f *Factory, o *RunOptions, out output, report *childReport) error {
	log := newLogger(f.IO.ErrOut, logLevel(f))
	conf, err := runConfig(f, o, log)
	if err != nil {
		return err
	}
	graph, err := buildGraph(f, o, conf, out)
	if err != nil {
		return err
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
		if haCfg, err = haConfig(conf, log); err != nil {
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
	if o.Check {
		if src == nil {
			out.println("Nothing to restore (no -s): the job and its configuration are valid.")
			out.result(map[string]any{"ok": true, "snapshot": nil})
			return nil
		}
		return checkRestore(f, out, graph, src)
	}
	jobID := f.Getenv(jobIDEnv) // a detached child runs the id its parent chose
	if jobID == "" {
		jobID = engine.NewJobID()
	}
	if haCfg != nil {
		jobID = haCfg.JobID // the cluster's, in every process of it
	}
	sub := &submission{f: f, out: out, report: report, graph: graph, srvOpts: srvOpts, args: o.Args,
		opts: engine.JobOptions{JobID: jobID, Config: conf, FS: f.FS, Logger: log}}
	if src != nil {
		sub.opts.Restore, sub.opts.AllowNonRestoredState, sub.opts.ClaimMode = src.Resolved, src.AllowNonRestoredState, src.ClaimMode
		sub.notices = restoreNotices(src, conf)
	}
	if haCfg != nil {
		return runHA(sub, o, haCfg, src, log)
	}
	return sub.run()
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

// restoreSource is the snapshot -s names, found and checked, with the
// user's restore settings.
type restoreSource = engine.RestoreSource

// restoreNotices are the lines that tell the user, before the job starts,
// which snapshot it restores, in which claim mode, and what gflink may
// delete: a user must never be surprised by what CLAIM or NO_CLAIM removes.
func restoreNotices(src *restoreSource, conf *config.Configuration) []string {
	var notices []string
	if src.JobDir != "" {
		notices = append(notices, fmt.Sprintf("Restoring from the newest complete checkpoint in %s: %s", src.JobDir, savepoint.URI(src.Dir)))
	}
	if src.ClaimMode == engine.ClaimModeLegacy {
		notices = append(notices, "Warning: The LEGACY restore mode is deprecated, please use CLAIM or NO_CLAIM mode instead.")
	}
	return append(notices, claimNotice(src.Resolved, src.ClaimMode, conf))
}

// droppedNotices name the state a restore with -n leaves behind, which
// only the engine's plan knows.
func droppedNotices(p *restore.Plan) []string {
	if p == nil {
		return nil
	}
	var notices []string
	for _, uid := range p.Dropped {
		notices = append(notices, fmt.Sprintf("Dropping the state of operator %s, which this job does not have (--allowNonRestoredState): %s", uid, stateNames(p.Meta.Operator(uid))))
	}
	return notices
}

// submission is a run that has been decided: what remains binds, registers,
// submits and waits, in that order.
type submission struct {
	f      *Factory
	out    output
	report *childReport // a detached child's pipe to its parent, or nil
	graph  *engine.JobGraph
	args   []string // the job's arguments
	// endpoint is the REST address, once bound.
	endpoint string
	opts     engine.JobOptions
	srvOpts  rest.ServerOptions
	// notices are the lines about the restore, printed when the job is
	// accepted and sent to a detached parent.
	notices []string
	// reached is RUNNING, or the status the job ended in without
	// running; set before the channel register returns is closed.
	reached engine.JobStatus
}

func (s *submission) run() error {
	st, err := s.start(s.f.Context)
	if err != nil {
		return err
	}
	defer st.srv.Close()
	<-st.running
	s.reportRunning()
	res := st.job.Wait()
	// Stay reachable until whoever asked for a stop or savepoint has its
	// answer, then go.
	st.srv.WaitFetched(10 * time.Second)
	return reportResult(s.f, s.out, res)
}

// started is a submitted job with its REST endpoint serving.
type started struct {
	job     *engine.Job
	srv     *rest.Server
	running <-chan struct{} // closed once the job runs or has ended
}

// start binds, registers, submits and serves; ctx ends the job (cancels
// it) when done.
func (s *submission) start(ctx context.Context) (*started, error) {
	listener, err := s.listen()
	if err != nil {
		return nil, err
	}
	running := s.register(listener)
	j, err := engine.Submit(ctx, s.graph, s.opts)
	if err != nil {
		listener.Close()
		return nil, err
	}
	s.srvOpts.Version, s.srvOpts.Revision, s.srvOpts.FS = "gflink "+Version, revision(), s.f.FS
	s.srvOpts.Config, s.srvOpts.Arguments = s.opts.Config, s.args
	srv := rest.NewServer(j, s.srvOpts)
	srv.Serve(listener)
	s.endpoint = srv.Address()
	return &started{job: j, srv: srv, running: running}, nil
}

// reportRunning answers a detached parent once the job runs; the parent
// prints the submission line for the user.
func (s *submission) reportRunning() {
	if s.report != nil {
		s.report.running(s.opts.JobID, s.reached, s.notices, s.endpoint)
		s.out.println("Job has been submitted with JobID %s", s.opts.JobID)
	}
}

// listen binds the REST endpoint before the job starts, so that a busy
// port range is an error before anything runs.
func (s *submission) listen() (net.Listener, error) {
	addr, _ := rest.BindAddress.Get(s.opts.Config)
	ports, _ := rest.BindPort.Get(s.opts.Config)
	return rest.Listen(addr, ports)
}

// register makes the job known to gflink's other commands through its
// registry entry, kept up to date from the job's status, and hooks the
// announcements to the job's acceptance. The returned channel is closed
// once the job runs or has ended.
func (s *submission) register(listener net.Listener) <-chan struct{} {
	// The job's secret: in its registry entry (owner-only) for gflink's
	// commands, required by its endpoint.
	if !s.srvOpts.DisableAuthentication && s.srvOpts.Token == "" {
		s.srvOpts.Token = rest.NewToken()
	}
	conf, jobID := s.opts.Config, s.opts.JobID
	reg := newRegistration(s.f, jobID, s.graph.Name, "http://"+listener.Addr().String(), s.f.Getenv(logFileEnv), jobCheckpointDir(conf, jobID), s.srvOpts.Token)
	s.opts.OnSavepoint = reg.savepoint
	running := make(chan struct{})
	var once sync.Once
	s.opts.OnStatus = func(st engine.JobStatus, at time.Time) {
		reg.update(st, at)
		if st == engine.StatusRunning || st.IsGloballyTerminal() {
			// Kept for reportRunning: OnStatus runs just before
			// Job.Status changes, so the job may not say it yet.
			once.Do(func() { s.reached = st; close(running) })
		}
	}
	s.opts.OnAccepted = func(j *engine.Job) {
		// Registered before anyone is told the job id, so that a script's
		// next command finds it.
		reg.update(engine.StatusInitializing, time.Now())
		s.notices = append(s.notices, droppedNotices(j.RestorePlan())...)
		s.announce()
	}
	return running
}

// announce prints the restore notices and Flink's submission line. Flink
// prints that line when the job is accepted, before it runs; here the
// job's print sink shares stdout, so the lines must be out before the
// first task starts.
func (s *submission) announce() {
	for _, n := range s.notices {
		if s.out.json {
			s.opts.Logger.Info(n)
		} else {
			s.out.println("%s", n)
		}
	}
	if s.report == nil {
		s.out.println("Job has been submitted with JobID %s", s.opts.JobID)
	}
}

// jobCheckpointDir is <execution.checkpointing.dir>/<jobId>, absolute
// (other commands read it from other directories), or "" when checkpoints
// are not kept on the local filesystem.
func jobCheckpointDir(conf *config.Configuration, jobID string) string {
	d, err := checkpoint.Dir.Get(conf)
	if err != nil || d == "" {
		return ""
	}
	p, err := savepoint.LocalPath(d)
	if err != nil {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return savepoint.JobCheckpointDir(p, jobID)
}

// claimNotice says in one line which claim mode applies and what gflink
// may delete.
func claimNotice(r *restore.Resolved, mode engine.RecoveryClaimMode, conf *config.Configuration) string {
	ptr := savepoint.URI(r.Dir)
	switch mode {
	case engine.ClaimModeClaim:
		n, _ := checkpoint.NumRetained.Get(conf)
		retention, _ := checkpoint.Retention.Get(conf)
		if shared := sharedFilesOf(r); len(shared) > 0 {
			// An incremental checkpoint: its shared files are claimed too.
			return fmt.Sprintf("Restoring from %s in CLAIM mode: the job owns it now and deletes it once %d newer checkpoint(s) complete (execution.checkpointing.num-retained), or when the job ends as %s says; the %d shared file(s) it refers to become the job's too, and each is deleted once no checkpoint of the job refers to it — other checkpoints of the old job that refer to them cannot be restored after that.", ptr, max(n, 1), retention, len(shared))
		}
		return fmt.Sprintf("Restoring from %s in CLAIM mode: the job owns it now and deletes it once %d newer checkpoint(s) complete (execution.checkpointing.num-retained), or when the job ends as %s says; nothing else beside it is touched.", ptr, max(n, 1), retention)
	case engine.ClaimModeLegacy:
		return fmt.Sprintf("Restoring from %s in LEGACY mode: gflink never deletes it.", ptr)
	}
	return fmt.Sprintf("Restoring from %s in NO_CLAIM mode: gflink never modifies or deletes it, and new checkpoints use none of its files; it may be deleted once the job's first checkpoint has completed.", ptr)
}

func stateNames(op *savepoint.OperatorState) string {
	if op == nil || len(op.States) == 0 {
		return "no named state"
	}
	var parts []string
	for _, s := range op.States {
		parts = append(parts, fmt.Sprintf("%s (%s, %d entries)", s.Name, s.Kind, s.Entries))
	}
	return strings.Join(parts, ", ")
}

// checkRestore reports, without running anything, how a snapshot maps onto
// the job: per operator uid, matched, missing from the job, or new.
// restore.Check decides; this gathers the engine's findings and prints.
func checkRestore(f *Factory, out output, g *engine.JobGraph, src *restoreSource) error {
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
			states = stateNames(x.State)
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

// sharedFilesOf lists the shared files a resolved snapshot refers to.
func sharedFilesOf(r *restore.Resolved) []string {
	if r.Metadata == nil {
		return nil
	}
	return r.Metadata.SharedFiles()
}

// Package cluster runs one job in this process, as a Flink session cluster
// of one job would: it binds the job's REST endpoint, registers the job
// with gflink's other commands, submits it to the job master and waits for
// it; with high availability it contends for the leadership and runs the
// job while it leads. What the user is told goes through Events, so that
// the command line decides how it is printed (text, JSON, or a detached
// child's report to its parent).
package cluster

import (
	"context"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/metrics"
	"github.com/gflink/gflink/engine/rest"
)

// Events are the moments of a run its starter is told about.
type Events interface {
	// Accepted: the job was accepted, before its first task starts (a
	// print sink shares stdout, so what is said here must be out first).
	// notices are the lines about its restore.
	Accepted(jobID string, notices []string)
	// Running: the job runs, or ended without running (st says which).
	Running(jobID string, st engine.JobStatus, notices []string, endpoint string)
	// StandingBy: another process leads the high-availability cluster.
	StandingBy(jobID, msg string)
	// AlreadyEnded: the job reached a globally terminal state under an
	// earlier leader; there is nothing to run.
	AlreadyEnded(jobID string, status engine.JobStatus, msg string)
}

// Submission is a run that has been decided: the job graph, its options
// and its endpoint's. What remains binds, registers, submits and waits, in
// that order.
type Submission struct {
	Graph *engine.JobGraph
	// Job, Args and Parallelism are the command line's job name, the
	// job's arguments and -p: what a high-availability cluster stores for
	// a later leader to rebuild the graph from.
	Job         string
	Args        []string
	Parallelism string
	Options     engine.JobOptions
	Server      rest.ServerOptions
	// Notices are the lines about the restore, said when the job is
	// accepted.
	Notices []string
	// Home is gflink's home ($GFLINK_HOME), whose registry lists the job
	// for gflink's other commands; LogFile is the job's log, if detached.
	Home    string
	LogFile string
	// Stderr gets the warning that the job could not be registered.
	Stderr io.Writer
	Events Events
	// Watch, if set, is called once the job is submitted; the function it
	// returns when the job has ended, before its result is reported (an
	// attached run's live status line).
	Watch func(j *engine.Job) (stop func())
	// Rebuild builds the graph of a job stored by an earlier leader of a
	// high-availability cluster.
	Rebuild func(job string, args []string, parallelism string) (*engine.JobGraph, error)

	// endpoint is the REST address, once bound.
	endpoint string
	// reached is RUNNING, or the status the job ended in without
	// running; set before the channel register returns is closed.
	reached engine.JobStatus
}

// Run runs the job until it ends or ctx is done (which cancels it), and
// returns its result once whoever asked for a stop or savepoint has its
// answer.
func Run(ctx context.Context, s *Submission) (engine.JobResult, error) {
	st, err := s.start(ctx)
	if err != nil {
		return engine.JobResult{}, err
	}
	defer st.srv.Close()
	defer st.closeReporters()
	if s.Watch != nil {
		defer s.Watch(st.job)()
	}
	<-st.running
	s.Events.Running(s.Options.JobID, s.reached, s.Notices, s.endpoint)
	res := st.job.Wait()
	// Stay reachable until whoever asked for a stop or savepoint has its
	// answer, then go.
	st.srv.WaitFetched(10 * time.Second)
	return res, nil
}

// started is a submitted job with its REST endpoint serving.
type started struct {
	job       *engine.Job
	srv       *rest.Server
	running   <-chan struct{} // closed once the job runs or has ended
	reporters []*metrics.Reporter
}

func (st *started) closeReporters() {
	for _, r := range st.reporters {
		r.Close()
	}
}

// start binds, registers, submits and serves; ctx ends the job (cancels
// it) when done.
func (s *Submission) start(ctx context.Context) (*started, error) {
	reporters, warnings, err := metrics.Configured(s.Options.Config)
	if err != nil {
		return nil, err
	}
	s.warn(warnings...)
	listener, err := s.listen()
	if err != nil {
		return nil, err
	}
	running := s.register(listener)
	j, err := engine.Submit(ctx, s.Graph, s.Options)
	if err != nil {
		listener.Close()
		return nil, err
	}
	s.Server.Config, s.Server.Arguments = s.Options.Config, s.Args
	srv := rest.NewServer(j, s.Server)
	srv.Serve(listener)
	s.endpoint = srv.Address()
	st := &started{job: j, srv: srv, running: running}
	addr, _ := rest.BindAddress.Get(s.Options.Config)
	for _, rc := range reporters {
		// As in Flink, a reporter that cannot start leaves the job
		// running without it.
		r, err := metrics.Start(j, rc, addr, s.Options.Logger)
		if err != nil {
			s.warn(err.Error() + "; the job runs without it.")
			continue
		}
		st.reporters = append(st.reporters, r)
	}
	return st, nil
}

// warn tells the starter something that does not stop the job.
func (s *Submission) warn(msgs ...string) {
	for _, m := range msgs {
		switch {
		case s.Options.Logger != nil:
			s.Options.Logger.Warn(m)
		case s.Stderr != nil:
			io.WriteString(s.Stderr, "WARN "+m+"\n")
		}
	}
}

// listen binds the REST endpoint before the job starts, so that a busy
// port range is an error before anything runs.
func (s *Submission) listen() (net.Listener, error) {
	addr, _ := rest.BindAddress.Get(s.Options.Config)
	ports, _ := rest.BindPort.Get(s.Options.Config)
	return rest.Listen(addr, ports)
}

// register makes the job known to gflink's other commands through its
// registry entry, kept up to date from the job's status, and hooks the
// announcements to the job's acceptance. The returned channel is closed
// once the job runs or has ended.
func (s *Submission) register(listener net.Listener) <-chan struct{} {
	// The job's secret: in its registry entry (owner-only) for gflink's
	// commands, required by its endpoint.
	if !s.Server.DisableAuthentication && s.Server.Token == "" {
		s.Server.Token = rest.NewToken()
	}
	conf, jobID := s.Options.Config, s.Options.JobID
	reg := newRegistration(s.Home, jobID, s.Graph.Name, "http://"+listener.Addr().String(), s.LogFile, JobCheckpointDir(conf, jobID), s.Server.Token)
	reg.warn = func(err error) {
		if s.Stderr != nil {
			io.WriteString(s.Stderr, "WARN could not register job "+jobID+": "+err.Error()+"\n")
		}
	}
	s.Options.OnSavepoint = reg.savepoint
	running := make(chan struct{})
	var once sync.Once
	s.Options.OnStatus = func(st engine.JobStatus, at time.Time) {
		reg.update(st, at)
		if st == engine.StatusRunning || st.IsGloballyTerminal() {
			// Kept for Events.Running: OnStatus runs just before
			// Job.Status changes, so the job may not say it yet.
			once.Do(func() { s.reached = st; close(running) })
		}
	}
	s.Options.OnAccepted = func(j *engine.Job) {
		// Registered before anyone is told the job id, so that a script's
		// next command finds it.
		reg.update(engine.StatusInitializing, time.Now())
		s.Notices = append(s.Notices, DroppedNotices(j.RestorePlan())...)
		s.Events.Accepted(jobID, s.Notices)
	}
	return running
}

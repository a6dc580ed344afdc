package cmd

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/cluster"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/rest"
)

// childReport is the child's side of the pipe to its parent, which also
// knows the exit codes of the command line.
type childReport struct{ *cluster.ParentPipe }

func openChildReport() *childReport { return &childReport{cluster.OpenParentPipe()} }

func (r *childReport) failed(err error) {
	var u *UsageError
	r.Send(cluster.ChildMessage{Error: err.Error(), Code: exitCode(err), Usage: errors.As(err, &u)})
}

func (r *childReport) close() {
	r.Send(cluster.ChildMessage{Error: "the job process ended without a report", Code: ExitFailure})
}

// runDetached starts the job in a background process and returns once it
// is RUNNING (restored, with -s), or reports why it could not start.
func runDetached(f *Factory, o *RunOptions, out output, conf *config.Configuration, haCfg *ha.Config) error {
	jobID := engine.NewJobID()
	logName := jobID + ".log"
	if haCfg != nil {
		// One job id per cluster, and one log per process of it.
		jobID = haCfg.JobID
		logName = fmt.Sprintf("%s-%d.log", jobID, time.Now().UnixNano())
	}
	if f.Executable == "" {
		return errors.New("cannot start a detached job: the gflink executable is unknown")
	}
	timeout, err := rest.ClientTimeout.Get(conf)
	if err != nil || timeout <= 0 {
		timeout = time.Minute
	}
	m, logPath, err := cluster.StartDetached(cluster.DetachedOptions{Executable: f.Executable, Args: childArgs(f.Args),
		Dir: f.WorkingDir, Home: jobregistry.Home(f.Getenv), JobID: jobID, LogName: logName, Timeout: timeout})
	if err != nil {
		return err
	}
	if m.Error != "" {
		if m.Usage {
			return &UsageError{Msg: m.Error}
		}
		if m.Code <= ExitFailure {
			// As the attached run reports it: on stderr, or as the one
			// JSON object with -o json.
			return errors.New(m.Error)
		}
		fmt.Fprintln(f.IO.ErrOut, m.Error)
		return &SilentError{Code: m.Code}
	}
	if m.State == string(engine.StatusFailed) {
		return fmt.Errorf("Job %s failed right after it started; see its log %s", jobID, logPath)
	}
	for _, n := range m.Notes {
		out.println("%s", n)
	}
	res := map[string]any{"jobId": jobID, "state": m.State, "log": logPath}
	if m.State == cluster.StateStandingBy {
		out.result(res)
		return nil
	}
	out.println("Job has been submitted with JobID %s", jobID)
	if m.Endpoint != "" {
		// Where Flink prints its web interface's address.
		out.println("REST endpoint: %s", m.Endpoint)
		res["endpoint"] = m.Endpoint
	}
	out.println("Log: %s", logPath)
	out.result(res)
	return nil
}

// childArgs is the run command line without -d/--detached before the job
// name.
func childArgs(args []string) []string {
	norm := normalizeArgs(args)
	out := []string{norm[0]}
	inJob := false
	for i := 1; i < len(norm); i++ {
		a := norm[i]
		if !inJob && (a == "-d" || a == "--detached" || a == "--detached=true") {
			continue
		}
		if !inJob && !strings.HasPrefix(a, "-") && (i == 1 || !takesValue(norm[i-1])) {
			inJob = true
		}
		out = append(out, a)
	}
	return out
}

func takesValue(opt string) bool {
	name := strings.TrimLeft(opt, "-")
	return !strings.Contains(name, "=") && (opt == "-D" || valueOptions["run"][name] || globalValueOptions[name])
}

// revision is the commit gflink was built from, if known.
func revision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

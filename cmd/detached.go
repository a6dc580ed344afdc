package cmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/cluster"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/rest"
	"github.com/gflink/gflink/savepoint/vfs"
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
	home := jobregistry.Home(f.Getenv)
	logDir := filepath.Join(home, "log")
	// Owner-only: a job's log may name its inputs, outputs and errors.
	if err := os.MkdirAll(logDir, vfs.PrivateDirMode); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	os.Chmod(logDir, vfs.PrivateDirMode) // made 0755 by an older gflink
	if err := vfs.CheckPrivate(vfs.Default, logDir, "the job log directory"); err != nil {
		return err
	}
	logPath := filepath.Join(logDir, logName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, vfs.PrivateFileMode)
	if err != nil {
		return fmt.Errorf("open job log: %w", err)
	}
	defer logFile.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	exe := f.Executable
	if exe == "" {
		return errors.New("cannot start a detached job: the gflink executable is unknown")
	}
	cmd := exec.Command(exe, childArgs(f.Args)...)
	cmd.Dir = f.WorkingDir
	cmd.Env = append(os.Environ(), cluster.DetachedChildEnv+"=1", cluster.JobIDEnv+"="+jobID, cluster.LogFileEnv+"="+logPath)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logFile, logFile
	cmd.ExtraFiles = []*os.File{pw}
	// A session of its own: Ctrl-C in this shell does not reach the job.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("start the detached job: %w", err)
	}
	pw.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timeout, err := rest.ClientTimeout.Get(conf)
	if err != nil || timeout <= 0 {
		timeout = time.Minute
	}
	msgs := make(chan cluster.ChildMessage, 1)
	reported := true // the child said why it failed, if it did
	go func() {
		m, err := cluster.ReadChildMessage(pr)
		if err != nil {
			reported = false
			m = cluster.ChildMessage{Error: fmt.Sprintf("the job process exited before its job was running; see its log %s", logPath), Code: ExitFailure}
		}
		msgs <- m
	}()
	var m cluster.ChildMessage
	select {
	case m = <-msgs:
	case <-time.After(timeout):
		return fmt.Errorf("the detached job %s did not reach RUNNING within %s; it keeps starting in the background, see its log %s", jobID, config.FormatDuration(timeout), logPath)
	}
	if m.Error != "" {
		// The child exits; do not leave a zombie behind.
		select {
		case <-exited:
			if reported {
				// The job never ran and its error is printed here: a log
				// of a job id nobody was shown would only be clutter.
				logFile.Close()
				os.Remove(logPath)
			}
		case <-time.After(5 * time.Second):
		}
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
	go func() { <-exited }() // reaped if it ends while we are still here
	if m.State == string(engine.StatusFailed) {
		return fmt.Errorf("Job %s failed right after it started; see its log %s", jobID, logPath)
	}
	for _, n := range m.Notes {
		out.println("%s", n)
	}
	if m.State == cluster.StateStandingBy {
		out.result(map[string]any{"jobId": jobID, "state": m.State, "log": logPath})
		return nil
	}
	out.println("Job has been submitted with JobID %s", jobID)
	res := map[string]any{"jobId": jobID, "state": m.State, "log": logPath}
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

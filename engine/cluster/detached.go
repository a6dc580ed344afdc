package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/savepoint/vfs"
)

// Environment variables between a detached parent and its child, the
// process that runs the job.
const (
	DetachedChildEnv = "GFLINK_DETACHED_CHILD" // "1" in the child
	JobIDEnv         = "GFLINK_JOB_ID"         // the job id the parent chose
	LogFileEnv       = "GFLINK_LOG_FILE"       // the child's log file
)

// StateStandingBy is a detached child's answer when another process leads.
const StateStandingBy = "STANDING_BY"

// ChildMessage is the one line a detached child sends its parent: the job
// runs (JobID, State, Notes, Endpoint), another process leads (State
// StateStandingBy), or why it could not start (Error, Code, Usage).
type ChildMessage struct {
	Notes []string `json:"notes,omitempty"`
	JobID string   `json:"jobId,omitempty"`
	State string   `json:"state,omitempty"`
	Error string   `json:"error,omitempty"`
	Code  int      `json:"code,omitempty"`
	Usage bool     `json:"usage,omitempty"`
	// Endpoint is the job's REST address.
	Endpoint string `json:"endpoint,omitempty"`
}

// ParentPipe is the child's side of the pipe (fd 3) to its parent: one
// JSON line, sent once.
type ParentPipe struct {
	w    *os.File
	once sync.Once
}

// OpenParentPipe opens the pipe the parent passed as fd 3.
func OpenParentPipe() *ParentPipe {
	return &ParentPipe{w: os.NewFile(3, "gflink-parent")}
}

// Send sends m, unless a message was sent already, and closes the pipe.
func (p *ParentPipe) Send(m ChildMessage) {
	p.once.Do(func() {
		if p.w == nil {
			return
		}
		b, _ := json.Marshal(m)
		p.w.Write(append(b, '\n'))
		p.w.Close()
	})
}

// Running tells the parent the job runs (or ended without running).
func (p *ParentPipe) Running(jobID string, st engine.JobStatus, notes []string, endpoint string) {
	p.Send(ChildMessage{JobID: jobID, State: string(st), Notes: notes, Endpoint: endpoint})
}

// StandingBy answers the parent of a high-availability process that does
// not lead (or found the job ended): it returns with msg.
func (p *ParentPipe) StandingBy(jobID, msg string) {
	p.Send(ChildMessage{JobID: jobID, State: StateStandingBy, Notes: []string{msg}})
}

// ReadChildMessage reads the child's line from the parent's end of the
// pipe.
func ReadChildMessage(r io.Reader) (ChildMessage, error) {
	var m ChildMessage
	line, err := bufio.NewReader(r).ReadBytes('\n')
	if err != nil {
		return m, err
	}
	err = json.Unmarshal(line, &m)
	return m, err
}

// DetachedOptions start a job's process in the background.
type DetachedOptions struct {
	// Executable is gflink's; Args the run command line without -d; Dir
	// the working directory.
	Executable string
	Args       []string
	Dir        string
	// Home is $GFLINK_HOME, whose log directory gets the job's log
	// LogName.
	Home    string
	JobID   string
	LogName string
	// Timeout is how long to wait for the child's report.
	Timeout time.Duration
}

// exitFailure is the command line's exit code of a failed command, for a
// child that ended without saying why.
const exitFailure = 1

// StartDetached starts the job's process in a session of its own, with
// its output in its log, and waits for its report: the job runs, another
// process leads, or why it could not start (then the log of a job that
// never ran is removed: its error is the parent's to print). logPath is
// the job's log.
func StartDetached(o DetachedOptions) (m ChildMessage, logPath string, err error) {
	logDir := filepath.Join(o.Home, "log")
	// Owner-only: a job's log may name its inputs, outputs and errors.
	if err := os.MkdirAll(logDir, vfs.PrivateDirMode); err != nil {
		return m, "", fmt.Errorf("create log directory: %w", err)
	}
	os.Chmod(logDir, vfs.PrivateDirMode) // made 0755 by an older gflink
	if err := vfs.CheckPrivate(vfs.Default, logDir, "the job log directory"); err != nil {
		return m, "", err
	}
	logPath = filepath.Join(logDir, o.LogName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, vfs.PrivateFileMode)
	if err != nil {
		return m, "", fmt.Errorf("open job log: %w", err)
	}
	defer logFile.Close()
	pr, exited, err := startChild(o, logFile, logPath)
	if err != nil {
		return m, "", err
	}
	defer pr.Close()
	msgs := make(chan ChildMessage, 1)
	reported := true // the child said why it failed, if it did
	go func() {
		m, err := ReadChildMessage(pr)
		if err != nil {
			reported = false
			m = ChildMessage{Error: fmt.Sprintf("the job process exited before its job was running; see its log %s", logPath), Code: exitFailure}
		}
		msgs <- m
	}()
	select {
	case m = <-msgs:
	case <-time.After(o.Timeout):
		return m, "", fmt.Errorf("the detached job %s did not reach RUNNING within %s; it keeps starting in the background, see its log %s", o.JobID, config.FormatDuration(o.Timeout), logPath)
	}
	if m.Error == "" {
		go func() { <-exited }() // reaped if it ends while we are still here
		return m, logPath, nil
	}
	// The child exits; do not leave a zombie behind.
	select {
	case <-exited:
		if reported {
			// The job never ran and its error is printed by the parent: a
			// log of a job id nobody was shown would only be clutter.
			logFile.Close()
			os.Remove(logPath)
		}
	case <-time.After(5 * time.Second):
	}
	return m, logPath, nil
}

// startChild starts the job's process with its output in logFile and the
// write end of a pipe as fd 3; it returns the read end and a channel that
// gets the process's exit.
func startChild(o DetachedOptions, logFile *os.File, logPath string) (*os.File, <-chan error, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, err
	}
	defer devnull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer pw.Close()
	cmd := exec.Command(o.Executable, o.Args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), DetachedChildEnv+"=1", JobIDEnv+"="+o.JobID, LogFileEnv+"="+logPath)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logFile, logFile
	cmd.ExtraFiles = []*os.File{pw}
	// A session of its own: Ctrl-C in the user's shell does not reach the
	// job.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		return nil, nil, fmt.Errorf("start the detached job: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return pr, exited, nil
}

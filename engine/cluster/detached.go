package cluster

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"sync"

	"github.com/gflink/gflink/engine"
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

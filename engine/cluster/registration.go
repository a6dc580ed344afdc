package cluster

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/savepoint"
)

// registration keeps a job's entry in $GFLINK_HOME/jobs up to date.
type registration struct {
	mu    sync.Mutex
	reg   *jobregistry.Registry
	entry jobregistry.Entry
	warn  func(error) // told once that the entry could not be written
}

func newRegistration(home, jobID, name, address, logPath, checkpointDir, token string) *registration {
	return &registration{reg: jobregistry.NewRegistry(home),
		entry: jobregistry.Entry{JobID: jobID, Name: name, PID: os.Getpid(), Address: address,
			StartTime: time.Now().UnixMilli(), EndTime: -1, State: string(engine.StatusInitializing), Log: logPath,
			CheckpointDir: checkpointDir, Token: token, Executable: jobregistry.SelfExecutable()}}
}

func (r *registration) update(st engine.JobStatus, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if jobregistry.StatusRank(r.entry.State) > jobregistry.StatusRank(string(st)) || at.UnixMilli() < r.entry.LastModification {
		return // a late, older status
	}
	r.entry.State = string(st)
	r.entry.LastModification = at.UnixMilli()
	if st.IsGloballyTerminal() {
		r.entry.EndTime = at.UnixMilli()
	}
	r.put()
}

// savepoint records a completed savepoint: after the job has ended,
// `checkpoints <jobId>` lists it from here.
func (r *registration) savepoint(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entry.Savepoints = append(r.entry.Savepoints, path)
	r.put()
}

func (r *registration) put() {
	if err := r.reg.Put(r.entry); err != nil && r.warn != nil {
		r.warn(err)
		r.warn = nil
	}
}

// JobCheckpointDir is <execution.checkpointing.dir>/<jobId>, absolute
// (other commands read it from other directories), or "" when checkpoints
// are not kept on the local filesystem.
func JobCheckpointDir(conf *config.Configuration, jobID string) string {
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

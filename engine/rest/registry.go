package rest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/gflink/gflink/savepoint/vfs"
)

// Entry is a job's registration under $GFLINK_HOME/jobs/<jobId>.json: how
// to reach the process that runs it, and its latest state. A process
// writes it when its job starts, rewrites it at every status change, and
// leaves it with the final state when the job ends, so that `list -a`
// shows finished jobs.
type Entry struct {
	JobID            string `json:"jid"`
	Name             string `json:"name"`
	PID              int    `json:"pid"`
	Address          string `json:"address"`
	StartTime        int64  `json:"start-time"`
	EndTime          int64  `json:"end-time"`
	State            string `json:"state"`
	LastModification int64  `json:"last-modification"`
	Log              string `json:"log,omitempty"`
	// CheckpointDir is <execution.checkpointing.dir>/<jobId>, where the
	// job's checkpoints are (and stay, when retained, after it ended).
	CheckpointDir string `json:"checkpoint-dir,omitempty"`
}

// Terminal reports whether the entry's job has ended.
func (e *Entry) Terminal() bool {
	return e.State == "FINISHED" || e.State == "FAILED" || e.State == "CANCELED"
}

// Registry is the directory of entries.
type Registry struct {
	Dir string // $GFLINK_HOME/jobs
	FS  vfs.FS
	// Alive reports whether a process exists (overridable in tests).
	Alive func(pid int) bool
}

// maxTerminal is how many ended jobs are kept for `list -a`.
const maxTerminal = 200

// NewRegistry opens the registry of a gflink home directory.
func NewRegistry(home string) *Registry {
	return &Registry{Dir: filepath.Join(home, "jobs"), FS: vfs.Default, Alive: processAlive}
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func (r *Registry) path(jobID string) string { return filepath.Join(r.Dir, jobID+".json") }

// Put writes an entry atomically.
func (r *Registry) Put(e Entry) error {
	if err := r.FS.MkdirAll(r.Dir, 0o755); err != nil {
		return fmt.Errorf("register job: %w", err)
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(r.FS, r.path(e.JobID), b); err != nil {
		return fmt.Errorf("register job: %w", err)
	}
	return nil
}

// Get reads one entry; a dead process's unfinished entry is removed and
// reported as not found.
func (r *Registry) Get(jobID string) (*Entry, error) {
	b, err := vfs.ReadFile(r.FS, r.path(jobID))
	if err != nil {
		return nil, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("job registry entry %s: %w", r.path(jobID), err)
	}
	if !e.Terminal() && !r.Alive(e.PID) {
		r.retire(e)
		return nil, fs.ErrNotExist
	}
	return &e, nil
}

// lostDir keeps the entries of processes that died without ending their
// job: out of every listing, but their checkpoint directory stays known,
// so that `checkpoints <jobId>` finds what a killed job left.
func (r *Registry) lostDir() string { return filepath.Join(r.Dir, "lost") }

// retire moves a dead process's entry out of the registry into lostDir,
// keeping the newest maxTerminal there.
func (r *Registry) retire(e Entry) {
	if err := r.FS.MkdirAll(r.lostDir(), 0o755); err == nil {
		if b, err := json.MarshalIndent(e, "", "  "); err == nil {
			vfs.WriteFileAtomic(r.FS, filepath.Join(r.lostDir(), e.JobID+".json"), b)
		}
	}
	r.FS.Remove(r.path(e.JobID))
	des, err := r.FS.ReadDir(r.lostDir())
	if err != nil || len(des) <= maxTerminal {
		return
	}
	type aged struct {
		name string
		mod  int64
	}
	var all []aged
	for _, de := range des {
		if info, err := de.Info(); err == nil {
			all = append(all, aged{de.Name(), info.ModTime().UnixNano()})
		}
	}
	slices.SortStableFunc(all, func(a, b aged) int { return cmp.Compare(a.mod, b.mod) })
	for _, a := range all[:max(len(all)-maxTerminal, 0)] {
		r.FS.Remove(filepath.Join(r.lostDir(), a.name))
	}
}

// Lost returns the entry of a job whose process died without ending it
// (see lostDir), or an error wrapping fs.ErrNotExist.
func (r *Registry) Lost(jobID string) (*Entry, error) {
	b, err := vfs.ReadFile(r.FS, filepath.Join(r.lostDir(), jobID+".json"))
	if err != nil {
		return nil, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("lost job entry %s: %w", jobID, err)
	}
	return &e, nil
}

// List returns every entry, oldest first. Entries of processes that died
// without ending their job are removed; so are the oldest ended jobs beyond
// the last 200.
func (r *Registry) List() ([]Entry, error) {
	des, err := r.FS.ReadDir(r.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		e, err := r.Get(strings.TrimSuffix(name, ".json"))
		if err != nil {
			continue
		}
		out = append(out, *e)
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return int(a.StartTime - b.StartTime) })
	var ended []Entry
	for _, e := range out {
		if e.Terminal() {
			ended = append(ended, e)
		}
	}
	if n := len(ended) - maxTerminal; n > 0 {
		drop := map[string]bool{}
		for _, e := range ended[:n] {
			drop[e.JobID] = true
			r.FS.Remove(r.path(e.JobID))
		}
		out = slices.DeleteFunc(out, func(e Entry) bool { return drop[e.JobID] })
	}
	return out, nil
}

// Home returns $GFLINK_HOME, default ~/.gflink.
func Home(getenv func(string) string) string {
	if h := getenv("GFLINK_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".gflink")
	}
	return ".gflink"
}

// StatusRank orders statuses so that a registry entry never goes back from
// a terminal status to an earlier one when updates race.
func StatusRank(s string) int {
	switch s {
	case "FINISHED", "FAILED", "CANCELED":
		return 2
	case "":
		return 0
	}
	return 1
}

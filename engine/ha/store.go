package ha

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/savepoint"
	"github.com/go-zookeeper/zk"
)

// SubmittedJob is the job graph store's entry: what a new leader runs. The
// job is rebuilt from its registered name and arguments, so every process
// of a cluster must have the same gflink (the same jobs).
type SubmittedJob struct {
	JobID       string   `json:"jobId"`
	Job         string   `json:"job"`
	Args        []string `json:"args"`
	Parallelism string   `json:"parallelism,omitempty"`
	Submitted   int64    `json:"submitted"`
}

// JobResult is the job result store's entry: the job reached a globally
// terminal state and must never run again.
type JobResult struct {
	JobID  string `json:"jobId"`
	Name   string `json:"name,omitempty"`
	Status string `json:"status"`
	// Start is when the job was first submitted; Time when it ended (ms).
	Start int64 `json:"start,omitempty"`
	Time  int64 `json:"time"`
}

func (s *Services) clusterStorage() string { return filepath.Join(s.cfg.StorageDir, s.cfg.ClusterID) }

// jobResultDir is Flink's job-result-store.storage-path default.
func (s *Services) jobResultDir() string {
	return filepath.Join(s.cfg.StorageDir, "job-result-store", s.cfg.ClusterID)
}

// writeFileAtomic writes data under name through a temporary file and a
// rename, so a reader sees all of it or nothing.
func writeFileAtomic(name string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// JobResult reads the job result store: nil when the job has not ended.
func (s *Services) JobResult(jobID string) (*JobResult, error) {
	data, err := os.ReadFile(filepath.Join(s.jobResultDir(), jobID+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the job result store: %w", err)
	}
	var r JobResult
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("the job result store's entry %s is not JSON: %w", filepath.Join(s.jobResultDir(), jobID+".json"), err)
	}
	return &r, nil
}

// SubmittedJob reads the job graph store: nil when no job was submitted.
func (s *Services) SubmittedJob(jobID string) (*SubmittedJob, error) {
	var ptr []byte
	err := s.retry("read the job graph store", func() error {
		var err error
		ptr, _, err = s.conn.Get(s.jobGraphNode(jobID))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(string(ptr))
	if err != nil {
		return nil, fmt.Errorf("read the job graph %s that %s points to: %w", ptr, s.jobGraphNode(jobID), err)
	}
	var j SubmittedJob
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("the job graph %s is not JSON: %w", ptr, err)
	}
	return &j, nil
}

// RegisteredCheckpoint is a completed checkpoint (or savepoint) in the
// completed-checkpoint store.
type RegisteredCheckpoint struct {
	ID        int64
	Metadata  string // its _metadata file, which the znode points to
	Dir       string // the directory of Metadata
	Savepoint bool
}

// checkpointName is a checkpoint's znode name: the id zero-padded, so the
// names sort as the ids do (Flink's), and "-savepoint" for savepoints.
func checkpointName(id int64, savepoint bool) string {
	n := fmt.Sprintf("%019d", id)
	if savepoint {
		n += "-savepoint"
	}
	return n
}

func parseCheckpointName(n string) (int64, bool, bool) {
	sp := strings.HasSuffix(n, "-savepoint")
	id, err := strconv.ParseInt(strings.TrimSuffix(n, "-savepoint"), 10, 64)
	return id, sp, err == nil
}

// Checkpoints lists the job's registered checkpoints, oldest first.
func (s *Services) Checkpoints(jobID string) ([]RegisteredCheckpoint, error) {
	var names []string
	err := s.retry("read the completed-checkpoint store", func() error {
		var err error
		names, _, err = s.conn.Children(s.checkpointsDir(jobID))
		if errors.Is(err, zk.ErrNoNode) {
			names, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []RegisteredCheckpoint
	for _, n := range names {
		id, sp, ok := parseCheckpointName(n)
		if !ok {
			continue
		}
		data, _, err := s.conn.Get(s.checkpointsDir(jobID) + "/" + n)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			return nil, fmt.Errorf("read the completed-checkpoint store: %w", err)
		}
		out = append(out, RegisteredCheckpoint{ID: id, Metadata: string(data), Dir: filepath.Dir(string(data)), Savepoint: sp})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// CheckpointIDCounter reads the job's checkpoint id counter: the least id
// its next checkpoint may take (1 if none was ever taken).
func (s *Services) CheckpointIDCounter(jobID string) (int64, error) {
	var data []byte
	err := s.retry("read the checkpoint id counter", func() error {
		var err error
		data, _, err = s.conn.Get(s.counterNode(jobID))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the checkpoint id counter %s holds %q, not a number", s.counterNode(jobID), data)
	}
	return n, nil
}

// ReadClusterToken reads the cluster's REST token without creating it
// (the CLI's side).
func (s *Services) ReadClusterToken() (string, error) {
	data, err := os.ReadFile(filepath.Join(s.clusterStorage(), "rest-token"))
	if err != nil {
		return "", fmt.Errorf("read the cluster's REST token in high-availability.storageDir: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// ClusterToken is the cluster's REST token: every leader's endpoint
// requires it, and the CLI reads it here, beside the job graph, owner-only.
// The first process of the cluster creates it.
func (s *Services) ClusterToken() (string, error) {
	name := filepath.Join(s.clusterStorage(), "rest-token")
	if data, err := os.ReadFile(name); err == nil {
		return strings.TrimSpace(string(data)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the cluster's REST token: %w", err)
	}
	if err := os.MkdirAll(s.clusterStorage(), 0o700); err != nil {
		return "", fmt.Errorf("high-availability.storageDir: %w", err)
	}
	b := make([]byte, 32)
	rand.Read(b)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return s.ClusterToken() // another process made it first
	}
	if err != nil {
		return "", fmt.Errorf("create the cluster's REST token: %w", err)
	}
	tok := hex.EncodeToString(b)
	_, err = f.WriteString(tok + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the cluster's REST token: %w", err)
	}
	return tok, nil
}

// ForJob scopes the leadership's stores to one job.
func (l *Leadership) ForJob(jobID string) (*JobStores, error) {
	for _, p := range []string{l.s.checkpointsDir(jobID), l.s.cfg.Root + "/jobgraphs"} {
		if err := l.s.retry("create "+p, func() error { return l.s.ensurePath(p) }); err != nil {
			return nil, err
		}
	}
	return &JobStores{l: l, jobID: jobID}, nil
}

// JobStores are the leader's fenced stores of one job: they implement
// engine.HighAvailability.
type JobStores struct {
	l     *Leadership
	jobID string
	name  string // for the job result
	start int64
}

// Describe names the job and its first submission for its job result.
func (j *JobStores) Describe(name string, submitted int64) { j.name, j.start = name, submitted }

// PutSubmittedJob stores the job graph (in storageDir, pointed to from
// ZooKeeper) unless one is stored already.
func (j *JobStores) PutSubmittedJob(sj SubmittedJob) error {
	s := j.l.s
	name := filepath.Join(s.clusterStorage(), "submittedJobGraph-"+j.jobID+".json")
	data, _ := json.MarshalIndent(sj, "", "  ")
	if err := writeFileAtomic(name, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("store the job graph in high-availability.storageDir: %w", err)
	}
	return j.l.fenced("register the job graph", &zk.CreateRequest{Path: s.jobGraphNode(j.jobID), Data: []byte(name), Acl: zk.WorldACL(zk.PermAll)})
}

// ReserveCheckpointID implements engine.HighAvailability: the counter
// moves past id, only while this process leads.
func (j *JobStores) ReserveCheckpointID(id int64) error {
	if err := j.l.alive("reserve checkpoint id"); err != nil {
		return err
	}
	s := j.l.s
	next := []byte(strconv.FormatInt(id+1, 10))
	ok, _, err := s.conn.Exists(s.counterNode(j.jobID))
	if err != nil {
		return err
	}
	if !ok {
		return j.l.fenced("reserve checkpoint id "+strconv.FormatInt(id, 10), &zk.CreateRequest{Path: s.counterNode(j.jobID), Data: next, Acl: zk.WorldACL(zk.PermAll)})
	}
	return j.l.fenced("reserve checkpoint id "+strconv.FormatInt(id, 10), &zk.SetDataRequest{Path: s.counterNode(j.jobID), Data: next, Version: -1})
}

// AddCheckpoint implements engine.HighAvailability. Savepoints are
// registered too, as sinks commit them: a savepoint replaces the
// savepoints registered before it.
func (j *JobStores) AddCheckpoint(id int64, dir string, isSavepoint bool) error {
	if err := j.l.alive("register checkpoint"); err != nil {
		return err
	}
	s := j.l.s
	// Flink's completed-checkpoint store: the znode points to _metadata.
	meta := []byte(filepath.Join(dir, savepoint.MetadataFileName))
	ops := []any{&zk.CreateRequest{Path: s.checkpointsDir(j.jobID) + "/" + checkpointName(id, isSavepoint), Data: meta, Acl: zk.WorldACL(zk.PermAll)}}
	if names, _, err := s.conn.Children(s.checkpointsDir(j.jobID)); err == nil {
		for _, n := range names {
			if old, sp, ok := parseCheckpointName(n); ok && sp && old < id {
				ops = append(ops, &zk.DeleteRequest{Path: s.checkpointsDir(j.jobID) + "/" + n, Version: -1})
			}
		}
	}
	return j.l.fenced("register checkpoint "+strconv.FormatInt(id, 10), ops...)
}

// Leading implements engine.HighAvailability.
func (j *JobStores) Leading() error { return j.l.alive("lead") }

// RemoveCheckpoint implements engine.HighAvailability.
func (j *JobStores) RemoveCheckpoint(id int64) error {
	if err := j.l.alive("unregister checkpoint"); err != nil {
		return err
	}
	s := j.l.s
	p := s.checkpointsDir(j.jobID) + "/" + checkpointName(id, false)
	ok, _, err := s.conn.Exists(p)
	if err != nil {
		return err
	}
	if !ok {
		return nil // never registered: nobody can restore it
	}
	return j.l.fenced("unregister checkpoint "+strconv.FormatInt(id, 10), &zk.DeleteRequest{Path: p, Version: -1})
}

// MarkTerminal implements engine.HighAvailability: the job result store
// records the job's end while this process still leads.
func (j *JobStores) MarkTerminal(status string) error {
	if err := j.l.fenced("record the job's end"); err != nil {
		return err
	}
	data, _ := json.Marshal(JobResult{JobID: j.jobID, Name: j.name, Status: status, Start: j.start, Time: time.Now().UnixMilli()})
	if err := writeFileAtomic(filepath.Join(j.l.s.jobResultDir(), j.jobID+".json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the job result store: %w", err)
	}
	return nil
}

// CleanUp removes the ended job's znodes and job graph (Flink's HA
// cleanup once a job's result is recorded); the job result stays.
func (j *JobStores) CleanUp() error {
	if err := j.l.alive("clean up the job's high-availability data"); err != nil {
		return err
	}
	s := j.l.s
	var ops []any
	if names, _, err := s.conn.Children(s.checkpointsDir(j.jobID)); err == nil {
		for _, n := range names {
			ops = append(ops, &zk.DeleteRequest{Path: s.checkpointsDir(j.jobID) + "/" + n, Version: -1})
		}
		ops = append(ops, &zk.DeleteRequest{Path: s.checkpointsDir(j.jobID), Version: -1})
	}
	for _, p := range []string{s.counterNode(j.jobID), s.jobGraphNode(j.jobID)} {
		if ok, _, _ := s.conn.Exists(p); ok {
			ops = append(ops, &zk.DeleteRequest{Path: p, Version: -1})
		}
	}
	if ok, _, _ := s.conn.Exists(s.cfg.Root + "/jobs/" + j.jobID); ok {
		ops = append(ops, &zk.DeleteRequest{Path: s.cfg.Root + "/jobs/" + j.jobID, Version: -1})
	}
	if err := j.l.fenced("clean up the job's high-availability data", ops...); err != nil {
		return err
	}
	os.Remove(filepath.Join(s.clusterStorage(), "submittedJobGraph-"+j.jobID+".json"))
	return nil
}

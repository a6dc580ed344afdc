package ha

import (
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
	"github.com/gflink/gflink/savepoint/vfs"
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

func (s *Services) clusterStorage() string { return s.cfg.clusterStorage() }
func (s *Services) jobResultDir() string   { return s.cfg.jobResultDir() }

// jobGraphFile is where the job graph of jobID lies: always here, in the
// cluster's private storage, whatever a znode says.
func (s *Services) jobGraphFile(jobID string) string {
	return filepath.Join(s.clusterStorage(), "submittedJobGraph-"+jobID+".json")
}

// writeFileAtomic writes data under name, owner-only, through a temporary
// file and a rename, so a reader sees all of it or nothing. The directory
// is one PrepareStorage made and checked.
func writeFileAtomic(name string, data []byte) error {
	return vfs.WriteFileAtomicPerm(vfs.Default, name, data, vfs.PrivateFileMode)
}

// needSecret fails when the session has no cluster secret to seal or
// open pointers with.
func (s *Services) needSecret(what string) error {
	if s.secret == nil {
		return fmt.Errorf("%s: the cluster's secret in high-availability.storageDir is needed to authenticate it", what)
	}
	return nil
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
// The znode must hold a pointer sealed with the cluster's secret, and the
// file in the cluster's storage must have the digest it seals: a job graph
// that another ZooKeeper user or local user wrote is refused, not run.
func (s *Services) SubmittedJob(jobID string) (*SubmittedJob, error) {
	if err := s.needSecret("read the job graph store"); err != nil {
		return nil, err
	}
	var data []byte
	node := s.jobGraphNode(jobID)
	err := s.retry("read the job graph store", func() error {
		var err error
		data, _, err = s.conn.Get(node)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ptr, err := s.openPointer(node, data, "jobgraph", s.cfg.ClusterID, jobID)
	if err != nil {
		return nil, err
	}
	name := s.jobGraphFile(jobID)
	content, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read the job graph %s that %s points to: %w", name, node, err)
	}
	if got := fileSHA256(content); got != ptr.SHA256 {
		return nil, &ForgedPointerError{Node: node, Reason: fmt.Sprintf("the job graph %s is not the one it was stored with (SHA-256 %s, sealed %s)", name, got, ptr.SHA256)}
	}
	var j SubmittedJob
	if err := json.Unmarshal(content, &j); err != nil {
		return nil, fmt.Errorf("the job graph %s is not JSON: %w", name, err)
	}
	if j.JobID != jobID {
		return nil, fmt.Errorf("the job graph %s is of job %s, not %s", name, j.JobID, jobID)
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
	// SHA256 is the digest of Metadata when it was registered.
	SHA256 string
	node   string
}

// CheckMetadata checks that data, read from Metadata, is the _metadata
// that was registered: one replaced since (by anyone who could write the
// checkpoint directory) is refused.
func (c RegisteredCheckpoint) CheckMetadata(data []byte) error {
	if got := fileSHA256(data); got != c.SHA256 {
		return &ForgedPointerError{Node: c.node, Reason: fmt.Sprintf("%s is not the _metadata registered (SHA-256 %s, sealed %s)", c.Metadata, got, c.SHA256)}
	}
	return nil
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

// Checkpoints lists the job's registered checkpoints, oldest first. A
// znode that is not sealed with the cluster's secret was not registered by
// a leader of this cluster, so a forged "latest checkpoint" is never
// restored: one below the newest genuine checkpoint is left out, with an
// error in the log; one above it is an error — recovering from the newest
// genuine checkpoint could then be recovering from an older one than a
// leader registered (the forgery may have replaced the real newest), which
// would repeat what that one's sinks committed.
func (s *Services) Checkpoints(jobID string) ([]RegisteredCheckpoint, error) {
	if err := s.needSecret("read the completed-checkpoint store"); err != nil {
		return nil, err
	}
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
	var forged []*ForgedPointerError
	var forgedIDs []int64
	for _, n := range names {
		id, sp, ok := parseCheckpointName(n)
		if !ok {
			continue
		}
		node := s.checkpointsDir(jobID) + "/" + n
		data, _, err := s.conn.Get(node)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			return nil, fmt.Errorf("read the completed-checkpoint store: %w", err)
		}
		ptr, err := s.openPointer(node, data, "checkpoint", s.cfg.ClusterID, jobID, n)
		if err != nil {
			forged = append(forged, err.(*ForgedPointerError))
			forgedIDs = append(forgedIDs, id)
			continue
		}
		meta := s.fromStoragePath(ptr.Value)
		out = append(out, RegisteredCheckpoint{ID: id, Metadata: meta, Dir: filepath.Dir(meta), Savepoint: sp, SHA256: ptr.SHA256, node: node})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	newest := int64(0)
	if len(out) > 0 {
		newest = out[len(out)-1].ID
	}
	for i, f := range forged {
		if forgedIDs[i] > newest {
			return nil, fmt.Errorf("%w\nIt is numbered above the newest checkpoint registered by this cluster (%d), so recovering from that one could repeat what a newer one's sinks committed: the job is not recovered. Delete the znode if no leader of this cluster wrote it.", f, newest)
		}
		s.log.Error(f.Error())
	}
	return out, nil
}

// storagePrefix marks a sealed path that lies in high-availability.storageDir,
// stored relative to it: processes of one cluster on several machines may
// mount the storage at different paths.
const storagePrefix = "storageDir:"

// toStoragePath is p as a pointer stores it: relative to storageDir when
// it lies there.
func (s *Services) toStoragePath(p string) string {
	if rel, err := filepath.Rel(s.cfg.StorageDir, p); err == nil && filepath.IsLocal(rel) {
		return storagePrefix + filepath.ToSlash(rel)
	}
	return p
}

// fromStoragePath is the local path of a stored pointer's path.
func (s *Services) fromStoragePath(p string) string {
	if rel, ok := strings.CutPrefix(p, storagePrefix); ok {
		return filepath.Join(s.cfg.StorageDir, filepath.FromSlash(rel))
	}
	return p
}

// CheckpointIDCounter reads the job's checkpoint id counter: the least id
// its next checkpoint may take (1 if none was ever taken).
func (s *Services) CheckpointIDCounter(jobID string) (int64, error) {
	if err := s.needSecret("read the checkpoint id counter"); err != nil {
		return 0, err
	}
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
	ptr, err := s.openPointer(s.counterNode(jobID), data, "counter", s.cfg.ClusterID, jobID)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(ptr.Value, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("the checkpoint id counter %s holds %q, not a checkpoint id", s.counterNode(jobID), ptr.Value)
	}
	return n, nil
}

// RESTToken is the token the cluster's REST endpoints require ("" when
// the session has no secret).
func (s *Services) RESTToken() string {
	if s.secret == nil {
		return ""
	}
	return s.secret.RESTToken()
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
	if err := s.needSecret("register the job graph"); err != nil {
		return err
	}
	name := s.jobGraphFile(j.jobID)
	data, _ := json.MarshalIndent(sj, "", "  ")
	data = append(data, '\n')
	if err := writeFileAtomic(name, data); err != nil {
		return fmt.Errorf("store the job graph in high-availability.storageDir: %w", err)
	}
	node := s.jobGraphNode(j.jobID)
	ptr := s.sealPointer(name, fileSHA256(data), "jobgraph", s.cfg.ClusterID, j.jobID)
	return j.l.fenced("register the job graph", &zk.CreateRequest{Path: node, Data: ptr, Acl: s.acl(node)})
}

// ReserveCheckpointID implements engine.HighAvailability: the counter
// moves past id, only while this process leads.
func (j *JobStores) ReserveCheckpointID(id int64) error {
	if err := j.l.alive("reserve checkpoint id"); err != nil {
		return err
	}
	s := j.l.s
	if err := s.needSecret("reserve checkpoint id"); err != nil {
		return err
	}
	next := s.sealPointer(strconv.FormatInt(id+1, 10), "", "counter", s.cfg.ClusterID, j.jobID)
	ok, _, err := s.conn.Exists(s.counterNode(j.jobID))
	if err != nil {
		return err
	}
	if !ok {
		return j.l.fenced("reserve checkpoint id "+strconv.FormatInt(id, 10), &zk.CreateRequest{Path: s.counterNode(j.jobID), Data: next, Acl: s.acl(s.counterNode(j.jobID))})
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
	if err := s.needSecret("register checkpoint"); err != nil {
		return err
	}
	// Flink's completed-checkpoint store: the znode points to _metadata,
	// sealed with its digest so that neither the pointer nor the file can
	// be swapped.
	meta := filepath.Join(dir, savepoint.MetadataFileName)
	content, err := os.ReadFile(meta)
	if err != nil {
		return fmt.Errorf("register checkpoint %d: %w", id, err)
	}
	name := checkpointName(id, isSavepoint)
	node := s.checkpointsDir(j.jobID) + "/" + name
	ptr := s.sealPointer(s.toStoragePath(meta), fileSHA256(content), "checkpoint", s.cfg.ClusterID, j.jobID, name)
	ops := []any{&zk.CreateRequest{Path: node, Data: ptr, Acl: s.acl(node)}}
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
	if err := writeFileAtomic(filepath.Join(j.l.s.jobResultDir(), j.jobID+".json"), append(data, '\n')); err != nil {
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
	os.Remove(s.jobGraphFile(j.jobID))
	return nil
}

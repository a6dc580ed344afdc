package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

var errJobEnded = errors.New("the job ended before the operation completed")

// Server serves Flink's REST API for one in-process job.
type Server struct {
	job      *engine.Job
	version  string
	revision string
	fs       vfs.FS
	ops      *opStore
	http     *http.Server
	listener net.Listener
	serveErr chan error
	closeMu  sync.Once
}

// ServerOptions configure a Server.
type ServerOptions struct {
	Version, Revision string
	FS                vfs.FS
	// StoreDuration is rest.async.store-duration.
	StoreDuration time.Duration
}

// NewServer makes a server for job; Serve starts it.
func NewServer(job *engine.Job, o ServerOptions) *Server {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.StoreDuration <= 0 {
		o.StoreDuration = 5 * time.Minute
	}
	s := &Server{job: job, version: o.Version, revision: o.Revision, fs: o.FS, ops: newOpStore(o.StoreDuration)}
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	return s
}

// Listen binds the first free port of ports on address.
func Listen(address string, ports PortSpec) (net.Listener, error) {
	var firstErr error
	for _, r := range ports {
		for p := r[0]; p <= r[1]; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(p)))
			if err == nil {
				return l, nil
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	return nil, fmt.Errorf("could not start the REST endpoint: no free port in %s on %s: %w", ports, address, firstErr)
}

// Serve serves on l until Close.
func (s *Server) Serve(l net.Listener) {
	s.listener = l
	s.serveErr = make(chan error, 1)
	go func() { s.serveErr <- s.http.Serve(l) }()
}

// Address is the base URL of the endpoint, e.g. http://127.0.0.1:8081.
func (s *Server) Address() string { return "http://" + s.listener.Addr().String() }

// WaitFetched keeps the endpoint up, after the job has ended, until every
// completed operation's answer has been fetched (a client polling a stop
// gets its savepoint path) or timeout passes.
func (s *Server) WaitFetched(timeout time.Duration) { s.ops.waitFetched(time.Now().Add(timeout)) }

// Close stops the server and waits for its goroutines.
func (s *Server) Close() error {
	var err error
	s.closeMu.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = s.http.Shutdown(ctx)
		if s.serveErr != nil {
			<-s.serveErr
		}
		s.ops.close()
	})
	return err
}

// httpError is an error with its HTTP status.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

var hexID = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)

// ServeHTTP routes Flink's REST paths (with or without the /v1 prefix).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	path = strings.TrimPrefix(path, "/v1")
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	body, code, err := s.route(r, parts)
	if err != nil {
		var he *httpError
		if !errors.As(err, &he) {
			he = &httpError{code: http.StatusInternalServerError, msg: "Internal server error."}
		}
		writeJSON(w, he.code, ErrorBody{Errors: []string{he.msg}})
		return
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

func (s *Server) route(r *http.Request, p []string) (any, int, error) {
	m := r.Method
	notFound := func() (any, int, error) {
		return nil, 0, errorf(http.StatusNotFound, "Not found: %s", r.URL.Path)
	}
	if len(p) == 1 {
		switch {
		case p[0] == "overview" && m == http.MethodGet:
			return s.overview(), http.StatusOK, nil
		case p[0] == "config" && m == http.MethodGet:
			return s.dashboardConfig(), http.StatusOK, nil
		case p[0] == "jobs" && m == http.MethodGet:
			info := s.job.Info()
			return map[string]any{"jobs": []map[string]string{{"id": info.ID, "status": string(info.Status)}}}, http.StatusOK, nil
		case p[0] == "savepoint-disposal" && m == http.MethodPost:
			return s.triggerDisposal(r)
		}
		return notFound()
	}
	if p[0] == "savepoint-disposal" && len(p) == 2 && m == http.MethodGet {
		return s.pollOp(p[1], opDisposal, "")
	}
	if p[0] != "jobs" {
		return notFound()
	}
	if p[1] == "overview" && len(p) == 2 && m == http.MethodGet {
		return JobsOverview{Jobs: []JobOverview{s.jobOverview()}}, http.StatusOK, nil
	}
	if !hexID.MatchString(p[1]) {
		return nil, 0, errorf(http.StatusBadRequest, "Bad request, could not parse parameters: Cannot parse JobID from %q. The expected format is [0-9a-fA-F]{32}, e.g. fd72014d4c864993a2e5a9287b4a9c5d.", p[1])
	}
	if !strings.EqualFold(p[1], s.job.ID()) {
		return nil, 0, errorf(http.StatusNotFound, "org.apache.flink.runtime.rest.NotFoundException: Job %s not found", strings.ToLower(p[1]))
	}
	rest := p[2:]
	switch {
	case len(rest) == 0 && m == http.MethodGet:
		return s.jobDetails(), http.StatusOK, nil
	case len(rest) == 0 && m == http.MethodPatch:
		return s.cancel(r)
	case len(rest) == 1 && rest[0] == "status" && m == http.MethodGet:
		return map[string]string{"status": string(s.job.Status())}, http.StatusOK, nil
	case len(rest) == 1 && rest[0] == "exceptions" && m == http.MethodGet:
		return s.exceptions(), http.StatusOK, nil
	case len(rest) == 1 && rest[0] == "execution-result" && m == http.MethodGet:
		return s.executionResult(), http.StatusOK, nil
	case len(rest) == 1 && rest[0] == "checkpoints" && m == http.MethodGet:
		return s.checkpointStats(), http.StatusOK, nil
	case len(rest) == 1 && rest[0] == "checkpoints" && m == http.MethodPost:
		return s.triggerCheckpoint(r)
	case len(rest) == 2 && rest[0] == "checkpoints" && rest[1] == "config" && m == http.MethodGet:
		return s.checkpointConfig(), http.StatusOK, nil
	case len(rest) == 3 && rest[0] == "checkpoints" && rest[1] == "details" && m == http.MethodGet:
		return s.checkpointDetails(rest[2])
	case len(rest) == 2 && rest[0] == "checkpoints" && m == http.MethodGet:
		return s.pollOp(rest[1], opCheckpoint, s.job.ID())
	case len(rest) == 1 && rest[0] == "savepoints" && m == http.MethodPost:
		return s.triggerSavepoint(r)
	case len(rest) == 2 && rest[0] == "savepoints" && m == http.MethodGet:
		return s.pollOp(rest[1], opSavepoint, s.job.ID())
	case len(rest) == 1 && rest[0] == "stop" && m == http.MethodPost:
		return s.stop(r)
	}
	if len(rest) <= 3 {
		return nil, 0, errorf(http.StatusMethodNotAllowed, "Not allowed: %s %s", m, r.URL.Path)
	}
	return notFound()
}

func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return errorf(http.StatusBadRequest, "Bad request: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errorf(http.StatusBadRequest, "Request did not match expected format %T: %v", v, err)
	}
	return nil
}

// asHTTP maps an engine refusal to Flink's status codes.
func asHTTP(err error) error {
	var nr *engine.NotRunningError
	switch {
	case errors.As(err, &nr):
		return errorf(http.StatusConflict, "%v", err)
	case errors.Is(err, engine.ErrNoSavepointDir):
		return errorf(http.StatusBadRequest, "%v", err)
	}
	return errorf(http.StatusBadRequest, "%v", err)
}

func (s *Server) triggerSavepoint(r *http.Request) (any, int, error) {
	var req SavepointTriggerRequest
	if err := decode(r, &req); err != nil {
		return nil, 0, err
	}
	id, err := s.triggerID(req.TriggerID)
	if err != nil || id == "" {
		return TriggerResponse{RequestID: req.TriggerID}, http.StatusAccepted, err
	}
	dir := ""
	if req.TargetDirectory != nil {
		dir = *req.TargetDirectory
	}
	ch, err := s.job.TriggerSavepoint(dir, req.FormatType)
	if err != nil {
		return nil, 0, asHTTP(err)
	}
	if req.CancelJob {
		// Deprecated cancel-with-savepoint: cancel once the savepoint is done.
		ch = s.thenCancel(ch)
	}
	s.ops.start(id, opSavepoint, s.job.ID(), ch, s.job.Done())
	return TriggerResponse{RequestID: id}, http.StatusAccepted, nil
}

// thenCancel forwards a savepoint's result and cancels the job after a
// successful savepoint.
func (s *Server) thenCancel(in <-chan engine.SnapshotResult) <-chan engine.SnapshotResult {
	out := make(chan engine.SnapshotResult, 1)
	s.ops.wg.Add(1)
	go func() {
		defer s.ops.wg.Done()
		select {
		case r := <-in:
			if r.Err == nil {
				s.job.Cancel()
				<-s.job.Done()
			}
			out <- r
		case <-s.ops.closing:
		}
	}()
	return out
}

// triggerID checks a client-supplied trigger id. A known one returns ""
// (the operation exists: answer with it, idempotently).
func (s *Server) triggerID(given string) (string, error) {
	if given == "" {
		return newTriggerID(), nil
	}
	if !hexID.MatchString(given) {
		return "", errorf(http.StatusBadRequest, "Cannot parse TriggerId from %q.", given)
	}
	if _, ok := s.ops.lookup(given); ok {
		return "", nil
	}
	return strings.ToLower(given), nil
}

func (s *Server) stop(r *http.Request) (any, int, error) {
	var req StopRequest
	if err := decode(r, &req); err != nil {
		return nil, 0, err
	}
	id, err := s.triggerID(req.TriggerID)
	if err != nil || id == "" {
		return TriggerResponse{RequestID: req.TriggerID}, http.StatusAccepted, err
	}
	dir := ""
	if req.TargetDirectory != nil {
		dir = *req.TargetDirectory
	}
	ch, err := s.job.StopWithSavepoint(dir, req.FormatType, req.Drain)
	if err != nil {
		return nil, 0, asHTTP(err)
	}
	s.ops.start(id, opSavepoint, s.job.ID(), ch, s.job.Done())
	return TriggerResponse{RequestID: id}, http.StatusAccepted, nil
}

func (s *Server) triggerCheckpoint(r *http.Request) (any, int, error) {
	var req CheckpointTriggerRequest
	if err := decode(r, &req); err != nil {
		return nil, 0, err
	}
	switch req.CheckpointType {
	case "", "CONFIGURED", "FULL":
	case "INCREMENTAL":
		return nil, 0, errorf(http.StatusBadRequest, "Incremental checkpoints are not supported by the manual checkpoint trigger. Use CONFIGURED or FULL.")
	default:
		return nil, 0, errorf(http.StatusBadRequest, "Unknown checkpointType %q: expected CONFIGURED, FULL or INCREMENTAL.", req.CheckpointType)
	}
	id, err := s.triggerID(req.TriggerID)
	if err != nil || id == "" {
		return TriggerResponse{RequestID: req.TriggerID}, http.StatusAccepted, err
	}
	ch, err := s.job.TriggerCheckpoint(req.CheckpointType == "FULL")
	if err != nil {
		return nil, 0, asHTTP(err)
	}
	s.ops.start(id, opCheckpoint, s.job.ID(), ch, s.job.Done())
	return TriggerResponse{RequestID: id}, http.StatusAccepted, nil
}

func failureCause(class string, err error) *FailureCause {
	return &FailureCause{Class: class, StackTrace: class + ": " + err.Error()}
}

const checkpointException = "org.apache.flink.runtime.checkpoint.CheckpointException"

func (s *Server) pollOp(id string, kind opKind, jobID string) (any, int, error) {
	op, ok := s.ops.status(id, kind, jobID)
	if !ok {
		return nil, 0, errorf(http.StatusNotFound, "org.apache.flink.runtime.rest.handler.RestHandlerException: There is no operation for trigger id %s.", id)
	}
	if !op.done {
		return AsyncResult{Status: QueueStatus{ID: "IN_PROGRESS"}}, http.StatusOK, nil
	}
	res := AsyncResult{Status: QueueStatus{ID: "COMPLETED"}}
	switch kind {
	case opCheckpoint:
		info := CheckpointInfo{CheckpointID: op.result.ID}
		if op.result.Err != nil {
			info = CheckpointInfo{FailureCause: failureCause(checkpointException, op.result.Err)}
		}
		res.Operation = info
	case opDisposal:
		info := SavepointInfo{}
		if op.result.Err != nil {
			info.FailureCause = failureCause("org.apache.flink.util.FlinkException", op.result.Err)
		}
		res.Operation = info
	default:
		info := SavepointInfo{Location: op.result.Path}
		if op.result.Err != nil {
			info = SavepointInfo{FailureCause: failureCause(checkpointException, op.result.Err)}
		}
		res.Operation = info
	}
	return res, http.StatusOK, nil
}

func (s *Server) cancel(r *http.Request) (any, int, error) {
	switch mode := r.URL.Query().Get("mode"); strings.ToLower(mode) {
	case "", "cancel":
	case "stop":
		return nil, 0, errorf(http.StatusPermanentRedirect, `The termination mode "stop" has been removed. For an ungraceful shutdown, please use "cancel" instead. For a graceful shutdown, please use "jobs/:jobId/stop" instead.`)
	default:
		return nil, 0, errorf(http.StatusBadRequest, "Bad request, could not parse parameters: Cannot resolve %q to a TerminationMode: expected cancel.", mode)
	}
	switch st := s.job.Status(); st {
	case engine.StatusFinished, engine.StatusFailed:
		return nil, 0, errorf(http.StatusConflict, "Job cancellation failed because the job has already reached another terminal state (%s).", st)
	}
	s.job.Cancel()
	return struct{}{}, http.StatusAccepted, nil
}

// triggerDisposal disposes a savepoint: it is deleted through its metadata
// (state files, _metadata, then the directory). Disposing a checkpoint this
// job still relies on is refused.
func (s *Server) triggerDisposal(r *http.Request) (any, int, error) {
	var req DisposalRequest
	if err := decode(r, &req); err != nil {
		return nil, 0, err
	}
	if req.SavepointPath == "" {
		return nil, 0, errorf(http.StatusBadRequest, "Field savepoint-path must be set.")
	}
	id := newTriggerID()
	ch := make(chan engine.SnapshotResult, 1)
	ch <- engine.SnapshotResult{Err: Dispose(s.fs, req.SavepointPath, s.ownedBy)}
	s.ops.start(id, opDisposal, "", ch, nil)
	return TriggerResponse{RequestID: id}, http.StatusOK, nil
}

// ownedBy refuses disposing the checkpoints the running job may recover
// from.
func (s *Server) ownedBy(md *savepoint.Metadata) error {
	if md.Kind == savepoint.KindCheckpoint && md.JobID == s.job.ID() && !s.job.Status().IsGloballyTerminal() {
		return fmt.Errorf("checkpoint %d belongs to the running job %s, which may need it to recover; it is deleted when subsumed", md.CheckpointID, md.JobID)
	}
	return nil
}

// Dispose deletes the snapshot at path (a savepoint directory, a chk-N
// directory or a _metadata file). check may refuse it.
func Dispose(fsys vfs.FS, path string, check func(*savepoint.Metadata) error) error {
	r, err := restore.Resolve(fsys, path)
	if err != nil {
		return err
	}
	// Never pick a snapshot for the user (a job directory resolves to its
	// newest checkpoint): disposal deletes, so the path must name one.
	if filepath.Base(r.MetadataFile) != savepoint.MetadataFileName || r.JobDir != "" {
		return fmt.Errorf("'%s' is not a savepoint or checkpoint directory or its _metadata file", path)
	}
	if check != nil {
		if err := check(r.Metadata); err != nil {
			return err
		}
	}
	return savepoint.Discard(fsys, r.Dir, r.Metadata)
}

func (s *Server) overview() map[string]any {
	info := s.job.Info()
	count := func(st engine.JobStatus) int {
		if info.Status == st {
			return 1
		}
		return 0
	}
	running := 0
	if !info.Status.IsGloballyTerminal() {
		running = 1
	}
	slots := 0
	for _, v := range info.Vertices {
		slots = max(slots, v.Parallelism)
	}
	return map[string]any{"taskmanagers": 1, "slots-total": slots, "slots-available": 0, "jobs-running": running,
		"jobs-finished": count(engine.StatusFinished), "jobs-cancelled": count(engine.StatusCanceled),
		"jobs-failed": count(engine.StatusFailed), "flink-version": s.version, "flink-commit": s.revision,
		"slots-free-and-blocked": 0, "taskmanagers-blocked": 0}
}

func (s *Server) dashboardConfig() map[string]any {
	name, offset := time.Now().Zone()
	return map[string]any{"refresh-interval": 3000, "timezone-name": name, "timezone-offset": offset * 1000,
		"flink-version": s.version, "flink-revision": s.revision,
		"features": map[string]bool{"web-submit": false, "web-cancel": true, "web-rescale": false, "web-history": false}}
}

func lowerTasks(v []engine.VertexInfo) map[string]int {
	out := map[string]int{"total": 0}
	for _, st := range []string{"created", "scheduled", "deploying", "running", "finished", "canceling", "canceled", "failed", "reconciling", "initializing"} {
		out[st] = 0
	}
	for _, vi := range v {
		for st, n := range vi.Tasks {
			out[strings.ToLower(st)] += n
			out["total"] += n
		}
	}
	return out
}

func (s *Server) jobOverview() JobOverview {
	return overviewOf(s.job.Info())
}

func overviewOf(info engine.JobInfo) JobOverview {
	end := info.EndTime
	now := time.Now().UnixMilli()
	dur := now - info.StartTime
	if end > 0 {
		dur = end - info.StartTime
	}
	last := info.StartTime
	for _, ts := range info.Timestamps {
		last = max(last, ts)
	}
	return JobOverview{JID: info.ID, Name: info.Name, StartTime: info.StartTime, EndTime: end, Duration: dur,
		State: string(info.Status), LastModification: last, Tasks: lowerTasks(info.Vertices)}
}

func vertexStatus(tasks map[string]int) string {
	for _, st := range []string{engine.ExecFailed, engine.ExecCanceled, engine.ExecRunning, engine.ExecDeploying, engine.ExecCreated} {
		if tasks[st] > 0 {
			return st
		}
	}
	if tasks[engine.ExecFinished] > 0 {
		return engine.ExecFinished
	}
	return engine.ExecCreated
}

func (s *Server) jobDetails() map[string]any {
	info := s.job.Info()
	now := time.Now().UnixMilli()
	ov := overviewOf(info)
	timestamps := map[string]int64{}
	for _, st := range engine.AllStatuses {
		timestamps[string(st)] = info.Timestamps[st]
	}
	statusCounts := map[string]int{}
	for _, st := range []string{"CREATED", "SCHEDULED", "DEPLOYING", "RUNNING", "FINISHED", "CANCELING", "CANCELED", "FAILED", "RECONCILING", "INITIALIZING"} {
		statusCounts[st] = 0
	}
	var vertices []map[string]any
	var nodes []map[string]any
	for _, v := range info.Vertices {
		tasks := map[string]int{}
		for st := range statusCounts {
			tasks[st] = v.Tasks[st]
		}
		status := vertexStatus(v.Tasks)
		statusCounts[status]++
		vertices = append(vertices, map[string]any{"id": v.ID, "name": v.Name, "maxParallelism": v.MaxParallelism,
			"parallelism": v.Parallelism, "status": status, "start-time": v.StartTime, "end-time": ov.EndTime,
			"duration": ov.Duration, "tasks": tasks, "metrics": map[string]any{
				"read-bytes": 0, "read-bytes-complete": true, "write-bytes": 0, "write-bytes-complete": true,
				"read-records": 0, "read-records-complete": true, "write-records": 0, "write-records-complete": true,
				"accumulated-backpressured-time": 0, "accumulated-idle-time": 0, "accumulated-busy-time": 0}})
		nodes = append(nodes, map[string]any{"id": v.ID, "parallelism": v.Parallelism, "operator": "",
			"operator_strategy": "", "description": v.Name})
	}
	return map[string]any{"jid": info.ID, "name": info.Name, "isStoppable": true, "state": string(info.Status),
		"job-type": "STREAMING", "start-time": info.StartTime, "end-time": ov.EndTime, "duration": ov.Duration,
		"maxParallelism": info.MaxParallelism, "now": now, "timestamps": timestamps, "vertices": vertices,
		"status-counts": statusCounts,
		"plan":          map[string]any{"jid": info.ID, "name": info.Name, "type": "STREAMING", "nodes": nodes}}
}

func checkpointStatsJSON(c *engine.CheckpointStats) map[string]any {
	if c == nil {
		return nil
	}
	class := map[string]string{"IN_PROGRESS": "in_progress", "COMPLETED": "completed", "FAILED": "failed"}[c.Status]
	// Absent values are left out rather than written as null: Flink's
	// OpenAPI description declares none of these fields nullable.
	m := map[string]any{"className": class, "id": c.ID, "status": c.Status, "is_savepoint": c.IsSavepoint(),
		"trigger_timestamp": c.TriggerTimestamp, "latest_ack_timestamp": c.LatestAckTimestamp,
		"checkpointed_size": c.StateSize, "state_size": c.StateSize, "end_to_end_duration": c.EndToEndDuration,
		"alignment_buffered": 0, "processed_data": 0, "persisted_data": 0, "num_subtasks": c.NumSubtasks,
		"num_acknowledged_subtasks": c.NumAcknowledged, "checkpoint_type": c.Type, "tasks": map[string]any{}}
	if c.IsSavepoint() {
		m["savepointFormat"] = c.Format
	}
	switch c.Status {
	case "COMPLETED":
		m["external_path"] = c.ExternalPath
		m["discarded"] = c.Discarded
	case "FAILED":
		m["failure_timestamp"] = c.FailureTimestamp
		m["failure_message"] = c.FailureMessage
	}
	return m
}

func (s *Server) checkpointStats() map[string]any {
	st := s.job.Info().Checkpoints
	summary := func(durations bool) map[string]any {
		mn, mx, avg, p50, p90, p95, p99, p999 := st.Summary(durations)
		return map[string]any{"min": mn, "max": mx, "avg": avg, "p50": p50, "p90": p90, "p95": p95, "p99": p99, "p999": p999}
	}
	zero := map[string]any{"min": 0, "max": 0, "avg": 0, "p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "p999": 0.0}
	history := []map[string]any{}
	for i := range st.History {
		history = append(history, checkpointStatsJSON(&st.History[i]))
	}
	latest := map[string]any{}
	if r := st.LatestRestored; r != nil {
		latest["restored"] = map[string]any{"id": r.ID, "restore_timestamp": r.Timestamp, "is_savepoint": r.IsSavepoint, "external_path": r.Path}
	}
	for k, c := range map[string]*engine.CheckpointStats{"completed": st.LatestCompleted, "savepoint": st.LatestSavepoint, "failed": st.LatestFailed} {
		if c != nil {
			latest[k] = checkpointStatsJSON(c)
		}
	}
	// gflink's extension: what the job keeps and whether it owns it (may
	// delete it). Flink's description allows extra properties.
	retained := []RetainedJSON{}
	for _, r := range s.job.Info().Retained {
		retained = append(retained, RetainedJSON{ID: r.ID, Type: r.Kind, Format: r.Format, Path: r.Path,
			Completed: r.CompletionTimestamp, Size: r.Size, Owned: r.Owned, Restored: r.Restored})
	}
	return map[string]any{
		"retained": retained,
		"counts": map[string]any{"restored": st.Restored, "total": st.Total, "in_progress": st.InProgress,
			"completed": st.Completed, "failed": st.Failed},
		"summary": map[string]any{"checkpointed_size": summary(false), "state_size": summary(false),
			"end_to_end_duration": summary(true), "alignment_buffered": zero, "processed_data": zero, "persisted_data": zero},
		"latest":  latest,
		"history": history,
	}
}

func (s *Server) checkpointDetails(idStr string) (any, int, error) {
	id, err := strconv.ParseInt(idStr, 10, 64)
	if err != nil {
		return nil, 0, errorf(http.StatusBadRequest, "Bad request, could not parse parameters: %q is not a checkpoint id.", idStr)
	}
	c, ok := s.job.CheckpointStats(id)
	if !ok {
		return nil, 0, errorf(http.StatusNotFound, "Could not find checkpointing statistics for checkpoint %d.", id)
	}
	return checkpointStatsJSON(&c), http.StatusOK, nil
}

func (s *Server) checkpointConfig() map[string]any {
	cfg := s.job.Info().CheckpointConfig
	interval := cfg.Interval.Milliseconds()
	if !cfg.Enabled() {
		interval = 9223372036854775807 // Flink: Long.MAX_VALUE when periodic checkpoints are off
	}
	storage := "JobManagerCheckpointStorage"
	if cfg.Storage == checkpoint.StorageFilesystem {
		storage = "FileSystemCheckpointStorage"
	}
	return map[string]any{"mode": strings.ToLower(cfg.Mode), "interval": interval, "timeout": cfg.Timeout.Milliseconds(),
		"min_pause": cfg.MinPause.Milliseconds(), "max_concurrent": cfg.MaxConcurrent,
		"externalization": map[string]bool{"enabled": cfg.Retention != checkpoint.NoExternalized,
			"delete_on_cancellation": cfg.Retention != checkpoint.RetainOnCancellation},
		"state_backend": "HashMapStateBackend", "checkpoint_storage": storage, "unaligned_checkpoints": false,
		"tolerable_failed_checkpoints": cfg.TolerableFailed, "aligned_checkpoint_timeout": 0,
		"checkpoints_after_tasks_finish": cfg.AfterTasksFinish, "state_changelog_enabled": false,
		"changelog_periodic_materialization_interval": 600000, "changelog_storage": "memory"}
}

func (s *Server) exceptions() map[string]any {
	info := s.job.Info()
	entries := []map[string]any{}
	for i := len(info.Exceptions) - 1; i >= 0; i-- {
		e := info.Exceptions[i]
		entries = append(entries, map[string]any{"exceptionName": "org.apache.flink.util.FlinkException",
			"stacktrace": e.Message, "timestamp": e.Timestamp, "taskName": e.TaskName,
			"failureLabels": map[string]string{}, "concurrentExceptions": []any{}})
	}
	return map[string]any{"exceptionHistory": map[string]any{"entries": entries, "truncated": false}}
}

func (s *Server) executionResult() map[string]any {
	info := s.job.Info()
	if !info.Status.IsGloballyTerminal() {
		return map[string]any{"status": QueueStatus{ID: "IN_PROGRESS"}}
	}
	app := map[engine.JobStatus]string{engine.StatusFinished: "SUCCEEDED", engine.StatusFailed: "FAILED", engine.StatusCanceled: "CANCELED"}[info.Status]
	res := map[string]any{"id": info.ID, "application-status": app, "accumulator-results": map[string]any{},
		"net-runtime": info.EndTime - info.StartTime}
	if info.Status == engine.StatusFailed && len(info.Exceptions) > 0 {
		res["failure-cause"] = &FailureCause{Class: "org.apache.flink.runtime.client.JobExecutionException", StackTrace: info.Exceptions[len(info.Exceptions)-1].Message}
	}
	return map[string]any{"status": QueueStatus{ID: "COMPLETED"}, "job-execution-result": res}
}

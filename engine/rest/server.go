package rest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
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
	mux      *http.ServeMux
	// token is what every request must carry; "" when authentication is
	// disabled.
	token     string
	maxBody   int64
	maxConns  int
	http      *http.Server
	listener  net.Listener
	gate      *gate
	serveErr  chan error
	closeMu   sync.Once
	tokenHash [sha256.Size]byte
	conf      *config.Configuration
	args      []string
}

// ServerOptions configure a Server. Zero values take the defaults of the
// corresponding rest.* options.
type ServerOptions struct {
	Version, Revision string
	FS                vfs.FS
	// StoreDuration is rest.async.store-duration.
	StoreDuration time.Duration
	// Token is the job's secret (see NewToken). Empty, a new one is made
	// (Server.Token) unless DisableAuthentication is set.
	Token string
	// DisableAuthentication is rest.authentication.enabled: false: every
	// request is served, whoever sends it.
	DisableAuthentication bool
	// MaxContentLength is rest.server.max-content-length.
	MaxContentLength int64
	// ReadTimeout, WriteTimeout and IdleTimeout are rest.server.*-timeout.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConnections is rest.server.max-connections.
	MaxConnections int
	// Config is the job's configuration and Arguments its arguments, as
	// served (secrets masked) by /jobmanager/config and /jobs/:jobid/config.
	Config    *config.Configuration
	Arguments []string
}

// ServerOptionsFrom reads the rest.* options of the server from conf; a bad
// value is an error naming its key.
func ServerOptionsFrom(conf *config.Configuration) (ServerOptions, error) {
	var o ServerOptions
	var errs []error
	read := func(err error) { errs = append(errs, err) }
	var err error
	o.StoreDuration, err = AsyncStoreDuration.Get(conf)
	read(err)
	auth, err := AuthenticationEnabled.Get(conf)
	read(err)
	o.DisableAuthentication = !auth
	maxBody, err := MaxContentLength.Get(conf)
	read(err)
	o.MaxContentLength = int64(maxBody)
	o.ReadTimeout, err = ServerReadTimeout.Get(conf)
	read(err)
	o.WriteTimeout, err = ServerWriteTimeout.Get(conf)
	read(err)
	o.IdleTimeout, err = ServerIdleTimeout.Get(conf)
	read(err)
	o.MaxConnections, err = MaxConnections.Get(conf)
	read(err)
	return o, errors.Join(errs...)
}

// NewToken makes a job's secret: 256 random bits, hex.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// NewServer makes a server for job; Serve starts it.
func NewServer(job *engine.Job, o ServerOptions) *Server {
	if o.Token == "" && !o.DisableAuthentication {
		o.Token = NewToken()
	}
	if o.DisableAuthentication {
		o.Token = ""
	}
	s := &Server{job: job, version: o.Version, revision: o.Revision, fs: orDefault(o.FS, vfs.Default),
		ops:      newOpStore(orDefault(o.StoreDuration, AsyncStoreDuration.Default())),
		token:    o.Token,
		maxBody:  orDefault(o.MaxContentLength, int64(MaxContentLength.Default())),
		maxConns: orDefault(o.MaxConnections, MaxConnections.Default()),
		conf:     o.Config,
		args:     config.MaskArgs(o.Arguments),
	}
	if s.conf == nil {
		s.conf = config.New()
	}
	s.tokenHash = sha256.Sum256([]byte(s.token))
	readTimeout := orDefault(o.ReadTimeout, ServerReadTimeout.Default())
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: min(readTimeout, headerTimeout), ReadTimeout: readTimeout,
		ConnContext:  withConn,
		WriteTimeout: orDefault(o.WriteTimeout, ServerWriteTimeout.Default()),
		IdleTimeout:  orDefault(o.IdleTimeout, ServerIdleTimeout.Default()), MaxHeaderBytes: 64 << 10}
	s.routes()
	return s
}

// Token is the secret requests must carry ("" without authentication).
func (s *Server) Token() string { return s.token }

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

// headerTimeout bounds how long a client may take to send a request's
// headers: a CLI sends them at once; a client that trickles them holds a
// connection for nothing.
const headerTimeout = 2 * time.Second

// Serve serves on l until Close, keeping at most rest.server.max-connections
// connections that have not yet made an authenticated request (see gate).
func (s *Server) Serve(l net.Listener) {
	s.listener = l
	s.serveErr = make(chan error, 1)
	s.gate = newGate(l, s.maxConns)
	go func() { s.serveErr <- s.http.Serve(s.gate) }()
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

// handlerFunc answers a request with a body and status, or an error.
type handlerFunc func(r *http.Request) (any, int, error)

// routes registers Flink's REST paths. Their {jobid} is checked by
// handleJob, with Flink's 400 and 404.
func (s *Server) routes() {
	s.mux = http.NewServeMux()
	ok := func(f func() any) handlerFunc {
		return func(*http.Request) (any, int, error) { return f(), http.StatusOK, nil }
	}
	s.handle("GET /overview", ok(func() any { return s.overview() }))
	s.handle("GET /config", ok(func() any { return s.dashboardConfig() }))
	s.handle("GET /jobmanager/config", ok(func() any { return s.configEntries() }))
	s.handleJob("GET /jobs/{jobid}/jobmanager/config", ok(func() any { return s.configEntries() }))
	s.handleJob("GET /jobs/{jobid}/config", ok(func() any { return s.jobConfig() }))
	s.handle("GET /jobs", ok(func() any {
		info := s.job.Info()
		return JobIDsWithStatus{Jobs: []JobIDWithStatus{{ID: info.ID, Status: string(info.Status)}}}
	}))
	s.handle("GET /jobs/overview", ok(func() any { return JobsOverview{Jobs: []JobOverview{s.jobOverview()}} }))
	s.handle("POST /savepoint-disposal", s.triggerDisposal)
	s.handle("GET /savepoint-disposal/{triggerid}", func(r *http.Request) (any, int, error) {
		return s.pollOp(r.PathValue("triggerid"), opDisposal, "")
	})
	s.handleJob("GET /jobs/{jobid}", ok(func() any { return s.jobDetails() }))
	s.handleJob("PATCH /jobs/{jobid}", s.cancel)
	s.handleJob("GET /jobs/{jobid}/status", ok(func() any { return JobStatusInfo{Status: string(s.job.Status())} }))
	s.handleJob("GET /jobs/{jobid}/exceptions", ok(func() any { return s.exceptions() }))
	s.handleJob("GET /jobs/{jobid}/execution-result", ok(func() any { return s.executionResult() }))
	s.handleJob("GET /jobs/{jobid}/checkpoints", ok(func() any { return s.checkpointStats() }))
	s.handleJob("POST /jobs/{jobid}/checkpoints", s.triggerCheckpoint)
	s.handleJob("GET /jobs/{jobid}/checkpoints/config", ok(func() any { return s.checkpointConfig() }))
	s.handleJob("GET /jobs/{jobid}/checkpoints/details/{checkpointid}", func(r *http.Request) (any, int, error) {
		return s.checkpointDetails(r.PathValue("checkpointid"))
	})
	s.handleJob("GET /jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}", func(r *http.Request) (any, int, error) {
		return s.checkpointSubtasks(r.PathValue("checkpointid"), r.PathValue("vertexid"))
	})
	s.handleJob("GET /jobs/{jobid}/checkpoints/{triggerid}", func(r *http.Request) (any, int, error) {
		return s.pollOp(r.PathValue("triggerid"), opCheckpoint, s.job.ID())
	})
	s.handleJob("POST /jobs/{jobid}/savepoints", s.triggerSavepoint)
	s.handleJob("GET /jobs/{jobid}/savepoints/{triggerid}", func(r *http.Request) (any, int, error) {
		return s.pollOp(r.PathValue("triggerid"), opSavepoint, s.job.ID())
	})
	s.handleJob("POST /jobs/{jobid}/stop", s.stop)
	s.handleJob("GET /jobs/{jobid}/plan", ok(func() any { return map[string]any{"plan": s.jobDetails().Plan} }))
	s.metricRoutes()
}

func (s *Server) handle(pattern string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		body, code, err := h(r)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, code, body)
	})
}

// handleJob registers a path of this job: another well-formed id is not
// found, a malformed one is a bad request, as in Flink.
func (s *Server) handleJob(pattern string, h handlerFunc) {
	s.handle(pattern, func(r *http.Request) (any, int, error) {
		id := r.PathValue("jobid")
		if !hexID.MatchString(id) {
			return nil, 0, errorf(http.StatusBadRequest, "Bad request, could not parse parameters: Cannot parse JobID from %q. The expected format is [0-9a-fA-F]{32}, e.g. fd72014d4c864993a2e5a9287b4a9c5d.", id)
		}
		if !strings.EqualFold(id, s.job.ID()) {
			return nil, 0, errorf(http.StatusNotFound, "org.apache.flink.runtime.rest.NotFoundException: Job %s not found", strings.ToLower(id))
		}
		return h(r)
	})
}

// ServeHTTP authenticates a request, bounds its body, and routes it (with
// or without Flink's /v1 prefix, with or without a trailing slash). Every
// error, the mux's 404 and 405 included, is Flink's {"errors": [...]}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == IdentityPath {
		s.serveIdentity(w, r)
		return
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && isWebPath(r.URL.Path) {
		s.serveWeb(w, r)
		return
	}
	if err := s.authenticate(r); err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gflink"`)
		// The connection does not stay: it would wait as long as it likes
		// for another try.
		w.Header().Set("Connection", "close")
		writeError(w, err)
		return
	}
	if s.token != "" {
		// Authenticated: the connection no longer counts against its
		// peer's limit. Without authentication nothing tells a client
		// from another, and every connection stays counted.
		admitConn(r.Context())
	}
	if r.ContentLength > s.maxBody {
		// Refused before a byte of it is read.
		writeError(w, s.tooLarge())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	if path != r.URL.Path && path != "" && !strings.HasPrefix(path, "/") {
		path = r.URL.Path // "/v1x" is not the prefix
	}
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	if path == "" {
		path = "/"
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = path, ""
	h, pattern := s.mux.Handler(r2)
	if pattern == "" {
		// No route: the mux's answer (404, or 405 with Allow) decides the
		// status; the body is Flink's.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r2)
		if rec.code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			writeError(w, errorf(http.StatusMethodNotAllowed, "Not allowed: %s %s", r.Method, r.URL.Path))
			return
		}
		writeError(w, errorf(http.StatusNotFound, "Not found: %s", r.URL.Path))
		return
	}
	// Through the mux again rather than h: only ServeHTTP sets the
	// pattern's path values ({jobid}, {triggerid}).
	s.mux.ServeHTTP(w, r2)
}

// statusRecorder keeps the status and headers the mux would send.
type statusRecorder struct {
	header http.Header
	code   int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *statusRecorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(b), nil
}

// authenticate checks the request's bearer token. The comparison takes
// the same time whatever the token sent (both sides are hashed to one
// length, then compared in constant time), so timing reveals nothing of
// the secret.
func (s *Server) authenticate(r *http.Request) error {
	if s.token == "" {
		return nil
	}
	scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return errorf(http.StatusUnauthorized, "Unauthorized: this gflink job's REST endpoint requires the job's token (Authorization: Bearer <token>). gflink's commands send it from $GFLINK_HOME/jobs/<jobId>.json, from GFLINK_REST_TOKEN or from --token; a job started with rest.authentication.enabled: false needs none.")
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
		return errorf(http.StatusUnauthorized, "Unauthorized: the token does not match this job's (see $GFLINK_HOME/jobs/<jobId>.json of the user running it).")
	}
	return nil
}

func (s *Server) tooLarge() error {
	return errorf(http.StatusRequestEntityTooLarge, "Request entity too large: the body exceeds %s (rest.server.max-content-length).", config.MemorySize(s.maxBody))
}

func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{code: http.StatusInternalServerError, msg: "Internal server error."}
	}
	writeJSON(w, he.code, ErrorBody{Errors: []string{he.msg}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// decode reads a JSON request body (bounded by ServeHTTP): an empty body
// leaves v as it is; one over rest.server.max-content-length is a 413, never
// silently cut.
func (s *Server) decode(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return s.tooLarge()
	case err != nil:
		return errorf(http.StatusBadRequest, "Bad request: could not read the request body: %v", err)
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
	if err := s.decode(r, &req); err != nil {
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
	if err := s.decode(r, &req); err != nil {
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
	if err := s.decode(r, &req); err != nil {
		return nil, 0, err
	}
	switch req.CheckpointType {
	case "", "CONFIGURED", "FULL":
	case "INCREMENTAL":
		if !s.job.Info().Incremental {
			return nil, 0, errorf(http.StatusBadRequest, "Incremental checkpoints need the rocksdb state backend with execution.checkpointing.incremental: true; this job's checkpoints are full. Use CONFIGURED or FULL.")
		}
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
// job still relies on is refused; so is a _metadata naming files outside
// the snapshot or through a symbolic link (savepoint.Discard).
func (s *Server) triggerDisposal(r *http.Request) (any, int, error) {
	var req DisposalRequest
	if err := s.decode(r, &req); err != nil {
		return nil, 0, err
	}
	if req.SavepointPath == "" {
		return nil, 0, errorf(http.StatusBadRequest, "Field savepoint-path must be set.")
	}
	id := newTriggerID()
	ch := make(chan engine.SnapshotResult, 1)
	ch <- engine.SnapshotResult{Err: restore.Dispose(s.fs, req.SavepointPath, s.ownedBy)}
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

func (s *Server) overview() ClusterOverview {
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
	return ClusterOverview{TaskManagers: 1, SlotsTotal: slots, JobsRunning: running,
		JobsFinished: count(engine.StatusFinished), JobsCancelled: count(engine.StatusCanceled),
		JobsFailed: count(engine.StatusFailed), FlinkVersion: s.version, FlinkCommit: s.revision}
}

func (s *Server) dashboardConfig() DashboardConfiguration {
	name, offset := time.Now().Zone()
	return DashboardConfiguration{RefreshInterval: 3000, TimezoneName: name, TimezoneOffset: offset * 1000,
		FlinkVersion: s.version, FlinkRevision: s.revision, Features: DashboardFeatures{WebCancel: true}}
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
	for _, st := range []engine.ExecutionState{engine.ExecFailed, engine.ExecCanceled, engine.ExecRunning, engine.ExecInitializing, engine.ExecDeploying, engine.ExecCreated} {
		if tasks[string(st)] > 0 {
			return string(st)
		}
	}
	if tasks[string(engine.ExecFinished)] > 0 {
		return string(engine.ExecFinished)
	}
	return string(engine.ExecCreated)
}

func (s *Server) jobDetails() JobDetails {
	info := s.job.Info()
	ov := overviewOf(info)
	timestamps := map[string]int64{}
	for _, st := range engine.AllStatuses {
		timestamps[string(st)] = info.Timestamps[st]
	}
	statusCounts := map[string]int{}
	for _, st := range []string{"CREATED", "SCHEDULED", "DEPLOYING", "RUNNING", "FINISHED", "CANCELING", "CANCELED", "FAILED", "RECONCILING", "INITIALIZING"} {
		statusCounts[st] = 0
	}
	vertices := []JobVertex{}
	nodes := []JobPlanNode{}
	for _, v := range info.Vertices {
		tasks := map[string]int{}
		for st := range statusCounts {
			tasks[st] = v.Tasks[st]
		}
		status := vertexStatus(v.Tasks)
		statusCounts[status]++
		vertices = append(vertices, JobVertex{ID: v.ID, Name: v.Name, MaxParallelism: v.MaxParallelism,
			Parallelism: v.Parallelism, Status: status, StartTime: v.StartTime, EndTime: ov.EndTime,
			Duration: ov.Duration, Tasks: tasks, Metrics: VertexMetrics{ReadBytesComplete: true,
				WriteBytesComplete: true, ReadRecordsComplete: true, WriteRecordsComplete: true}})
		node := JobPlanNode{ID: v.ID, Parallelism: v.Parallelism, Description: v.Name}
		for i, in := range v.Inputs {
			node.Inputs = append(node.Inputs, JobPlanInput{Num: i, ID: in.ID, ShipStrategy: in.Ship, Exchange: "pipelined_bounded"})
		}
		nodes = append(nodes, node)
	}
	return JobDetails{JID: info.ID, Name: info.Name, IsStoppable: true, State: string(info.Status),
		JobType: "STREAMING", StartTime: info.StartTime, EndTime: ov.EndTime, Duration: ov.Duration,
		MaxParallelism: info.MaxParallelism, Now: time.Now().UnixMilli(), Timestamps: timestamps,
		Vertices: vertices, StatusCounts: statusCounts,
		Plan: JobPlan{JID: info.ID, Name: info.Name, Type: "STREAMING", Nodes: nodes}}
}

func checkpointStatistics(c *engine.CheckpointStats) *CheckpointStatistics {
	if c == nil {
		return nil
	}
	class := map[string]string{"IN_PROGRESS": "in_progress", "COMPLETED": "completed", "FAILED": "failed"}[c.Status]
	out := &CheckpointStatistics{ClassName: class, ID: c.ID, Status: c.Status, IsSavepoint: c.IsSavepoint(),
		TriggerTimestamp: c.TriggerTimestamp, LatestAckTimestamp: c.LatestAckTimestamp,
		CheckpointedSize: c.CheckpointedSize, StateSize: c.StateSize, EndToEndDuration: c.EndToEndDuration,
		NumSubtasks: c.NumSubtasks, NumAcknowledgedSubtasks: c.NumAcknowledged, CheckpointType: c.CheckpointType(),
		PersistedData: c.PersistedData, Tasks: map[string]any{}}
	for id, t := range taskCheckpointStats(c, nil) {
		out.Tasks[id] = t.TaskCheckpointStatistics
	}
	if c.IsSavepoint() {
		out.SavepointFormat = string(c.Format)
	}
	switch c.Status {
	case "COMPLETED":
		out.ExternalPath, out.Discarded = &c.ExternalPath, &c.Discarded
	case "FAILED":
		out.FailureTimestamp, out.FailureMessage = &c.FailureTimestamp, &c.FailureMessage
	}
	return out
}

func (s *Server) checkpointStats() CheckpointingStatistics {
	info := s.job.Info()
	st := info.Checkpoints
	summary := func(durations bool) StatsSummary {
		mn, mx, avg, p50, p90, p95, p99, p999 := st.Summary(durations)
		return StatsSummary{Min: mn, Max: mx, Avg: avg, P50: p50, P90: p90, P95: p95, P99: p99, P999: p999}
	}
	out := CheckpointingStatistics{
		Retained: []RetainedJSON{},
		Counts: CheckpointCounts{Restored: st.Restored, Total: st.Total, InProgress: st.InProgress,
			Completed: st.Completed, Failed: st.Failed},
		Summary: CheckpointSummaries{CheckpointedSize: summary(false), StateSize: summary(false),
			EndToEndDuration: summary(true)},
		Latest: LatestCheckpoints{Completed: checkpointStatistics(st.LatestCompleted),
			Savepoint: checkpointStatistics(st.LatestSavepoint), Failed: checkpointStatistics(st.LatestFailed)},
		History: []CheckpointStatistics{},
	}
	if r := st.LatestRestored; r != nil {
		out.Latest.Restored = &RestoredCheckpoint{ID: r.ID, RestoreTimestamp: r.Timestamp, IsSavepoint: r.IsSavepoint, ExternalPath: r.Path}
	}
	for i := range st.History {
		out.History = append(out.History, *checkpointStatistics(&st.History[i]))
	}
	for _, r := range info.Retained {
		out.Retained = append(out.Retained, RetainedJSON{ID: r.ID, Type: string(r.Kind), Format: string(r.Format), Path: r.Path,
			Completed: r.CompletionTimestamp, Size: r.Size, Added: r.Added, Incremental: r.Incremental, Changelog: r.Changelog, Owned: r.Owned, Restored: r.Restored})
	}
	return out
}

// checkpointByID finds a checkpoint's statistics by the id in a path.
func (s *Server) checkpointByID(idStr string) (engine.CheckpointStats, error) {
	id, err := strconv.ParseInt(idStr, 10, 64)
	if err != nil {
		return engine.CheckpointStats{}, errorf(http.StatusBadRequest, "Bad request, could not parse parameters: %q is not a checkpoint id.", idStr)
	}
	c, ok := s.job.CheckpointStats(id)
	if !ok {
		return engine.CheckpointStats{}, errorf(http.StatusNotFound, "Could not find checkpointing statistics for checkpoint %d.", id)
	}
	return c, nil
}

func (s *Server) checkpointDetails(idStr string) (any, int, error) {
	c, err := s.checkpointByID(idStr)
	if err != nil {
		return nil, 0, err
	}
	return checkpointStatistics(&c), http.StatusOK, nil
}

// taskCheckpointStats sums a checkpoint's subtask reports per job vertex
// (Flink's TaskCheckpointStatistics), with the subtasks' details; vertices
// names the job's vertices (nil: only those that reported).
func taskCheckpointStats(c *engine.CheckpointStats, vertices []engine.VertexInfo) map[string]*TaskCheckpointStatisticsWithSubtaskDetails {
	out := map[string]*TaskCheckpointStatisticsWithSubtaskDetails{}
	for _, v := range vertices {
		out[v.ID] = &TaskCheckpointStatisticsWithSubtaskDetails{TaskCheckpointStatistics: TaskCheckpointStatistics{
			ID: c.ID, Status: c.Status, NumSubtasks: v.Parallelism}, Subtasks: []SubtaskCheckpointStatistics{}}
	}
	for _, s := range c.Subtasks {
		t := out[s.VertexID]
		if t == nil {
			t = &TaskCheckpointStatisticsWithSubtaskDetails{TaskCheckpointStatistics: TaskCheckpointStatistics{ID: c.ID, Status: c.Status}}
			out[s.VertexID] = t
		}
		t.NumAcknowledgedSubtasks++
		t.NumSubtasks = max(t.NumSubtasks, t.NumAcknowledgedSubtasks)
		t.StateSize += s.StateSize
		t.CheckpointedSize += s.StateSize
		t.PersistedData += s.Persisted
		e2e := s.AckTimestamp - c.TriggerTimestamp
		t.LatestAckTimestamp = max(t.LatestAckTimestamp, s.AckTimestamp)
		t.EndToEndDuration = max(t.EndToEndDuration, e2e)
		t.Subtasks = append(t.Subtasks, SubtaskCheckpointStatistics{ClassName: "completed", Index: s.Subtask, Status: "completed",
			StateSize: s.StateSize, CheckpointedSize: s.StateSize, AckTimestamp: s.AckTimestamp, EndToEndDuration: e2e,
			Checkpoint:          CheckpointDuration{Sync: s.Sync.Milliseconds(), Async: s.Async.Milliseconds()},
			Alignment:           CheckpointAlignment{Persisted: s.Persisted, Duration: s.Alignment.Milliseconds()},
			UnalignedCheckpoint: s.Unaligned})
	}
	return out
}

// checkpointSubtasks is GET …/checkpoints/details/:checkpointid/subtasks/:vertexid.
func (s *Server) checkpointSubtasks(idStr, vertexID string) (any, int, error) {
	c, err := s.checkpointByID(idStr)
	if err != nil {
		return nil, 0, err
	}
	t := taskCheckpointStats(&c, s.job.Info().Vertices)[vertexID]
	if t == nil {
		return nil, 0, errorf(http.StatusNotFound, "There is no vertex %s in job %s.", vertexID, s.job.ID())
	}
	slices.SortFunc(t.Subtasks, func(a, b SubtaskCheckpointStatistics) int { return a.Index - b.Index })
	return t, http.StatusOK, nil
}

func (s *Server) checkpointConfig() CheckpointConfigInfo {
	info := s.job.Info()
	cfg := info.CheckpointConfig
	interval := cfg.Interval.Milliseconds()
	if !cfg.Enabled() {
		interval = 9223372036854775807 // Flink: Long.MAX_VALUE when periodic checkpoints are off
	}
	storage := "JobManagerCheckpointStorage"
	if cfg.Storage == checkpoint.StorageFilesystem {
		storage = "FileSystemCheckpointStorage"
	}
	// Flink's StateBackend.getName(): the class's simple name.
	backend := "HashMapStateBackend"
	if info.StateBackend == "rocksdb" {
		backend = "EmbeddedRocksDBStateBackend"
	}
	return CheckpointConfigInfo{Mode: strings.ToLower(string(cfg.Mode)), Interval: interval, Timeout: cfg.Timeout.Milliseconds(),
		MinPause: cfg.MinPause.Milliseconds(), MaxConcurrent: cfg.MaxConcurrent,
		Externalization: ExternalizationConfig{Enabled: cfg.Retention != checkpoint.NoExternalized,
			DeleteOnCancellation: cfg.Retention != checkpoint.RetainOnCancellation},
		StateBackend: backend, CheckpointStorage: storage,
		UnalignedCheckpoints: cfg.Unaligned, AlignedCheckpointTimeout: cfg.AlignedTimeout.Milliseconds(),
		TolerableFailedCheckpoints: cfg.TolerableFailed, CheckpointsAfterTasksFinish: cfg.AfterTasksFinish,
		StateChangelogEnabled: info.Changelog.Enabled, ChangelogStorage: info.Changelog.Storage,
		ChangelogPeriodicMaterializationInterval: info.Changelog.Interval.Milliseconds()}
}

func (s *Server) exceptions() JobExceptions {
	info := s.job.Info()
	entries := []ExceptionEntry{}
	for i := len(info.Exceptions) - 1; i >= 0; i-- {
		e := info.Exceptions[i]
		entries = append(entries, ExceptionEntry{ExceptionName: "org.apache.flink.util.FlinkException",
			Stacktrace: e.Message, Timestamp: e.Timestamp, TaskName: e.TaskName,
			FailureLabels: map[string]string{}, ConcurrentExceptions: []ExceptionEntry{}})
	}
	return JobExceptions{ExceptionHistory: ExceptionHistory{Entries: entries}}
}

func (s *Server) executionResult() JobExecutionResultResponse {
	info := s.job.Info()
	if !info.Status.IsGloballyTerminal() {
		return JobExecutionResultResponse{Status: QueueStatus{ID: "IN_PROGRESS"}}
	}
	app := map[engine.JobStatus]string{engine.StatusFinished: "SUCCEEDED", engine.StatusFailed: "FAILED", engine.StatusCanceled: "CANCELED"}[info.Status]
	res := &JobExecutionResult{ID: info.ID, ApplicationStatus: app, AccumulatorResults: map[string]any{},
		NetRuntime: info.EndTime - info.StartTime}
	if info.Status == engine.StatusFailed && len(info.Exceptions) > 0 {
		res.FailureCause = &FailureCause{Class: "org.apache.flink.runtime.client.JobExecutionException", StackTrace: info.Exceptions[len(info.Exceptions)-1].Message}
	}
	return JobExecutionResultResponse{Status: QueueStatus{ID: "COMPLETED"}, Result: res}
}

package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Client speaks Flink's REST API: to a gflink job's endpoint or to a Flink
// cluster.
type Client struct {
	// Base is the endpoint, e.g. http://127.0.0.1:8081.
	Base string
	// Token is sent as "Authorization: Bearer <token>" when set: a gflink
	// job's endpoint requires it (see Server). It is set only for an
	// endpoint known to be the job's, never sent to an arbitrary host.
	Token string
	// Prove makes every connection that carries Token prove first that
	// its peer holds the token (IdentityPath): for addresses read from
	// places others may write (ZooKeeper, the job registry).
	Prove bool
	// AllowUnproven lets Prove send the token to an endpoint that does not
	// know the proof at all (it answers 401 or 404 to IdentityPath): for a
	// registry entry already checked to be this user's running gflink
	// process, which may predate the proof. Never for addresses from
	// ZooKeeper.
	AllowUnproven bool
	proving       *http.Client // its connections prove themselves
	provingFor    string       // the Base and Token proving is for
	HTTP          *http.Client
	// Rediscover, when set, finds the endpoint again after this one
	// refused a connection: under high availability a killed leader's
	// address stays published until its session ends, and a standby takes
	// over at another. It returns the new endpoint and token, or an error
	// when none appears before ctx ends.
	Rediscover func(ctx context.Context, failed string) (base, token string, err error)
	// ImpostorWait bounds how long Rediscover may look for another
	// endpoint after this one failed the proof (0: it is not asked).
	// After a failover another process can hold the dead leader's port
	// until its address leaves ZooKeeper, at most a session timeout later;
	// an address that is still published after that was forged.
	ImpostorWait time.Duration
}

// NewClient makes a client for an address: host:port or a URL.
func NewClient(address string) *Client {
	base := address
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	// Flink's REST API never redirects; following one could carry the
	// token to another address.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{Base: strings.TrimSuffix(base, "/"), HTTP: &http.Client{CheckRedirect: noRedirect}}
}

// APIError is an error response of the REST API.
type APIError struct {
	Status int
	Msg    string
}

func (e *APIError) Error() string { return e.Msg }

// UnreachableError means the endpoint did not answer.
type UnreachableError struct {
	Base string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("Could not connect to the REST endpoint at %s: %v", e.Base, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

var javaClassPrefix = regexp.MustCompile(`^(?:[a-z][a-zA-Z0-9_]*\.)+[A-Z][a-zA-Z0-9_$]*: `)

// cleanMessage keeps the first line of a Flink error and drops a Java
// exception class in front of it.
func cleanMessage(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return javaClassPrefix.ReplaceAllString(strings.TrimSpace(s), "")
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	// One deadline for every endpoint that fails the proof: a forger who
	// keeps publishing new addresses cannot keep the client looking.
	impostorDeadline := time.Now().Add(c.ImpostorWait)
	for {
		err := c.attempt(ctx, method, path, body, out)
		// Only a refused connection or an endpoint that failed the proof
		// is retried: the request never reached the job, so sending it
		// again cannot do anything twice. The second is how a failover can
		// look too: another process (of any user) may take the dead
		// leader's port before its address leaves ZooKeeper.
		var ue *UnreachableError
		var imp *ImpostorError
		refused := errors.As(err, &ue) && errors.Is(err, syscall.ECONNREFUSED)
		impostor := errors.As(err, &imp) && c.ImpostorWait > 0
		if c.Rediscover == nil || ctx.Err() != nil || !refused && !impostor {
			return err
		}
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if impostor {
			rctx, cancel = context.WithDeadline(ctx, impostorDeadline)
		}
		base, token, rerr := c.Rediscover(rctx, c.Base)
		cancel()
		if rerr != nil {
			if imp != nil {
				return fmt.Errorf("%w\n%v", imp, rerr)
			}
			return &UnreachableError{Base: c.Base, Err: fmt.Errorf("%w; %v", ue.Err, rerr)}
		}
		c.Base, c.Token = strings.TrimSuffix(NewClient(base).Base, "/"), token
	}
}

func (c *Client) attempt(ctx context.Context, method, path string, body, out any) error {
	hc := c.HTTP
	if c.Token != "" && c.Prove {
		hc = c.provingClient()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var imp *ImpostorError
		if errors.As(err, &imp) {
			return imp
		}
		return &UnreachableError{Base: c.Base, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &UnreachableError{Base: c.Base, Err: err}
	}
	if resp.StatusCode >= 300 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && len(eb.Errors) > 0 {
			return &APIError{Status: resp.StatusCode, Msg: cleanMessage(eb.Errors[0])}
		}
		return &APIError{Status: resp.StatusCode, Msg: fmt.Sprintf("%s %s: %s", method, path, resp.Status)}
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: unexpected response: %w", method, path, err)
		}
	}
	return nil
}

// JobsOverview is GET /jobs/overview.
func (c *Client) JobsOverview(ctx context.Context) ([]JobOverview, error) {
	var out JobsOverview
	err := c.do(ctx, http.MethodGet, "/jobs/overview", nil, &out)
	return out.Jobs, err
}

// JobStatus is GET /jobs/:jobid/status.
func (c *Client) JobStatus(ctx context.Context, jobID string) (string, error) {
	var out struct {
		Status string `json:"status"`
	}
	err := c.do(ctx, http.MethodGet, "/jobs/"+jobID+"/status", nil, &out)
	return out.Status, err
}

// TriggerSavepoint is POST /jobs/:jobid/savepoints.
func (c *Client) TriggerSavepoint(ctx context.Context, jobID, targetDir, format string, cancelJob bool) (string, error) {
	req := SavepointTriggerRequest{CancelJob: cancelJob, FormatType: format}
	if targetDir != "" {
		req.TargetDirectory = &targetDir
	}
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, "/jobs/"+jobID+"/savepoints", req, &out)
	return out.RequestID, err
}

// Stop is POST /jobs/:jobid/stop.
func (c *Client) Stop(ctx context.Context, jobID, targetDir, format string, drain bool) (string, error) {
	req := StopRequest{Drain: drain, FormatType: format}
	if targetDir != "" {
		req.TargetDirectory = &targetDir
	}
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, "/jobs/"+jobID+"/stop", req, &out)
	return out.RequestID, err
}

// Cancel is PATCH /jobs/:jobid?mode=CANCEL. (Flink's own client sends
// "cancel"; its server parses the mode case-insensitively, and its OpenAPI
// description lists the upper-case names, so this is valid for both.)
func (c *Client) Cancel(ctx context.Context, jobID string) error {
	return c.do(ctx, http.MethodPatch, "/jobs/"+jobID+"?mode=CANCEL", nil, nil)
}

// TriggerCheckpoint is POST /jobs/:jobid/checkpoints.
func (c *Client) TriggerCheckpoint(ctx context.Context, jobID string, full bool) (string, error) {
	req := CheckpointTriggerRequest{CheckpointType: "CONFIGURED"}
	if full {
		req.CheckpointType = "FULL"
	}
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, "/jobs/"+jobID+"/checkpoints", req, &out)
	return out.RequestID, err
}

// Dispose is POST /savepoint-disposal.
func (c *Client) Dispose(ctx context.Context, path string) (string, error) {
	var out TriggerResponse
	err := c.do(ctx, http.MethodPost, "/savepoint-disposal", DisposalRequest{SavepointPath: path}, &out)
	return out.RequestID, err
}

// OperationError is a completed operation that failed.
type OperationError struct{ Msg string }

func (e *OperationError) Error() string { return e.Msg }

type rawOperation struct {
	Location       string        `json:"location"`
	CheckpointID   int64         `json:"checkpointId"`
	FailureCause   *FailureCause `json:"failure-cause"`
	FailureCauseCC *FailureCause `json:"failureCause"`
}

func (f *FailureCause) message() string {
	if f.StackTrace != "" {
		return cleanMessage(f.StackTrace)
	}
	return f.Class
}

// poll polls a status path with Flink's client back-off (10 ms doubling
// to 2 s) until the operation completes or ctx ends.
func (c *Client) poll(ctx context.Context, path string) (*rawOperation, error) {
	delay := 10 * time.Millisecond
	for {
		var res struct {
			Status    QueueStatus   `json:"status"`
			Operation *rawOperation `json:"operation"`
		}
		if err := c.do(ctx, http.MethodGet, path, nil, &res); err != nil {
			return nil, err
		}
		if res.Status.ID == "COMPLETED" {
			op := res.Operation
			if op == nil {
				op = &rawOperation{}
			}
			if fc := op.FailureCause; fc != nil {
				return nil, &OperationError{Msg: fc.message()}
			}
			if fc := op.FailureCauseCC; fc != nil {
				return nil, &OperationError{Msg: fc.message()}
			}
			return op, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// WaitSavepoint polls a savepoint or stop trigger until it completes and
// returns the savepoint's location.
func (c *Client) WaitSavepoint(ctx context.Context, jobID, triggerID string) (string, error) {
	op, err := c.poll(ctx, "/jobs/"+jobID+"/savepoints/"+triggerID)
	if err != nil {
		return "", err
	}
	return op.Location, nil
}

// WaitCheckpoint polls a checkpoint trigger and returns the checkpoint id.
func (c *Client) WaitCheckpoint(ctx context.Context, jobID, triggerID string) (int64, error) {
	op, err := c.poll(ctx, "/jobs/"+jobID+"/checkpoints/"+triggerID)
	if err != nil {
		return 0, err
	}
	return op.CheckpointID, nil
}

// WaitDisposal polls a disposal trigger.
func (c *Client) WaitDisposal(ctx context.Context, triggerID string) error {
	_, err := c.poll(ctx, "/savepoint-disposal/"+triggerID)
	return err
}

// CheckpointPath returns a checkpoint's external path, from
// GET /jobs/:jobid/checkpoints/details/:id ("" if it has none).
func (c *Client) CheckpointPath(ctx context.Context, jobID string, id int64) (string, error) {
	var out struct {
		ExternalPath string `json:"external_path"`
	}
	err := c.do(ctx, http.MethodGet, fmt.Sprintf("/jobs/%s/checkpoints/details/%d", jobID, id), nil, &out)
	if out.ExternalPath == "<checkpoint-not-externally-addressable>" {
		out.ExternalPath = ""
	}
	return out.ExternalPath, err
}

// IsNotFound reports whether err is a 404 of the REST API.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// Retained returns what a job keeps: gflink's "retained" extension, or, from
// a Flink cluster, the completed checkpoints and savepoints of its history
// that were not discarded (ownership then unknown: checkpoints are taken as
// the job's, savepoints as the user's).
func (c *Client) Retained(ctx context.Context, jobID string) ([]RetainedJSON, bool, error) {
	var out struct {
		Retained *[]RetainedJSON `json:"retained"`
		History  []struct {
			ID        int64  `json:"id"`
			Status    string `json:"status"`
			Type      string `json:"checkpoint_type"`
			Format    string `json:"savepointFormat"`
			Path      string `json:"external_path"`
			Trigger   int64  `json:"trigger_timestamp"`
			Duration  int64  `json:"end_to_end_duration"`
			Size      int64  `json:"state_size"`
			Savepoint bool   `json:"is_savepoint"`
			Discarded bool   `json:"discarded"`
		} `json:"history"`
	}
	if err := c.do(ctx, http.MethodGet, "/jobs/"+jobID+"/checkpoints", nil, &out); err != nil {
		return nil, false, err
	}
	if out.Retained != nil {
		return *out.Retained, true, nil
	}
	var rs []RetainedJSON
	for _, h := range out.History {
		if h.Status != "COMPLETED" || h.Discarded {
			continue
		}
		rs = append(rs, RetainedJSON{ID: h.ID, Type: h.Type, Format: h.Format, Path: h.Path,
			Completed: h.Trigger + h.Duration, Size: h.Size, Added: h.Size, Owned: !h.Savepoint})
	}
	return rs, false, nil
}

// CloseIdleConnections closes the client's idle keep-alive connections
// (and their goroutines).
func (c *Client) CloseIdleConnections() {
	c.HTTP.CloseIdleConnections()
	if c.proving != nil {
		c.proving.CloseIdleConnections()
	}
}

// JobMetrics is GET /jobs/:jobid/metrics?get=…: the values of the named
// job metrics that exist, by name.
func (c *Client) JobMetrics(ctx context.Context, jobID string, names ...string) (map[string]string, error) {
	var out []MetricValue
	if err := c.do(ctx, http.MethodGet, "/jobs/"+jobID+"/metrics?get="+url.QueryEscape(strings.Join(names, ",")), nil, &out); err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, v := range out {
		if v.Value != nil {
			m[v.ID] = *v.Value
		}
	}
	return m, nil
}

// SubtaskSums is GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics
// with agg=sum: each named task metric summed over the vertex's subtasks.
func (c *Client) SubtaskSums(ctx context.Context, jobID, vertexID string, names ...string) (map[string]float64, error) {
	var out []AggregatedMetric
	path := "/jobs/" + jobID + "/vertices/" + vertexID + "/subtasks/metrics?agg=sum&get=" + url.QueryEscape(strings.Join(names, ","))
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, a := range out {
		if a.Sum != nil {
			m[a.ID] = *a.Sum
		}
	}
	return m, nil
}

// JobPlan is GET /jobs/:jobid/plan: the job's vertices and their inputs.
func (c *Client) JobPlan(ctx context.Context, jobID string) ([]JobPlanNode, error) {
	var out struct {
		Plan JobPlan `json:"plan"`
	}
	err := c.do(ctx, http.MethodGet, "/jobs/"+jobID+"/plan", nil, &out)
	return out.Plan.Nodes, err
}

// SourceReadRate is the records per second a source vertex's sources
// read: its subtasks' first operators' numRecordsInPerSecond, found among
// the vertex's metrics (ids <subtask>.<operator>.<name>).
func (c *Client) SourceReadRate(ctx context.Context, jobID, vertexID string) (float64, error) {
	base := "/jobs/" + jobID + "/vertices/" + vertexID + "/metrics"
	var ids []MetricValue
	if err := c.do(ctx, http.MethodGet, base, nil, &ids); err != nil {
		return 0, err
	}
	var want []string
	for _, m := range ids {
		if strings.Count(m.ID, ".") == 2 && strings.HasSuffix(m.ID, ".numRecordsInPerSecond") {
			want = append(want, m.ID)
		}
	}
	if len(want) == 0 {
		return 0, nil
	}
	var vals []MetricValue
	if err := c.do(ctx, http.MethodGet, base+"?get="+url.QueryEscape(strings.Join(want, ",")), nil, &vals); err != nil {
		return 0, err
	}
	sum := 0.0
	for _, v := range vals {
		if v.Value != nil {
			if x, err := strconv.ParseFloat(*v.Value, 64); err == nil {
				sum += x
			}
		}
	}
	return sum, nil
}

package rest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// serve starts a server for j on a free loopback port.
func serve(t *testing.T, j *engine.Job, o ServerOptions) *Server {
	t.Helper()
	l, err := Listen("127.0.0.1", PortSpec{{0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(j, o)
	srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// send makes one request with an optional Authorization header and returns
// the status, the headers and the decoded error body, if any.
func send(t *testing.T, method, url, auth string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// flinkError decodes Flink's {"errors": [...]} and returns its message.
func flinkError(t *testing.T, body []byte) string {
	t.Helper()
	var eb ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || len(eb.Errors) != 1 {
		t.Fatalf("body %q is not Flink's error JSON", body)
	}
	return eb.Errors[0]
}

// noSavepointTaken checks that the job took no savepoint.
func noSavepointTaken(t *testing.T, j *engine.Job, dir string) {
	t.Helper()
	if sp := j.Info().Checkpoints.LatestSavepoint; sp != nil {
		t.Errorf("a savepoint was taken: %+v", sp)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the savepoint directory %s was created", dir)
	}
}

// TestHardening covers the endpoint's defences against other local users
// and misbehaving clients, on one running job.
func TestHardening(t *testing.T) {
	dir := t.TempDir()
	j := startJob(t, dir)
	defer func() {
		j.Cancel()
		j.Wait()
	}()
	// The checks below assert that refused requests leave the job RUNNING:
	// it must be RUNNING first (Submit returns while it may be CREATED).
	waitRunning(t, j)
	id := j.ID()
	spDir := filepath.Join(dir, "sp")
	savepointBody := `{"target-directory":"` + spDir + `","cancel-job":false}`

	t.Run("a request without the token or with a wrong one is refused with 401", func(t *testing.T) {
		srv := serve(t, j, ServerOptions{Token: testToken})
		for _, tc := range []struct{ auth, want string }{
			{"", "requires the job's token (Authorization: Bearer <token>)"},
			{"Basic " + testToken, "requires the job's token"},
			{"Bearer " + strings.Repeat("0", len(testToken)), "the token does not match"},
			{"Bearer " + testToken[:10], "the token does not match"},
		} {
			for _, r := range []struct{ method, path, body string }{
				{http.MethodGet, "/jobs/" + id + "/status", ""},
				{http.MethodGet, "/v1/jobs/overview", ""},
				{http.MethodGet, "/no/such/path", ""},
				{http.MethodPatch, "/jobs/" + id + "?mode=cancel", ""},
				{http.MethodPost, "/jobs/" + id + "/savepoints", savepointBody},
				{http.MethodPost, "/jobs/" + id + "/stop", `{"targetDirectory":"` + spDir + `"}`},
				{http.MethodPost, "/savepoint-disposal", `{"savepoint-path":"` + dir + `"}`},
			} {
				code, h, body := send(t, r.method, srv.Address()+r.path, tc.auth, strings.NewReader(r.body))
				if code != http.StatusUnauthorized || !strings.Contains(flinkError(t, body), tc.want) {
					t.Errorf("%s %s with %q: %d %s; want 401 with %q", r.method, r.path, tc.auth, code, body, tc.want)
				}
				if h.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: 401 without WWW-Authenticate", r.method, r.path)
				}
			}
		}
		if st := j.Status(); st != engine.StatusRunning {
			t.Fatalf("the job is %s after unauthenticated requests", st)
		}
		noSavepointTaken(t, j, spDir)
		// The right token, in any case of the scheme, is served.
		for _, auth := range []string{"Bearer " + testToken, "bearer " + testToken} {
			if code, _, body := send(t, http.MethodGet, srv.Address()+"/jobs/"+id+"/status", auth, nil); code != http.StatusOK {
				t.Errorf("with %q: %d %s", auth, code, body)
			}
		}
	})

	t.Run("a server makes its own token when given none", func(t *testing.T) {
		srv := serve(t, j, ServerOptions{})
		if len(srv.Token()) != 64 {
			t.Fatalf("token %q; want 64 hex digits", srv.Token())
		}
		if code, _, _ := send(t, http.MethodGet, srv.Address()+"/jobs", "", nil); code != http.StatusUnauthorized {
			t.Errorf("GET /jobs without the token: %d", code)
		}
		c := NewClient(srv.Address())
		c.Token = srv.Token()
		if _, err := c.JobStatus(context.Background(), id); err != nil {
			t.Errorf("the client with the token: %v", err)
		}
	})

	t.Run("with authentication disabled every request is served", func(t *testing.T) {
		srv := serve(t, j, ServerOptions{DisableAuthentication: true, Token: testToken})
		if srv.Token() != "" {
			t.Errorf("Token() = %q with authentication disabled", srv.Token())
		}
		if code, _, body := send(t, http.MethodGet, srv.Address()+"/jobs/"+id+"/status", "", nil); code != http.StatusOK {
			t.Errorf("GET status: %d %s", code, body)
		}
	})

	t.Run("a body over the limit is refused with 413 and triggers nothing", func(t *testing.T) {
		srv := serve(t, j, ServerOptions{Token: testToken, MaxContentLength: 1 << 10})
		huge := savepointBody + strings.Repeat(" ", 1<<10)
		for name, body := range map[string]io.Reader{
			"with a Content-Length": strings.NewReader(huge),
			// No length: refused while it is read.
			"chunked": io.MultiReader(strings.NewReader(huge)),
		} {
			code, _, resp := send(t, http.MethodPost, srv.Address()+"/jobs/"+id+"/savepoints", "Bearer "+testToken, body)
			if code != http.StatusRequestEntityTooLarge || !strings.Contains(flinkError(t, resp), "the body exceeds 1 kb (rest.server.max-content-length)") {
				t.Errorf("%s: %d %s; want 413", name, code, resp)
			}
		}
		noSavepointTaken(t, j, spDir)
		// The default limit is 1 MiB: 100 MB of whitespace once took a
		// savepoint.
		def := serve(t, j, ServerOptions{Token: testToken})
		code, _, resp := send(t, http.MethodPost, def.Address()+"/jobs/"+id+"/savepoints", "Bearer "+testToken,
			io.MultiReader(strings.NewReader(savepointBody), bytes.NewReader(bytes.Repeat([]byte{' '}, 1<<20))))
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(flinkError(t, resp), "1 mb") {
			t.Errorf("1 MiB of whitespace: %d %s; want 413", code, resp)
		}
		noSavepointTaken(t, j, spDir)
	})

	t.Run("a client that sends its body too slowly is disconnected", func(t *testing.T) {
		srv := serve(t, j, ServerOptions{Token: testToken, ReadTimeout: 100 * time.Millisecond})
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Address(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Headers and the start of a body that never ends.
		io.WriteString(conn, "POST /jobs/"+id+"/savepoints HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testToken+
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"+savepointBody[:10])
		// The server must close the connection; the deadline only keeps a
		// broken server from hanging the test.
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadAll(bufio.NewReader(conn))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server kept a stalled request open for 30 s; want it dropped after rest.server.read-timeout")
		}
		noSavepointTaken(t, j, spDir)
	})

	t.Run("routing errors are Flink's JSON", func(t *testing.T) {
		srv := serve(t, j, ServerOptions{Token: testToken})
		auth := "Bearer " + testToken
		for _, tc := range []struct {
			method, path string
			code         int
			want         string
		}{
			{http.MethodGet, "/jobs/" + id + "/status/", 200, ""},
			{http.MethodGet, "/v1/jobs/" + id + "/status", 200, ""},
			{http.MethodGet, "/v1/", 404, "Not found: /v1/"},
			{http.MethodGet, "/v1x/jobs", 404, "Not found"},
			{http.MethodPost, "/jobs/" + id + "/status", 405, "Not allowed: POST /jobs/" + id + "/status"},
			{http.MethodDelete, "/jobs/overview", 405, "Not allowed"},
			{http.MethodGet, "/jobs/" + id + "/nothing", 404, "Not found"},
			{http.MethodGet, "/jobs/xyz/status", 400, `Cannot parse JobID from "xyz"`},
			{http.MethodGet, "/jobs/0123456789abcdef0123456789abcdef/checkpoints", 404, "Job 0123456789abcdef0123456789abcdef not found"},
			{http.MethodGet, "/jobs/" + id + "/checkpoints/details/x", 400, `"x" is not a checkpoint id`},
		} {
			code, h, body := send(t, tc.method, srv.Address()+tc.path, auth, nil)
			if code != tc.code {
				t.Errorf("%s %s: %d %s; want %d", tc.method, tc.path, code, body, tc.code)
				continue
			}
			if tc.want != "" && !strings.Contains(flinkError(t, body), tc.want) {
				t.Errorf("%s %s: %s; want %q", tc.method, tc.path, body, tc.want)
			}
			if code == 405 && h.Get("Allow") == "" {
				t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
			}
		}
	})

	t.Run("disposal refuses a crafted _metadata and deletes nothing", func(t *testing.T) {
		srv := serve(t, j, ServerOptions{Token: testToken})
		c := NewClient(srv.Address())
		c.Token = testToken
		root := t.TempDir()
		victim := filepath.Join(root, "victim")
		os.MkdirAll(victim, 0o700)
		os.WriteFile(filepath.Join(victim, "secret"), []byte("s"), 0o600)
		sp := filepath.Join(root, "savepoint-012345-6789abcdef01")
		os.MkdirAll(sp, 0o700)
		os.WriteFile(filepath.Join(sp, "mine"), []byte("m"), 0o600)
		os.Symlink(victim, filepath.Join(sp, "link"))
		md := &savepoint.Metadata{JobID: "0123456789abcdef0123456789abcdef", CheckpointID: 1, Kind: savepoint.KindSavepoint,
			Operators: []savepoint.OperatorState{{UID: "a", Parallelism: 1, MaxParallelism: 1, Subtasks: []savepoint.SubtaskState{
				{Index: 0, Operator: &savepoint.StreamStateHandle{Path: "mine"}},
				{Index: 1, Operator: &savepoint.StreamStateHandle{Path: "link/secret"}},
			}}}}
		if err := savepoint.WriteMetadata(vfs.Default, sp, md); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		trigger, err := c.Dispose(ctx, sp)
		if err != nil {
			t.Fatal(err)
		}
		err = c.WaitDisposal(ctx, trigger)
		if err == nil || !strings.Contains(err.Error(), "names the state file 'link/secret', which goes through the symbolic link") {
			t.Fatalf("disposal of a crafted savepoint: %v; want a refusal naming the entry", err)
		}
		for _, p := range []string{filepath.Join(victim, "secret"), filepath.Join(sp, "_metadata"), filepath.Join(sp, "mine")} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("a refused disposal deleted %s", p)
			}
		}
	})
}

// chanListener hands out the connections sent on conns.
type chanListener struct {
	conns  chan net.Conn
	closed chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}
func (l *chanListener) Close() error   { close(l.closed); return nil }
func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestLimitListenerWaitsForAFreeSlot: beyond the limit, Accept waits until
// a connection closes; closing the listener ends the wait.
func TestLimitListenerWaitsForAFreeSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl := &chanListener{conns: make(chan net.Conn, 4), closed: make(chan struct{})}
		for range 4 {
			a, b := net.Pipe()
			defer b.Close()
			fl.conns <- a
		}
		l := LimitListener(fl, 2)
		c1, _ := l.Accept()
		c2, _ := l.Accept()
		accepted := make(chan net.Conn, 1)
		go func() {
			if c, err := l.Accept(); err == nil {
				accepted <- c
			}
		}()
		synctest.Wait()
		select {
		case <-accepted:
			t.Fatal("a third connection was accepted while two were open")
		default:
		}
		c1.Close()
		c1.Close() // a second Close frees nothing more
		synctest.Wait()
		var c3 net.Conn
		select {
		case c3 = <-accepted:
		default:
			t.Fatal("no connection accepted after one of two closed")
		}
		defer c3.Close()
		defer c2.Close()
		errc := make(chan error, 1)
		go func() {
			_, err := l.Accept()
			errc <- err
		}()
		synctest.Wait()
		l.Close()
		if err := <-errc; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
	})
}

// TestServerOptionsFromConfig: the rest.* keys reach the server.
func TestServerOptionsFromConfig(t *testing.T) {
	c := configWith(map[string]string{"rest.authentication.enabled": "false", "rest.server.max-content-length": "4 kb",
		"rest.server.read-timeout": "2 s", "rest.server.max-connections": "3"})
	o, err := ServerOptionsFrom(c)
	if err != nil {
		t.Fatal(err)
	}
	if !o.DisableAuthentication || o.MaxContentLength != 4<<10 || o.ReadTimeout != 2*time.Second || o.MaxConnections != 3 ||
		o.WriteTimeout != 30*time.Second || o.IdleTimeout != time.Minute {
		t.Errorf("options %+v", o)
	}
	for k, v := range map[string]string{"rest.server.read-timeout": "0 s", "rest.server.max-connections": "0", "rest.authentication.enabled": "maybe"} {
		if _, err := ServerOptionsFrom(configWith(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s: %s: %v; want an error naming the key", k, v, err)
		}
	}
}

func configWith(kv map[string]string) *config.Configuration {
	c := config.New()
	for k, v := range kv {
		c.SetString(k, v, "test")
	}
	return c
}

// waitRunning waits, up to a deadline, until j is RUNNING.
func waitRunning(t *testing.T, j *engine.Job) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for j.Status() != engine.StatusRunning {
		if time.Now().After(deadline) {
			t.Fatalf("the job is %s, not RUNNING, after 20 s", j.Status())
		}
		select {
		case <-j.Done():
			t.Fatalf("the job ended %s before it ran", j.Status())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

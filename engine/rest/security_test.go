package rest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/internal/testutil"
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
		conn.SetReadDeadline(testutil.Deadline(30 * time.Second))
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

// TestGateEvictsTheOldestWaitingConnectionOfThePeer: Accept never waits;
// beyond the limit a peer's oldest connection that has not authenticated
// is closed — never another peer's, and never an admitted one.
func TestGateEvictsTheOldestWaitingConnectionOfThePeer(t *testing.T) {
	fl := &chanListener{conns: make(chan net.Conn, 8), closed: make(chan struct{})}
	peerOfConn := map[net.Conn]string{}
	var peers []net.Conn
	for i := range 6 {
		a, b := net.Pipe()
		peers = append(peers, b)
		defer b.Close()
		peerOfConn[a] = "attacker"
		if i == 0 {
			peerOfConn[a] = "user"
		}
		fl.conns <- a
	}
	g := newGate(fl, 2)
	g.peerOf = func(c net.Conn) string { return peerOfConn[c] }
	defer g.Close()
	var conns []*gatedConn
	for i := range 4 {
		c, err := g.Accept()
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c.(*gatedConn))
		if i == 1 {
			conns[1].admit() // authenticated: never evicted
		}
	}
	// The user's 0 waits; the attacker's 1 was admitted, 2 and 3 wait.
	c5, _ := g.Accept() // the attacker's third waiting one: 2 goes
	defer c5.Close()
	open := func(i int) bool {
		go conns[i].Read(make([]byte, 1))
		_, err := peers[i].Write([]byte("x"))
		return err == nil
	}
	if open(2) {
		t.Error("the attacker's oldest waiting connection is still open")
	}
	if !open(0) || !open(1) || !open(3) {
		t.Error("a connection of another peer, an admitted one or a newer one was closed")
	}
	if n, m := g.waiting("attacker"), g.waiting("user"); n != 2 || m != 1 {
		t.Errorf("waiting: attacker %d, user %d; want 2 and 1", n, m)
	}
	for _, c := range conns {
		c.Close()
	}
	if n := g.waiting(""); n != 1 {
		t.Errorf("%d connections waiting after closing; want 1 (the fifth)", n)
	}
}

// TestPeerOfALoopbackConnectionIsItsUser: a local client is told apart by
// the user that owns its socket.
func TestPeerOfALoopbackConnectionIsItsUser(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if runtime.GOOS != "linux" {
		t.Skip("only Linux tells a socket's owner: peers are told apart by address")
	}
	if got, want := peerOf(s), fmt.Sprintf("uid %d", os.Geteuid()); got != want {
		t.Errorf("peerOf = %q; want %q", got, want)
	}
}

// slowlorisEnv, set, makes the test binary a slowloris attacker of that
// address (see TestMain).
const slowlorisEnv = "GFLINK_TEST_SLOWLORIS"

// slowloris holds 300 connections to addr that never finish their
// headers, opening a new one whenever one is dropped, until its stdin
// closes; it prints "ready" once all are open.
func slowloris(addr string) {
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	for range 300 {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for ctx.Err() == nil {
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", addr)
				if err == nil {
					io.WriteString(c, "GET /jobs/overview HTTP/1.1\r\nHost: x\r\n")
					context.AfterFunc(ctx, func() { c.Close() })
				}
				if first {
					ready.Done()
					first = false
				}
				if err == nil {
					io.Copy(io.Discard, c) // until the server drops it
					c.Close()
				}
			}
		}()
	}
	ready.Wait()
	fmt.Println("ready")
	wg.Wait()
}

// TestSlowlorisDoesNotLockOutTheUser: another local user holds hundreds
// of connections that never finish their headers, reconnecting at once
// whenever one is dropped, while the job's user runs commands: every
// authenticated call succeeds. The attacker is this test binary run as
// nobody (root is needed to start it so).
func TestSlowlorisDoesNotLockOutTheUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the attacking process as another user")
	}
	j := startJob(t, t.TempDir())
	defer func() {
		j.Cancel()
		j.Wait()
	}()
	waitRunning(t, j)
	srv := serve(t, j, ServerOptions{Token: testToken})
	// A copy of this binary that nobody may run.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "gflink-attacker-") // t.TempDir's parent is owner-only
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "attacker")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), slowlorisEnv+"="+strings.TrimPrefix(srv.Address(), "http://"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("the attacker did not start: %q, %v", line, err)
	}
	c := NewClient(srv.Address())
	c.Token = testToken
	c.Prove = true
	defer c.CloseIdleConnections()
	for i := range 20 {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := c.JobStatus(cctx, j.ID())
		cancel()
		if err != nil || st != "RUNNING" {
			t.Fatalf("call %d during a slowloris of 300 connections: %q, %v; want RUNNING", i, st, err)
		}
		c.CloseIdleConnections() // a new connection each time, as a new CLI process makes
	}
	if n := srv.gate.waiting("uid 65534"); n > 32 {
		t.Errorf("the attacker holds %d unauthenticated connections; want at most rest.server.max-connections (32)", n)
	}
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
	deadline := testutil.Deadline(20 * time.Second)
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

// TestConfigurationIsServedMasked: the job's configuration and arguments
// are served as Flink serves them, with every secret masked.
func TestConfigurationIsServedMasked(t *testing.T) {
	j := startJob(t, t.TempDir())
	defer func() {
		j.Cancel()
		j.Wait()
	}()
	conf := configWith(map[string]string{"s3.secret-key": "hunter2", "high-availability.zookeeper.client.digest-credentials": "u:hunter2",
		"parallelism.default": "2"})
	args := []string{"--input", "kafka://b:9092/lines?group=wc&sasl.password=hunter2", "--properties.sasl.jaas.config",
		`ScramLoginModule required username="wc" password="hunter2";`, "--bounded", "--group", "wc"}
	srv := serve(t, j, ServerOptions{Token: testToken, Config: conf, Arguments: args})
	code, body := get(t, srv.Address(), "/jobmanager/config")
	if code != 200 || bytes.Contains(body, []byte("hunter2")) || !bytes.Contains(body, []byte(`{"key":"s3.secret-key","value":"******"}`)) ||
		!bytes.Contains(body, []byte(`{"key":"parallelism.default","value":"2"}`)) {
		t.Errorf("GET /jobmanager/config: %d %s", code, body)
	}
	code, body = get(t, srv.Address(), "/jobs/"+j.ID()+"/config")
	var jc JobConfigInfo
	if code != 200 || json.Unmarshal(body, &jc) != nil || bytes.Contains(body, []byte("hunter2")) {
		t.Fatalf("GET /jobs/:jobid/config: %d %s", code, body)
	}
	want := map[string]string{"input": "kafka://b:9092/lines?group=wc&sasl.password=******", "properties.sasl.jaas.config": "******",
		"bounded": "__NO_VALUE_KEY", "group": "wc"}
	if jc.JobID != j.ID() || !maps.Equal(jc.ExecutionConfig.UserConfig, want) {
		t.Errorf("job config %+v; want user-config %v", jc, want)
	}
}

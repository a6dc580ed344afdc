package rest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// tokenCatcher is a listener a forged address points to: it records every
// Authorization header it is sent, and answers the identity request with
// next (nil: 404).
type tokenCatcher struct {
	mu   sync.Mutex
	auth []string
	next http.Handler
}

func (c *tokenCatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	if a := r.Header.Get("Authorization"); a != "" {
		c.auth = append(c.auth, a)
	}
	c.mu.Unlock()
	if c.next != nil {
		c.next.ServeHTTP(w, r)
		return
	}
	http.NotFound(w, r)
}

func (c *tokenCatcher) caught() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.auth
}

// TestTokenGoesOnlyToAnEndpointThatProvesItself: a client that reads an
// address from a place others may write (ZooKeeper, the registry) sends
// its token only to the job's own endpoint. A listener that does not
// answer the proof, one that answers like an endpoint without
// authentication, and one that relays the proof from the real endpoint
// all get nothing.
func TestTokenGoesOnlyToAnEndpointThatProvesItself(t *testing.T) {
	j := startJob(t, t.TempDir())
	defer func() {
		j.Cancel()
		j.Wait()
	}()
	waitRunning(t, j)
	real := serve(t, j, ServerOptions{Token: testToken})
	relay := func(w http.ResponseWriter, r *http.Request) {
		// Ask the real endpoint for the proof of the nonce sent here.
		resp, err := http.Get(real.Address() + r.URL.RequestURI())
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}
	noAuth := func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"authentication":false}`)
	}
	for name, tc := range map[string]struct {
		handler http.HandlerFunc
		reason  string
	}{
		"a plain listener":               {nil, "answers 404"},
		"one that claims no token":       {noAuth, "it says it requires no token"},
		"one that relays the real proof": {relay, "its proof does not match the token"},
	} {
		t.Run(name, func(t *testing.T) {
			catcher := &tokenCatcher{}
			if tc.handler != nil {
				catcher.next = tc.handler
			}
			fake := httptest.NewServer(catcher)
			defer fake.Close()
			c := NewClient(fake.URL)
			c.Token, c.Prove = testToken, true
			defer c.CloseIdleConnections()
			_, err := c.JobStatus(context.Background(), j.ID())
			var imp *ImpostorError
			if !errors.As(err, &imp) || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), "nothing was sent to it") {
				t.Fatalf("JobStatus at a forged address: %v; want a refusal saying %q", err, tc.reason)
			}
			if got := catcher.caught(); len(got) > 0 {
				t.Fatalf("the forged endpoint received the token: %q", got)
			}
		})
	}
	t.Run("the job's endpoint proves itself and gets the token", func(t *testing.T) {
		c := NewClient(real.Address())
		c.Token, c.Prove = testToken, true
		defer c.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if st, err := c.JobStatus(ctx, j.ID()); err != nil || st != "RUNNING" {
			t.Fatalf("JobStatus at the real endpoint: %q, %v", st, err)
		}
	})
	t.Run("an impostor at a failed-over leader's address is passed over for the new leader", func(t *testing.T) {
		// Under high availability another process can take the dead
		// leader's port before its address leaves ZooKeeper: the client
		// sends nothing there and follows the cluster to the new leader.
		catcher := &tokenCatcher{}
		fake := httptest.NewServer(catcher)
		defer fake.Close()
		c := NewClient(fake.URL)
		c.Token, c.Prove, c.ImpostorWait = testToken, true, time.Minute
		var asked []string
		c.Rediscover = func(_ context.Context, failed string) (string, string, error) {
			asked = append(asked, failed)
			return real.Address(), testToken, nil
		}
		defer c.CloseIdleConnections()
		if st, err := c.JobStatus(context.Background(), j.ID()); err != nil || st != "RUNNING" {
			t.Fatalf("JobStatus through a failover: %q, %v", st, err)
		}
		if len(asked) != 1 || asked[0] != fake.URL {
			t.Errorf("rediscovered after %q; want once, after %s", asked, fake.URL)
		}
		if got := catcher.caught(); len(got) > 0 {
			t.Fatalf("the impostor received the token: %q", got)
		}
		// No new leader: the refusal, and why none was found.
		c = NewClient(fake.URL)
		c.Token, c.Prove, c.ImpostorWait = testToken, true, 50*time.Millisecond
		c.Rediscover = func(ctx context.Context, _ string) (string, string, error) {
			<-ctx.Done() // bounded by ImpostorWait
			return "", "", errors.New("no other leader appeared")
		}
		defer c.CloseIdleConnections()
		_, err := c.JobStatus(context.Background(), j.ID())
		if !errors.As(err, new(*ImpostorError)) || !strings.Contains(err.Error(), "no other leader appeared") {
			t.Fatalf("JobStatus with no new leader: %v; want the refusal and the rediscovery's error", err)
		}
	})
	t.Run("a byte-for-byte TCP relay does not prove", func(t *testing.T) {
		// The strongest relay: every byte both ways. On its own
		// connection the endpoint proves its own address, not the
		// relay's, which the client is connected to.
		relay := tcpRelay(t, strings.TrimPrefix(real.Address(), "http://"))
		c := NewClient("http://" + relay)
		c.Token, c.Prove = testToken, true
		defer c.CloseIdleConnections()
		if _, err := c.JobStatus(context.Background(), j.ID()); !errors.As(err, new(*ImpostorError)) {
			t.Fatalf("JobStatus through a relay: %v; want a refusal", err)
		}
	})
	t.Run("another spelling of the endpoint's address proves", func(t *testing.T) {
		// localhost for 127.0.0.1: the proof is of the connection, not of
		// a name.
		u, _ := url.Parse(real.Address())
		_, port, _ := net.SplitHostPort(u.Host)
		c := NewClient("http://localhost:" + port)
		c.Token, c.Prove = testToken, true
		defer c.CloseIdleConnections()
		if st, err := c.JobStatus(context.Background(), j.ID()); err != nil || st != "RUNNING" {
			t.Fatalf("JobStatus at localhost: %q, %v", st, err)
		}
	})
	t.Run("an endpoint bound to every address proves the one reached", func(t *testing.T) {
		l, err := Listen("0.0.0.0", PortSpec{{0, 0}})
		if err != nil {
			t.Fatal(err)
		}
		wild := NewServer(j, ServerOptions{Token: testToken})
		wild.Serve(l)
		defer wild.Close()
		_, port, _ := net.SplitHostPort(l.Addr().String())
		c := NewClient("http://127.0.0.1:" + port)
		c.Token, c.Prove = testToken, true
		defer c.CloseIdleConnections()
		if st, err := c.JobStatus(context.Background(), j.ID()); err != nil || st != "RUNNING" {
			t.Fatalf("JobStatus at 127.0.0.1 of a server on 0.0.0.0: %q, %v", st, err)
		}
		// A published "0.0.0.0:port" reaches whatever listens on the
		// client's machine; through a relay there, the proof fails.
		relay := tcpRelay(t, "127.0.0.1:"+port)
		c2 := NewClient("http://" + relay)
		c2.Token, c2.Prove = testToken, true
		defer c2.CloseIdleConnections()
		if _, err := c2.JobStatus(context.Background(), j.ID()); !errors.As(err, new(*ImpostorError)) {
			t.Fatalf("through a relay to a server on 0.0.0.0: %v; want a refusal", err)
		}
	})
	t.Run("an older gflink's endpoint gets the token only when allowed", func(t *testing.T) {
		// One that asks for the token at /gflink/identity too (401).
		old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+testToken {
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"errors":["Unauthorized"]}`)
				return
			}
			io.WriteString(w, `{"status":"RUNNING"}`)
		}))
		defer old.Close()
		c := NewClient(old.URL)
		c.Token, c.Prove = testToken, true
		defer c.CloseIdleConnections()
		if _, err := c.JobStatus(context.Background(), j.ID()); !errors.As(err, new(*ImpostorError)) {
			t.Fatalf("an unproven endpoint, not allowed: %v; want a refusal", err)
		}
		c.AllowUnproven = true
		c.CloseIdleConnections()
		if st, err := c.JobStatus(context.Background(), j.ID()); err != nil || st != "RUNNING" {
			t.Fatalf("an unproven endpoint, allowed (a registered job of an older gflink): %q, %v", st, err)
		}
	})
}

// tcpRelay forwards every connection to target, byte for byte, until the
// test ends; it returns its address.
func tcpRelay(t *testing.T, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(up, c); up.Close() }()
			go func() { defer wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

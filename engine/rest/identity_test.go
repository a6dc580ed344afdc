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
	t.Run("another spelling of the endpoint's address does not prove", func(t *testing.T) {
		// localhost instead of 127.0.0.1: the proof binds the address the
		// endpoint publishes, so a client told another one refuses.
		u, _ := url.Parse(real.Address())
		_, port, _ := net.SplitHostPort(u.Host)
		c := NewClient("http://localhost:" + port)
		c.Token, c.Prove = testToken, true
		defer c.CloseIdleConnections()
		if _, err := c.JobStatus(context.Background(), j.ID()); !errors.As(err, new(*ImpostorError)) {
			t.Fatalf("JobStatus at another spelling of the address: %v; want a refusal", err)
		}
	})
}

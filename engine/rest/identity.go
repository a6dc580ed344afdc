package rest

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// IdentityPath is gflink's own endpoint (not Flink's) where a job's REST
// endpoint proves that it holds the token before a client sends it: the
// client sends a fresh nonce on a new connection; the endpoint answers with
// an HMAC, keyed by the token, of the nonce and of the IP address and port
// that connection reached on its side, which the client checks against the
// address it is connected to. A listener elsewhere — at an address that
// ZooKeeper or a registry entry was made to name — can neither compute the
// proof nor get it from the real endpoint by relaying the nonce: on the
// relay's own connection the real endpoint proves its own address, not the
// relay's. (Binding the proof to an address string instead would not do:
// a published 0.0.0.0 or 127.0.0.1 names another machine for each client.)
// A client behind address translation sees another address than the
// endpoint does, and is refused.
const IdentityPath = "/gflink/identity"

// identityProof is the proof an endpoint reached at address gives for
// nonce.
func identityProof(token, nonce string, address net.Addr) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("gflink REST identity\x00" + nonce + "\x00" + canonicalAddr(address)))
	return hex.EncodeToString(m.Sum(nil))
}

// canonicalAddr spells a TCP address one way on both ends: an IPv4
// address as IPv4 even when it came through an IPv6 socket.
func canonicalAddr(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := t.IP
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(t.Port))
}

// identityResponse is the answer at IdentityPath.
type identityResponse struct {
	Proof string `json:"proof,omitempty"`
	// Authentication is false on an endpoint that requires no token.
	Authentication bool `json:"authentication"`
}

// serveIdentity answers IdentityPath without authentication: proving
// costs the endpoint one HMAC and reveals nothing of the token.
func (s *Server) serveIdentity(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, errorf(http.StatusMethodNotAllowed, "Not allowed: %s %s", r.Method, r.URL.Path))
		return
	}
	nonce := r.URL.Query().Get("nonce")
	if b, err := hex.DecodeString(nonce); err != nil || len(b) < 16 || len(b) > 64 {
		writeError(w, errorf(http.StatusBadRequest, "Bad request: nonce must be 32 to 128 hexadecimal digits."))
		return
	}
	if s.token == "" {
		writeJSON(w, http.StatusOK, identityResponse{})
		return
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		writeError(w, errorf(http.StatusInternalServerError, "the connection's address is unknown"))
		return
	}
	writeJSON(w, http.StatusOK, identityResponse{Proof: identityProof(s.token, nonce, local), Authentication: true})
}

// ImpostorError: the endpoint could not prove that it is the one the
// token belongs to, and the token was not sent.
type ImpostorError struct {
	Base, Reason string
	// Unproven: the endpoint does not know the proof at all (a gflink
	// from before it, or a Flink cluster), as opposed to failing it.
	Unproven bool
}

func (e *ImpostorError) Error() string {
	return fmt.Sprintf("Refusing to send the job's token to %s: it did not prove that it is the job's endpoint (%s). Its address may have been forged (in ZooKeeper, or in a registry entry); nothing was sent to it.", e.Base, e.Reason)
}

// provingClient is the HTTP client for requests that carry the token to
// an endpoint that must prove itself (Client.Prove): every connection it
// opens first asks for the proof, on that connection, and is used only if
// the proof holds. Binding the proof to the connection matters: an
// endpoint that proved itself can die between two requests, and whoever
// takes its port then gets a new connection, which has to prove itself
// again.
func (c *Client) provingClient() *http.Client {
	key := fmt.Sprintf("%s\x00%s\x00%v", c.Base, c.Token, c.AllowUnproven)
	if c.proving != nil && c.provingFor == key {
		return c.proving
	}
	if c.proving != nil {
		c.proving.CloseIdleConnections()
	}
	base, token, allowUnproven := c.Base, c.Token, c.AllowUnproven
	host := strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")
	dialer := &net.Dialer{Timeout: 30 * time.Second}
	tr := &http.Transport{
		Proxy: nil, // the proof is the endpoint's, not a proxy's
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := proveOn(ctx, conn, base, host, token); err != nil {
				var imp *ImpostorError
				if allowUnproven && errors.As(err, &imp) && imp.Unproven {
					return conn, nil
				}
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
	c.proving = &http.Client{Transport: tr, CheckRedirect: c.HTTP.CheckRedirect}
	c.provingFor = key
	return c.proving
}

// proveOn asks for the proof of identity as the first request on conn,
// and checks it. An endpoint that says it requires no token is refused
// too: the client holds a token because its configuration says the job
// requires one (rest.authentication.enabled), and an impostor would say
// anything.
func proveOn(ctx context.Context, conn net.Conn, base, host, token string) error {
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	} else {
		conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	defer conn.SetDeadline(time.Time{})
	nb := make([]byte, 32)
	rand.Read(nb)
	nonce := hex.EncodeToString(nb)
	if _, err := fmt.Fprintf(conn, "GET %s?nonce=%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: gflink\r\n\r\n", IdentityPath, nonce, host); err != nil {
		return err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return &ImpostorError{Base: base, Reason: fmt.Sprintf("no HTTP answer to %s: %v", IdentityPath, err)}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if err != nil {
		return &ImpostorError{Base: base, Reason: fmt.Sprintf("reading its answer to %s: %v", IdentityPath, err)}
	}
	if br.Buffered() > 0 || resp.Close {
		return &ImpostorError{Base: base, Reason: fmt.Sprintf("its answer to %s does not leave the connection usable", IdentityPath)}
	}
	var ir identityResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &ir) != nil {
		// 401 or 404: it knows no proof (a gflink job started before the
		// proof existed asks for the token even here).
		unproven := resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound
		return &ImpostorError{Base: base, Reason: fmt.Sprintf("it answers %s to %s", resp.Status, IdentityPath), Unproven: unproven}
	}
	if !ir.Authentication {
		return &ImpostorError{Base: base, Reason: "it says it requires no token; if the job runs with rest.authentication.enabled: false, give the command -Drest.authentication.enabled=false too"}
	}
	if !hmac.Equal([]byte(identityProof(token, nonce, conn.RemoteAddr())), []byte(ir.Proof)) {
		return &ImpostorError{Base: base, Reason: "its proof does not match the token"}
	}
	return nil
}

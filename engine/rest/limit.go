package rest

import (
	"container/list"
	"context"
	"net"
	"sync"
)

// gate bounds the connections the endpoint keeps for clients that have not
// yet proven who they are, without ever making the job's user wait for
// them. Accept never blocks on a limit: a connection is held as "waiting"
// until a request on it authenticates (admitConn). Waiting connections are
// counted per peer (peerOf: the local user that owns the client's socket,
// or a remote client's IP address), at most n each; when a peer opens
// another, its own oldest waiting one is closed. Slow clients that never
// send a whole request (a slowloris), however fast they reconnect, thus
// hold at most n connections of their own and never one of another
// user's; the header timeout cuts them off besides. Connections that
// authenticated are not counted: only the token's holder has them. Past
// maxPeers × n waiting connections in all (many remote addresses), the
// oldest of the peer holding most is closed.
type gate struct {
	net.Listener
	n      int
	peerOf func(net.Conn) string
	mu     sync.Mutex
	peers  map[string]*list.List // of *gatedConn, oldest first
	total  int
}

// maxPeers bounds the waiting connections of all peers together, as a
// multiple of the per-peer limit.
const maxPeers = 16

func newGate(l net.Listener, n int) *gate {
	return &gate{Listener: l, n: n, peerOf: peerOf, peers: map[string]*list.List{}}
}

func (g *gate) Accept() (net.Conn, error) {
	c, err := g.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &gatedConn{Conn: c, g: g, peer: g.peerOf(c)}
	var evict []*gatedConn
	g.mu.Lock()
	q := g.peers[gc.peer]
	if q == nil {
		q = list.New()
		g.peers[gc.peer] = q
	}
	gc.elem = q.PushBack(gc)
	g.total++
	if q.Len() > g.n {
		evict = append(evict, g.removeLocked(q.Front().Value.(*gatedConn)))
	}
	if g.total > maxPeers*g.n {
		var most *list.List
		for _, l := range g.peers {
			if most == nil || l.Len() > most.Len() {
				most = l
			}
		}
		evict = append(evict, g.removeLocked(most.Front().Value.(*gatedConn)))
	}
	g.mu.Unlock()
	for _, e := range evict {
		e.Conn.Close()
	}
	return gc, nil
}

// removeLocked takes c out of the waiting connections.
func (g *gate) removeLocked(c *gatedConn) *gatedConn {
	if c.elem == nil {
		return c
	}
	q := g.peers[c.peer]
	q.Remove(c.elem)
	c.elem = nil
	g.total--
	if q.Len() == 0 {
		delete(g.peers, c.peer)
	}
	return c
}

// waiting is how many connections of peer wait for an authenticated
// request ("" for all of them).
func (g *gate) waiting(peer string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if peer == "" {
		return g.total
	}
	if q := g.peers[peer]; q != nil {
		return q.Len()
	}
	return 0
}

// gatedConn is a connection of the gate.
type gatedConn struct {
	net.Conn
	g    *gate
	peer string
	elem *list.Element // among the waiting; nil once admitted or closed
}

// admit takes the connection out of the waiting ones: a request on it
// authenticated.
func (c *gatedConn) admit() {
	c.g.mu.Lock()
	c.g.removeLocked(c)
	c.g.mu.Unlock()
}

func (c *gatedConn) Close() error {
	c.admit()
	return c.Conn.Close()
}

// connKey carries the request's connection in its context
// (http.Server.ConnContext), so that the handler can admit it.
type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	if gc, ok := c.(*gatedConn); ok {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

// admitConn admits the connection a request came on.
func admitConn(ctx context.Context) {
	if gc, ok := ctx.Value(connKey{}).(*gatedConn); ok {
		gc.admit()
	}
}

package ha

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Services is one process's ZooKeeper session and what it serves: leader
// election, leader retrieval and the stores. A session lives until the
// process closes it or ZooKeeper ends it; a process that lost its session
// opens a new one to contend again.
type Services struct {
	cfg    *Config
	conn   *zk.Conn
	log    *slog.Logger
	secret *Secret // nil: a CLI that could not read it (acl open)
	auth   string  // the digest credentials the session authenticated with, or ""

	// ended is closed once the session is gone (expired or closed): its
	// ephemeral znodes — a standby's latch among them — are gone with it.
	ended     chan struct{}
	endedOnce sync.Once
	endedWhy  error
	// leaderships end at the next disconnection as well: a disconnected
	// leader cannot tell whether its session still lives.
	mu          sync.Mutex
	leaderships []*leadershipWatch
	done        chan struct{} // the event loop has ended
}

// leadershipWatch is closed when a leadership must stop acting.
type leadershipWatch struct {
	ch   chan struct{}
	once sync.Once
	why  error
}

func (w *leadershipWatch) end(why error) {
	w.once.Do(func() {
		w.why = why
		close(w.ch)
	})
}

// cause is why the leadership ended, nil while it lasts.
func (w *leadershipWatch) cause() error {
	select {
	case <-w.ch:
		return w.why
	default:
		return nil
	}
}

// watchLeadership returns a watch that ends at the next disconnection
// or at the session's end (at once if the session has ended).
func (s *Services) watchLeadership() *leadershipWatch {
	w := &leadershipWatch{ch: make(chan struct{})}
	s.mu.Lock()
	s.leaderships = append(s.leaderships, w)
	s.mu.Unlock()
	if why := s.EndCause(); why != nil {
		w.end(why)
	}
	return w
}

// endLeaderships ends every leadership watch made so far.
func (s *Services) endLeaderships(why error) {
	s.mu.Lock()
	ws := s.leaderships
	s.leaderships = nil
	s.mu.Unlock()
	for _, w := range ws {
		w.end(why)
	}
}

// zkLogger sends the client's lines to the debug log.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug("zookeeper: " + fmt.Sprintf(format, args...))
}

// Connect opens a session with the quorum, waiting at most the connection
// timeout: an unreachable quorum is an error naming its address and the
// key to raise, not a hang. The session authenticates with the cluster's
// digest credentials (from secret, or configured), which the creator ACL
// requires; secret may be nil only with the open ACL and configured
// credentials or none, and then pointers cannot be sealed or opened.
func Connect(ctx context.Context, cfg *Config, secret *Secret, log *slog.Logger) (*Services, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	auth := cfg.Digest
	if auth == "" && secret != nil {
		auth = secret.digest()
	}
	if auth == "" && cfg.ACL == ACLCreator {
		return nil, errors.New("high-availability.zookeeper.client.acl is creator, but there are no credentials to authenticate with ZooKeeper: the cluster's secret in high-availability.storageDir, or high-availability.zookeeper.client.digest-credentials")
	}
	established := make(chan struct{})
	var once sync.Once
	conn, events, err := zk.Connect(cfg.Servers, cfg.SessionTimeout, zk.WithLogger(zkLogger{log}), zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				once.Do(func() { close(established) })
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("high-availability.zookeeper.quorum %s: %w", strings.Join(cfg.Servers, ","), err)
	}
	s := &Services{cfg: cfg, conn: conn, log: log, secret: secret, auth: auth, ended: make(chan struct{}), done: make(chan struct{})}
	go s.watchSession(events, established)
	timer := time.NewTimer(cfg.ConnectionTimeout)
	defer timer.Stop()
	select {
	case <-established:
	case <-timer.C:
		s.Close()
		return nil, fmt.Errorf("Could not connect to ZooKeeper at %s within %s (high-availability.zookeeper.quorum, high-availability.zookeeper.client.connection-timeout): is ZooKeeper running there?",
			strings.Join(cfg.Servers, ","), fmtDuration(cfg.ConnectionTimeout))
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	if auth != "" {
		// Sent before any other request, and again by the client on
		// every reconnection.
		if err := conn.AddAuth("digest", []byte(auth)); err != nil {
			s.Close()
			return nil, fmt.Errorf("authenticate with ZooKeeper at %s (digest): %w", strings.Join(cfg.Servers, ","), err)
		}
	}
	return s, nil
}

// acl is the ACL of a znode at p. Under the cluster's root it is the
// configured one: creator gives every permission to the identities the
// session authenticated with (the cluster's digest) and none to anyone
// else. The ancestors above the root (path.root) are shared with other
// clusters (and Flink's): anyone may read them, create a cluster's root
// under them and delete an empty one — never a cluster's root in use,
// which is not empty — and nobody may change them.
func (s *Services) acl(p string) []zk.ACL {
	if s.cfg.ACL != ACLCreator {
		return zk.WorldACL(zk.PermAll)
	}
	if p == s.cfg.Root || strings.HasPrefix(p, s.cfg.Root+"/") {
		return zk.AuthACL(zk.PermAll)
	}
	return zk.WorldACL(zk.PermRead | zk.PermCreate | zk.PermDelete)
}

// ownACL is the ACL ZooKeeper gives a znode this session creates with the
// creator ACL: every permission to the session's digest identity.
func (s *Services) ownACL() []zk.ACL {
	user, _, _ := strings.Cut(s.auth, ":")
	sum := sha1.Sum([]byte(s.auth))
	return []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: user + ":" + base64.StdEncoding.EncodeToString(sum[:])}}
}

// claimTree makes every znode under the cluster's root the cluster's
// alone, under the creator ACL: one made before (by a gflink without the
// ACL, or under acl open) gets the cluster's ACL if its ACL lets anyone
// change it; a latch znode of a process without the cluster's credentials
// is deleted (it could hold the lead for ever); a znode someone else
// owns is refused, naming it. A process runs it before it contends.
func (s *Services) claimTree() error {
	if s.cfg.ACL != ACLCreator {
		return nil
	}
	want := s.ownACL()
	var walk func(p string) error
	walk = func(p string) error {
		acl, _, err := s.conn.GetACL(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("Refusing the cluster's znode %s: it is not this cluster's and this process cannot read its ACL (%v). Use another high-availability.cluster-id, or have ZooKeeper's administrator delete it.", p, err)
		}
		if !slices.Equal(acl, want) {
			if path.Dir(p) == s.latchDir() {
				s.log.Warn(fmt.Sprintf("Deleting the leader latch znode %s: it was not made with this cluster's credentials (ACL %v), and could hold the lead for ever.", p, acl))
				if err := s.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return fmt.Errorf("Refusing the cluster's leader latch %s: it was not made with this cluster's credentials and cannot be deleted (%v).", p, err)
				}
				return nil
			}
			if _, err := s.conn.SetACL(p, want, -1); err != nil {
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				return fmt.Errorf("Refusing the cluster's znode %s: it was made by someone else (ACL %v) and this process cannot make it the cluster's (%v). Use another high-availability.cluster-id, or have ZooKeeper's administrator delete it.", p, acl, err)
			}
			s.log.Warn(fmt.Sprintf("The cluster's znode %s was open to anyone (ACL %v): it is now the cluster's alone (high-availability.zookeeper.client.acl: creator).", p, acl))
		}
		children, _, err := s.conn.Children(p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("read %s: %w", p, err)
		}
		for _, c := range children {
			if err := walk(p + "/" + c); err != nil {
				return err
			}
		}
		return nil
	}
	return s.retry("check the cluster's znodes", func() error { return walk(s.cfg.Root) })
}

func fmtDuration(d time.Duration) string { return strings.TrimSuffix(d.String(), "0s") }

// watchSession drains the client's events (it drops what nobody reads).
// A disconnection ends this process's leadership: a disconnected leader
// cannot tell whether its session still lives, and ZooKeeper may already
// have handed the job to another process, so it must stop acting at once
// (Flink's default: a SUSPENDED connection revokes leadership). A standby
// keeps its place: the client reconnects within the session timeout and
// its latch znode lives on — dropping the session instead would leave that
// znode ahead of the others until the session expired, delaying the next
// failover by a whole session timeout. Only an expired or closed session
// ends it (ended).
func (s *Services) watchSession(events <-chan zk.Event, established <-chan struct{}) {
	defer close(s.done)
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		select {
		case <-established:
		default:
			continue // still connecting: Connect decides
		}
		switch ev.State {
		case zk.StateDisconnected:
			s.endLeaderships(errors.New("the connection to ZooKeeper was lost"))
		case zk.StateExpired:
			s.endSession(errors.New("the ZooKeeper session expired"))
		}
	}
	s.endSession(errors.New("the ZooKeeper session was closed"))
}

func (s *Services) endSession(why error) {
	s.endedOnce.Do(func() {
		s.endedWhy = why
		close(s.ended)
	})
	s.endLeaderships(why)
}

// Ended is closed once the session has expired or was closed.
func (s *Services) Ended() <-chan struct{} { return s.ended }

// EndCause says why the session ended (nil while it lives).
func (s *Services) EndCause() error {
	select {
	case <-s.ended:
		return s.endedWhy
	default:
		return nil
	}
}

// Close ends the session: ZooKeeper deletes this process's ephemeral
// znodes (its latch, its connection info) at once, so a standby takes over
// without waiting for the session timeout.
func (s *Services) Close() {
	s.conn.Close()
	<-s.done
}

// Paths of the cluster's znodes, after Flink's layout.
func (s *Services) latchDir() string       { return s.cfg.Root + "/leader/latch" }
func (s *Services) connectionInfo() string { return s.cfg.Root + "/leader/rest_server/connection_info" }
func (s *Services) jobGraphNode(jobID string) string {
	return s.cfg.Root + "/jobgraphs/" + jobID
}
func (s *Services) checkpointsDir(jobID string) string {
	return s.cfg.Root + "/jobs/" + jobID + "/checkpoints"
}
func (s *Services) counterNode(jobID string) string {
	return s.cfg.Root + "/jobs/" + jobID + "/checkpoint_id_counter"
}

// retry runs op again on a lost connection, retry-wait apart, at most
// max-retry-attempts times: reads and set-up writes ride out a blip. The
// fenced writes of a leader are never retried blindly — see Leadership.
func (s *Services) retry(what string, op func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		err = op()
		if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) || attempt >= s.cfg.MaxRetries {
			break
		}
		select {
		case <-time.After(s.cfg.RetryWait):
		case <-s.done:
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ensurePath creates p and its parents as persistent znodes, if missing.
func (s *Services) ensurePath(p string) error {
	if p == "/" || p == "" {
		return nil
	}
	ok, _, err := s.conn.Exists(p)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	if err := s.ensurePath(path.Dir(p)); err != nil {
		return err
	}
	_, err = s.conn.Create(p, nil, 0, s.acl(p))
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

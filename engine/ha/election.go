package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Candidate describes a contending process in its latch znode, so that
// `list` can tell who stands by.
type Candidate struct {
	PID  int    `json:"pid"`
	Host string `json:"host"`
}

// Leadership is this process's lead of the cluster, held through its latch
// znode. Every write made on the job's behalf checks that the znode still
// exists in the same multi-op: a leader whose session ended — killed, cut
// off, paused past the session timeout — can no longer write anything,
// even before it learns that it lost.
type Leadership struct {
	s     *Services
	latch string
	jobID string
	watch *leadershipWatch
}

// Contend enters the election and blocks until this process leads, ctx
// ends or the session is lost. The latch is Curator's: every candidate
// creates an ephemeral sequential znode; the lowest leads; each other
// watches the one just below its own, so a leader's end wakes exactly one
// standby. standby is called once if this process has to wait, with the
// number of candidates ahead of it.
func (s *Services) Contend(ctx context.Context, me Candidate, standby func(ahead int)) (*Leadership, error) {
	if err := s.retry("create "+s.latchDir(), func() error { return s.ensurePath(s.latchDir()) }); err != nil {
		return nil, err
	}
	if err := s.claimTree(); err != nil {
		return nil, err
	}
	data, _ := json.Marshal(me)
	var node string
	err := s.retry("enter the leader election", func() error {
		var err error
		node, err = s.conn.Create(s.latchDir()+"/latch-", data, zk.FlagEphemeral|zk.FlagSequence, s.acl(s.latchDir()))
		return err
	})
	if err != nil {
		return nil, err
	}
	told := false
	for {
		// Watched from before the check that makes this process the
		// leader: a disconnection in between ends the leadership at once.
		watch := s.watchLeadership()
		var children []string
		err := s.retry("read the leader election", func() error {
			var err error
			children, _, err = s.conn.Children(s.latchDir())
			return err
		})
		if err != nil {
			if cause := s.EndCause(); cause != nil {
				return nil, cause
			}
			return nil, err
		}
		sortLatches(children)
		mine := path.Base(node)
		i := indexOf(children, mine)
		if i < 0 {
			return nil, errors.New("this process's latch znode disappeared: its ZooKeeper session ended")
		}
		if i == 0 {
			if watch.cause() != nil {
				continue // disconnected meanwhile: look again
			}
			return &Leadership{s: s, latch: node, watch: watch}, nil
		}
		if !told && standby != nil {
			standby(i)
			told = true
		}
		var exists bool
		var ahead <-chan zk.Event
		err = s.retry("watch the leader election", func() error {
			var err error
			exists, _, ahead, err = s.conn.ExistsW(s.latchDir() + "/" + children[i-1])
			return err
		})
		if err != nil {
			if cause := s.EndCause(); cause != nil {
				return nil, cause
			}
			return nil, err
		}
		if !exists {
			continue
		}
		// A disconnection does not end the wait: the client reconnects
		// within the session and sets the watch again.
		select {
		case <-ahead:
		case <-ctx.Done():
			s.conn.Delete(node, -1)
			return nil, ctx.Err()
		case <-s.ended:
			return nil, s.EndCause()
		}
	}
}

// sortLatches orders latch znodes by their sequence number, the ten digits
// ZooKeeper appends.
func sortLatches(names []string) {
	seq := func(n string) string {
		if len(n) < 10 {
			return n
		}
		return n[len(n)-10:]
	}
	sort.Slice(names, func(i, j int) bool { return seq(names[i]) < seq(names[j]) })
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// Candidates lists the contending processes, the leader first.
func (s *Services) Candidates() ([]Candidate, error) {
	var children []string
	err := s.retry("read the leader election", func() error {
		var err error
		children, _, err = s.conn.Children(s.latchDir())
		if errors.Is(err, zk.ErrNoNode) {
			children, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sortLatches(children)
	var out []Candidate
	for _, c := range children {
		data, _, err := s.conn.Get(s.latchDir() + "/" + c)
		if err != nil {
			continue // ended meanwhile
		}
		var cd Candidate
		_ = json.Unmarshal(data, &cd)
		out = append(out, cd)
	}
	return out, nil
}

// fenced runs ops only if this process's latch znode still exists, all or
// nothing.
func (l *Leadership) fenced(what string, ops ...any) error {
	if err := l.alive(what); err != nil {
		return err
	}
	all := append([]any{&zk.CheckVersionRequest{Path: l.latch, Version: -1}}, ops...)
	res, err := l.s.conn.Multi(all...)
	if err != nil {
		if len(res) > 0 && res[0].Error != nil {
			return fmt.Errorf("%s: not the leader any more (its latch znode is gone): %w", what, res[0].Error)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// LeaderInfo is what the leader publishes for the CLI (Flink's leader
// retrieval): where its REST endpoint is and which job it runs.
type LeaderInfo struct {
	Address string `json:"address"`
	JobID   string `json:"jobId"`
	JobName string `json:"jobName,omitempty"`
	PID     int    `json:"pid"`
	Host    string `json:"host"`
}

// Publish writes the leader's connection info as an ephemeral znode, gone
// with the leader's session.
func (l *Leadership) Publish(info LeaderInfo) error {
	data, _ := json.Marshal(info)
	if err := l.s.ensurePath(path.Dir(l.s.connectionInfo())); err != nil {
		return fmt.Errorf("publish the leader's address: %w", err)
	}
	ops := []any{}
	if ok, _, _ := l.s.conn.Exists(l.s.connectionInfo()); ok {
		// A leader that lost its connection but not its session, leading
		// again: its own znode.
		ops = append(ops, &zk.DeleteRequest{Path: l.s.connectionInfo(), Version: -1})
	}
	ops = append(ops, &zk.CreateRequest{Path: l.s.connectionInfo(), Data: data, Flags: zk.FlagEphemeral, Acl: l.s.acl(l.s.connectionInfo())})
	return l.fenced("publish the leader's address", ops...)
}

// Leader reads the published connection info of the cluster's leader.
func (s *Services) Leader() (*LeaderInfo, error) {
	var data []byte
	err := s.retry("read the leader's address", func() error {
		var err error
		data, _, err = s.conn.Get(s.connectionInfo())
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, ErrNoLeader
	}
	if err != nil {
		return nil, err
	}
	var info LeaderInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("the leader's connection info in %s is not JSON: %w", s.connectionInfo(), err)
	}
	return &info, nil
}

// ErrNoLeader: no process leads the cluster now.
var ErrNoLeader = errors.New("no gflink process leads the cluster now")

// Release gives the leadership up (a job that ended): the latch znode and
// the connection info go at once.
func (l *Leadership) Release() {
	_ = l.fenced("withdraw the leader's address", &zk.DeleteRequest{Path: l.s.connectionInfo(), Version: -1})
	_ = l.s.conn.Delete(l.latch, -1)
}

// String names the leader's latch znode.
func (l *Leadership) String() string { return strings.TrimPrefix(l.latch, l.s.cfg.Root+"/") }

// alive fails once the leadership is known lost (a disconnection, or the
// session's end): a lost leader does not even read, as its reads would
// wait for a reconnection that cannot restore its leadership.
func (l *Leadership) alive(what string) error {
	if cause := l.watch.cause(); cause != nil {
		return fmt.Errorf("%s: not the leader any more: %w", what, cause)
	}
	return nil
}

// Lost is closed once this process must stop acting as the leader.
func (l *Leadership) Lost() <-chan struct{} { return l.watch.ch }

// LostCause says why the leadership was lost (nil while it lasts).
func (l *Leadership) LostCause() error { return l.watch.cause() }

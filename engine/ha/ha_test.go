package ha

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha/zktest"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/go-zookeeper/zk"
)

func testConfig(t *testing.T, addr string) *Config {
	t.Helper()
	c := config.New()
	c.SetString(Type.Key(), "zookeeper", "-D")
	c.SetString(Quorum.Key(), addr, "-D")
	c.SetString(StorageDir.Key(), t.TempDir(), "-D")
	c.SetString(ClusterID.Key(), "/"+strings.ReplaceAll(t.Name(), "/", "-"), "-D")
	c.SetString(SessionTimeout.Key(), "1 s", "-D")
	// Generous: a connection that succeeds takes milliseconds, but under a
	// full go test ./... on 2 cores a JVM that answered ruok once took
	// longer than 5 s to establish a session.
	c.SetString(ConnectionTimeout.Key(), "30 s", "-D")
	c.SetString(RetryWait.Key(), "100 ms", "-D")
	cfg, err := ConfigFrom(c)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func connect(t *testing.T, cfg *Config) *Services {
	t.Helper()
	secret, err := PrepareStorage(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Connect(context.Background(), cfg, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// snapshotDir makes a checkpoint directory with a _metadata file (its
// content is all AddCheckpoint reads) and returns it.
func snapshotDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_metadata"), []byte("metadata of "+name), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := testutil.Deadline(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestElectionHandsOverInOrder(t *testing.T) {
	zk := zktest.Start(t)
	cfg := testConfig(t, zk.Addr)
	a, b, c := connect(t, cfg), connect(t, cfg), connect(t, cfg)
	la, err := a.Contend(context.Background(), Candidate{PID: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type won struct {
		who string
		l   *Leadership
		err error
	}
	wins := make(chan won, 2)
	ahead := make(chan int, 2)
	for name, s := range map[string]*Services{"b": b, "c": c} {
		go func() {
			l, err := s.Contend(context.Background(), Candidate{PID: 2}, func(n int) { ahead <- n })
			wins <- won{name, l, err}
		}()
	}
	got := []int{<-ahead, <-ahead}
	if got[0]+got[1] != 3 {
		t.Fatalf("standbys were told %v candidates ahead, want 1 and 2", got)
	}
	cands, err := a.Candidates()
	if err != nil || len(cands) != 3 {
		t.Fatalf("candidates %v, %v; want 3", cands, err)
	}
	select {
	case w := <-wins:
		t.Fatalf("%s leads while a does", w.who)
	case <-time.After(200 * time.Millisecond):
	}
	if err := la.Publish(LeaderInfo{Address: "http://127.0.0.1:1", JobID: "j"}); err != nil {
		t.Fatal(err)
	}
	if info, err := c.Leader(); err != nil || info.Address != "http://127.0.0.1:1" {
		t.Fatalf("leader retrieval: %+v, %v", info, err)
	}
	a.Close() // the leader's session ends: one standby takes over
	w := <-wins
	if w.err != nil {
		t.Fatal(w.err)
	}
	if _, err := c.Leader(); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("the old leader's address outlived its session: %v", err)
	}
	select {
	case w2 := <-wins:
		t.Fatalf("%s and %s lead at once", w.who, w2.who)
	case <-time.After(200 * time.Millisecond):
	}
	w.l.Release()
	w2 := <-wins
	if w2.err != nil || w2.who == w.who {
		t.Fatalf("the last standby did not take over: %+v", w2)
	}
}

// proxy forwards TCP to ZooKeeper until frozen: a frozen proxy is a
// leader that stopped answering (paused, cut off) without closing its
// connection.
type proxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
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
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pipe(c, up)
			go p.pipe(up, c)
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		p.mu.Lock()
		frozen := p.frozen
		p.mu.Unlock()
		if frozen {
			continue // swallowed, as by a paused process
		}
		if _, err := dst.Write(buf[:n]); err != nil && !errors.Is(err, io.EOF) {
			src.Close()
			return
		}
	}
}

func (p *proxy) freeze(f bool) {
	p.mu.Lock()
	p.frozen = f
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestFencing: a leader that stops answering loses its session; a standby
// takes over; everything the old leader then tries to write — a checkpoint
// id, a checkpoint, the job's end — fails, before and after it is heard
// from again, and the store holds only the new leader's checkpoints.
func TestFencing(t *testing.T) {
	zk := zktest.Start(t)
	px := newProxy(t, zk.Addr)
	cfg := testConfig(t, zk.Addr)
	oldCfg := *cfg
	oldCfg.Servers = []string{px.l.Addr().String()}
	old := connect(t, &oldCfg)
	l1, err := old.Contend(context.Background(), Candidate{PID: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j1, err := l1.ForJob("job")
	if err != nil {
		t.Fatal(err)
	}
	if err := j1.ReserveCheckpointID(1); err != nil {
		t.Fatal(err)
	}
	chk1, chk2 := snapshotDir(t, "chk-1"), snapshotDir(t, "chk-2")
	if err := j1.AddCheckpoint(1, chk1, false); err != nil {
		t.Fatal(err)
	}
	standby := connect(t, cfg)
	won := make(chan *Leadership, 1)
	go func() {
		l, err := standby.Contend(context.Background(), Candidate{PID: 2}, nil)
		if err != nil {
			t.Error(err)
		}
		won <- l
	}()
	px.freeze(true)
	var l2 *Leadership
	select {
	case l2 = <-won:
	case <-testutil.After(10 * time.Second):
		t.Fatal("the standby did not take over within 10 s of a 1 s session timeout")
	}
	j2, err := l2.ForJob("job")
	if err != nil {
		t.Fatal(err)
	}
	next, err := standby.CheckpointIDCounter("job")
	if err != nil || next != 2 {
		t.Fatalf("counter %d, %v; want 2", next, err)
	}
	if err := j2.ReserveCheckpointID(2); err != nil {
		t.Fatal(err)
	}
	if err := j2.AddCheckpoint(2, chk2, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old leader notices", 5*time.Second, func() bool { return l1.LostCause() != nil })
	tryOld := func() {
		if err := j1.ReserveCheckpointID(3); err == nil {
			t.Error("the old leader reserved a checkpoint id")
		}
		if err := j1.AddCheckpoint(3, snapshotDir(t, "old-chk-3"), false); err == nil {
			t.Error("the old leader registered a checkpoint")
		}
		if err := j1.MarkTerminal("FINISHED"); err == nil {
			t.Error("the old leader recorded the job's end")
		}
	}
	tryOld()
	px.freeze(false) // heard from again: its session is gone all the same
	tryOld()
	cps, err := standby.Checkpoints("job")
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 2 || cps[0].Dir != chk1 || cps[1].Dir != chk2 {
		t.Fatalf("registered %+v, want chk-1 and chk-2", cps)
	}
	if r, _ := standby.JobResult("job"); r != nil {
		t.Fatalf("a job result was recorded: %+v", r)
	}
	if err := j2.MarkTerminal("FINISHED"); err != nil {
		t.Fatal(err)
	}
	if r, err := standby.JobResult("job"); err != nil || r == nil || r.Status != "FINISHED" {
		t.Fatalf("job result %+v, %v", r, err)
	}
}

func TestStoresRoundTrip(t *testing.T) {
	zk := zktest.Start(t)
	cfg := testConfig(t, zk.Addr)
	s := connect(t, cfg)
	l, err := s.Contend(context.Background(), Candidate{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := l.ForJob("job")
	if err != nil {
		t.Fatal(err)
	}
	if sj, err := s.SubmittedJob("job"); err != nil || sj != nil {
		t.Fatalf("submitted job before any: %+v, %v", sj, err)
	}
	want := SubmittedJob{JobID: "job", Job: "wordcount", Args: []string{"--input", "x"}}
	if err := j.PutSubmittedJob(want); err != nil {
		t.Fatal(err)
	}
	got, err := s.SubmittedJob("job")
	if err != nil || got.Job != want.Job || len(got.Args) != 2 {
		t.Fatalf("submitted job %+v, %v", got, err)
	}
	// The job graph holds the job's arguments (a Kafka password, say).
	if fi, err := os.Stat(s.jobGraphFile("job")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the job graph file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	c, sp := snapshotDir(t, "c"), snapshotDir(t, "s")
	for id := int64(1); id <= 3; id++ {
		if err := j.AddCheckpoint(id, c, id == 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.AddCheckpoint(4, sp, true); err != nil {
		t.Fatal(err)
	}
	cps, _ := s.Checkpoints("job")
	var ids []int64
	for _, c := range cps {
		ids = append(ids, c.ID)
	}
	if len(ids) != 3 || ids[0] != 1 || ids[1] != 3 || ids[2] != 4 {
		t.Fatalf("registered %v: a savepoint replaces older savepoints only", ids)
	}
	if err := j.RemoveCheckpoint(1); err != nil {
		t.Fatal(err)
	}
	if err := j.RemoveCheckpoint(99); err != nil {
		t.Fatalf("removing an unregistered checkpoint: %v", err)
	}
	again, err := ReadSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(cfg.StorageDir, cfg.ClusterID, "cluster-secret"))
	if tok := s.RESTToken(); len(tok) != 64 || tok != again.RESTToken() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("REST token %q/%q, secret mode %v", tok, again.RESTToken(), fi.Mode())
	}
	if err := j.CleanUp(); err != nil {
		t.Fatal(err)
	}
	if cps, _ := s.Checkpoints("job"); len(cps) != 0 {
		t.Fatalf("after clean-up: %+v", cps)
	}
	if sj, _ := s.SubmittedJob("job"); sj != nil {
		t.Fatalf("job graph after clean-up: %+v", sj)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"high-availability.type": "zookeeper", "high-availability.storageDir": "/tmp/x"}, "high-availability.zookeeper.quorum is not set"},
		{map[string]string{"high-availability.type": "zookeeper", "high-availability.zookeeper.quorum": "127.0.0.1:2181"}, "high-availability.storageDir is not set"},
		{map[string]string{"high-availability": "KUBERNETES"}, "KUBERNETES is not available"},
		{map[string]string{"high-availability.type": "zookeeper", "high-availability.zookeeper.quorum": "localhost", "high-availability.storageDir": "/tmp/x"}, "high-availability.zookeeper.quorum"},
		{map[string]string{"high-availability.type": "etcd"}, "high-availability.type"},
		{map[string]string{"high-availability.type": "zookeeper", "high-availability.zookeeper.quorum": "127.0.0.1:2181", "high-availability.storageDir": "/tmp/x", "pipeline.job-id": "xyz"}, "pipeline.job-id"},
	} {
		c := config.New()
		for k, v := range tc.set {
			c.SetString(k, v, "-D")
		}
		_, err := ConfigFrom(c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.set, err, tc.want)
		}
	}
	c := config.New()
	if cfg, err := ConfigFrom(c); cfg != nil || err != nil {
		t.Errorf("default: %+v, %v; want high availability off", cfg, err)
	}
}

func TestUnreachableQuorumFailsWithinTheConnectionTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	cfg := &Config{Servers: []string{addr}, Root: "/flink/x", SessionTimeout: time.Second, ConnectionTimeout: 700 * time.Millisecond}
	start := time.Now()
	_, err = Connect(context.Background(), cfg, nil, nil)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection-timeout") {
		t.Fatalf("error %v: want one naming %s and the key", err, addr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v with a 700 ms connection timeout", d)
	}
}

func TestDerivedJobIDIsStable(t *testing.T) {
	a, b := DerivedJobID("/default"), DerivedJobID("default")
	if a != b || len(a) != 32 || DerivedJobID("other") == a {
		t.Fatalf("derived ids %s %s", a, b)
	}
}

// cut drops the proxy's connections (not its listener): a network blip
// after which the client reconnects, within its session.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestStandbyKeepsItsPlaceThroughABlip: a standby whose connection drops
// and comes back within the session keeps its session and its latch
// znode, and takes over as soon as the leader's session ends — it does
// not start over behind a latch of its own that outlives it by a session
// timeout.
func TestStandbyKeepsItsPlaceThroughABlip(t *testing.T) {
	zkSrv := zktest.Start(t)
	px := newProxy(t, zkSrv.Addr)
	cfg := testConfig(t, zkSrv.Addr)
	leader := connect(t, cfg)
	if _, err := leader.Contend(context.Background(), Candidate{PID: 1}, nil); err != nil {
		t.Fatal(err)
	}
	standbyCfg := *cfg
	standbyCfg.Servers = []string{px.l.Addr().String()}
	// A session long enough that the blip is well within it, however
	// loaded the machine (the test is about a blip, not an expiry).
	standbyCfg.SessionTimeout = testutil.Scale(4 * time.Second)
	standby := connect(t, &standbyCfg)
	type won struct {
		l   *Leadership
		err error
	}
	wins := make(chan won, 1)
	waiting := make(chan int, 1)
	go func() {
		l, err := standby.Contend(context.Background(), Candidate{PID: 2}, func(n int) { waiting <- n })
		wins <- won{l, err}
	}()
	<-waiting
	session := standby.conn.SessionID()
	px.cut()
	// The standby reconnects (through the proxy, which still forwards).
	waitFor(t, "the standby reconnects", 10*time.Second, func() bool {
		return standby.conn.State() == zk.StateHasSession
	})
	select {
	case w := <-wins:
		t.Fatalf("a blip ended the standby's wait: %+v", w)
	default:
	}
	leader.Close()
	select {
	case w := <-wins:
		if w.err != nil {
			t.Fatalf("the standby did not take over: %v", w.err)
		}
		if standby.conn.SessionID() != session || standby.EndCause() != nil {
			t.Errorf("the standby's session changed or ended: %v", standby.EndCause())
		}
		if err := w.l.LostCause(); err != nil {
			t.Errorf("the new leader is not leading: %v", err)
		}
	case <-testutil.After(10 * time.Second):
		t.Fatal("the standby did not take over within 10 s of the leader closing its session")
	}
}

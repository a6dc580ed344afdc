package external

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
)

// lineServer serves lines to whoever connects, like nc -lk.
type lineServer struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newLineServer(t *testing.T) *lineServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lineServer{l: l}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(s.close)
	return s
}

// send writes a line to every connected client once one is connected.
func (s *lineServer) send(t *testing.T, line string) {
	t.Helper()
	deadline := testutil.Deadline(30 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.conns)
		for _, c := range s.conns {
			fmt.Fprintln(c, line)
		}
		s.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no client connected within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *lineServer) close() {
	s.l.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// TestSocketSourceSavepointDemo is the guide's savepoint walkthrough:
// word count reads lines from a socket; "a" counts (a,1); the job is
// stopped with a savepoint; restored from it, the next "a" counts (a,2).
// The log says that the socket cannot rewind.
func TestSocketSourceSavepointDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gflink processes")
	}
	dir := t.TempDir()
	srv := newLineServer(t)
	uri := "socket://" + srv.l.Addr().String()
	ckpt := []string{"-Dexecution.checkpointing.interval=100ms", "-Dexecution.checkpointing.dir=" + filepath.Join(dir, "ck")}
	start := func(extra ...string) (*syncBuffer, *syncBuffer, func() error) {
		args := append(append(append([]string{"run"}, extra...), ckpt...), "wordcount", "--input", uri)
		c := gflinkCmd(dir, args...)
		out, errOut := &syncBuffer{}, &syncBuffer{}
		c.Stdout, c.Stderr = out, errOut
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return out, errOut, c.Wait
	}
	out, errOut, wait := start()
	waitOutput(t, out, "Job has been submitted with JobID")
	jobID := regexp.MustCompile(`JobID ([0-9a-f]{32})`).FindStringSubmatch(out.String())[1]
	srv.send(t, "a")
	waitOutput(t, out, "(a,1)")
	if !strings.Contains(errOut.String(), "cannot rewind") {
		t.Errorf("the log does not say the socket source is at most once:\n%s", errOut.String())
	}
	stop := gflinkCmd(dir, "stop", "--savepointPath", filepath.Join(dir, "sp"), jobID)
	res, err := stop.CombinedOutput()
	if err != nil {
		t.Fatalf("stop: %v\n%s", err, res)
	}
	if err := wait(); err != nil {
		t.Fatalf("the stopped job: %v\n%s", err, errOut.String())
	}
	sp := regexp.MustCompile(`Savepoint completed. Path: (\S+)`).FindSubmatch(res)
	if sp == nil {
		t.Fatalf("stop: %s", res)
	}
	srv.mu.Lock()
	for _, c := range srv.conns {
		c.Close()
	}
	srv.conns = nil
	srv.mu.Unlock()
	out, _, wait = start("-s", string(sp[1]))
	waitOutput(t, out, "Job has been submitted with JobID")
	srv.send(t, "a")
	waitOutput(t, out, "(a,2)")
	jobID = regexp.MustCompile(`JobID ([0-9a-f]{32})`).FindStringSubmatch(out.String())[1]
	if res, err := gflinkCmd(dir, "cancel", jobID).CombinedOutput(); err != nil {
		t.Fatalf("cancel: %v\n%s", err, res)
	}
	wait()
}

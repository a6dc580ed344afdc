package rest

import (
	"testing"
	"time"

	"github.com/gflink/gflink/engine"
)

func TestPortSpec(t *testing.T) {
	for in, want := range map[string]string{"8081": "8081", "8081-8181": "8081-8181", "50100, 50200-50210": "50100,50200-50210", "0": "0"} {
		p, err := ParsePorts(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePorts(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "x", "70000", "9-8", "1-x"} {
		if _, err := ParsePorts(bad); err == nil {
			t.Errorf("ParsePorts(%q) accepted", bad)
		}
	}
}

func TestListenTakesFirstFreePort(t *testing.T) {
	l1, err := Listen("127.0.0.1", PortSpec{{0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	busy := l1.Addr().(interface{ String() string }).String()
	_, portStr, _ := splitHostPort(busy)
	var port int
	for _, c := range portStr {
		port = port*10 + int(c-'0')
	}
	// The busy port is skipped for the next one in the range.
	l2, err := Listen("127.0.0.1", PortSpec{{port, port}, {0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
	if _, err := Listen("127.0.0.1", PortSpec{{port, port}}); err == nil {
		t.Error("a busy port alone must fail")
	}
}

func splitHostPort(a string) (string, string, error) {
	i := len(a) - 1
	for i >= 0 && a[i] != ':' {
		i--
	}
	return a[:i], a[i+1:], nil
}

func TestCleanMessage(t *testing.T) {
	for in, want := range map[string]string{
		"org.apache.flink.runtime.rest.NotFoundException: Job x not found\n\tat foo":                                            "Job x not found",
		"java.util.concurrent.CompletionException: org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired": "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired",
		"plain message": "plain message",
	} {
		if got := cleanMessage(in); got != want {
			t.Errorf("cleanMessage(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestOpStoreKeepsAnswersUntilFetched(t *testing.T) {
	s := newOpStore(time.Minute)
	defer s.close()
	ch := make(chan engine.SnapshotResult, 1)
	s.start("t1", opSavepoint, "job", ch, nil)
	if op, _ := s.status("t1", opSavepoint, "job"); op.done {
		t.Fatal("done before its result")
	}
	ch <- engine.SnapshotResult{Path: "file:/sp"}
	waited := make(chan struct{})
	go func() {
		s.waitFetched(time.Now().Add(time.Minute))
		close(waited)
	}()
	var op *operation
	for op == nil || !op.done {
		op, _ = s.status("t1", opSavepoint, "job")
	}
	<-waited // returns once the completed answer was fetched
	if op.result.Path != "file:/sp" {
		t.Fatalf("result %+v", op.result)
	}
	if _, ok := s.status("t1", opCheckpoint, "job"); ok {
		t.Error("a savepoint trigger id must not answer a checkpoint poll")
	}
	if _, ok := s.status("t1", opSavepoint, "other"); ok {
		t.Error("a trigger id of one job must not answer for another")
	}
}

// TestVertexStatusWhileRestoring: a vertex whose tasks are loading their
// restored state is INITIALIZING in REST, as in Flink 1.12+, not CREATED.
func TestVertexStatusWhileRestoring(t *testing.T) {
	for _, c := range []struct {
		tasks map[string]int
		want  string
	}{
		{map[string]int{string(engine.ExecInitializing): 2}, string(engine.ExecInitializing)},
		{map[string]int{string(engine.ExecInitializing): 1, string(engine.ExecRunning): 1}, string(engine.ExecRunning)},
		{map[string]int{string(engine.ExecInitializing): 1, string(engine.ExecDeploying): 1}, string(engine.ExecInitializing)},
		{map[string]int{string(engine.ExecFinished): 2}, string(engine.ExecFinished)},
		{map[string]int{}, string(engine.ExecCreated)},
	} {
		if got := vertexStatus(c.tasks); got != c.want {
			t.Errorf("vertexStatus(%v) = %s; want %s", c.tasks, got, c.want)
		}
	}
}

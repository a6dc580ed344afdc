package rest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gflink/gflink/engine"
)

func TestPortSpec(t *testing.T) {
	for in, want := range map[string]string{"8081": "8081", "8081-8181": "8081-8181", "50100, 50200-50210": "50100,50200-50210", "0": "0"} {
		p, err := parsePorts(in)
		if err != nil || p.String() != want {
			t.Errorf("parsePorts(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "x", "70000", "9-8", "1-x"} {
		if _, err := parsePorts(bad); err == nil {
			t.Errorf("parsePorts(%q) accepted", bad)
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

func TestRegistry(t *testing.T) {
	dir := t.TempDir()
	r := NewRegistry(dir)
	alive := map[int]bool{1: true, 2: false, 3: false}
	r.Alive = func(pid int) bool { return alive[pid] }
	for _, e := range []Entry{
		{JobID: "a", PID: 1, State: "RUNNING", StartTime: 3},
		{JobID: "b", PID: 2, State: "RUNNING", StartTime: 2}, // died without ending its job
		{JobID: "c", PID: 3, State: "FINISHED", StartTime: 1},
	} {
		if err := r.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.JobID)
	}
	if !slices.Equal(ids, []string{"c", "a"}) {
		t.Errorf("List = %v; want the ended job and the live one, oldest first", ids)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", "b.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the dead process's entry must be cleaned")
	}
	if _, err := r.Get("b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a cleaned entry: %v", err)
	}
	// ... but kept aside, so that its checkpoints can still be found.
	if e, err := r.Lost("b"); err != nil || e.JobID != "b" || e.State != "RUNNING" {
		t.Errorf("Lost(b) = %+v, %v", e, err)
	}
	if _, err := r.Lost("a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lost of a live job: %v", err)
	}
	if e, err := r.Get("c"); err != nil || !e.Terminal() {
		t.Errorf("an ended job stays listed: %v %v", e, err)
	}
}

func TestRegistryKeepsTheLastLostJobs(t *testing.T) {
	r := NewRegistry(t.TempDir())
	r.Alive = func(int) bool { return false }
	for i := 0; i < maxTerminal+3; i++ {
		id := fmt.Sprintf("j%03d", i)
		r.Put(Entry{JobID: id, State: "RUNNING"})
		r.Get(id) // found dead: retired
	}
	if got, _ := r.List(); len(got) != 0 {
		t.Errorf("List = %v; want no entry", got)
	}
	des, _ := os.ReadDir(r.lostDir())
	if len(des) != maxTerminal {
		t.Errorf("%d lost entries kept; want %d", len(des), maxTerminal)
	}
	if _, err := r.Lost(fmt.Sprintf("j%03d", maxTerminal+2)); err != nil {
		t.Errorf("the newest lost entry is gone: %v", err)
	}
}

func TestRegistryKeepsTheLastEndedJobs(t *testing.T) {
	r := NewRegistry(t.TempDir())
	r.Alive = func(int) bool { return false }
	for i := 0; i < maxTerminal+5; i++ {
		r.Put(Entry{JobID: string(rune('a'+i/26)) + string(rune('a'+i%26)), State: "CANCELED", StartTime: int64(i)})
	}
	got, _ := r.List()
	if len(got) != maxTerminal || got[0].StartTime != 5 {
		t.Errorf("kept %d ended jobs starting at %d; want %d starting at 5", len(got), got[0].StartTime, maxTerminal)
	}
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

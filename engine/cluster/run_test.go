package cluster_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/cluster"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/engine/rest"
)

// events records what a run told its starter, in order.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, s)
}

func (e *events) Accepted(jobID string, notices []string) { e.add("accepted " + jobID) }
func (e *events) Running(jobID string, st engine.JobStatus, notices []string, endpoint string) {
	e.add("running " + jobID + " " + string(st) + " " + strings.SplitN(endpoint, ":", 2)[0])
}
func (e *events) StandingBy(jobID, msg string) { e.add("standing by " + jobID) }
func (e *events) AlreadyEnded(jobID string, st engine.JobStatus, msg string) {
	e.add("ended " + jobID)
}

// Run binds the endpoint, registers the job where gflink's other commands
// look, tells its starter that the job was accepted before it runs, and
// returns the job's result; the registry entry ends FINISHED.
func TestRunRegistersAndReports(t *testing.T) {
	home := t.TempDir()
	out := &bytes.Buffer{}
	conf := config.New()
	conf.SetString(rest.BindPort.Key(), "0", "test")
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: out})
	src := &connectors.WordGenerator{Words: 1000, Distinct: 10, Seed: 1, WordsPerLine: 5}
	jobs.WordCountPipeline(engine.FromSource[string](env, src, "generator").UID("source")).Print().UID("sink")
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	jobID := engine.NewJobID()
	sub := &cluster.Submission{Graph: g, Job: "wordcount", Options: engine.JobOptions{JobID: jobID, Config: conf},
		Server: rest.ServerOptions{DisableAuthentication: true}, Home: home, Events: ev}
	res, err := cluster.Run(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != engine.StatusFinished || res.JobID != jobID {
		t.Fatalf("result %s %s, want %s FINISHED (%v)", res.JobID, res.Status, jobID, res.Err)
	}
	if n := strings.Count(out.String(), "\n"); n != 1000 {
		t.Errorf("%d counts printed, want one per word (1000)", n)
	}
	if len(ev.got) != 2 || ev.got[0] != "accepted "+jobID || !strings.HasPrefix(ev.got[1], "running "+jobID+" ") {
		t.Errorf("events %q: want accepted, then running", ev.got)
	}
	e, err := jobregistry.NewRegistry(home).Get(jobID)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != string(engine.StatusFinished) || e.EndTime < e.StartTime || !strings.HasPrefix(e.Address, "http://127.0.0.1:") {
		t.Errorf("registry entry %+v: want FINISHED with its end time and endpoint", e)
	}
}

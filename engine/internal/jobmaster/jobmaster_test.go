package jobmaster

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/internal/graph"
	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/internal/testsource"
	"github.com/gflink/gflink/savepoint/vfs"
)

// TestFinalizeAfterFailoverInSameBatch: a task finishing can complete the
// acks of two pending checkpoints at once; when finalizing the first fails
// the job over, the second must not be finalized against the gone attempt
// (found by review: a nil dereference that killed the process).
func TestFinalizeAfterFailoverInSameBatch(t *testing.T) {
	dir := t.TempDir()
	g := sourceToSink(t)
	c := config.New()
	for k, v := range map[string]string{
		"execution.checkpointing.interval":                   "10 ms",
		"execution.checkpointing.dir":                        dir,
		"execution.checkpointing.max-concurrent-checkpoints": "2",
		"restart-strategy.type":                              "fixed-delay",
	} {
		c.SetString(k, v, "test")
	}
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if filepath.Base(filepath.Dir(path)) == "chk-1" && op == vfs.OpCreate {
			return fmt.Errorf("disk full: %w", vfs.ErrInjected)
		}
		return nil
	})}
	jm, err := newJobMaster(t.Context(), g, JobOptions{Config: c, FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	jm.status = StatusRunning
	now := time.Now()
	jm.exec = &execution{jm: jm, clock: time.Now, maxPar: map[string]int{"src": 128, "sink": 128},
		tasks: []*task.Task{task.New(task.Options{Name: "t", Parallelism: g.Vertices[0].Parallelism})}}
	jm.coord.Start(now, []checkpoint.TaskInfo{{ID: 0, Source: true}})
	jm.apply(jm.coord.Tick(now.Add(10 * time.Millisecond)))
	jm.apply(jm.coord.Tick(now.Add(20 * time.Millisecond)))
	if n := len(jm.coord.Pending()); n != 2 {
		t.Fatalf("%d checkpoints pending; want 2", n)
	}
	jm.onEvent(taskEvent{task: 0, kind: evFinished, final: []checkpoint.OperatorSnapshot{{UID: "src"}}})
	if jm.statusNow() != StatusRestarting || jm.exec != nil {
		t.Fatalf("status %s, attempt %v: the failed finalize must fail the attempt over", jm.statusNow(), jm.exec)
	}
}

// sourceToSink is the smallest job graph, an empty source into a print
// sink, made as the job API's FromSource and Print make it (the job API
// builds on this package, so its tests cannot use it).
func sourceToSink(t *testing.T) *graph.JobGraph {
	src := &graph.Node{ID: 0, Kind: graph.KindSource, Name: "src", UID: "src", UIDExplicit: true,
		Out: graph.NewTypeOps[int](), Source: testsource.EmptySource{}, Enumerate: testsource.EmptySource{}.Splits, Stateful: true}
	src.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		return nil, &task.SourceOperator[int]{Src: testsource.EmptySource{}, Out: out.(api.Collector[int])}
	}
	sink := &api.PrintSink[int]{W: io.Discard}
	snk := &graph.Node{ID: 1, Kind: graph.KindSink, Name: "Print to Std. Out", UID: "sink", UIDExplicit: true, Sink: sink}
	snk.Build = func(rt *task.BuildContext, _ any) (any, task.Operator) {
		op := task.NewSinkOperator(rt, api.Sink[int](sink))
		return api.Collector[int](op), op
	}
	e := &graph.Edge{From: src, To: snk, Ship: network.ShipForward}
	src.Outs, snk.In = []*graph.Edge{e}, []*graph.Edge{e}
	g, err := graph.New([]*graph.Node{src, snk}, graph.Options{Name: "test", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

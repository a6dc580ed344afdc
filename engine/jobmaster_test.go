package engine

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/savepoint/vfs"
)

type emptySource struct{}

func (emptySource) Splits(int) ([][]byte, error) { return nil, nil }
func (emptySource) CreateReader(api.SourceContext) (api.SourceReader[int], error) {
	return emptyReader{}, nil
}

type emptyReader struct{}

func (emptyReader) AddSplits([][]byte) error                             { return nil }
func (emptyReader) PollNext(api.Collector[int]) (api.InputStatus, error) { return api.EndOfInput, nil }
func (emptyReader) SnapshotState(int64) ([][]byte, error)                { return nil, nil }
func (emptyReader) Close() error                                         { return nil }

// TestFinalizeAfterFailoverInSameBatch: a task finishing can complete the
// acks of two pending checkpoints at once; when finalizing the first fails
// the job over, the second must not be finalized against the gone attempt
// (found by review: a nil dereference that killed the process).
func TestFinalizeAfterFailoverInSameBatch(t *testing.T) {
	dir := t.TempDir()
	env := NewEnvironment(EnvironmentOptions{Parallelism: 1})
	FromSource[int](env, &emptySource{}, "src").UID("src").Print().UID("sink")
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
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

package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/internal/api"
)

type failingSource struct{}

func (failingSource) Splits(int) ([][]byte, error) { return [][]byte{[]byte("x")}, nil }
func (failingSource) CreateReader(api.SourceContext) (api.SourceReader[int], error) {
	return nil, errors.New("cannot create reader")
}

type trackSink struct{ created, closed atomic.Int32 }

func (s *trackSink) CreateWriter(api.SinkContext) (api.SinkWriter[int], error) {
	s.created.Add(1)
	return &trackWriter{s}, nil
}

type trackWriter struct{ s *trackSink }

func (w *trackWriter) Write(int) error  { return nil }
func (w *trackWriter) Flush(bool) error { return nil }
func (w *trackWriter) Close() error     { w.s.closed.Add(1); return nil }

// TestOpenFailureClosesOpenedOperators: when an operator fails to open,
// exactly the operators already opened (the tail of the chain) are closed
// (found by review: the wrong ones were).
func TestOpenFailureClosesOpenedOperators(t *testing.T) {
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1})
	sink := &trackSink{}
	engine.FromSource[int](env, failingSource{}, "src").UID("src").SinkTo(sink).UID("sink")
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res := j.Wait(); res.Status != engine.StatusFailed {
		t.Fatalf("status %s", res.Status)
	}
	if c, cl := sink.created.Load(), sink.closed.Load(); c == 0 || c != cl {
		t.Fatalf("sink writers created %d, closed %d", c, cl)
	}
}

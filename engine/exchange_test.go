package engine

import (
	"strings"
	"testing"

	"github.com/gflink/gflink/engine/internal/graph"
	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/internal/testsource"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A job whose exchanges the machine cannot hold is refused before it
// starts, with the numbers; p=10000 word count was OOM-killed at 24 GB.
func TestExchangeMemoryRefused(t *testing.T) {
	build := func(p int) *graph.JobGraph {
		env := NewEnvironment(EnvironmentOptions{Parallelism: p})
		src := FromSource[int](env, testsource.EmptySource{}, "src").UID("src")
		Process[int, int, int](KeyBy(src, func(x int) int { return x }), passThrough{}).UID("p").Print().UID("sink")
		g, err := env.Build()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if n := build(10).NumChannels(); n != 10*10 {
		t.Fatalf("p=10: %d channels; want 100 (keyed p×p; the sink is chained)", n)
	}
	if err := graph.CheckExchangeMemory(build(1000), 8<<30); err != nil {
		t.Fatalf("p=1000 on 8 GB: %v", err)
	}
	err := graph.CheckExchangeMemory(build(10000), 24<<30)
	if err == nil || !strings.Contains(err.Error(), "parallelism 10000") || !strings.Contains(err.Error(), "100000000 channels") {
		t.Fatalf("p=10000 on 24 GB: %v", err)
	}
}

type passThrough struct{}

func (passThrough) ProcessElement(_ *api.Context[int], x int, out api.Collector[int]) error {
	out.Collect(x)
	return nil
}

package task

import (
	"errors"
	"slices"
	"testing"

	"github.com/gflink/gflink/engine/state"
)

type sliceCollector[T any] struct{ got []T }

func (c *sliceCollector[T]) Collect(v T) { c.got = append(c.got, v) }

// TestFailGuardDropsOutputAfterAStoreFailure: what a function emits while
// the store under its state is healthy passes; once the store has failed,
// its reads found nothing, so what it emits is dropped (the operator then
// fails the task), never passed on as if it were right.
func TestFailGuardDropsOutputAfterAStoreFailure(t *testing.T) {
	out := &sliceCollector[int]{}
	f := &state.FailureFlag{}
	g := &failGuard[int]{out: out, failed: f}
	g.Collect(1)
	g.Collect(2)
	f.Set(&state.Failure{Err: errors.New("pebble: corrupt block")})
	g.Collect(3)
	if !slices.Equal(out.got, []int{1, 2}) {
		t.Errorf("passed on %v; want [1 2]: a record emitted after the store failed was passed on", out.got)
	}
}

package state

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// TestInParallel: every index runs once; the error of the lowest failing
// index is returned; after a failure no new index starts.
func TestInParallel(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		var calls [100]atomic.Int32
		if err := inParallel(100, workers, func(i int) error { calls[i].Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		for i := range calls {
			if n := calls[i].Load(); n != 1 {
				t.Fatalf("%d workers: index %d ran %d times", workers, i, n)
			}
		}
		var started atomic.Int32
		err := inParallel(1000, workers, func(i int) error {
			started.Add(1)
			if i >= 3 {
				return fmt.Errorf("index %d failed", i)
			}
			return nil
		})
		if err == nil || err.Error() != "index 3 failed" {
			t.Fatalf("%d workers: error %v, want index 3's", workers, err)
		}
		// Every index from 3 on fails, so a worker that runs one stops:
		// indexes 0–2 and at most one failing index per worker, however
		// the workers are scheduled. (With only indexes 3 and 7 failing, a
		// worker descheduled while it held index 3 let the others run on:
		// 8 started with 2 workers, once.)
		if limit := 3 + workers; int(started.Load()) > limit {
			t.Fatalf("%d workers: %d indexes started, at most %d may", workers, started.Load(), limit)
		}
	}
}

// TestInParallelCarriesAPanic: a panic in a worker (a serializer's bug)
// is raised on the caller's goroutine, where the task recovers it, with the
// worker's stack; an error keeps its identity. The process does not end.
func TestInParallelCarriesAPanic(t *testing.T) {
	sentinel := errors.New("decoder bug")
	for _, tc := range []struct {
		raise any
		check func(r any) bool
	}{
		{sentinel, func(r any) bool { e, ok := r.(error); return ok && errors.Is(e, sentinel) }},
		{"index out of range", func(r any) bool { s, ok := r.(string); return ok && strings.Contains(s, "index out of range") }},
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !tc.check(r) || !strings.Contains(fmt.Sprint(r), "on a restore worker") {
					t.Fatalf("recovered %v, want the worker's panic %v", r, tc.raise)
				}
			}()
			inParallel(64, 2, func(i int) error {
				if i == 10 {
					panic(tc.raise)
				}
				return nil
			})
			t.Fatal("inParallel returned after a worker panicked")
		}()
	}
}

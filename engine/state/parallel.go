package state

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// inParallel calls f(0) … f(n-1) on up to workers goroutines (key groups
// are independent maps, so restore and replay spread them over the cores)
// and returns the error of the lowest i that failed. After a failure no
// new i is started. f runs user code (serializers), so a panic in a worker
// is carried to the caller and raised there, where the task turns it into
// a failure as it does on its own goroutine, instead of ending the process.
func inParallel(n, workers int, f func(i int) error) error {
	errs := make([]error, n)
	workers = max(1, min(workers, n))
	if workers == 1 {
		for i := range n {
			if errs[i] = f(i); errs[i] != nil {
				break
			}
		}
	} else {
		var next atomic.Int64
		var failed atomic.Bool
		var wg sync.WaitGroup
		var once sync.Once
		var panicked any
		for range workers {
			wg.Go(func() {
				defer func() {
					if r := recover(); r != nil {
						once.Do(func() { panicked = workerPanic(r) })
						failed.Store(true)
					}
				}()
				for !failed.Load() {
					i := int(next.Add(1) - 1)
					if i >= n {
						return
					}
					if errs[i] = f(i); errs[i] != nil {
						failed.Store(true)
					}
				}
			})
		}
		wg.Wait()
		if panicked != nil {
			panic(panicked)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// workerPanic adds the worker's stack to its panic (the caller's, where it
// is raised again, says little); an error stays an error (errors.Is and As
// still see it).
func workerPanic(r any) any {
	if err, ok := r.(error); ok {
		return fmt.Errorf("%w (on a restore worker)\n%s", err, debug.Stack())
	}
	return fmt.Sprintf("%v (on a restore worker)\n%s", r, debug.Stack())
}

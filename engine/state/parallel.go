package state

import (
	"sync"
	"sync/atomic"
)

// inParallel calls f(0) … f(n-1) on up to workers goroutines (key groups
// are independent maps, so restore and replay spread them over the cores)
// and returns the error of the lowest i that failed. After a failure no
// new i is started.
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
		for range workers {
			wg.Go(func() {
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
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

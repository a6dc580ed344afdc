//go:build !unix

package jobs

import "time"

// cpuTime is not measured here: benchmarks of CPU time skip.
func cpuTime() time.Duration { return 0 }

const haveCPUTime = false

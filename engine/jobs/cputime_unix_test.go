//go:build unix

package jobs

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used so far, user and
// system, on every thread.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const haveCPUTime = true

//go:build unix

package changelog_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used so far, user and
// system, on every thread (the persister's included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const haveCPUTime = true

//go:build !linux

package state

import "time"

// threadCPU is the CPU time of the calling thread, where the OS tells it
// (zero elsewhere).
func threadCPU() time.Duration { return 0 }

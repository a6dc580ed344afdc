//go:build amd64 || arm64

package state

import "unsafe"

// prefetch asks the processor to start loading the cache line at p into
// its caches without waiting for it (PREFETCHT0, PRFM PLDL1KEEP): a hint,
// which changes nothing a program computes. Go has no prefetch of its own
// for programs; a plain load would not do, as the processor could not
// retire anything after it until the line arrived.
//
//go:noescape
func prefetch(p unsafe.Pointer)

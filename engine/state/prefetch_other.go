//go:build !amd64 && !arm64

package state

import "unsafe"

// prefetch is a no-op where gflink has no prefetch instruction for it.
func prefetch(p unsafe.Pointer) {}

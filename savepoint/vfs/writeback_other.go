//go:build !linux

package vfs

// StartWriteback does nothing here: the platform has no way to start
// writeback without waiting for it, and Sync does all the work.
func StartWriteback(f File, off, n int64) {}

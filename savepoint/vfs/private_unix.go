//go:build unix

package vfs

import (
	"io/fs"
	"os"
	"syscall"
)

// owner returns the uid that owns info, and false where the platform does
// not say (then ownership is not checked).
func owner(info fs.FileInfo) (uint32, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// openNonBlocking opens name for reading without waiting for a writer (a
// FIFO) and without following a symbolic link.
func openNonBlocking(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
}

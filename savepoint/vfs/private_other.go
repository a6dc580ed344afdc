//go:build !unix

package vfs

import (
	"io/fs"
	"os"
)

// owner cannot tell a file's owner on this platform: ownership is not
// checked.
func owner(info fs.FileInfo) (uint32, bool) { return 0, false }

func openNonBlocking(name string) (*os.File, error) { return os.Open(name) }

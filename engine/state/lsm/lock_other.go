//go:build !unix

package lsm

import (
	"errors"
	"os"
	"path/filepath"
)

// lockDir: without flock, a directory's owner cannot be told alive or dead,
// so stale directories are never removed (lockDir of an existing one fails)
// and a new one is simply created.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, errors.New("locked")
	}
	return f, nil
}

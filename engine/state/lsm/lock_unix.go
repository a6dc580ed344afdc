//go:build unix

package lsm

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockDir takes the exclusive lock of dir's LOCK file without waiting; it
// fails if another process holds it. The lock dies with the process, which
// is what makes a killed process's directory recognisable.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use: %w", dir, err)
	}
	return f, nil
}

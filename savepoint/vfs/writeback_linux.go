package vfs

import "golang.org/x/sys/unix"

// StartWriteback asks the kernel to start writing the file's bytes in
// [off, off+n) to disk without waiting for them (sync_file_range with
// SYNC_FILE_RANGE_WRITE), so that a later Sync has only the rest to wait
// for. It does nothing for files that are not the operating system's.
// It is a hint: errors are for Sync to report.
func StartWriteback(f File, off, n int64) {
	if fd, ok := f.(interface{ Fd() uintptr }); ok {
		_ = unix.SyncFileRange(int(fd.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
	}
}

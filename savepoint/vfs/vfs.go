// Package vfs is the one small filesystem interface through which gflink
// touches disk: snapshots, part files and the job registry. Tests wrap it to
// log the exact order of writes, fsyncs and renames, or to fail the n-th
// operation (see ErrorFS), the way pebble's vfs and errorfs are used.
package vfs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	Sync() error
	Stat() (fs.FileInfo, error)
}

// FS is the filesystem as gflink needs it.
type FS interface {
	// Create creates or truncates the named file for writing; a new file
	// is readable by everyone the umask allows (0644): for job output.
	Create(name string) (File, error)
	// CreatePerm is Create with the permissions a new file gets (before
	// the umask): snapshots and the job registry are owner-only.
	CreatePerm(name string, perm os.FileMode) (File, error)
	// Open opens the named file for reading.
	Open(name string) (File, error)
	// OpenDir opens a directory so that it can be fsynced.
	OpenDir(name string) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	Stat(name string) (fs.FileInfo, error)
	// Lstat is Stat that does not follow a symbolic link in the last
	// element of name.
	Lstat(name string) (fs.FileInfo, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	// RemoveBeneath removes dir/rel, resolving rel inside dir only: a
	// path that leaves dir, through ".." or a symbolic link, is refused
	// even if the tree changes while it is resolved (os.Root), so that a
	// crafted snapshot cannot make disposal delete another file.
	RemoveBeneath(dir, rel string) error
}

// Owner-only permissions of snapshots (checkpoints, savepoints) and of the
// job registry, which holds each job's REST token: other local users must
// neither read a job's state nor learn its token.
const (
	PrivateFileMode os.FileMode = 0o600
	PrivateDirMode  os.FileMode = 0o700
)

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}
func (osFS) CreatePerm(name string, perm os.FileMode) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
}
func (osFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }
func (osFS) RemoveBeneath(dir, rel string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.Remove(rel)
}
func (osFS) Open(name string) (File, error)              { return os.Open(name) }
func (osFS) OpenDir(name string) (File, error)           { return os.Open(name) }
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                    { return os.Rename(o, n) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (fs.FileInfo, error)       { return os.Stat(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)  { return os.ReadDir(name) }

// ReadFile reads a whole file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// SyncDir fsyncs a directory so that a rename or create inside it survives a
// crash.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// WriteFileAtomic makes data appear at name all at once or not at all: it
// writes a temporary file beside it, fsyncs it, renames it over name and
// fsyncs the directory. On error the temporary file is removed. A reader
// therefore never sees a half-written file under name, even after kill -9 or
// a power cut. A new file gets mode 0644 (before the umask).
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	return WriteFileAtomicPerm(fsys, name, data, 0o644)
}

// WriteFileAtomicPerm is WriteFileAtomic with the file's permissions.
func WriteFileAtomicPerm(fsys FS, name string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(name)
	tmp := filepath.Join(dir, "."+filepath.Base(name)+".inprogress")
	f, err := fsys.CreatePerm(tmp, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fsys.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = fsys.Rename(tmp, name); err != nil {
		return err
	}
	return SyncDir(fsys, dir)
}

// WriteFileSynced writes data to a new file and fsyncs it, but does not make
// it appear atomically: for state files that only become visible through a
// _metadata file written afterwards. The file is owner-only
// (PrivateFileMode), as every snapshot file is.
func WriteFileSynced(fsys FS, name string, data []byte) (err error) {
	f, err := fsys.CreatePerm(name, PrivateFileMode)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		f.Close()
		fsys.Remove(name)
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		fsys.Remove(name)
		return err
	}
	if err = f.Close(); err != nil {
		fsys.Remove(name)
		return err
	}
	return nil
}

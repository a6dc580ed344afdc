package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// Op names a filesystem operation, for fault injection and logging.
type Op string

// The operations an ErrorFS can fail and a LogFS records.
const (
	OpCreate   Op = "create"
	OpOpen     Op = "open"
	OpOpenDir  Op = "opendir"
	OpRemove   Op = "remove"
	OpRename   Op = "rename"
	OpMkdirAll Op = "mkdirall"
	OpStat     Op = "stat"
	OpReadDir  Op = "readdir"
	OpWrite    Op = "write"
	OpRead     Op = "read"
	OpSync     Op = "sync"
	OpClose    Op = "close"
)

// ErrInjected is the error an ErrorFS returns.
var ErrInjected = errors.New("injected error")

// Injector decides whether an operation fails.
type Injector interface {
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op, path string) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

// FailNth fails the n-th (1-based) operation for which match returns true,
// and only that one.
func FailNth(n int64, match func(op Op, path string) bool) Injector {
	var count atomic.Int64
	return InjectorFunc(func(op Op, path string) error {
		if match != nil && !match(op, path) {
			return nil
		}
		if count.Add(1) == n {
			return fmt.Errorf("%s %s: %w", op, path, ErrInjected)
		}
		return nil
	})
}

// ErrorFS wraps an FS and fails operations chosen by an Injector.
type ErrorFS struct {
	FS  FS
	Inj Injector
}

var _ FS = ErrorFS{}

func (e ErrorFS) check(op Op, path string) error {
	if e.Inj == nil {
		return nil
	}
	return e.Inj.MaybeError(op, path)
}

func (e ErrorFS) Create(name string) (File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, name: name, fs: e}, nil
}

func (e ErrorFS) CreatePerm(name string, perm os.FileMode) (File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.FS.CreatePerm(name, perm)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, name: name, fs: e}, nil
}

func (e ErrorFS) Open(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, name: name, fs: e}, nil
}

func (e ErrorFS) OpenDir(name string) (File, error) {
	if err := e.check(OpOpenDir, name); err != nil {
		return nil, err
	}
	f, err := e.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, name: name, fs: e}, nil
}

func (e ErrorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.FS.Remove(name)
}

func (e ErrorFS) RemoveAll(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.FS.RemoveAll(name)
}

func (e ErrorFS) Rename(o, n string) error {
	if err := e.check(OpRename, o); err != nil {
		return err
	}
	return e.FS.Rename(o, n)
}

func (e ErrorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.FS.MkdirAll(dir, perm)
}

func (e ErrorFS) Stat(name string) (fs.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.FS.Stat(name)
}

func (e ErrorFS) Lstat(name string) (fs.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.FS.Lstat(name)
}

func (e ErrorFS) RemoveBeneath(dir, rel string) error {
	if err := e.check(OpRemove, filepath.Join(dir, rel)); err != nil {
		return err
	}
	return e.FS.RemoveBeneath(dir, rel)
}

func (e ErrorFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := e.check(OpReadDir, name); err != nil {
		return nil, err
	}
	return e.FS.ReadDir(name)
}

type errorFile struct {
	File
	name string
	fs   ErrorFS
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *errorFile) Read(p []byte) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

// Close closes the file even when it fails: an injected close error still
// releases the descriptor, as a real failing close(2) does.
func (f *errorFile) Close() error {
	if err := f.fs.check(OpClose, f.name); err != nil {
		f.File.Close()
		return err
	}
	return f.File.Close()
}

// LogFS records every mutating operation, in order, so that a test can
// assert the exact sequence of writes, fsyncs and renames.
type LogFS struct {
	FS FS
	// Trim is removed from the front of every logged path.
	Trim string

	mu  sync.Mutex
	log []string
}

var _ FS = (*LogFS)(nil)

func (l *LogFS) record(op Op, args ...string) {
	for i, a := range args {
		args[i] = strings.TrimPrefix(a, l.Trim)
	}
	l.mu.Lock()
	l.log = append(l.log, string(op)+" "+strings.Join(args, " "))
	l.mu.Unlock()
}

// Log returns the operations recorded so far.
func (l *LogFS) Log() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.log...)
}

func (l *LogFS) Create(name string) (File, error) {
	l.record(OpCreate, name)
	f, err := l.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &logFile{File: f, name: name, l: l}, nil
}

func (l *LogFS) CreatePerm(name string, perm os.FileMode) (File, error) {
	l.record(OpCreate, name)
	f, err := l.FS.CreatePerm(name, perm)
	if err != nil {
		return nil, err
	}
	return &logFile{File: f, name: name, l: l}, nil
}

func (l *LogFS) Open(name string) (File, error) { return l.FS.Open(name) }

func (l *LogFS) OpenDir(name string) (File, error) {
	f, err := l.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &logFile{File: f, name: name, l: l}, nil
}

func (l *LogFS) Remove(name string) error {
	l.record(OpRemove, name)
	return l.FS.Remove(name)
}

func (l *LogFS) RemoveAll(name string) error {
	l.record(OpRemove, name)
	return l.FS.RemoveAll(name)
}

func (l *LogFS) RemoveBeneath(dir, rel string) error {
	l.record(OpRemove, filepath.Join(dir, rel))
	return l.FS.RemoveBeneath(dir, rel)
}

func (l *LogFS) Rename(o, n string) error {
	l.record(OpRename, o, n)
	return l.FS.Rename(o, n)
}

func (l *LogFS) MkdirAll(dir string, perm os.FileMode) error {
	l.record(OpMkdirAll, dir)
	return l.FS.MkdirAll(dir, perm)
}

func (l *LogFS) Stat(name string) (fs.FileInfo, error)      { return l.FS.Stat(name) }
func (l *LogFS) Lstat(name string) (fs.FileInfo, error)     { return l.FS.Lstat(name) }
func (l *LogFS) ReadDir(name string) ([]fs.DirEntry, error) { return l.FS.ReadDir(name) }

type logFile struct {
	File
	name string
	l    *LogFS
}

func (f *logFile) Write(p []byte) (int, error) {
	f.l.record(OpWrite, f.name)
	return f.File.Write(p)
}

func (f *logFile) Sync() error {
	f.l.record(OpSync, f.name)
	return f.File.Sync()
}

func (f *logFile) Close() error {
	f.l.record(OpClose, f.name)
	return f.File.Close()
}

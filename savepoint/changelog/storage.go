package changelog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gflink/gflink/savepoint/vfs"
)

// DirName is the directory, under <base-path>/<jobId>/, that holds a job's
// log files; deletion refuses files anywhere else.
const DirName = "dstl"

// MemoryPrefix starts the path of a file kept in this process's memory
// (state.changelog.storage: memory).
const MemoryPrefix = "memory:"

// Sink is an open log file.
type Sink interface {
	io.Writer
	Sync() error
	Close() error
}

// Storage creates log files.
type Storage interface {
	// Create creates a file; path is what checkpoints record.
	Create(name string) (s Sink, path string, err error)
}

// FSStorage keeps log files in a directory (state.changelog.storage:
// filesystem): <base-path>/<jobId>/dstl.
type FSStorage struct {
	FS  vfs.FS
	Dir string
}

// Create creates dir/name, owner-only like every snapshot file.
func (s FSStorage) Create(name string) (Sink, string, error) {
	p := filepath.Join(s.Dir, name)
	f, err := s.FS.CreatePerm(p, vfs.PrivateFileMode)
	if err != nil {
		return nil, "", err
	}
	return f, p, nil
}

// ReadBacker is a Storage that reads back the start of a file it created
// (while the file is still open for writing): a writer then keeps only
// what it wrote since the last fsync for a retry, not the whole file.
type ReadBacker interface {
	ReadBack(path string, n int64) ([]byte, error)
}

// ReadBack reads the first n bytes of the file at path.
func (s FSStorage) ReadBack(path string, n int64) ([]byte, error) {
	f, err := s.FS.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

// MemoryStorage keeps log files in memory, for tests, as Flink's in-memory
// changelog does. It belongs to one job (the job's state backends make
// it): its checkpoints restore within that job — after a failure — but not
// in another job or process. The zero value is not usable: NewMemoryStorage.
type MemoryStorage struct {
	mu    sync.Mutex
	files map[string][]byte
}

// NewMemoryStorage returns an empty store.
func NewMemoryStorage() *MemoryStorage { return &MemoryStorage{files: map[string][]byte{}} }

type memSink struct {
	m    *MemoryStorage
	path string
	buf  []byte
}

func (m *memSink) Write(p []byte) (int, error) { m.buf = append(m.buf, p...); return len(p), nil }
func (m *memSink) Sync() error                 { return nil }
func (m *memSink) Close() error {
	m.m.mu.Lock()
	m.m.files[m.path] = m.buf
	m.m.mu.Unlock()
	return nil
}

func (m *memSink) discard() { m.buf = nil }

// Create makes a file that exists once closed.
func (ms *MemoryStorage) Create(name string) (Sink, string, error) {
	return &memSink{m: ms, path: MemoryPrefix + name}, MemoryPrefix + name, nil
}

// ReadFile reads a log file a checkpoint refers to: from fsys, or from mem
// for a file of memory storage (mem may be nil outside the job that wrote
// it: the file is gone).
func ReadFile(fsys vfs.FS, mem *MemoryStorage, path string) ([]byte, error) {
	var buf []byte
	return ReadFileInto(fsys, mem, path, &buf)
}

// ReadFileInto is ReadFile reading into *buf, which it grows as needed
// (and sets to the grown buffer), so that a caller reading many files
// allocates once. A file of memory storage is returned as it is kept,
// *buf untouched: the caller must not change the bytes returned.
func ReadFileInto(fsys vfs.FS, mem *MemoryStorage, path string, buf *[]byte) ([]byte, error) {
	if strings.HasPrefix(path, MemoryPrefix) {
		var b []byte
		ok := false
		if mem != nil {
			mem.mu.Lock()
			b, ok = mem.files[path]
			mem.mu.Unlock()
		}
		if !ok {
			return nil, fmt.Errorf("changelog file %s was kept in the memory of the job that wrote it (state.changelog.storage: memory) and is gone with it; use state.changelog.storage: filesystem for checkpoints that outlive the job: %w", path, ErrCorrupt)
		}
		return b, nil
	}
	if !filepath.IsAbs(path) || filepath.Base(filepath.Dir(path)) != DirName {
		return nil, fmt.Errorf("changelog file path '%s' is not an absolute path in a %s/ directory: %w", path, DirName, ErrCorrupt)
	}
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open changelog file: %w", err)
	}
	defer f.Close()
	// Read into a buffer of the file's size (ReadAll would grow one by
	// doubling, copying the file about twice over), reused from file to
	// file by a restore's workers: a fresh one is zeroed first, and at 1 M
	// keys zeroing 120 MB of logs was an eighth of a recovery's CPU. A file
	// that grows meanwhile is still read to its end. (bytes.MinRead more:
	// ReadFrom wants that much room even for the read that finds the end,
	// and would otherwise copy the whole file into a buffer twice its size.)
	if info, err := f.Stat(); err == nil && info.Size() > 0 {
		*buf = slices.Grow((*buf)[:0], int(info.Size())+bytes.MinRead)
	}
	b := bytes.NewBuffer((*buf)[:0])
	_, err = b.ReadFrom(f)
	*buf = b.Bytes()[:0]
	if err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Remove deletes a log file no retained checkpoint refers to any more.
func Remove(fsys vfs.FS, mem *MemoryStorage, path string) error {
	if strings.HasPrefix(path, MemoryPrefix) {
		if mem != nil {
			mem.mu.Lock()
			delete(mem.files, path)
			mem.mu.Unlock()
		}
		return nil
	}
	if !filepath.IsAbs(path) || filepath.Base(filepath.Dir(path)) != DirName {
		return fmt.Errorf("refusing to delete %s: not in a %s/ directory", path, DirName)
	}
	err := fsys.RemoveBeneath(filepath.Dir(path), filepath.Base(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// IsLogPath reports whether a path a snapshot refers to is a log file.
func IsLogPath(p string) bool {
	return strings.HasPrefix(p, MemoryPrefix) || filepath.IsAbs(p) && filepath.Base(filepath.Dir(p)) == DirName
}

// Sweep deletes the log files in dir that keep does not name: files of
// checkpoints that never completed, or that were subsumed while the
// process died. Call it when the job has ended.
func Sweep(fsys vfs.FS, dir string, keep func(path string) bool) error {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil // nothing written
	}
	var errs []error
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if !keep(p) {
			errs = append(errs, Remove(fsys, nil, p))
		}
	}
	fsys.Remove(dir)               // only if empty
	fsys.Remove(filepath.Dir(dir)) // the job's directory under the base path, if empty
	return errors.Join(errs...)
}

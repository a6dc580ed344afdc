package connectors

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gflink/gflink/savepoint/vfs"
	"github.com/gflink/gflink/stream"
	"golang.org/x/sys/unix"
)

// UpsertFileSink writes keyed records into a file-backed key-value table:
// each record sets its key's value. Writing is idempotent — writing the
// same record again changes nothing — which is the second route to
// end-to-end exactly-once, without transactions: after a recovery,
// exactly-once state replays the same per-key updates, so the table ends
// as if nothing had failed. (A reader may, meanwhile, see a key's value go
// back to an earlier one and come forward again; what it never sees is a
// key twice or a wrong final value.)
//
// The table is the file at Path, one "key<TAB>value" line per key, sorted
// by key; keys and values holding tabs, newlines or quotes are written as
// Go-quoted strings. It is rewritten atomically at every checkpoint barrier
// and at the end of input, so a reader never sees a half-written table.
// All subtasks of the sink share one table; it suits tables of up to a few
// hundred thousand keys.
type UpsertFileSink[T any] struct {
	Path  string
	Key   func(T) string
	Value func(T) string
	FS    vfs.FS

	mu     sync.Mutex
	table  map[string]string
	loaded bool
	dirty  bool
}

func (s *UpsertFileSink[T]) fs() vfs.FS {
	if s.FS == nil {
		return vfs.Default
	}
	return s.FS
}

// CheckUpsertPath reports why path could not hold an upsert table, without
// creating anything: it must be a regular file or not exist yet, and its
// directory must exist or be creatable. A job checks it before it is
// submitted; at run time the same mistake fails every restart.
func CheckUpsertPath(path string) error {
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return fmt.Errorf("%s is a directory; --upsert takes a file (created if missing)", path)
	case err == nil && !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case err == nil:
		if err := unix.Access(path, unix.W_OK); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	if err := CheckCreatableDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("cannot create the directory of %s: %w", path, err)
	}
	return nil
}

// CreateWriter implements stream.Sink.
func (s *UpsertFileSink[T]) CreateWriter(stream.SinkContext) (stream.SinkWriter[T], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fs().MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return nil, fmt.Errorf("create the directory of upsert table %s: %w", s.Path, err)
	}
	if !s.loaded {
		t, err := ReadUpsertTable(s.fs(), s.Path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if t == nil {
			t = map[string]string{}
		}
		s.table, s.loaded = t, true
	}
	return &upsertWriter[T]{s: s}, nil
}

type upsertWriter[T any] struct{ s *UpsertFileSink[T] }

func (w *upsertWriter[T]) Write(v T) error {
	s := w.s
	k, val := s.Key(v), s.Value(v)
	s.mu.Lock()
	if old, ok := s.table[k]; !ok || old != val {
		s.table[k] = val
		s.dirty = true
	}
	s.mu.Unlock()
	return nil
}

// Flush persists the table when it changed.
func (w *upsertWriter[T]) Flush(bool) error {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty {
		return nil
	}
	keys := make([]string, 0, len(s.table))
	for k := range s.table {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString(quoteField(k))
		b.WriteByte('\t')
		b.WriteString(quoteField(s.table[k]))
		b.WriteByte('\n')
	}
	if err := vfs.WriteFileAtomic(s.fs(), s.Path, b.Bytes()); err != nil {
		return fmt.Errorf("write upsert table %s: %w", s.Path, err)
	}
	s.dirty = false
	return nil
}

func (w *upsertWriter[T]) Close() error { return nil }

func quoteField(s string) string {
	if strings.ContainsAny(s, "\t\n\r\"") {
		return strconv.Quote(s)
	}
	return s
}

func unquoteField(s string) (string, error) {
	if strings.HasPrefix(s, `"`) {
		return strconv.Unquote(s)
	}
	return s, nil
}

// ReadUpsertTable reads a table written by UpsertFileSink.
func ReadUpsertTable(fsys vfs.FS, path string) (map[string]string, error) {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, err
	}
	t := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			return nil, fmt.Errorf("%s:%d: not a key<TAB>value line", path, n)
		}
		if k, err = unquoteField(k); err == nil {
			v, err = unquoteField(v)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		t[k] = v
	}
	return t, sc.Err()
}

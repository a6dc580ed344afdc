package vfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gflink/gflink/savepoint/vfs"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteFileAtomicSequence(t *testing.T) {
	root := t.TempDir()
	lfs := &vfs.LogFS{FS: vfs.Default, Trim: root + "/"}
	if err := vfs.WriteFileAtomic(lfs, filepath.Join(root, "d", "f"), []byte("x")); err == nil {
		t.Fatal("WriteFileAtomic into a missing directory succeeded")
	}
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	lfs = &vfs.LogFS{FS: vfs.Default, Trim: root + "/"}
	if err := vfs.WriteFileAtomic(lfs, filepath.Join(root, "d", "f"), []byte("hello")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create d/.f.inprogress",
		"write d/.f.inprogress",
		"sync d/.f.inprogress",
		"close d/.f.inprogress",
		"rename d/.f.inprogress d/f",
		"sync d",
		"close d",
	}
	if got := lfs.Log(); !slices.Equal(got, want) {
		t.Fatalf("operations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := readString(t, filepath.Join(root, "d", "f")); got != "hello" {
		t.Fatalf("content %q", got)
	}
	if names := listDir(t, filepath.Join(root, "d")); !slices.Equal(names, []string{"f"}) {
		t.Fatalf("directory holds %q", names)
	}
}

func TestWriteFileAtomicOverwrite(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "registry")
	for _, content := range []string{"first, a longer content", "second"} {
		if err := vfs.WriteFileAtomic(vfs.Default, name, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got := readString(t, name); got != content {
			t.Fatalf("content %q, want %q", got, content)
		}
	}
}

func TestWriteFileAtomicFailures(t *testing.T) {
	root := t.TempDir()
	steps := []struct {
		op       vfs.Op
		onDir    bool
		replaced bool // whether the new content is in place despite the error
	}{
		{vfs.OpCreate, false, false},
		{vfs.OpWrite, false, false},
		{vfs.OpSync, false, false},
		{vfs.OpClose, false, false},
		{vfs.OpRename, false, false},
		{vfs.OpOpenDir, true, true},
		{vfs.OpSync, true, true},
		{vfs.OpClose, true, true},
	}
	for i, s := range steps {
		dir := filepath.Join(root, string(rune('a'+i)))
		os.Mkdir(dir, 0o755)
		name := filepath.Join(dir, "f")
		os.WriteFile(name, []byte("old"), 0o644)
		target := filepath.Join(dir, ".f.inprogress")
		if s.onDir {
			target = dir
		}
		efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(1, func(op vfs.Op, path string) bool {
			return op == s.op && path == target
		})}
		err := vfs.WriteFileAtomic(efs, name, []byte("new"))
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("failing %s on %s: %v", s.op, target, err)
		}
		want := "old"
		if s.replaced {
			want = "new"
		}
		if got := readString(t, name); got != want {
			t.Fatalf("failing %s on %s: content %q, want %q", s.op, target, got, want)
		}
		if names := listDir(t, dir); !slices.Equal(names, []string{"f"}) {
			t.Fatalf("failing %s on %s: directory holds %q", s.op, target, names)
		}
	}
}

func TestWriteFileSynced(t *testing.T) {
	root := t.TempDir()
	lfs := &vfs.LogFS{FS: vfs.Default, Trim: root + "/"}
	if err := vfs.WriteFileSynced(lfs, filepath.Join(root, "s"), []byte("state")); err != nil {
		t.Fatal(err)
	}
	want := []string{"create s", "write s", "sync s", "close s"}
	if got := lfs.Log(); !slices.Equal(got, want) {
		t.Fatalf("operations %q, want %q", got, want)
	}
	if got := readString(t, filepath.Join(root, "s")); got != "state" {
		t.Fatalf("content %q", got)
	}

	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpClose} {
		name := filepath.Join(root, "f-"+string(op))
		efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(1, func(o vfs.Op, path string) bool { return o == op })}
		err := vfs.WriteFileSynced(efs, name, []byte("x"))
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("failing %s: %v", op, err)
		}
		if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("failing %s left the file behind (%v)", op, err)
		}
	}
}

func TestFailNthCountsOnlyMatchingOps(t *testing.T) {
	inj := vfs.FailNth(2, func(op vfs.Op, path string) bool { return op == vfs.OpWrite && strings.HasSuffix(path, ".state") })
	seq := []struct {
		op   vfs.Op
		path string
		fail bool
	}{
		{vfs.OpCreate, "a.state", false},
		{vfs.OpWrite, "_metadata", false},
		{vfs.OpWrite, "a.state", false}, // match 1
		{vfs.OpSync, "a.state", false},
		{vfs.OpWrite, "b.other", false},
		{vfs.OpWrite, "b.state", true}, // match 2
		{vfs.OpWrite, "c.state", false},
		{vfs.OpWrite, "d.state", false},
	}
	for i, s := range seq {
		err := inj.MaybeError(s.op, s.path)
		if (err != nil) != s.fail {
			t.Fatalf("op %d (%s %s): error %v, want failure %v", i, s.op, s.path, err, s.fail)
		}
		if err != nil {
			if !errors.Is(err, vfs.ErrInjected) || !strings.Contains(err.Error(), "write b.state") {
				t.Fatalf("injected error %q", err)
			}
		}
	}

	all := vfs.FailNth(3, nil)
	var failed []int
	for i := 1; i <= 6; i++ {
		if all.MaybeError(vfs.Op([]string{"open", "read", "stat"}[i%3]), "x") != nil {
			failed = append(failed, i)
		}
	}
	if !slices.Equal(failed, []int{3}) {
		t.Fatalf("FailNth(3, nil) failed ops %v, want [3]", failed)
	}
}

func TestErrorFSInjectsEveryOp(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "f"), []byte("data"), 0o644)
	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpOpen, vfs.OpOpenDir, vfs.OpRemove, vfs.OpRename, vfs.OpMkdirAll, vfs.OpStat, vfs.OpReadDir, vfs.OpWrite, vfs.OpRead, vfs.OpSync, vfs.OpClose} {
		var hit bool
		efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.InjectorFunc(func(o vfs.Op, path string) error {
			if o == op {
				hit = true
				return vfs.ErrInjected
			}
			return nil
		})}
		f := filepath.Join(root, "f")
		var errs []error
		if w, err := efs.Create(filepath.Join(root, "new")); err != nil {
			errs = append(errs, err)
		} else {
			_, err := w.Write([]byte("x"))
			errs = append(errs, err, w.Sync(), w.Close())
		}
		if r, err := efs.Open(f); err != nil {
			errs = append(errs, err)
		} else {
			_, err1 := r.Read(make([]byte, 1))
			_, err2 := r.ReadAt(make([]byte, 1), 0)
			errs = append(errs, err1, err2, r.Close())
		}
		if d, err := efs.OpenDir(root); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, d.Close())
		}
		_, err1 := efs.Stat(f)
		_, err2 := efs.ReadDir(root)
		errs = append(errs, err1, err2,
			efs.MkdirAll(filepath.Join(root, "sub"), 0o755),
			efs.Rename(filepath.Join(root, "nope"), filepath.Join(root, "nope2")),
			efs.Remove(filepath.Join(root, "nope")))
		if !hit {
			t.Fatalf("%s was never checked", op)
		}
		if !slices.ContainsFunc(errs, func(e error) bool { return errors.Is(e, vfs.ErrInjected) }) {
			t.Fatalf("%s: injected error not returned (%v)", op, errs)
		}
	}
}

func TestLogFSRecordsMutations(t *testing.T) {
	root := t.TempDir()
	lfs := &vfs.LogFS{FS: vfs.Default, Trim: root + "/"}
	lfs.MkdirAll(filepath.Join(root, "a", "b"), 0o755)
	f, err := lfs.Create(filepath.Join(root, "a", "x"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("1"))
	f.Close()
	if b, err := vfs.ReadFile(lfs, filepath.Join(root, "a", "x")); err != nil || string(b) != "1" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	lfs.Stat(filepath.Join(root, "a", "x"))
	lfs.ReadDir(root)
	lfs.Rename(filepath.Join(root, "a", "x"), filepath.Join(root, "a", "y"))
	if err := vfs.SyncDir(lfs, filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	lfs.Remove(filepath.Join(root, "a", "y"))
	lfs.RemoveAll(filepath.Join(root, "a"))
	want := []string{"mkdirall a/b", "create a/x", "write a/x", "close a/x", "rename a/x a/y", "sync a", "close a", "remove a/y", "remove a"}
	if got := lfs.Log(); !slices.Equal(got, want) {
		t.Fatalf("log %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(root, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("RemoveAll did not remove: %v", err)
	}
}

func TestSyncDirAndReadFileErrors(t *testing.T) {
	root := t.TempDir()
	if err := vfs.SyncDir(vfs.Default, filepath.Join(root, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir(missing) = %v", err)
	}
	if _, err := vfs.ReadFile(vfs.Default, filepath.Join(root, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile(missing) = %v", err)
	}
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(1, func(op vfs.Op, _ string) bool { return op == vfs.OpSync })}
	if err := vfs.SyncDir(efs, root); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("SyncDir with failing sync = %v", err)
	}
}

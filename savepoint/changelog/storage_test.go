package changelog_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/savepoint/changelog"
	"github.com/gflink/gflink/savepoint/vfs"
)

func TestReadFileMemoryMissing(t *testing.T) {
	p := changelog.MemoryPrefix + uniquePrefix("never-written") + "-1.log"
	_, err := changelog.ReadFile(vfs.Default, changelog.NewMemoryStorage(), p)
	if err == nil || !strings.Contains(err.Error(), "state.changelog.storage") || !strings.Contains(err.Error(), p) {
		t.Fatalf("ReadFile(%s) = %v; want an error naming the file and state.changelog.storage", p, err)
	}
	if !errors.Is(err, changelog.ErrCorrupt) {
		t.Fatalf("error %v is not ErrCorrupt", err)
	}
	// A memory file exists once closed.
	mem := changelog.NewMemoryStorage()
	s, path, err := mem.Create(uniquePrefix("mem") + "-1.log")
	if err != nil || !strings.HasPrefix(path, changelog.MemoryPrefix) {
		t.Fatalf("Create: %s, %v", path, err)
	}
	s.Write([]byte("abc"))
	if _, err := changelog.ReadFile(vfs.Default, mem, path); err == nil {
		t.Fatal("a memory file is readable before it is closed")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := changelog.ReadFile(vfs.Default, mem, path); err != nil || string(b) != "abc" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	// Another job's store (or none) does not have it.
	if _, err := changelog.ReadFile(vfs.Default, changelog.NewMemoryStorage(), path); err == nil {
		t.Fatal("a memory file is readable from another store")
	}
	if _, err := changelog.ReadFile(vfs.Default, nil, path); err == nil {
		t.Fatal("a memory file is readable without its store")
	}
	if err := changelog.Remove(vfs.Default, mem, path); err != nil {
		t.Fatal(err)
	}
	if _, err := changelog.ReadFile(vfs.Default, mem, path); err == nil || !strings.Contains(err.Error(), "state.changelog.storage") {
		t.Fatalf("ReadFile after Remove = %v", err)
	}
}

// writeFiles writes n one-record files into dir through a writer.
func writeFiles(t *testing.T, dir, prefix string, n int) []changelog.File {
	t.Helper()
	w := changelog.NewWriter(changelog.WriterOptions{Storage: changelog.FSStorage{FS: vfs.Default, Dir: dir},
		Prefix: prefix, Declarations: declarations(wDecls)}, 1, time.Unix(0, 0))
	defer w.Close()
	for i := 0; i < n; i++ {
		write(w, fixedRecs(1, i)[0])
		w.Roll()
	}
	list, err := files(t, w, 1, int64(n))
	if err != nil || len(list) != n {
		t.Fatalf("Files = %v, %v", list, err)
	}
	return list
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Stat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestRemove(t *testing.T) {
	dir := fsDir(t)
	list := writeFiles(t, dir, "rm", 2)
	if err := changelog.Remove(vfs.Default, nil, list[0].Path); err != nil {
		t.Fatal(err)
	}
	if exists(t, list[0].Path) || !exists(t, list[1].Path) {
		t.Fatalf("after Remove of %s: it exists %v, %s exists %v", list[0].Path, exists(t, list[0].Path), list[1].Path, exists(t, list[1].Path))
	}
	if _, err := changelog.ReadFile(vfs.Default, nil, list[0].Path); err == nil {
		t.Fatal("ReadFile of a removed file succeeded")
	}
	// Removing it again is fine: it is gone.
	if err := changelog.Remove(vfs.Default, nil, list[0].Path); err != nil {
		t.Fatalf("second Remove: %v", err)
	}

	// Files outside a dstl/ directory are never deleted nor read.
	other := filepath.Join(filepath.Dir(dir), "shared")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(other, "rm-1.log")
	if err := os.WriteFile(victim, []byte("not a log"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		victim,
		filepath.Join(dir, "..", "shared", "rm-1.log"), // Base(Dir) of the unclean path is "shared" too
		"dstl/rm-2.log",                       // relative
		changelog.DirName,                     // not in it
		filepath.Join(dir, "sub", "rm-2.log"), // below it
	} {
		if err := changelog.Remove(vfs.Default, nil, p); err == nil || !strings.Contains(err.Error(), "dstl/") {
			t.Fatalf("Remove(%s) = %v; want a refusal", p, err)
		}
		if _, err := changelog.ReadFile(vfs.Default, nil, p); !errors.Is(err, changelog.ErrCorrupt) {
			t.Fatalf("ReadFile(%s) = %v; want a refusal", p, err)
		}
		if changelog.IsLogPath(p) {
			t.Fatalf("IsLogPath(%s) is true", p)
		}
	}
	if !exists(t, victim) || !exists(t, list[1].Path) {
		t.Fatal("a refused Remove deleted a file")
	}
}

func TestSweep(t *testing.T) {
	dir := fsDir(t)
	job := filepath.Dir(dir)
	list := writeFiles(t, dir, "sw", 4)
	keep := map[string]bool{list[1].Path: true, list[3].Path: true}
	if err := changelog.Sweep(vfs.Default, dir, func(p string) bool { return keep[p] }); err != nil {
		t.Fatal(err)
	}
	for _, f := range list {
		if exists(t, f.Path) != keep[f.Path] {
			t.Fatalf("after Sweep: %s exists %v, kept %v", f.Path, exists(t, f.Path), keep[f.Path])
		}
	}
	if !exists(t, dir) {
		t.Fatal("Sweep removed a directory that still holds kept files")
	}
	// Kept files are intact.
	for _, f := range []changelog.File{list[1], list[3]} {
		data, err := changelog.ReadFile(vfs.Default, nil, f.Path)
		if err != nil || int64(len(data)) != f.Size {
			t.Fatalf("kept %s: %d bytes, %v", f.Path, len(data), err)
		}
	}
	// Keeping nothing empties the directory, which goes, and the job's
	// directory with it.
	if err := changelog.Sweep(vfs.Default, dir, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if exists(t, dir) || exists(t, job) {
		t.Fatalf("after sweeping everything: %s exists %v, %s exists %v", dir, exists(t, dir), job, exists(t, job))
	}
	// A directory never written is nothing to sweep.
	if err := changelog.Sweep(vfs.Default, filepath.Join(t.TempDir(), "none", changelog.DirName), func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	// A job directory holding more than the log stays.
	dir2 := fsDir(t)
	os.WriteFile(filepath.Join(filepath.Dir(dir2), "other"), nil, 0o600)
	writeFiles(t, dir2, "sw2", 1)
	if err := changelog.Sweep(vfs.Default, dir2, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if exists(t, dir2) || !exists(t, filepath.Dir(dir2)) {
		t.Fatal("Sweep removed a job directory that was not empty, or left the empty log directory")
	}
}

func TestIsLogPath(t *testing.T) {
	for p, want := range map[string]bool{
		"memory:x-1.log":           true,
		"/base/job/dstl/x-1.log":   true,
		"/base/job/shared/x.log":   false,
		"base/job/dstl/x-1.log":    false,
		"/base/job/dstl":           false,
		"/base/job/dstl/sub/x.log": false,
	} {
		if got := changelog.IsLogPath(p); got != want {
			t.Fatalf("IsLogPath(%s) = %v, want %v", p, got, want)
		}
	}
}

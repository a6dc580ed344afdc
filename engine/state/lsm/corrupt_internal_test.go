package lsm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/gflink/gflink/internal/testutil"
)

// corruptCheckpoint writes a store of n keys as a checkpoint into dir and
// flips a byte in the middle of its SST file, whose name it returns.
func corruptCheckpoint(t *testing.T, dir string, n int) string {
	t.Helper()
	s, err := Open(Options{Dir: filepath.Join(t.TempDir(), "writer")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.Set([]byte(fmt.Sprintf("key-%06d", i)), []byte(fmt.Sprintf("value-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Checkpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("checkpoint SST files %v; want one", ssts)
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(ssts[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Base(ssts[0])
}

// TestCorruptFileFailsTheStore: a corrupt SST found by a read on the
// task's goroutine, or by one of Pebble's own background jobs (a
// compaction), fails the store — every later read and write returns the
// error, naming the file as the snapshot it was restored from calls it —
// instead of Pebble's default, a panic that ends the process. Close still
// removes the working directory.
func TestCorruptFileFailsTheStore(t *testing.T) {
	for _, by := range []string{"read", "compaction"} {
		t.Run(by, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "restored")
			sst := corruptCheckpoint(t, dir, 20000)
			origin := "/ck/job/chk-3/b1-" + sst
			s, err := Open(Options{Dir: dir, Restored: map[string]string{sst: origin}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the working directory is left: %v", err)
				}
			}()
			var first error
			switch by {
			case "read":
				for i := 0; i < 20000 && first == nil; i++ {
					_, _, first = s.Get([]byte(fmt.Sprintf("key-%06d", i)), nil)
				}
			case "compaction":
				// A table over the same keys, then a compaction that
				// merges it with the corrupt one (on Pebble's goroutines).
				for i := 0; i < 20000; i += 7 {
					if err := s.Set([]byte(fmt.Sprintf("key-%06d", i)), []byte("new")); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.sync(); err != nil {
					t.Fatal(err)
				}
				if err := s.db.Flush(); err != nil {
					t.Fatal(err)
				}
				// Pebble retries a failed compaction until it is
				// cancelled: wait for the report, then cancel it.
				ctx, cancel := context.WithCancel(t.Context())
				compacted := make(chan error, 1)
				go func() { compacted <- s.db.Compact(ctx, []byte("key-"), []byte("key-999999"), false) }()
				select {
				case <-s.h.done:
				case err := <-compacted:
					t.Fatalf("the compaction of a corrupt file ended with %v before the store failed", err)
				case <-testutil.After(20 * time.Second):
					t.Fatal("no failure within 20 s of compacting a corrupt file")
				}
				cancel()
				<-compacted
				first = s.h.get()
			}
			var ce *CorruptionError
			if !errors.As(first, &ce) || ce.File != sst || ce.Origin != origin {
				t.Fatalf("%s of a corrupt file: %v; want a CorruptionError of %s from %s", by, first, sst, origin)
			}
			want := fmt.Sprintf("lsm: state file %s (restored from %s) is corrupt", sst, origin)
			if !strings.Contains(first.Error(), want) {
				t.Errorf("error %q; want it to say %q", first, want)
			}
			// The store stays failed: reads that reach Pebble, iterators
			// and writes all say so.
			if _, _, err := s.Get([]byte("key-000000"), nil); !errors.As(err, &ce) {
				t.Errorf("a later Get: %v", err)
			}
			if err := s.Set([]byte("new"), []byte("v")); !errors.As(err, &ce) {
				t.Errorf("a later Set: %v", err)
			}
			if it, err := s.NewIter(nil, nil); err == nil {
				for ok := it.First(); ok; ok = it.Next() {
				}
				if err := it.Error(); !errors.As(err, &ce) {
					t.Errorf("a later iterator: %v", err)
				}
				it.Close()
			} else if !errors.As(err, &ce) {
				t.Errorf("a later NewIter: %v", err)
			}
			res, err := s.Checkpoint(filepath.Join(t.TempDir(), "chk"))
			if err == nil {
				err = <-res
			}
			if !errors.As(err, &ce) {
				t.Errorf("a checkpoint of a failed store: %v; want the corruption", err)
			}
		})
	}
}

// TestFatalfDoesNotPanic: Pebble's fatal conditions fail the store; the
// default logger would end the process from whichever goroutine (often
// Pebble's own) met them.
func TestFatalfDoesNotPanic(t *testing.T) {
	h := newHealth("/work/op_1", nil)
	var l pebble.Logger = storeLogger{h}
	l.Fatalf("MANIFEST flush failed: %v", errors.New("disk full"))
	err := h.get()
	if err == nil || err.Error() != "lsm: /work/op_1: MANIFEST flush failed: disk full" {
		t.Fatalf("after Fatalf: %v", err)
	}
	if err := h.wrap(errors.New("later")); err != h.get() {
		t.Fatalf("a later error: %v; want the first failure", err)
	}
	if err := h.protect(func() error { panic("invariant violated") }); err != h.get() {
		t.Fatalf("a panic after the failure: %v; want the first failure", err)
	}
	h2 := newHealth("/work/op_2", nil)
	if err := h2.protect(func() error { panic(errors.New("invariant violated")) }); err == nil || !strings.Contains(err.Error(), "pebble panicked: invariant violated") {
		t.Fatalf("a panic: %v", err)
	}
}

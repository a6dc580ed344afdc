package jobregistry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
)

// TestForgedJIDTouchesNothingOutside: an entry whose jid is a path (a
// forged entry file) is ignored: nothing is written or deleted through
// it, and nothing path-like is listed.
func TestForgedJIDTouchesNothingOutside(t *testing.T) {
	home := t.TempDir()
	victimDir := filepath.Join(home, "victim")
	os.MkdirAll(victimDir, 0o700)
	victim := filepath.Join(victimDir, "important.json")
	os.WriteFile(victim, []byte("keep me"), 0o600)
	r := NewRegistry(home)
	r.Alive = func(int) bool { return false } // found dead: would be retired
	var warnings []string
	r.Warn = func(s string) { warnings = append(warnings, s) }
	if err := r.Put(Entry{JobID: jid("ok"), State: "FINISHED"}); err != nil {
		t.Fatal(err)
	}
	forged := filepath.Join(r.Dir, jid("forged")+".json")
	os.WriteFile(forged, []byte(`{"jid":"../victim/important","state":"RUNNING","pid":12345}`), 0o600)
	os.WriteFile(filepath.Join(r.Dir, "..%2f..%2fetc.json"), []byte(`{"jid":"..%2f..%2fetc","state":"FINISHED"}`), 0o600)
	got, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].JobID != jid("ok") {
		t.Errorf("List = %+v; want only the genuine entry", got)
	}
	if data, err := os.ReadFile(victim); err != nil || string(data) != "keep me" {
		t.Fatalf("the file the forged jid names was changed: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(home, "victim", "important.json.json")); err == nil {
		t.Fatal("a file was written through the forged jid")
	}
	if len(warnings) != 2 || !strings.Contains(strings.Join(warnings, "\n"), `its jid "../victim/important" is not the job id of its file name`) {
		t.Errorf("warnings %q; want one per skipped file", warnings)
	}
	if _, err := r.Get(jid("forged")); !errors.As(err, new(*ForgedEntryError)) {
		t.Errorf("Get of the forged entry: %v; want a refusal", err)
	}
	if _, err := r.Get("../victim/important"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a path: %v; want not found", err)
	}
	if err := r.Put(Entry{JobID: "../victim/important"}); err == nil {
		t.Error("Put of a path-like job id succeeded")
	}
}

// TestFIFOInTheRegistryDoesNotHang: a FIFO named like an entry is skipped
// (opening one for reading waits for a writer).
func TestFIFOInTheRegistryDoesNotHang(t *testing.T) {
	r := NewRegistry(t.TempDir())
	if err := r.Put(Entry{JobID: jid("ok"), State: "FINISHED"}); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(r.Dir, jid("fifo")+".json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	done := make(chan error, 2)
	go func() {
		_, err := r.List()
		done <- err
	}()
	go func() {
		_, err := r.Get(jid("fifo"))
		if err == nil {
			err = errors.New("Get of a FIFO succeeded")
		} else if !strings.Contains(err.Error(), "not a regular file") {
			err = fmt.Errorf("Get of a FIFO: %v; want 'not a regular file'", err)
		} else {
			err = nil
		}
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-testutil.After(10 * time.Second):
			// Unblock the reader so the test can end, then fail.
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			t.Fatal("reading the registry hung on a FIFO")
		}
	}
}

// TestRegistryMustBeTheUsers: a registry directory or GFLINK_HOME that
// others can write (or that belongs to someone else) is refused with how
// to fix it.
func TestRegistryMustBeTheUsers(t *testing.T) {
	t.Run("a world-writable jobs directory", func(t *testing.T) {
		r := NewRegistry(t.TempDir())
		r.Put(Entry{JobID: jid("a"), State: "FINISHED"})
		os.Chmod(r.Dir, 0o777)
		for name, call := range map[string]func() error{
			"List": func() error { _, err := r.List(); return err },
			"Get":  func() error { _, err := r.Get(jid("a")); return err },
			"Put":  func() error { return r.Put(Entry{JobID: jid("b")}) },
		} {
			err := call()
			if err == nil || !strings.Contains(err.Error(), "writable by group or others") || !strings.Contains(err.Error(), "chmod go-w "+r.Dir) || !strings.Contains(err.Error(), "GFLINK_HOME") {
				t.Errorf("%s: %v; want a refusal saying how to fix it", name, err)
			}
		}
	})
	t.Run("a GFLINK_HOME of another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give a directory to another user")
		}
		home := t.TempDir()
		os.Chown(home, 65534, 65534)
		r := NewRegistry(home)
		if _, err := r.List(); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("List: %v; want a refusal naming the owner", err)
		}
	})
}

// TestEndedJobsExpire: List keeps an ended job for Expiration after its
// end (jobstore.expiration-time), and Clear removes every job that is not
// running.
func TestEndedJobsExpire(t *testing.T) {
	r := NewRegistry(t.TempDir())
	r.Alive = func(pid int) bool { return pid == 1 }
	r.Executable = func(int) (string, error) { return "/opt/gflink", nil }
	r.Expiration = time.Hour
	now := time.Now()
	for _, e := range []Entry{
		{JobID: jid("running"), PID: 1, Executable: "/opt/gflink", State: "RUNNING", StartTime: 1},
		{JobID: jid("recent"), State: "FINISHED", StartTime: 2, EndTime: now.Add(-time.Minute).UnixMilli()},
		{JobID: jid("old"), State: "FAILED", StartTime: 3, EndTime: now.Add(-2 * time.Hour).UnixMilli()},
		{JobID: jid("lost"), PID: 2, Executable: "/opt/gflink", State: "RUNNING", StartTime: 4},
	} {
		if err := r.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.JobID)
		}
		return out
	}
	got, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{jid("running"), jid("recent")}; !slices.Equal(ids(got), want) {
		t.Errorf("List = %v; want the running job and the one that ended a minute ago", ids(got))
	}
	if _, err := r.Lost(jid("lost")); err != nil {
		t.Errorf("the lost job's entry: %v", err)
	}
	cleared, err := r.Clear()
	slices.Sort(cleared)
	want := []string{jid("lost"), jid("recent")}
	slices.Sort(want)
	if err != nil || !slices.Equal(cleared, want) {
		t.Errorf("Clear = %v, %v; want %v", cleared, err, want)
	}
	if got, _ := r.List(); !slices.Equal(ids(got), []string{jid("running")}) {
		t.Errorf("List after Clear = %v; want the running job only", ids(got))
	}
}

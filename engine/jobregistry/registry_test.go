package jobregistry

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
)

// jid makes a job id of a short name, for readable tests.
func jid(name string) string {
	h := hex.EncodeToString([]byte(name))
	return strings.Repeat("0", 32-len(h)) + h
}

func TestRegistry(t *testing.T) {
	dir := t.TempDir()
	r := NewRegistry(dir)
	alive := map[int]bool{1: true, 2: false, 3: false}
	r.Alive = func(pid int) bool { return alive[pid] }
	for _, e := range []Entry{
		{JobID: jid("a"), PID: 1, State: "RUNNING", StartTime: 3},
		{JobID: jid("b"), PID: 2, State: "RUNNING", StartTime: 2}, // died without ending its job
		{JobID: jid("c"), PID: 3, State: "FINISHED", StartTime: 1},
	} {
		if err := r.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.JobID)
	}
	if !slices.Equal(ids, []string{jid("c"), jid("a")}) {
		t.Errorf("List = %v; want the ended job and the live one, oldest first", ids)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", jid("b")+".json")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the dead process's entry must be cleaned")
	}
	if _, err := r.Get(jid("b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a cleaned entry: %v", err)
	}
	// ... but kept aside, so that its checkpoints can still be found.
	if e, err := r.Lost(jid("b")); err != nil || e.JobID != jid("b") || e.State != "RUNNING" {
		t.Errorf("Lost(b) = %+v, %v", e, err)
	}
	if _, err := r.Lost(jid("a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lost of a live job: %v", err)
	}
	if e, err := r.Get(jid("c")); err != nil || !e.Terminal() {
		t.Errorf("an ended job stays listed: %v %v", e, err)
	}
}

func TestRegistryKeepsTheLastLostJobs(t *testing.T) {
	r := NewRegistry(t.TempDir())
	r.Alive = func(int) bool { return false }
	for i := 0; i < DefaultMaxEnded+3; i++ {
		id := fmt.Sprintf("%032x", i)
		r.Put(Entry{JobID: id, State: "RUNNING"})
		r.Get(id) // found dead: retired
	}
	if got, _ := r.List(); len(got) != 0 {
		t.Errorf("List = %v; want no entry", got)
	}
	des, _ := os.ReadDir(r.lostDir())
	if len(des) != DefaultMaxEnded {
		t.Errorf("%d lost entries kept; want %d", len(des), DefaultMaxEnded)
	}
	if _, err := r.Lost(fmt.Sprintf("%032x", DefaultMaxEnded+2)); err != nil {
		t.Errorf("the newest lost entry is gone: %v", err)
	}
}

func TestRegistryKeepsTheLastEndedJobs(t *testing.T) {
	r := NewRegistry(t.TempDir())
	r.Alive = func(int) bool { return false }
	for i := 0; i < DefaultMaxEnded+5; i++ {
		r.Put(Entry{JobID: fmt.Sprintf("%032x", i), State: "CANCELED", StartTime: int64(i)})
	}
	got, _ := r.List()
	if len(got) != DefaultMaxEnded || got[0].StartTime != 5 {
		t.Errorf("kept %d ended jobs starting at %d; want %d starting at 5", len(got), got[0].StartTime, DefaultMaxEnded)
	}
}

// TestRegistryIsOwnerOnly: entries hold the jobs' REST tokens, so the
// directory is 0700 and every entry 0600.
func TestRegistryIsOwnerOnly(t *testing.T) {
	r := NewRegistry(t.TempDir())
	r.Alive = func(int) bool { return false }
	if err := r.Put(Entry{JobID: jid("a"), State: "RUNNING", Token: "secret"}); err != nil {
		t.Fatal(err)
	}
	r.Get(jid("a")) // found dead: moved to lost/
	r.Put(Entry{JobID: jid("b"), State: "RUNNING", Token: "secret"})
	for p, want := range map[string]os.FileMode{r.Dir: 0o700, r.path(jid("b")): 0o600, r.lostDir(): 0o700,
		filepath.Join(r.lostDir(), jid("a")+".json"): 0o600} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s has mode %v; want %v", p, got, want)
		}
	}
}

// fakeExecutables: pid 2 runs another program, pid 3 is another user's
// process (its exe unreadable), every other pid runs /opt/gflink.
func fakeExecutables(pid int) (string, error) {
	switch pid {
	case 2:
		return "/usr/bin/sleep", nil
	case 3:
		return "", &fs.PathError{Op: "readlink", Path: "/proc/3/exe", Err: fs.ErrPermission}
	}
	return "/opt/gflink", nil
}

// TestCheckRefusesForgedEntries: an entry is used only if its process is a
// live gflink process of this user and its address is on this machine.
func TestCheckRefusesForgedEntries(t *testing.T) {
	r := NewRegistry(t.TempDir())
	r.Alive = func(pid int) bool { return pid != 99 }
	r.Executable = fakeExecutables
	good := Entry{JobID: jid("j"), PID: 1, Executable: "/opt/gflink", Address: "http://127.0.0.1:8081", State: "RUNNING"}
	if err := r.Check(&good); err != nil {
		t.Fatalf("a genuine entry: %v", err)
	}
	for _, addr := range []string{"http://0.0.0.0:8081", "http://[::1]:8081"} {
		e := good
		e.Address = addr
		if err := r.Check(&e); err != nil {
			t.Errorf("address %s: %v", addr, err)
		}
	}
	for _, tc := range []struct {
		edit func(*Entry)
		want string
	}{
		{func(e *Entry) { e.PID = 99 }, "its process 99 is not running"},
		{func(e *Entry) { e.PID = 2 }, "process 2 runs /usr/bin/sleep, not the gflink executable /opt/gflink the entry records"},
		{func(e *Entry) { e.PID = 3 }, "process 3 is not one of yours"},
		{func(e *Entry) { e.Executable = "" }, "it records no executable"},
		{func(e *Entry) { e.Address = "http://192.0.2.7:8081" }, "its address http://192.0.2.7:8081 is not on this machine"},
		{func(e *Entry) { e.Address = "http://evil.example:8081" }, "names a host, not this machine's IP address"},
	} {
		e := good
		tc.edit(&e)
		err := r.Check(&e)
		var fe *ForgedEntryError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Refusing the registry entry of job "+jid("j")) {
			t.Errorf("Check(%+v) = %v; want a refusal with %q", e, err, tc.want)
		}
	}
}

// TestSelfExecutableMatchesProc: what a job records is what Check reads
// back for its process.
func TestSelfExecutableMatchesProc(t *testing.T) {
	r := NewRegistry(t.TempDir())
	e := Entry{JobID: jid("j"), PID: os.Getpid(), Executable: SelfExecutable(), Address: "http://127.0.0.1:1"}
	if err := r.Check(&e); err != nil {
		t.Fatal(err)
	}
}

// TestReusedPIDIsALostJob: an unfinished entry whose pid now runs another
// program, or another user's process, belongs to a process that died: Get
// and List retire it to the lost entries (where `checkpoints <jobId>` still
// finds it) instead of showing the job as running.
func TestReusedPIDIsALostJob(t *testing.T) {
	r := NewRegistry(t.TempDir())
	r.Alive = func(int) bool { return true }
	r.Executable = fakeExecutables
	for pid, id := range map[int]string{1: jid("live"), 2: jid("reused"), 3: jid("other-user")} {
		if err := r.Put(Entry{JobID: id, PID: pid, Executable: "/opt/gflink", State: "RUNNING"}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].JobID != jid("live") {
		t.Fatalf("List = %+v; want only the job whose process runs gflink", got)
	}
	for _, id := range []string{jid("reused"), jid("other-user")} {
		if _, err := r.Get(id); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Get(%s) = %v; want not found", id, err)
		}
		if _, err := r.Lost(id); err != nil {
			t.Errorf("Lost(%s) = %v; want the retired entry", id, err)
		}
	}
}

// TestZombieIsNotAlive: a child killed but not reaped yet (a zombie) is no
// running job, though signal 0 still reaches it.
func TestZombieIsNotAlive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here: zombies cannot be told apart")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !processAlive(pid) {
		t.Fatal("a running child reads as dead")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet: wait (with a deadline) until /proc says it exited.
	deadline := testutil.Deadline(10 * time.Second)
	for !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the killed child never became a zombie")
		}
		time.Sleep(time.Millisecond)
	}
	if processAlive(pid) {
		t.Error("a zombie reads as alive")
	}
	cmd.Wait()
}

// TestListRemovesLeftoverTemporaryFiles: the temporary file of an entry
// write that a kill interrupted (it may hold the job's token) is removed
// once it is old; one being written now is left alone.
func TestListRemovesLeftoverTemporaryFiles(t *testing.T) {
	r := NewRegistry(t.TempDir())
	if err := r.Put(Entry{JobID: jid("a"), State: "FINISHED"}); err != nil {
		t.Fatal(err)
	}
	old, fresh := filepath.Join(r.Dir, ".b.json.inprogress"), filepath.Join(r.Dir, ".c.json.inprogress")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte(`{"token":"secret"}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * staleWrite)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	if _, err := r.List(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the leftover %s is still there (%v)", old, err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a write in progress was removed: %v", err)
	}
}

// TestFinishedJustBeforeExitIsNotLost: a reader that finds the entry
// RUNNING and then the process gone must not retire the entry, when the
// process wrote FINISHED in between and exited. CI saw `waitstate
// FINISHED` fail that way: the FINISHED entry deleted, the job lost.
func TestFinishedJustBeforeExitIsNotLost(t *testing.T) {
	r := NewRegistry(t.TempDir())
	e := Entry{JobID: jid("a"), PID: 7, State: "RUNNING", StartTime: 1}
	if err := r.Put(e); err != nil {
		t.Fatal(err)
	}
	// The process ends its job and exits between the reader's read and
	// its look at the process.
	r.Alive = func(int) bool {
		e.State, e.EndTime = "FINISHED", 2
		if err := r.Put(e); err != nil {
			t.Fatal(err)
		}
		return false
	}
	got, err := r.Get(jid("a"))
	if err != nil || got.State != "FINISHED" {
		t.Fatalf("Get = %+v, %v; want the FINISHED entry", got, err)
	}
	if _, err := r.Lost(jid("a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the finished job was recorded as lost: %v", err)
	}
	if again, err := r.Get(jid("a")); err != nil || again.State != "FINISHED" {
		t.Errorf("a second Get = %+v, %v", again, err)
	}
}

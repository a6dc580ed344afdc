package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gflink/gflink/internal/clitest"
	"github.com/gflink/gflink/internal/testutil"
)

// TestListAndCancelSkipAFIFOInTheRegistry: a FIFO named like a registry
// entry once made list and cancel wait forever for a writer.
func TestListAndCancelSkipAFIFOInTheRegistry(t *testing.T) {
	dir := t.TempDir()
	jobs := filepath.Join(dir, ".gflink", "jobs")
	os.MkdirAll(jobs, 0o700)
	id := "0123456789abcdef0123456789abcdef"
	if err := syscall.Mkfifo(filepath.Join(jobs, id+".json"), 0o600); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	for _, args := range [][]string{{"list", "-a"}, {"cancel", id}, {"savepoint", id, dir}} {
		c := clitest.Command(dir, args...)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			if args[0] == "list" && err != nil {
				t.Errorf("gflink list -a: %v\n%s", err, out.String())
			}
			if args[0] != "list" && !strings.Contains(out.String(), "not found") && !strings.Contains(out.String(), "not a regular file") {
				t.Errorf("gflink %s: %v\n%s; want the job reported not found", args[0], err, out.String())
			}
		case <-testutil.After(30 * time.Second):
			c.Process.Kill()
			<-done
			t.Fatalf("gflink %s hung on a FIFO in the registry:\n%s", strings.Join(args, " "), out.String())
		}
	}
}

// TestSignalsEndAStuckCommand: the first SIGINT or SIGTERM cancels the
// command; a command that has not returned once the grace period has
// passed (stuck in I/O it cannot interrupt), or a second signal, ends the
// process with the code of a cancelled command. run has no grace period:
// its job ends in order unless signalled again.
func TestSignalsEndAStuckCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			grace   time.Duration
			signals int
			exits   bool
		}{
			{"grace passes", time.Second, 1, true},
			{"a second signal", 0, 2, true},
			{"run: one signal only cancels", 0, 1, false},
		} {
			sigs := make(chan os.Signal, 2)
			done := make(chan struct{})
			var cancelled error
			exited := -1
			finished := make(chan struct{})
			go func() {
				watchSignals(sigs, func(err error) { cancelled = err }, done, tc.grace, func(code int) { exited = code })
				close(finished)
			}()
			for range tc.signals {
				sigs <- syscall.SIGTERM
			}
			time.Sleep(time.Minute) // fake time: far past the grace period
			synctest.Wait()
			if cancelled == nil {
				t.Errorf("%s: the command was not cancelled", tc.name)
			}
			if tc.exits && exited != ExitCanceled || !tc.exits && exited != -1 {
				t.Errorf("%s: exit code %d; want exit %v", tc.name, exited, tc.exits)
			}
			close(done)
			<-finished
		}
	})
}

package cmd

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/internal/clitest"
)

func TestUIDWarnings(t *testing.T) {
	got := uidWarnings([]engine.OperatorInfo{
		{UID: "source", Name: "Source: in", UIDExplicit: true, Stateful: true},
		{UID: "map-1", Name: "tokenizer"},
		{UID: "process-2", Name: "counter", Stateful: true},
	})
	want := []string{`Operator "counter" has state but no uid: its state is saved under the uid process-2 derived from the job's structure, which changes when the structure does, and a changed job would not find it. Set one with .UID(...).`}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestClosedStdoutCancelsTheJob: `gflink run … | head -1` — the reader goes
// away mid-job. gflink must end the job as Ctrl-C does (CANCELED in the
// registry, no entry left for a dead process, no temporary files) and exit
// 141, as a shell reports a program ended by a broken pipe; not die of
// SIGPIPE at the next write with the job left without an end state.
func TestClosedStdoutCancelsTheJob(t *testing.T) {
	dir := t.TempDir()
	c := clitest.Command(dir, "run", "wordcount", "--generate", "unbounded", "--rate", "20000")
	r, out, stderr := clitest.StartPiped(t, c)
	// Read the first line, then go away as head does.
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "Job has been submitted with JobID ") {
		t.Fatalf("first line %q, %v", line, err)
	}
	jobID := strings.TrimSpace(strings.TrimPrefix(line, "Job has been submitted with JobID "))
	clitest.CloseWantingExit(t, c, r, stderr, ExitBrokenPipe)
	if want := "Job " + jobID + " was cancelled: its output (stdout) was closed by the reader."; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr:\n%s\nwant %q", stderr.String(), want)
	}
	reg := jobregistry.NewRegistry(filepath.Join(dir, ".gflink"))
	e, err := reg.Get(jobID)
	if err != nil || e.State != "CANCELED" {
		t.Fatalf("registry entry %+v, %v; want the job CANCELED", e, err)
	}
	des, _ := os.ReadDir(reg.Dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".") {
			t.Errorf("left behind in the registry: %s", de.Name())
		}
	}
}

// TestFailedDetachedStartLeavesNoLog: a detached job whose process reports
// that it cannot start (here: its REST port is taken) exits 1 with the
// reason, and leaves no log under a job id that was never shown.
func TestFailedDetachedStartLeavesNoLog(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	c := clitest.Command(dir, "run", "-d", "-Drest.bind-address=127.0.0.1", "-Drest.bind-port="+port, "wordcount")
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitFailure || !strings.Contains(string(out), "address already in use") {
		t.Fatalf("gflink ended with %v; want exit 1 naming the taken port\n%s", err, out)
	}
	des, err := os.ReadDir(filepath.Join(dir, ".gflink", "log"))
	if err != nil {
		t.Fatal(err) // the child was started, so the directory exists
	}
	for _, de := range des {
		t.Errorf("left behind: log/%s", de.Name())
	}
}

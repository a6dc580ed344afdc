package testutil

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// SyncBuffer is a buffer a job's goroutines (or a process) write while
// the test reads it: a job's log, its printed output.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// FailingJob is the configuration of a job run that must recover exactly:
// parallelism p, checkpoints every 20 ms under dir/chk, fixed-delay
// restarts, and failures injected after failAfter source records, each
// once the attempt has completed two checkpoints (so that every failure
// restores one). extra keys are added or override.
func FailingJob(dir string, p, failAfter, failures int, extra ...string) map[string]string {
	c := map[string]string{
		"parallelism.default":                   fmt.Sprint(p),
		"execution.checkpointing.interval":      "20 ms",
		"execution.checkpointing.dir":           filepath.Join(dir, "chk"),
		"restart-strategy.type":                 "fixed-delay",
		"restart-strategy.fixed-delay.delay":    "1 ms",
		"restart-strategy.fixed-delay.attempts": fmt.Sprint(failures + 3),
		"fault-injection.fail-after-records":    fmt.Sprint(failAfter),
		"fault-injection.after-checkpoints":     "2",
		"fault-injection.max-failures":          fmt.Sprint(failures),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i]] = extra[i+1]
	}
	return c
}

// CheckRestores fails the test unless the job's log shows exactly n
// injected failures, each restored from a checkpoint: a test of exactly
// once that never restored proves nothing.
func CheckRestores(t testing.TB, log string, n int) {
	t.Helper()
	if f, r := strings.Count(log, "injected failure"), strings.Count(log, "from checkpoint"); f != n || r != n {
		t.Fatalf("%d injected failures and %d restores from a checkpoint logged, want %d and %d:\n%s", f, r, n, n, log)
	}
}

// CommittedLines returns the whitespace-separated fields of every
// committed file under dir, sorted: the file sink's finished part files
// (pending and in-progress files start with a dot).
func CommittedLines(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(p)
		out = append(out, strings.Fields(string(b))...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

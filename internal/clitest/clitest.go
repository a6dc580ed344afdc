// Package clitest starts gflink from tests: the test binaries of cmd and
// cmd/e2e are gflink themselves (their TestMain runs gflink's command line
// when AsMainEnv is set), so the processes a test starts run the code under
// test, under the race detector when the test does.
package clitest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/testutil"
	"go.uber.org/goleak"
)

// AsMainEnv, set to "1", makes a gflink test binary run as gflink.
const AsMainEnv = "GFLINK_AS_MAIN"

// Command runs this test binary as gflink in dir, with GFLINK_HOME in dir.
func Command(dir string, args ...string) *exec.Cmd {
	c := exec.Command(os.Args[0], args...)
	c.Dir = dir
	c.Env = append(os.Environ(), AsMainEnv+"=1", "GFLINK_HOME="+filepath.Join(dir, ".gflink"))
	return c
}

// StartPiped starts c with its stdout a pipe the test reads, as `| head`
// would, and its stderr collected (read it only after c has ended).
func StartPiped(t *testing.T, c *exec.Cmd) (*os.File, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = w, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return r, bufio.NewReader(r), &stderr
}

// CloseWantingExit closes the reading end of c's stdout, as head does once
// it has its lines, and wants c to end with exit code want.
func CloseWantingExit(t *testing.T, c *exec.Cmd, r *os.File, stderr *bytes.Buffer, want int) {
	t.Helper()
	r.Close()
	err := c.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != want {
		t.Fatalf("gflink ended with %v; want exit %d\n%s", err, want, stderr.String())
	}
}

// Main is a gflink test binary's TestMain: run as gflink (main, which is
// cmd.Main or cmd.MainWith) when asked to — by Command, or by gflink's own
// run -d, which starts its executable again — else run the tests and fail
// if a goroutine outlives them.
func Main(m *testing.M, main func() int) {
	if os.Getenv(AsMainEnv) == "1" || os.Getenv(detachedChildEnv) == "1" {
		os.Exit(main())
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines outlived the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// detachedChildEnv is cmd's: `run -d` starts its executable again with it.
const detachedChildEnv = "GFLINK_DETACHED_CHILD"

// WriteWords writes lines of generated words (10 a line, from distinct
// words) to path and returns each word's count.
func WriteWords(t *testing.T, path string, lines int64, distinct int) map[string]int64 {
	t.Helper()
	g := &connectors.WordGenerator{Distinct: distinct, Seed: 5, WordsPerLine: 10}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	want := map[string]int64{}
	var buf []byte
	for i := int64(0); i < lines; i++ {
		buf = g.Line(i, buf)
		w.Write(buf)
		w.WriteByte('\n')
		for _, word := range strings.Fields(string(buf)) {
			want[word]++
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// CountsOf reads word count's (word,count) updates, with or without a
// subtask prefix, from outputs: each word's final (highest) count.
func CountsOf(outputs ...string) map[string]int64 {
	m := map[string]int64{}
	for _, out := range outputs {
		for _, l := range strings.Split(out, "\n") {
			if i := strings.Index(l, "> "); i > 0 && i < 4 {
				l = l[i+2:]
			}
			if r, ok := jobs.ParseWordCountRecord(l); ok {
				m[r.Word] = max(m[r.Word], r.Count)
			}
		}
	}
	return m
}

// SyncBuffer is a buffer a process writes while the test reads it.
type SyncBuffer = testutil.SyncBuffer

// WaitOutput waits (30 s, scaled) until b holds want.
func WaitOutput(t *testing.T, b *SyncBuffer, want string) {
	t.Helper()
	deadline := testutil.Deadline(30 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%q not printed within 30 s (scaled):\n%s", want, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CheckCommittedOnce checks that the finished part files in out hold every
// word count update of want exactly once and nothing else.
func CheckCommittedOnce(t *testing.T, what, out string, want map[string]int64) {
	t.Helper()
	seen := map[string]bool{}
	got := map[string]int64{}
	parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
	for _, f := range parts {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			r, ok := jobs.ParseWordCountRecord(l)
			if !ok {
				continue
			}
			if seen[l] {
				t.Fatalf("%s: %s is in the finished files twice", what, l)
			}
			seen[l] = true
			got[r.Word] = max(got[r.Word], r.Count)
		}
	}
	var total int64
	for w, n := range want {
		if got[w] != n {
			t.Fatalf("%s: final count of %q = %d; want %d", what, w, got[w], n)
		}
		total += n
	}
	if int64(len(seen)) != total {
		t.Fatalf("%s: %d updates in the files; want exactly %d", what, len(seen), total)
	}
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// batchSessions is the oracle: every user's clicks sorted, cut where the gap
// exceeds gap — a batch computation that shares no code with the job.
func batchSessions(clicks []Click, gap int64) []string {
	by := map[string][]int64{}
	for _, c := range clicks {
		by[c.User] = append(by[c.User], c.TS)
	}
	var out []string
	for u, ts := range by {
		slices.Sort(ts)
		start, n := ts[0], int64(1)
		for i := 1; i <= len(ts); i++ {
			if i == len(ts) || ts[i] > ts[i-1]+gap {
				out = append(out, Session{User: u, Start: start, End: ts[i-1], Clicks: n}.String())
				if i < len(ts) {
					start, n = ts[i], 0
				}
			}
			n++
		}
	}
	slices.Sort(out)
	return out
}

// TestSessionsExactlyOnceUnderFailures runs the job at parallelism 2 with
// checkpoints and two injected failures, and compares the committed sessions
// with the batch computation.
func TestSessionsExactlyOnceUnderFailures(t *testing.T) {
	dir := t.TempDir()
	var log testutil.SyncBuffer
	r := rand.New(rand.NewPCG(1, 2))
	var clicks []Click
	var lines []string
	next := map[string]int64{}
	for range 20000 {
		u := fmt.Sprintf("u%03d", r.IntN(300))
		next[u] += 1 + r.Int64N(40_000) // gaps of up to 40 s against a 30 s session gap
		clicks = append(clicks, Click{User: u, TS: next[u]})
		lines = append(lines, fmt.Sprintf("%s %d", u, next[u]))
	}
	in := filepath.Join(dir, "clicks.txt")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := stream.NewEnvironment(stream.Options{
		Config: testutil.FailingJob(dir, 2, 3000, 2),
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := Job().Build(env, []string{"--input", in, "--output", out, "--rate", "40000"}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.CheckRestores(t, log.String(), 2)
	got, want := testutil.CommittedLines(t, out), batchSessions(clicks, 30_000)
	if !slices.Equal(got, want) {
		t.Fatalf("%d sessions committed, %d expected; first difference: %s", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("got %s, want %s", got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}

func TestBadLineFailsNamingIt(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "clicks.txt")
	os.WriteFile(in, []byte("ann 1\nann x\n"), 0o600)
	env, err := stream.NewEnvironment(stream.Options{Config: map[string]string{"restart-strategy.type": "none"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Job().Build(env, []string{"--input", in}); err != nil {
		t.Fatal(err)
	}
	res, err := env.Execute(context.Background())
	if err == nil || res.Status != "FAILED" || !strings.Contains(err.Error(), `line "ann x"`) {
		t.Fatalf("status %s, error %v; want FAILED naming the line", res.Status, err)
	}
}

func TestUsageErrors(t *testing.T) {
	env, _ := stream.NewEnvironment(stream.Options{})
	for _, args := range [][]string{{"--gap", "0"}, {"extra"}, {"--bogus"}} {
		var ue *stream.UsageError
		err := Job().Build(env, args)
		if !asUsage(err, &ue) {
			t.Errorf("%v: error %v, want a usage error", args, err)
		}
	}
}

func asUsage(err error, ue **stream.UsageError) bool {
	u, ok := err.(*stream.UsageError)
	*ue = u
	return ok
}

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

// batch is the oracle: word counts over the whole text, then the two
// results derived from them, with no code shared with the job.
func batch(text string, threshold int64) []string {
	counts := map[string]int64{}
	for _, w := range strings.Fields(text) {
		counts[w]++
	}
	type agg struct{ distinct, total int64 }
	letters := map[string]*agg{}
	var out []string
	for w, n := range counts {
		if n >= threshold {
			out = append(out, fmt.Sprintf("frequent(%s,%d)", w, threshold))
		}
		a := letters[w[:1]]
		if a == nil {
			a = &agg{}
			letters[w[:1]] = a
		}
		a.distinct++
		a.total += n
	}
	for l, a := range letters {
		out = append(out, fmt.Sprintf("letter(%s,%d,%d)", l, a.distinct, a.total))
	}
	slices.Sort(out)
	return out
}

// TestFanOutExactlyOnceUnderFailures runs both keyed stages at different
// parallelism (3 and 1) with checkpoints and two injected failures, each
// restored from a checkpoint, and compares the committed results with the
// batch computation.
func TestFanOutExactlyOnceUnderFailures(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	var text strings.Builder
	for i := range 30000 {
		// Zipf-like: a few words are frequent, most are rare.
		fmt.Fprintf(&text, "%c%d", 'a'+rune(r.IntN(26)), r.IntN(1+r.IntN(400)))
		if i%8 == 7 {
			text.WriteByte('\n')
		} else {
			text.WriteByte(' ')
		}
	}
	// Split keeps letters only: the job sees "a12" as "a"; give it words
	// of letters by mapping digits to letters.
	words := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return 'a' + (r - '0')
		}
		return r
	}, text.String())
	in := filepath.Join(dir, "words.txt")
	if err := os.WriteFile(in, []byte(words), 0o600); err != nil {
		t.Fatal(err)
	}
	var log testutil.SyncBuffer
	env, err := stream.NewEnvironment(stream.Options{
		Config: testutil.FailingJob(dir, 3, 1000, 2),
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := Job().Build(env, []string{"--input", in, "--output", out, "--threshold", "20", "--rate", "20000"}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.CheckRestores(t, log.String(), 2)
	got, want := testutil.CommittedLines(t, out), batch(words, 20)
	if !slices.Equal(got, want) {
		t.Fatalf("%d results committed, %d expected:\ngot  %v\nwant %v", len(got), len(want), got, want)
	}
}

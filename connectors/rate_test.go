package connectors

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/internal/testutil"
	"pgregory.net/rapid"
)

// pollUntil polls r until it has emitted want lines, it ends, or a
// deadline passes; it returns what was emitted.
func pollUntil(t *testing.T, r api.SourceReader[string], want int) []string {
	t.Helper()
	var c sliceCollector
	deadline := testutil.Deadline(5 * time.Second)
	for len(c.out) < want && time.Now().Before(deadline) {
		st, err := r.PollNext(&c)
		if err != nil {
			t.Fatal(err)
		}
		if st == api.EndOfInput {
			break
		}
	}
	return c.out
}

// A rate of +Inf or 1e308 words per second is no limit; it used to
// overflow the integer budget and emit nothing, ever (issue 8).
func TestGeneratorHugeRateEmits(t *testing.T) {
	for _, rate := range []float64{math.Inf(1), 1e308, math.MaxFloat64} {
		g := &WordGenerator{Words: 1000, Distinct: 10, Rate: rate}
		r, err := g.CreateReader(api.SourceContext{Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		splits, _ := g.Splits(1)
		if err := r.AddSplits(splits); err != nil {
			t.Fatal(err)
		}
		if got := pollUntil(t, r, 100); len(got) != 100 {
			t.Errorf("rate %g: %d lines emitted; want all 100", rate, len(got))
		}
		if next := r.(api.AvailabilityWaiter).NextPollTime(); time.Until(next) > time.Second {
			t.Errorf("rate %g: next poll %v from now", rate, time.Until(next))
		}
	}
}

// Elements honours its rate (word count's built-in text ignored --rate, so
// it could not be stopped with a savepoint before it ended): weighted
// items go no faster than the rate, and the reader says when to come back.
func TestElementsRate(t *testing.T) {
	items := make([]string, 100)
	for i := range items {
		items[i] = "two words"
	}
	src := &Elements[string]{Items: items, Rate: 10, Weigh: func(string) int { return 2 }}
	r, err := src.CreateReader(api.SourceContext{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	splits, _ := src.Splits(1)
	if err := r.AddSplits(splits); err != nil {
		t.Fatal(err)
	}
	var c sliceCollector
	start := time.Now()
	st := api.MoreAvailable
	for st == api.MoreAvailable {
		if st, err = r.PollNext(&c); err != nil {
			t.Fatal(err)
		}
	}
	// 10 words/s, 2 words an item: about 5 items a second; the first poll
	// may let one through.
	if maxN := 1 + int(time.Since(start).Seconds()*5) + 1; st != api.NothingAvailable || len(c.out) > maxN {
		t.Fatalf("status %v after %d items in %v; want NothingAvailable after at most %d", st, len(c.out), time.Since(start), maxN)
	}
	next := r.(api.AvailabilityWaiter).NextPollTime()
	if !next.After(start) || next.Sub(start) > time.Second {
		t.Fatalf("next poll %v after the start; want within the next 0.2 s per item", next.Sub(start))
	}

	// Unthrottled (0, +Inf) it reads everything at once.
	for _, rate := range []float64{0, math.Inf(1)} {
		src := &Elements[string]{Items: items, Rate: rate}
		got := readAll(t, src, splits, func(int) bool { return false })
		if len(got) != len(items) {
			t.Fatalf("rate %g: %d items; want %d", rate, len(got), len(items))
		}
	}
}

// At the instant a paced reader is told to come back, what it waits for
// is allowed: rounding that instant down made a reader spin at it, and
// hang on testing/synctest's clock, which moves only while it waits.
func TestPaceTimeAllowsTheUnit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Float64Range(1, 1e9).Draw(t, "rate") // units/rate under paceTime's one-year cap
		units := float64(rapid.IntRange(1, 1_000_000).Draw(t, "units"))
		start := time.Unix(946684800, 0) // synctest's epoch
		at := paceTime(start, units, rate)
		if got := rate * at.Sub(start).Seconds(); got < units {
			t.Fatalf("at %v after the start, %v units allowed; want %v", at.Sub(start), got, units)
		}
	})
}

// A paced generator runs to its end on synctest's fake clock (it spun at
// a rounded-down instant before).
func TestPacedGeneratorOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &WordGenerator{Lines: 50, WordsPerLine: 3, Distinct: 10, Rate: 333}
		splits, _ := g.Splits(1)
		start := time.Now()
		got := readAllPaced(t, g, splits)
		if len(got) != 50 {
			t.Fatalf("%d lines; want 50", len(got))
		}
		// 150 words at 333 words/s: about 0.45 s of fake time.
		if d := time.Since(start); d < 400*time.Millisecond || d > 500*time.Millisecond {
			t.Fatalf("took %v of fake time; want ~450 ms", d)
		}
	})
}

// readAllPaced drains a reader, waiting until NextPollTime whenever it has
// nothing available, as a source task does.
func readAllPaced(t *testing.T, src api.Source[string], splits [][]byte) []string {
	r, err := src.CreateReader(api.SourceContext{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddSplits(splits); err != nil {
		t.Fatal(err)
	}
	var c sliceCollector
	for {
		st, err := r.PollNext(&c)
		if err != nil {
			t.Fatal(err)
		}
		switch st {
		case api.EndOfInput:
			return c.out
		case api.NothingAvailable:
			time.Sleep(time.Until(r.(api.AvailabilityWaiter).NextPollTime()))
		}
	}
}

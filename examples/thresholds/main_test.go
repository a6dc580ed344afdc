package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// The alerts over readings and limits, both out of order by less than 5 s,
// equal a batch check of each reading against the limit in force at its
// time, at parallelism 2.
func TestThresholdsAlerts(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 3))
	var readings, limitLines []string
	byTime := map[string][]Limit{}
	for i := range 40 {
		ts, s := int64(i)*1000-r.Int64N(4000), fmt.Sprint("s", r.IntN(3))
		max := 50 + r.Int64N(50)
		limitLines = append(limitLines, fmt.Sprintf("%d,%s,%d", ts, s, max))
		byTime[s] = append(byTime[s], Limit{From: ts, Max: max})
	}
	for _, ls := range byTime {
		slices.SortStableFunc(ls, func(a, b Limit) int { return int(a.From - b.From) })
	}
	var want []string
	for i := range 4000 {
		ts, s, v := int64(i)*10-r.Int64N(4000), fmt.Sprint("s", r.IntN(3)), r.Int64N(100)
		readings = append(readings, fmt.Sprintf("%d,%s,%d", ts, s, v))
		if max, ok := InForce(byTime[s], ts); ok && v > max {
			want = append(want, fmt.Sprintf("ALERT %d %s %d > %d", ts, s, v, max))
		}
	}
	dir := t.TempDir()
	rin, lin := filepath.Join(dir, "readings.txt"), filepath.Join(dir, "limits.txt")
	for path, lines := range map[string][]string{rin: readings, lin: limitLines} {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := &testutil.SyncBuffer{}
	env, err := stream.NewEnvironment(stream.Options{Stdout: out, Config: map[string]string{"parallelism.default": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Thresholds().Build(env, []string{rin, lin}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := testutil.PrintedLines(out.String())
	slices.Sort(got)
	slices.Sort(want)
	if len(want) < 100 || !slices.Equal(got, want) {
		t.Fatalf("%d alerts printed, %d found in batch:\n got %v\nwant %v", len(got), len(want), got[:min(5, len(got))], want[:min(5, len(want))])
	}
}

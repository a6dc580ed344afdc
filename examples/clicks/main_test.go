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
	"time"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// The job's per-minute counts over clicks out of order by less than 5 s
// equal a batch count per user and minute; none is late.
func TestClicksPerMinute(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	var lines []string
	want := map[string]int{}
	for i := range 5000 {
		ts := int64(i)*97 - r.Int64N(5000)
		u := fmt.Sprint("user", r.IntN(7))
		lines = append(lines, fmt.Sprintf("%d,%s", ts, u))
		start := ts - ((ts%60000)+60000)%60000
		want[fmt.Sprintf("%s %s", time.UnixMilli(start).UTC().Format("15:04"), u)]++
	}
	in := filepath.Join(t.TempDir(), "clicks.txt")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &testutil.SyncBuffer{}
	env, err := stream.NewEnvironment(stream.Options{Stdout: out, Config: map[string]string{"parallelism.default": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Clicks().Build(env, []string{in}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := testutil.PrintedLines(out.String())
	var exp []string
	for k, n := range want {
		exp = append(exp, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(got)
	slices.Sort(exp)
	if !slices.Equal(got, exp) {
		t.Fatalf("%d lines printed, %d counted in batch:\n got %v\nwant %v", len(got), len(exp), got[:min(5, len(got))], exp[:min(5, len(exp))])
	}
}

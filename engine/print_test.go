package engine_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
)

// The print sink buffers lines, but a slow stream's lines still appear at
// once: `gflink run wordcount --generate unbounded --rate 10` prints about
// ten lines a second, not a chunk of 64 KiB now and then. Whole lines
// only, with their subtask prefix, at parallelism 2.
func TestPrintShowsASlowStreamsLinesAtOnce(t *testing.T) {
	for _, p := range []int{1, 2} {
		synctest.Test(t, func(t *testing.T) {
			out := &syncBuffer{}
			env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: p, Stdout: out})
			src := &connectors.WordGenerator{Distinct: 1000, Seed: 1, WordsPerLine: 1, Rate: 10}
			jobs.WordCountPipeline(engine.FromSource[string](env, src, "generator").UID("source")).Print().UID("sink")
			g, err := env.Build()
			if err != nil {
				t.Fatal(err)
			}
			j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: config.New()})
			if err != nil {
				t.Fatal(err)
			}
			for sec := 1; sec <= 3; sec++ {
				time.Sleep(time.Second)
				synctest.Wait()
				// 10 words a second; a line may wait for the source's next
				// poll and for one buffer timeout.
				if n := strings.Count(out.String(), "\n"); n < 10*sec-2 {
					t.Errorf("p=%d: %d lines printed after %d s of 10 words a second", p, n, sec)
					break
				}
			}
			j.Cancel()
			j.Wait()
			line := regexp.MustCompile(`^(?:[12]> )?\([a-z]+,\d+\)$`)
			if p == 1 {
				line = regexp.MustCompile(`^\([a-z]+,\d+\)$`)
			}
			for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
				if !line.MatchString(l) {
					t.Fatalf("p=%d: line %q", p, l)
				}
			}
		})
	}
}

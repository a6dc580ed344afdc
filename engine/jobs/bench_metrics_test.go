package jobs

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/metrics"
	"github.com/gflink/gflink/engine/rest"
)

// BenchmarkMetricsRatio reports RMETRICS: word count (R1's input, p=1,
// checkpointing off, discarding sink) while its metrics are read — a
// Prometheus reporter scraped and every task's metrics read through the
// job every 250 ms, 12 times as often as Flink's dashboard refreshes (3 s)
// and 60 times a 15 s Prometheus scrape interval — ÷ the same job with
// nobody reading. The tasks count in both (their counters
// are part of the engine): what this measures is that counting, as the
// readers see it, costs the record path nothing; docs/performance.md
// gives an A/B of the counting itself against the engine without it.
func BenchmarkMetricsRatio(b *testing.B) {
	path := writeBenchInput(b)
	run := func(read bool) time.Duration {
		start := time.Now()
		env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1})
		lines := engine.FromSource[string](env, &connectors.TextFileSource{Paths: []string{path}}, "file-input").UID("source")
		WordCountPipeline(lines).SinkTo(connectors.DiscardingSink[WordCountRecord]{}).UID("sink")
		g, err := env.Build()
		if err != nil {
			b.Fatal(err)
		}
		j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: config.New()})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		if read {
			r, err := metrics.Start(j, metrics.ReporterConfig{Name: "prom", Ports: rest.PortSpec{{0, 0}}, FilterLabelValues: true}, "127.0.0.1", nil)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(250 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-j.Done():
						return
					case <-tick.C:
						if resp, err := http.Get("http://" + r.Addr() + "/metrics"); err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
						j.Metrics()
					}
				}
			}()
		}
		if res := j.Wait(); res.Status != engine.StatusFinished {
			b.Fatalf("job ended %s: %v", res.Status, res.Err)
		}
		wg.Wait()
		return time.Since(start)
	}
	var r []float64
	b.ResetTimer()
	// Run with -benchtime=1x.
	for i, d := range alternate(7, func() time.Duration { return run(true) }, func() time.Duration { return run(false) }) {
		r = append(r, d[1].Seconds()/d[0].Seconds())
		b.Logf("round %d: metrics read %v, not read %v", i, d[0].Round(time.Millisecond), d[1].Round(time.Millisecond))
	}
	b.Logf("RMETRICS: %s", spread(r))
	b.ReportMetric(median(r), "RMETRICS")
}

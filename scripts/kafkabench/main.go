// Command kafkabench measures Kafka → word count → Kafka on kfake (an
// in-process Kafka over loopback TCP), with gflink as a library, in one
// run: throughput with the exactly-once sink ÷ the at-least-once sink
// (KAFKA_EO_RATIO; the variants alternate round by round, the median of
// per-round ratios is reported), and input words per second per core used
// (KAFKA_WORDS_PER_CORE_S: words ÷ the process's CPU seconds).
//
// Usage: go run ./scripts/kafkabench [-lines 300000] [-rounds 3] [-p 2] [-interval 200ms]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/connectors/kafka"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	lines  = flag.Int("lines", 300_000, "input lines (10 words each, 10,000 distinct words)")
	every  = flag.Duration("interval", 200*time.Millisecond, "checkpoint interval")
	rounds = flag.Int("rounds", 3, "rounds")
	par    = flag.Int("p", 2, "parallelism")
)

func main() {
	flag.Parse()
	dir, err := os.MkdirTemp("", "gflink-kafkabench-")
	check(err)
	defer os.RemoveAll(dir)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, "lines"))
	check(err)
	defer kc.Close()
	brokers := kc.ListenAddrs()
	produce(brokers)
	var ratios, perCore []float64
	for r := range *rounds {
		el := map[string]float64{}
		for k := range 2 {
			g := []string{kafka.AtLeastOnce, kafka.ExactlyOnce}[(k+r)%2]
			d, cpu := run(brokers, dir, g, fmt.Sprintf("counts-%d-%d", r, k))
			el[g] = d.Seconds()
			words := float64(*lines) * 10
			perCore = append(perCore, words/cpu.Seconds())
			fmt.Printf("# round %d %s: %.2fs, %.0f words/s, %.0f words per CPU second\n", r+1, g, d.Seconds(), words/d.Seconds(), words/cpu.Seconds())
		}
		ratios = append(ratios, el[kafka.AtLeastOnce]/el[kafka.ExactlyOnce])
	}
	report("KAFKA_EO_RATIO", ratios)
	report("KAFKA_WORDS_PER_CORE_S", perCore)
}

func produce(brokers []string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	check(err)
	defer cl.Close()
	g := &connectors.WordGenerator{Distinct: 10_000, Seed: 1, WordsPerLine: 10}
	var buf []byte
	var recs []*kgo.Record
	for i := range int64(*lines) {
		buf = g.Line(i, buf)
		recs = append(recs, &kgo.Record{Topic: "lines", Value: append([]byte(nil), buf...)})
		if len(recs) == 10_000 {
			check(cl.ProduceSync(context.Background(), recs...).FirstErr())
			recs = recs[:0]
		}
	}
	check(cl.ProduceSync(context.Background(), recs...).FirstErr())
}

// run counts the topic once into a new output topic and returns the wall
// time and the process's CPU time it took.
func run(brokers []string, dir, guarantee, out string) (time.Duration, time.Duration) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	check(err)
	_, err = kadm.NewClient(cl).CreateTopic(context.Background(), 8, 1, nil, out)
	cl.Close()
	check(err)
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: *par, Stdout: io.Discard})
	src := &kafka.Source{Brokers: brokers, Topics: []string{"lines"}, Bounded: true}
	counts := jobs.WordCountPipeline(engine.FromSource[string](env, src, "kafka").UID("source"))
	cfg := &kafka.SinkConfig{Brokers: brokers, Topic: out, Guarantee: guarantee, TransactionalIDPrefix: out}
	counts.SinkTo(kafka.NewSink(cfg, func(r jobs.WordCountRecord) ([]byte, []byte) { return []byte(r.Word), []byte(r.String()) })).UID("sink")
	g, err := env.Build()
	check(err)
	c := config.New()
	c.SetString("execution.checkpointing.interval", every.String(), "bench")
	c.SetString("execution.checkpointing.dir", filepath.Join(dir, out), "bench")
	cpu0 := cpuTime()
	start := time.Now()
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: c})
	check(err)
	if res := j.Wait(); res.Status != engine.StatusFinished {
		check(fmt.Errorf("job ended %s: %v", res.Status, res.Err))
	}
	d, cpu := time.Since(start), cpuTime()-cpu0
	// kfake keeps every record in memory: drop the output.
	cl, err = kgo.NewClient(kgo.SeedBrokers(brokers...))
	check(err)
	_, err = kadm.NewClient(cl).DeleteTopics(context.Background(), out)
	cl.Close()
	check(err)
	return d, cpu
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func report(name string, xs []float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	fmt.Printf("%s=%.3f min=%.3f max=%.3f n=%d\n", name, s[len(s)/2], s[0], s[len(s)-1], len(s))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkabench:", strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
}

// Command guarantees measures Flink's guarantee levels on word count: it
// runs gflink over one fixed input with one injected failure in each
// configuration, compares each run's output with a failure-free run, and
// prints what it measured. Nothing in the table is typed in by hand.
//
// Run it with scripts/guarantees.sh.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/connectors/kafka"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/savepoint/vfs"
	"github.com/olekukonko/tablewriter"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	gflinkBin   = flag.String("gflink", "", "the gflink binary")
	lines       = flag.Int64("lines", 20000, "lines of input (10 words each)")
	distinct    = flag.Int("distinct", 2000, "distinct words")
	parallelism = flag.Int("p", 2, "parallelism")
	rate        = flag.Int("rate", 100000, "words per second the sources read")
	failAfter   = flag.Int("fail-after", 0, "source records before the injected failure (default: 60% of the lines)")
)

// config is one row of the table.
type config struct {
	name, sink string
	flags      []string
}

// output is what a run produced: every (word,count) update emitted, or the
// final table of an upsert sink.
type output struct {
	updates map[string]int // "word,count" -> times emitted
	final   map[string]int64
	table   bool // final comes from an upsert table: no update stream
	restart bool // the log shows a recovery
}

func main() {
	flag.Parse()
	work, err := os.MkdirTemp("", "gflink-guarantees")
	check(err)
	defer os.RemoveAll(work)
	input := filepath.Join(work, "words.txt")
	writeInput(input)
	if *failAfter == 0 {
		*failAfter = int(*lines * 6 / 10)
	}
	p := strconv.Itoa(*parallelism)
	common := []string{"-p", p, "-Drestart-strategy.type=fixed-delay", "-Drestart-strategy.fixed-delay.delay=50ms"}
	failure := []string{"-Dfault-injection.fail-after-records=" + strconv.Itoa(*failAfter)}
	ck := func(mode string) []string {
		return []string{"-Dexecution.checkpointing.interval=100ms", "-Dexecution.checkpointing.mode=" + mode,
			"-Dexecution.checkpointing.dir=" + filepath.Join(work, "ck")}
	}
	configs := []config{
		{"no checkpointing", "stdout", nil},
		{"AT_LEAST_ONCE", "stdout", ck("AT_LEAST_ONCE")},
		{"EXACTLY_ONCE", "stdout", ck("EXACTLY_ONCE")},
		{"EXACTLY_ONCE", "file sink (two-phase commit)", ck("EXACTLY_ONCE")},
		{"EXACTLY_ONCE", "upsert table (idempotent)", ck("EXACTLY_ONCE")},
		{"AT_LEAST_ONCE", "Kafka, at-least-once", ck("AT_LEAST_ONCE")},
		{"EXACTLY_ONCE", "Kafka, exactly-once (read_committed)", ck("EXACTLY_ONCE")},
	}
	// The Kafka rows write to an in-process Kafka (kfake, over loopback
	// TCP) and read the topic back as a consumer would.
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4))
	check(err)
	defer kc.Close()
	brokers = kc.ListenAddrs()

	fmt.Printf("word count over %d words (%d distinct), parallelism %d, sources at %d words/s,\n", *lines*10, *distinct, *parallelism, *rate)
	fmt.Printf("one failure injected after %d source records; checkpoints every 100 ms where enabled.\n\n", *failAfter)

	ref := run(work, "reference", append(common, "--"), "stdout", input, false)
	if ref.restart {
		fail("the reference run restarted")
	}

	tw := tablewriter.NewWriter(os.Stdout)
	tw.Header("Checkpointing", "Sink", "Final counts correct", "Results emitted twice", "Results lost")
	for i, c := range configs {
		args := append(append(append([]string{}, common...), c.flags...), failure...)
		out := run(work, fmt.Sprintf("run%d", i), args, c.sink, input, true)
		if !out.restart {
			fail(fmt.Sprintf("%s / %s: the injected failure did not happen", c.name, c.sink))
		}
		tw.Append(c.name, c.sink, correct(out, ref), twice(out), lost(out, ref))
	}
	check(tw.Render())
	fmt.Println("\nEach cell compares that run's output with the failure-free run's: \"results\" are the")
	fmt.Println("(word,count) updates emitted; for the upsert table, the rows of the final table.")
}

func writeInput(path string) {
	f, err := os.Create(path)
	check(err)
	w := bufio.NewWriter(f)
	g := &connectors.WordGenerator{Distinct: *distinct, Seed: 42, WordsPerLine: 10}
	var buf []byte
	for i := int64(0); i < *lines; i++ {
		buf = g.Line(i, buf)
		w.Write(buf)
		w.WriteByte('\n')
	}
	check(w.Flush())
	check(f.Close())
}

// run runs word count and collects its output.
func run(work, name string, flags []string, sink, input string, expectFailure bool) output {
	args := []string{"run"}
	for _, f := range flags {
		if f != "--" {
			args = append(args, f)
		}
	}
	args = append(args, "wordcount", "--input", input, "--rate", strconv.Itoa(*rate))
	outDir := filepath.Join(work, name+".out")
	table := filepath.Join(work, name+".tsv")
	switch {
	case strings.HasPrefix(sink, "file"):
		args = append(args, "--output", outDir)
	case strings.HasPrefix(sink, "upsert"):
		args = append(args, "--upsert", table)
	case strings.HasPrefix(sink, "Kafka"):
		g := kafka.AtLeastOnce
		if strings.Contains(sink, "exactly-once") {
			g = kafka.ExactlyOnce
		}
		createTopic(name)
		args = append(args, "--output", "kafka://"+strings.Join(brokers, ",")+"/"+name+"?delivery-guarantee="+g+"&transactional-id-prefix="+name)
	}
	cmd := exec.Command(*gflinkBin, args...)
	cmd.Env = append(os.Environ(), "GFLINK_HOME="+filepath.Join(work, "home"), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		fail(fmt.Sprintf("%s: gflink %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String()))
	}
	out := output{updates: map[string]int{}, final: map[string]int64{},
		restart: strings.Contains(stderr.String(), "injected failure")}
	add := func(text string) {
		for _, l := range strings.Split(text, "\n") {
			if i := strings.Index(l, "> "); i > 0 && i < 4 {
				l = l[i+2:]
			}
			if r, ok := jobs.ParseWordCountRecord(l); ok {
				out.updates[r.Word+","+strconv.FormatInt(r.Count, 10)]++
				out.final[r.Word] = max(out.final[r.Word], r.Count)
			}
		}
	}
	switch {
	case strings.HasPrefix(sink, "file"):
		entries, err := os.ReadDir(outDir)
		check(err)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "part-") {
				b, err := os.ReadFile(filepath.Join(outDir, e.Name()))
				check(err)
				add(string(b))
			}
		}
	case strings.HasPrefix(sink, "upsert"):
		t, err := connectors.ReadUpsertTable(vfs.Default, table)
		check(err)
		out.table = true
		for w, v := range t {
			n, err := strconv.ParseInt(v, 10, 64)
			check(err)
			out.final[w] = n
			out.updates[w+","+v]++
		}
	case strings.HasPrefix(sink, "Kafka"):
		add(strings.Join(readTopic(name), "\n"))
	default:
		add(stdout.String())
	}
	return out
}

// brokers is the in-process Kafka's address.
var brokers []string

func createTopic(topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	check(err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(context.Background(), 4, 1, nil, topic)
	check(err)
}

// readTopic reads a topic to its last stable offset with read_committed,
// as a consumer of transactional output must.
func readTopic(topic string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := kafka.ReadToEnd(ctx, brokers, topic, true)
	check(err)
	return out
}

func correct(out, ref output) string {
	var high, low int
	for w, n := range ref.final {
		switch g := out.final[w]; {
		case g > n:
			high++
		case g < n:
			low++
		}
	}
	if high == 0 && low == 0 {
		return "yes"
	}
	var parts []string
	if high > 0 {
		parts = append(parts, fmt.Sprintf("%d too high", high))
	}
	if low > 0 {
		parts = append(parts, fmt.Sprintf("%d too low", low))
	}
	return fmt.Sprintf("no: %s (of %d words)", strings.Join(parts, ", "), len(ref.final))
}

func twice(out output) string {
	if out.table {
		return "no: one row per word"
	}
	n := 0
	for _, c := range out.updates {
		if c > 1 {
			n += c - 1
		}
	}
	if n == 0 {
		return "no"
	}
	return fmt.Sprintf("yes: %d", n)
}

func lost(out, ref output) string {
	n, total := 0, 0
	if out.table {
		for w, v := range ref.final {
			total++
			if out.final[w] != v {
				n++
			}
		}
	} else {
		for u := range ref.updates {
			total++
			if out.updates[u] == 0 {
				n++
			}
		}
	}
	if n == 0 {
		return "no"
	}
	return fmt.Sprintf("yes: %d of %d", n, total)
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "guarantees:", msg)
	os.Exit(1)
}

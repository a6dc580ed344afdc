package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// rescaleConf configures a run of a cancel-then-restore test at
// parallelism p: checkpoints every 20 ms retained on cancellation, in the
// given backend (hashmap, rocksdb or changelog) and mode (aligned or
// unaligned).
func rescaleConf(dir, backend, mode string, p int) map[string]string {
	c := map[string]string{
		"parallelism.default":                                       fmt.Sprint(p),
		"execution.checkpointing.interval":                          "20 ms",
		"execution.checkpointing.dir":                               filepath.Join(dir, "chk"),
		"execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
		"pipeline.auto-watermark-interval":                          "5 ms",
		"state.backend.type":                                        "hashmap",
	}
	switch backend {
	case "rocksdb":
		c["state.backend.type"] = "rocksdb"
	case "changelog":
		c["state.changelog.enabled"] = "true"
		c["state.changelog.storage"] = "filesystem"
		c["state.changelog.dstl.dfs.base-path"] = filepath.Join(dir, "dstl")
		c["state.changelog.periodic-materialize.interval"] = "30 ms"
	}
	if mode == "unaligned" {
		c["execution.checkpointing.unaligned.enabled"] = "true"
	}
	return c
}

// cancelThenRestore runs a job built by build at parallelism p1, paced at
// rate, until it has completed 4 checkpoints and committed output to out;
// cancels it; restores its last retained checkpoint at p2, unpaced, to the
// end; and returns what was committed to out, sorted. build reads its
// input with heldElements, so the first run stops reading halfway and
// cannot finish before it is cancelled however slow the machine: it
// commits some of the total results, never all, and a restore that
// carries nothing in state, which would test nothing, cannot happen.
func cancelThenRestore(t *testing.T, dir, backend, mode string, p1, p2 int, rate float64, total int, out string,
	build func(env *stream.Environment, rate float64)) []string {
	t.Helper()
	var log testutil.SyncBuffer
	env, err := stream.NewEnvironment(stream.Options{Config: rescaleConf(dir, backend, mode, p1), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	build(env, rate)
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		deadline := testutil.Deadline(30 * time.Second)
		for (strings.Count(log.String(), "Completed checkpoint") < 4 || !committed(out)) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	res, err := env.Execute(ctx)
	cancel()
	<-watched
	if res.Status != "CANCELED" || len(res.Retained) == 0 {
		t.Fatalf("first run: %+v, %v; want CANCELED with a retained checkpoint", res, err)
	}
	if n := len(testutil.CommittedLines(t, out)); n == 0 || n >= total {
		t.Fatalf("the first run committed %d of %d results before it was cancelled; want some, not all", n, total)
	}
	c := rescaleConf(dir, backend, mode, p2)
	c["execution.state-recovery.path"] = res.Retained[len(res.Retained)-1]
	env, err = stream.NewEnvironment(stream.Options{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	build(env, 0)
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := testutil.CommittedLines(t, out)
	slices.Sort(got)
	return got
}

// heldElements reads items at rate; in a first run (rate > 0) each reader
// stops after half of its range and waits, without ending, to be
// cancelled. A restore (rate 0) reads everything at full speed.
func heldElements[T any](items []T, rate float64) stream.Source[T] {
	e := &connectors.Elements[T]{Items: items, Rate: rate}
	if rate == 0 {
		return e
	}
	return heldSource[T]{e}
}

type heldSource[T any] struct{ *connectors.Elements[T] }

func (s heldSource[T]) CreateReader(ctx stream.SourceContext) (stream.SourceReader[T], error) {
	r, err := s.Elements.CreateReader(ctx)
	return &heldReader[T]{SourceReader: r, left: len(s.Items) / ctx.Parallelism / 2}, err
}

type heldReader[T any] struct {
	stream.SourceReader[T]
	left int
}

func (r *heldReader[T]) PollNext(out stream.Collector[T]) (stream.InputStatus, error) {
	if r.left <= 0 {
		return stream.NothingAvailable, nil
	}
	st, err := r.SourceReader.PollNext(counting[T]{out, &r.left})
	if st == stream.EndOfInput {
		st = stream.NothingAvailable // held: a first run never ends
	}
	return st, err
}

// NextPollTime implements stream.AvailabilityWaiter: the pace's, until the
// reader holds; then a poll every 10 ms that reads nothing.
func (r *heldReader[T]) NextPollTime() time.Time {
	if w, ok := r.SourceReader.(stream.AvailabilityWaiter); ok && r.left > 0 {
		return w.NextPollTime()
	}
	return time.Now().Add(10 * time.Millisecond)
}

// counting counts down *left for each record it passes on.
type counting[T any] struct {
	out  stream.Collector[T]
	left *int
}

func (c counting[T]) Collect(v T) { *c.left--; c.out.Collect(v) }

package jobs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint/vfs"
)

type lockedBuffer = testutil.SyncBuffer

func submitWordCount(t *testing.T, args []string, r *restore.Resolved, out *lockedBuffer) *engine.Job {
	t.Helper()
	env := engine.NewEnvironment(engine.EnvironmentOptions{Parallelism: 1, Stdout: out})
	if err := WordCount().Build(env, args); err != nil {
		t.Fatal(err)
	}
	g, err := env.Build()
	if err != nil {
		t.Fatal(err)
	}
	j, err := engine.Submit(context.Background(), g, engine.JobOptions{Config: config.New(), Restore: r})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// The built-in text honours --rate (it used to ignore it and end at once),
// so a built-in-text job can be stopped with a savepoint and restored, and
// the two runs together count the whole text exactly once.
func TestBuiltinTextRateStopAndRestore(t *testing.T) {
	args := []string{"--rate", "200"} // ~1.4 s for the soliloquy's ~280 words
	out1 := &lockedBuffer{}
	j := submitWordCount(t, args, nil, out1)
	deadline := testutil.Deadline(30 * time.Second)
	for out1.String() == "" || j.Status() != engine.StatusRunning {
		if time.Now().After(deadline) {
			t.Fatal("no output within 30 s")
		}
		select {
		case <-j.Done():
			t.Fatalf("the job ended %s before it could be stopped: --rate was ignored", j.Status())
		case <-time.After(5 * time.Millisecond):
		}
	}
	res, err := j.StopWithSavepoint(t.TempDir(), "", false)
	if err != nil {
		t.Fatal(err)
	}
	sp := <-res
	if sp.Err != nil {
		t.Fatalf("stop-with-savepoint: %v", sp.Err)
	}
	if r := j.Wait(); r.Status != engine.StatusFinished {
		t.Fatalf("stopped job ended %s", r.Status)
	}
	resolved, err := restore.Resolve(vfs.Default, sp.Path)
	if err != nil {
		t.Fatal(err)
	}
	out2 := &lockedBuffer{}
	j2 := submitWordCount(t, []string{"--rate", "1e308"}, resolved, out2)
	if r := j2.Wait(); r.Status != engine.StatusFinished {
		t.Fatalf("restored job ended %s: %v", r.Status, r.Err)
	}

	want := map[string]int64{}
	for _, l := range HamletLines {
		var w words
		Tokenize(l, &w)
		for _, x := range w {
			want[x]++
		}
	}
	got := map[string]int64{}
	updates := 0
	for _, l := range strings.Split(out1.String()+out2.String(), "\n") {
		rec, ok := ParseWordCountRecord(l)
		if !ok {
			continue
		}
		updates++
		got[rec.Word] = max(got[rec.Word], rec.Count)
	}
	total := int64(0)
	for w, n := range want {
		total += n
		if got[w] != n {
			t.Errorf("%s: counted %d; want %d", w, got[w], n)
		}
	}
	if int64(updates) != total {
		t.Errorf("%d updates over the two runs; want one per word, %d", updates, total)
	}
	if out1.String() == "" || out2.String() == "" {
		t.Errorf("each run must count part of the text: %d and %d bytes", len(out1.String()), len(out2.String()))
	}
}

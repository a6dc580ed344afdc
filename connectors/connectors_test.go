package connectors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gflink/gflink/internal/api"
	"github.com/gflink/gflink/savepoint/vfs"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type sliceCollector struct{ out []string }

func (c *sliceCollector) Collect(s string) { c.out = append(c.out, s) }

// readAll drains a reader, snapshotting and restarting from the snapshot
// into a fresh reader whenever restartAt says so.
func readAll(t interface{ Fatal(...any) }, src api.Source[string], splits [][]byte, restartAt func(polls int) bool) []string {
	var c sliceCollector
	r, err := src.CreateReader(api.SourceContext{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddSplits(splits); err != nil {
		t.Fatal(err)
	}
	for polls := 0; ; polls++ {
		if restartAt(polls) {
			state, err := r.SnapshotState(int64(polls))
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			r, _ = src.CreateReader(api.SourceContext{Parallelism: 1})
			if err := r.AddSplits(state); err != nil {
				t.Fatal(err)
			}
		}
		st, err := r.PollNext(&c)
		if err != nil {
			t.Fatal(err)
		}
		if st == api.EndOfInput {
			r.Close()
			return c.out
		}
	}
}

// TestTextSourceReadsEveryLineOnce: whatever the split size, and wherever
// the reader is snapshotted and restored, every line of every file is read
// exactly once — the property the exactly-once guarantee rests on.
func TestTextSourceReadsEveryLineOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "textsrc")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		var paths []string
		var want []string
		for f := 0; f < rapid.IntRange(1, 3).Draw(t, "files"); f++ {
			lines := rapid.SliceOfN(rapid.StringMatching(`[a-z ]{0,40}`), 0, 60).Draw(t, "lines")
			eol := rapid.SampledFrom([]string{"\n", "\r\n"}).Draw(t, "eol")
			content := strings.Join(lines, eol)
			trailing := len(lines) > 0 && rapid.Bool().Draw(t, "trailing")
			if trailing {
				content += eol
			}
			p := filepath.Join(dir, "f"+string(rune('a'+f)))
			os.WriteFile(p, []byte(content), 0o644)
			paths = append(paths, p)
			// An empty last line without a line end is not a line.
			if !trailing && len(lines) > 0 && lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			want = append(want, lines...)
		}
		src := &TextFileSource{Paths: paths, SplitSize: int64(rapid.IntRange(1, 200).Draw(t, "splitSize"))}
		splits, err := src.Splits(rapid.IntRange(1, 4).Draw(t, "parallelism"))
		if err != nil {
			t.Fatal(err)
		}
		restarts := rapid.SliceOfN(rapid.IntRange(0, 30), 0, 5).Draw(t, "restarts")
		got := readAll(t, src, splits, func(p int) bool { return slices.Contains(restarts, p) })
		if !slices.Equal(got, want) {
			t.Fatalf("read %q\nwant %q", got, want)
		}
	})
}

func TestTextSourceSplitsAFileForParallelism(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.txt")
	os.WriteFile(p, []byte(strings.Repeat("hello world\n", 200000)), 0o644) // 2.4 MB
	splits, err := (&TextFileSource{Paths: []string{p}}).Splits(4)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) < 4 {
		t.Fatalf("%d splits for parallelism 4", len(splits))
	}
	if _, err := (&TextFileSource{Paths: []string{filepath.Join(t.TempDir(), "missing")}}).Splits(1); err == nil {
		t.Fatal("a missing input file must fail")
	}
}

func TestElementsAndGeneratorResume(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e", "f", "g"}
	el := &Elements[string]{Items: items}
	splits, _ := el.Splits(3)
	got := readAll(t, el, splits, func(p int) bool { return p == 1 })
	sort.Strings(got)
	if !slices.Equal(got, items) {
		t.Fatalf("elements: %q", got)
	}

	g := &WordGenerator{Lines: 1000, Distinct: 50, Seed: 3}
	splits, _ = g.Splits(3)
	got = readAll(t, g, splits, func(p int) bool { return p == 1 || p == 3 })
	var want []string
	var buf []byte
	for i := int64(0); i < 1000; i++ {
		buf = g.Line(i, buf)
		want = append(want, string(buf))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatal("generator: lines lost or repeated across a restore")
	}
	if Word(0) != "a" || Word(25) != "z" || Word(26) != "ba" {
		t.Fatalf("Word: %q %q %q", Word(0), Word(25), Word(26))
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestFileSinkPartFileLifecycle(t *testing.T) {
	dir := t.TempDir()
	s := &FileSink[string]{Dir: dir}
	ctx := api.SinkContext{Subtask: 2, Parallelism: 3, RunID: "0badcafe", Checkpointing: true}
	w, err := s.CreateWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.CreateCommitter(ctx)
	w.Write("one")
	w.Write("two")
	// In progress: hidden.
	if got := listDir(t, dir); !slices.Equal(got, []string{".part-0badcafe-2-0.inprogress"}) {
		t.Fatalf("in progress: %v", got)
	}
	committables, err := w.(api.CommittingSinkWriter[string]).PrepareCommit()
	if err != nil || len(committables) != 1 {
		t.Fatalf("PrepareCommit: %v %v", committables, err)
	}
	// Pending: still hidden until the checkpoint completes.
	w.Write("three")
	if got := listDir(t, dir); !slices.Equal(got, []string{".part-0badcafe-2-0.inprogress", ".part-0badcafe-2-1.inprogress"}) {
		t.Fatalf("pending: %v", got)
	}
	if err := c.Commit(committables); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(committables); err != nil {
		t.Fatalf("committing twice must be harmless: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "part-0badcafe-2-0"))
	if err != nil || string(b) != "one\ntwo\n" {
		t.Fatalf("finished part: %q %v", b, err)
	}
	w.Close()
}

func TestFileSinkRollsOnSize(t *testing.T) {
	dir := t.TempDir()
	s := &FileSink[string]{Dir: dir, RollSize: 10}
	w, _ := s.CreateWriter(api.SinkContext{RunID: "r", Parallelism: 1})
	for i := 0; i < 5; i++ {
		w.Write("0123456789") // 11 bytes with the newline: one file each
	}
	committables, _ := w.(api.CommittingSinkWriter[string]).PrepareCommit()
	if len(committables) != 5 {
		t.Fatalf("%d part files; want 5", len(committables))
	}
}

// A committable whose pending file and finished file are both gone was
// committed before and moved away by a consumer: recommitting it after a
// restore is done, not a failure (which restarted the job forever).
func TestFileSinkRecommitOfMovedPartIsDone(t *testing.T) {
	dir := t.TempDir()
	c := &fileCommitter{fs: vfs.Default, dir: dir}
	b, _ := json.Marshal(fileCommittable{Pending: ".part-x-0-0.inprogress", Finished: "part-x-0-0"})
	if err := c.Commit([][]byte{b}); err != nil {
		t.Fatalf("recommit of a part file moved away: %v", err)
	}
}

// Committables carry the absolute directory they were written in: a job
// restored with another --output commits the restored checkpoint's files
// where they are, and its own files in the new directory.
func TestFileSinkCommitsInTheDirectoryWritten(t *testing.T) {
	old, cur := t.TempDir(), t.TempDir()
	ctx := api.SinkContext{RunID: "r1", Parallelism: 1, Checkpointing: true}
	w, _ := (&FileSink[string]{Dir: old}).CreateWriter(ctx)
	w.Write("one")
	committables, err := w.(api.CommittingSinkWriter[string]).PrepareCommit()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	c, _ := (&FileSink[string]{Dir: cur}).CreateCommitter(ctx)
	for range 2 { // the second commit is a recommit after a restore
		if err := c.Commit(committables); err != nil {
			t.Fatal(err)
		}
	}
	if got := listDir(t, old); !slices.Equal(got, []string{"part-r1-0-0"}) {
		t.Fatalf("old directory: %v", got)
	}
	if got := listDir(t, cur); len(got) != 0 {
		t.Fatalf("new directory: %v", got)
	}
}

// A relative --output is made absolute when written: the committable
// does not depend on the working directory of the run that restores it.
func TestFileSinkCommittableDirIsAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	w, _ := (&FileSink[string]{Dir: "out"}).CreateWriter(api.SinkContext{RunID: "r", Parallelism: 1})
	w.Write("x")
	committables, _ := w.(api.CommittingSinkWriter[string]).PrepareCommit()
	w.Close()
	var fc fileCommittable
	if err := json.Unmarshal(committables[0], &fc); err != nil || !filepath.IsAbs(fc.Dir) {
		t.Fatalf("committable %s: dir must be absolute (%v)", committables[0], err)
	}
}

// A committable no restart can commit — its directory is gone, its names
// leave the directory, its directory is not absolute — suppresses restarts
// and names the file or entry. A rename that fails otherwise is a plain
// error (the restart strategy decides), naming the file, and the
// directories of the renames made before it are fsynced all the same.
func TestFileSinkCommitErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".part-x-0-0.inprogress"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, ".part-x-0-1.inprogress"), []byte("x"), 0o600)
	var ops []string
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(2, func(op vfs.Op, name string) bool {
		ops = append(ops, string(op)+" "+filepath.Base(name))
		return op == vfs.OpRename
	})}
	c := &fileCommitter{fs: efs, dir: dir}
	ok, _ := json.Marshal(fileCommittable{Dir: dir, Pending: ".part-x-0-0.inprogress", Finished: "part-x-0-0"})
	bad, _ := json.Marshal(fileCommittable{Dir: dir, Pending: ".part-x-0-1.inprogress", Finished: "part-x-0-1"})
	err := c.Commit([][]byte{ok, bad})
	var s *api.SuppressRestartsError
	if err == nil || errors.As(err, &s) || !strings.Contains(err.Error(), filepath.Join(dir, "part-x-0-1")) {
		t.Fatalf("err = %v; want a plain error naming the file", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "part-x-0-0")); err != nil {
		t.Fatalf("the first file was not committed: %v", err)
	}
	if !slices.Contains(ops, "opendir "+filepath.Base(dir)) {
		t.Errorf("the directory was not fsynced after the rename that succeeded: %q", ops)
	}

	c = &fileCommitter{fs: vfs.Default, dir: dir}
	for _, tc := range []struct {
		fc   fileCommittable
		want string
	}{
		{fileCommittable{Dir: filepath.Join(dir, "gone"), Pending: ".part-y-0-0.inprogress", Finished: "part-y-0-0"}, "its directory " + filepath.Join(dir, "gone") + " is gone"},
		{fileCommittable{Dir: dir, Pending: "../../etc/passwd", Finished: "part-x-0-2"}, "../../etc/passwd"},
		{fileCommittable{Dir: "relative/dir", Pending: ".p", Finished: "p"}, `"relative/dir"`},
	} {
		b, _ := json.Marshal(tc.fc)
		if err := c.Commit([][]byte{b}); !errors.As(err, &s) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v; want a SuppressRestartsError naming %q", tc.fc, err, tc.want)
		}
	}
}

func TestFileSinkCleanUpAfterRestore(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{".part-old-0-0.inprogress", ".part-old-0-1.inprogress", ".part-new-1-0.inprogress",
		".part-otherjob-0-0.inprogress", "part-old-0-7", "unrelated.txt", ".hidden"} {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	s := &FileSink[string]{Dir: dir}
	keep, _ := json.Marshal(fileCommittable{Pending: ".part-old-0-1.inprogress", Finished: "part-old-0-1"})
	if err := s.CleanUp(api.SinkContext{RunID: "new", PreviousRunIDs: []string{"old"}}, [][]byte{keep}); err != nil {
		t.Fatal(err)
	}
	// Gone: the orphan of the failed earlier attempt. Kept: the pending file
	// the checkpoint references, this attempt's file, another job's file,
	// finished output, other files.
	want := []string{".hidden", ".part-new-1-0.inprogress", ".part-old-0-1.inprogress", ".part-otherjob-0-0.inprogress", "part-old-0-7", "unrelated.txt"}
	if got := listDir(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after clean-up: %v; want %v", got, want)
	}
}

func TestFileSinkWriteFailureSurfaces(t *testing.T) {
	dir := t.TempDir()
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(1, func(op vfs.Op, _ string) bool { return op == vfs.OpSync })}
	s := &FileSink[string]{Dir: dir, FS: efs}
	w, _ := s.CreateWriter(api.SinkContext{RunID: "r", Parallelism: 1})
	w.Write("x")
	if _, err := w.(api.CommittingSinkWriter[string]).PrepareCommit(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("a failed fsync must fail the pre-commit, got %v", err)
	}
}

func TestUpsertFileSinkIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "table.tsv")
	type kv struct{ k, v string }
	s := &UpsertFileSink[kv]{Path: path, Key: func(x kv) string { return x.k }, Value: func(x kv) string { return x.v }}
	w, err := s.CreateWriter(api.SinkContext{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []kv{{"b", "1"}, {"a", "1"}, {"b", "2"}, {"tab\there", "x\"y"}} {
		w.Write(x)
	}
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(path)
	// Writing the same records again (a replay) leaves the table as it was.
	for _, x := range []kv{{"b", "1"}, {"b", "2"}, {"a", "1"}} {
		w.Write(x)
	}
	w.Flush(false)
	again, _ := os.ReadFile(path)
	if string(first) != string(again) || string(first) != "a\t1\nb\t2\n\"tab\\there\"\t\"x\\\"y\"\n" {
		t.Fatalf("table:\n%q\nafter replay:\n%q", first, again)
	}
	// A new sink object (another process) starts from the table on disk.
	s2 := &UpsertFileSink[kv]{Path: path, Key: s.Key, Value: s.Value}
	s2.CreateWriter(api.SinkContext{})
	if tbl, err := ReadUpsertTable(vfs.Default, path); err != nil || tbl["tab\there"] != "x\"y" || len(tbl) != 3 {
		t.Fatalf("ReadUpsertTable: %v %v", tbl, err)
	}
}

func TestGeneratorMakesExactlyWordsWords(t *testing.T) {
	for _, words := range []int64{1, 9, 10, 11, 25} {
		g := &WordGenerator{Words: words, Distinct: 7, Seed: 1, WordsPerLine: 10}
		splits, _ := g.Splits(2)
		n := 0
		for _, line := range readAll(t, g, splits, func(p int) bool { return p == 1 }) {
			n += len(strings.Fields(line))
		}
		if int64(n) != words {
			t.Errorf("Words=%d: generated %d words", words, n)
		}
	}
}

// A restored source reads its snapshot's splits, not its settings: each
// connector refuses splits that are not positions in its own input.
func TestRestoredSplitsMustBeTheSourcesOwn(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	os.WriteFile(a, []byte("one two\nthree\n"), 0o644)
	os.WriteFile(b, []byte("four\n"), 0o644)
	if err := os.Symlink(dir, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	snapshot := func(src api.Source[string]) [][]byte {
		splits, err := src.Splits(2)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := src.CreateReader(api.SourceContext{Parallelism: 1})
		r.AddSplits(splits)
		r.PollNext(&sliceCollector{})
		state, err := r.SnapshotState(1)
		if err != nil {
			t.Fatal(err)
		}
		return state
	}
	textA := &TextFileSource{Paths: []string{a}}
	gen := &WordGenerator{Distinct: 10, Seed: 1}
	gen1000 := &WordGenerator{Words: 1000, Distinct: 10, Seed: 1}
	elems := &Elements[string]{Items: []string{"x", "y", "z"}}
	for _, tc := range []struct {
		name   string
		check  RestoredSplitsCheckerForTest
		splits [][]byte
		want   string // "" = accepted
	}{
		{"text, same file", textA, snapshot(textA), ""},
		{"text, same file spelled differently", &TextFileSource{Paths: []string{dir + "/./a.txt"}}, snapshot(textA), ""},
		{"text, same file through a symlink", &TextFileSource{Paths: []string{filepath.Join(dir, "link", "a.txt")}}, snapshot(textA), ""},
		{"text, same file twice", &TextFileSource{Paths: []string{a, a}}, snapshot(textA), "; this job reads " + a + ", " + a},
		{"text, a file once that was read twice", textA, snapshot(&TextFileSource{Paths: []string{a, a}}), "the snapshot's source read " + a + ", " + a + "; this job reads " + a},
		{"text, another file", &TextFileSource{Paths: []string{b}}, snapshot(textA), "the snapshot's source read " + a + "; this job reads " + b},
		{"text, a file added", &TextFileSource{Paths: []string{a, b}}, snapshot(textA), "this job reads " + a + ", " + b},
		{"text, generator state", textA, snapshot(gen), "the snapshot's source generated an unbounded stream of words (10 distinct, seed 1, 10 per line); this job's reads the files " + a},
		{"text, elements state", textA, snapshot(elems), "the snapshot's source read an in-memory input of 3 items (such as word count's built-in text); this job's reads the files " + a},
		{"generator, same text", gen, snapshot(gen), ""},
		{"generator, bounded now", gen1000, snapshot(gen), "generated an unbounded stream of words (10 distinct, seed 1, 10 per line); this job's generates 1000 words (10 distinct, seed 1, 10 per line)"},
		{"generator, other seed", &WordGenerator{Distinct: 10, Seed: 2}, snapshot(gen), "seed 2"},
		{"generator, text state", gen, snapshot(textA), "the snapshot's source read the files " + a + "; this job's generates an unbounded stream of words (10 distinct, seed 1, 10 per line)"},
		{"generator, elements state", gen, snapshot(elems), "the snapshot's source read an in-memory input of 3 items (such as word count's built-in text); this job's generates"},
		{"elements, same", elems, snapshot(elems), ""},
		{"elements, other size", &Elements[string]{Items: []string{"x"}}, snapshot(elems), "in-memory input of 3 items; this job's has 1"},
		{"elements, generator state", elems, snapshot(gen), "the snapshot's source generated an unbounded stream of words (10 distinct, seed 1, 10 per line); this job's reads an in-memory input of 3 items"},
		{"elements, text state", elems, snapshot(textA), "the snapshot's source read the files " + a + "; this job's reads an in-memory input of 3 items"},
	} {
		err := tc.check.CheckRestoredSplits(tc.splits)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v; want it to contain %q", tc.name, err, tc.want)
		}
	}

	// A file that changed size since the snapshot is refused, naming it.
	state := snapshot(textA)
	os.WriteFile(a, []byte("one two\nthree\nfive\n"), 0o644)
	if err := textA.CheckRestoredSplits(state); err == nil || !strings.Contains(err.Error(), "input file "+a+" has 19 bytes but had 14 when the snapshot was taken") {
		t.Errorf("grown file: err = %v", err)
	}
	// A file the snapshot read that is gone cannot be continued.
	stateB := snapshot(&TextFileSource{Paths: []string{b}})
	os.Remove(b)
	if err := textA.CheckRestoredSplits(stateB); err == nil || !strings.Contains(err.Error(), "the snapshot's source read "+b+", which cannot be read here: no such file or directory") {
		t.Errorf("deleted file: err = %v", err)
	}
}

// RestoredSplitsCheckerForTest is api.RestoredSplitsChecker, named here
// so the table above reads plainly.
type RestoredSplitsCheckerForTest = api.RestoredSplitsChecker

func TestSplitEncodings(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Valid splits round-trip.
		s := genSplit{Next: rapid.Int64Min(0).Draw(t, "next"), End: rapid.Int64Min(-1).Draw(t, "end"),
			Step: rapid.Int64Min(1).Draw(t, "step"), text: genText{Words: rapid.Int64Min(-1).Draw(t, "words"),
				Distinct: rapid.Int64Min(1).Draw(t, "distinct"), Seed: rapid.Uint64().Draw(t, "seed"), PerLine: rapid.Int64Min(1).Draw(t, "perLine")}}
		if got, err := decodeGenSplit(s.encode()); err != nil || got != s {
			t.Fatalf("generator split %+v decoded as %+v, %v", s, got, err)
		}
		n := rapid.Uint64().Draw(t, "total")
		e := rapid.Uint64Max(n).Draw(t, "end")
		x := rapid.Uint64Max(e).Draw(t, "next")
		if a, b, c, ok := decodeElementsSplit(encodeElementsSplit(x, e, n)); !ok || a != x || b != e || c != n {
			t.Fatalf("elements split (%d, %d, %d) decoded as (%d, %d, %d, %v)", x, e, n, a, b, c, ok)
		}
		// Splits written before the tags still decode, flagged legacy.
		old := binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(nil, s.Next), s.End), s.Step)
		if got, err := decodeGenSplit(old); err != nil || !got.legacy || got.Next != s.Next || got.End != s.End || got.Step != s.Step {
			t.Fatalf("legacy generator split %x decoded as %+v, %v", old, got, err)
		}
		oldE := binary.AppendUvarint(binary.AppendUvarint(nil, x), e)
		if a, b, c, ok := decodeElementsSplit(oldE); !ok || a != x || b != e || c != legacyTotal {
			t.Fatalf("legacy elements split %x decoded as (%d, %d, %d, %v)", oldE, a, b, c, ok)
		}
		// No split, of any layout or none, is taken by both decoders: one
		// connector's split is never read as another's. Nothing panics.
		for _, b := range [][]byte{rapid.SliceOf(rapid.Byte()).Draw(t, "garbage"), s.encode(), old, oldE, encodeElementsSplit(x, e, n)} {
			_, gerr := decodeGenSplit(b)
			_, _, _, eok := decodeElementsSplit(b)
			if gerr == nil && eok {
				t.Fatalf("%x decodes as both a generator and an elements split", b)
			}
		}
		if _, err := decodeGenSplit(encodeElementsSplit(x, e, n)); err == nil {
			t.Fatal("an elements split decoded as a generator split")
		}
		if _, _, _, ok := decodeElementsSplit(s.encode()); ok {
			t.Fatal("a generator split decoded as an elements split")
		}
		if _, err := decodeGenSplit(oldE); err == nil {
			t.Fatal("a legacy elements split decoded as a generator split")
		}
		if _, _, _, ok := decodeElementsSplit(old); ok {
			t.Fatal("a legacy generator split decoded as an elements split")
		}
	})
}

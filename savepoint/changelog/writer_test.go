package changelog_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/savepoint/changelog"
	"github.com/gflink/gflink/savepoint/vfs"
	"pgregory.net/rapid"
)

// waitLimit bounds every wait on the writer: a hang fails the test.
const waitLimit = 20 * time.Second

var prefixSeq atomic.Int64

// uniquePrefix names a writer's files: memory files live in one process-
// wide map, so no two writers of these tests may share names.
func uniquePrefix(what string) string {
	return fmt.Sprintf("%s-%d", what, prefixSeq.Add(1))
}

// files calls w.Files, failing the test if it does not return in time.
func files(t tb, w *changelog.Writer, from, to int64) ([]changelog.File, error) {
	t.Helper()
	type res struct {
		fs  []changelog.File
		err error
	}
	ch := make(chan res, 1)
	go func() {
		list, err := w.Files(from, to)
		ch <- res{list, err}
	}()
	select {
	case r := <-ch:
		return r.fs, r.err
	case <-testutil.After(waitLimit):
		t.Fatalf("Files(%d, %d) did not return within %v", from, to, waitLimit)
		return nil, nil
	}
}

// write appends one record through the writer's record side.
func write(w *changelog.Writer, x rec) {
	if x.setString {
		w.SetStringVarint(x.id, x.r.KeyGroup, x.str, x.v)
		return
	}
	w.Head(x.r.Op, x.id, x.r.KeyGroup, x.r.Key)
	w.Buf = appendBody(w.Buf, x)
	w.Done()
}

func declarations(ds []decl) func([]byte) []byte {
	return func(dst []byte) []byte { return appendDecls(dst, ds) }
}

// checkFile reads one closed file and checks its size, that it starts with
// the declarations, and its records.
func checkFile(t tb, fsys vfs.FS, f changelog.File, decls []byte, want []rec) [][]byte {
	t.Helper()
	data, err := changelog.ReadFile(fsys, testLogs, f.Path)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", f.Path, err)
	}
	if int64(len(data)) != f.Size {
		t.Fatalf("%s has %d bytes, Files says %d", f.Path, len(data), f.Size)
	}
	// The checksum a checkpoint records is the file's, as written (also
	// when it was rewritten after a failed write).
	if sum := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)); sum != f.CRC32C {
		t.Fatalf("%s has the CRC-32C %08x, Files says %08x", f.Path, sum, f.CRC32C)
	}
	if err := changelog.CheckCRC(data, f.Size, f.Path, f.CRC32C); err != nil {
		t.Fatalf("CheckCRC(%s): %v", f.Path, err)
	}
	chunks := chunkPayloads(t, data)
	if len(chunks) == 0 || !bytes.HasPrefix(chunks[0], decls) {
		t.Fatalf("%s does not start with the declarations", f.Path)
	}
	got, err := parseAll(data, f.Size, f.Path)
	if err != nil {
		t.Fatalf("Parse(%s): %v", f.Path, err)
	}
	checkRecords(t, f.Path, want, got)
	return chunks
}

var wDecls = []decl{dValue, dList, dMap, dTimer}

// fixedRecs makes n records of every op, sizes varying.
func fixedRecs(n, salt int) []rec {
	out := make([]rec, n)
	for i := range out {
		op := allOps[(i+salt)%len(allOps)]
		d := dValue
		switch op {
		case changelog.OpListAdd, changelog.OpListSet:
			d = dList
		case changelog.OpMapPut, changelog.OpMapRemove:
			d = dMap
		case changelog.OpTimerAdd, changelog.OpTimerDel:
			d = dTimer
		}
		key := []byte(fmt.Sprintf("k%d-%d", salt, i))
		out[i] = newRec(d, op, (i*37+salt)%128, key, pattern((i*13)%150, byte(i)), pattern(i%5, byte(salt)),
			int64(i*1000-salt), i%4)
	}
	return out
}

func fsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "job", changelog.DirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The writer's files: one per Roll that had records, closed, in order,
// each starting with the declarations and holding exactly the records
// written since the previous Roll.
func TestWriterRollsFiles(t *testing.T) {
	for _, backend := range []string{"memory", "filesystem"} {
		t.Run(backend, func(t *testing.T) {
			prefix := uniquePrefix("roll")
			var storage changelog.Storage = testLogs
			dir := ""
			if backend == "filesystem" {
				dir = fsDir(t)
				storage = changelog.FSStorage{FS: vfs.Default, Dir: dir}
			}
			const handOff = 64
			w := changelog.NewWriter(changelog.WriterOptions{Storage: storage, Prefix: prefix, PersistDelay: time.Hour,
				HandOff: handOff, InFlight: 4 * handOff, Declarations: declarations(wDecls)}, 5, time.Unix(1000, 0))
			defer w.Close()

			if w.Seq() != 5 {
				t.Fatalf("Seq %d, want 5", w.Seq())
			}
			// Rolls and what they ended: nil means no records.
			written := map[int64][]rec{}
			if s := w.Roll(); s != 5 { // nothing written: no file
				t.Fatalf("Roll ended %d, want 5", s)
			}
			for i, n := range []int{10, 1, 0, 0, 200} {
				recs := fixedRecs(n, i)
				for _, x := range recs {
					write(w, x)
				}
				seq := w.Roll()
				if seq != int64(6+i) || w.Seq() != seq+1 {
					t.Fatalf("Roll ended %d (Seq now %d), want %d", seq, w.Seq(), 6+i)
				}
				if n > 0 {
					written[seq] = recs
				}
			}
			// Files 5..10: 6, 7 and 10 have records; 5, 8 and 9 none.
			got, err := files(t, w, 5, 10)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []int64
			for _, f := range got {
				seqs = append(seqs, f.Seq)
			}
			if fmt.Sprint(seqs) != "[6 7 10]" {
				t.Fatalf("Files(5, 10) gives files %v, want [6 7 10]", seqs)
			}
			decls := appendDecls(nil, wDecls)
			for _, f := range got {
				name := fmt.Sprintf("%s-%d.log", prefix, f.Seq)
				wantPath := changelog.MemoryPrefix + name
				if backend == "filesystem" {
					wantPath = filepath.Join(dir, name)
				}
				if f.Path != wantPath {
					t.Fatalf("file %d at %s, want %s", f.Seq, f.Path, wantPath)
				}
				if !changelog.IsLogPath(f.Path) {
					t.Fatalf("IsLogPath(%s) is false", f.Path)
				}
				chunks := checkFile(t, vfs.Default, f, decls, written[f.Seq])
				// A full buffer is handed over at once: every chunk but a
				// file's last holds at least HandOff bytes, and the big
				// file took many hand-offs.
				for i, c := range chunks[:len(chunks)-1] {
					if len(c) < handOff {
						t.Fatalf("file %d: chunk %d of %d bytes was handed over before %d were buffered", f.Seq, i, len(c), handOff)
					}
				}
				if f.Seq == 10 && len(chunks) < 20 {
					t.Fatalf("file 10 has %d chunks; 200 records with a hand-off every %d bytes make many more", len(chunks), handOff)
				}
			}
			if backend == "filesystem" {
				ents, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(ents) != 3 {
					t.Fatalf("%d files in %s, want 3", len(ents), dir)
				}
				for _, e := range ents {
					info, err := e.Info()
					if err != nil {
						t.Fatal(err)
					}
					if info.Mode().Perm() != vfs.PrivateFileMode {
						t.Fatalf("%s has mode %v, want %v", e.Name(), info.Mode().Perm(), vfs.PrivateFileMode)
					}
				}
			}
			// A range picks its files.
			if one, err := files(t, w, 7, 9); err != nil || len(one) != 1 || one[0].Seq != 7 {
				t.Fatalf("Files(7, 9) = %v, %v; want file 7", one, err)
			}
			if none, err := files(t, w, 8, 9); err != nil || len(none) != 0 {
				t.Fatalf("Files(8, 9) = %v, %v; want none", none, err)
			}
			// Forget drops the bookkeeping of earlier files, not the files.
			w.Forget(7)
			if list, err := files(t, w, 0, 10); err != nil || len(list) != 2 || list[0].Seq != 7 || list[1].Seq != 10 {
				t.Fatalf("after Forget(7): Files = %v, %v; want 7 and 10", list, err)
			}
			if _, err := changelog.ReadFile(vfs.Default, testLogs, got[0].Path); err != nil {
				t.Fatalf("Forget deleted %s: %v", got[0].Path, err)
			}
			w.Forget(11)
			if list, err := files(t, w, 0, 10); err != nil || len(list) != 0 {
				t.Fatalf("after Forget(11): Files = %v, %v; want none", list, err)
			}
			// Writing goes on after Forget.
			more := fixedRecs(3, 9)
			for _, x := range more {
				write(w, x)
			}
			if s := w.Roll(); s != 11 {
				t.Fatalf("Roll ended %d, want 11", s)
			}
			last, err := files(t, w, 11, 11)
			if err != nil || len(last) != 1 {
				t.Fatalf("Files(11, 11) = %v, %v", last, err)
			}
			checkFile(t, vfs.Default, last[0], decls, more)

			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			for _, f := range append(got, last...) {
				if err := changelog.Remove(vfs.Default, testLogs, f.Path); err != nil {
					t.Fatal(err)
				}
				if _, err := changelog.ReadFile(vfs.Default, testLogs, f.Path); err == nil {
					t.Fatalf("%s still readable after Remove", f.Path)
				}
			}
		})
	}
}

// A state registered while a file is open is declared in it; one
// registered between files is declared by Declarations with the others.
func TestWriterDeclare(t *testing.T) {
	states := []decl{dValue}
	w := changelog.NewWriter(changelog.WriterOptions{Storage: testLogs, Prefix: uniquePrefix("declare"),
		Declarations: func(dst []byte) []byte { return appendDecls(dst, states) }}, 1, time.Unix(0, 0))
	defer w.Close()

	a := newRec(dValue, changelog.OpSet, 1, []byte("a"), []byte("1"), nil, 0, 0)
	write(w, a)
	states = append(states, dList)
	w.Declare(dList.id, dList.kind, dList.name)
	b := newRec(dList, changelog.OpListAdd, 2, []byte("b"), []byte("2"), nil, 0, 1)
	write(w, b)
	w.Roll()
	// Between files: nothing is buffered; the next file's declarations
	// include the new state.
	states = append(states, dMap)
	w.Declare(dMap.id, dMap.kind, dMap.name)
	if len(w.Buf) != 0 {
		t.Fatalf("Declare between files buffered %d bytes", len(w.Buf))
	}
	c := newRec(dMap, changelog.OpMapPut, 3, []byte("c"), []byte("k"), []byte("v"), 0, 0)
	write(w, c)
	w.Roll()
	list, err := files(t, w, 1, 2)
	if err != nil || len(list) != 2 {
		t.Fatalf("Files = %v, %v", list, err)
	}
	checkFile(t, vfs.Default, list[0], appendDecls(nil, []decl{dValue}), []rec{a, b})
	checkFile(t, vfs.Default, list[1], appendDecls(nil, []decl{dValue, dList, dMap}), []rec{c})
	for _, f := range list {
		changelog.Remove(vfs.Default, testLogs, f.Path)
	}
}

// watchStorage keeps files in memory and reports every write, so that a
// test can wait for the persister without sleeping.
type watchStorage struct {
	mu     sync.Mutex
	files  map[string]*watchSink
	events chan struct{}
}

type watchSink struct {
	s      *watchStorage
	data   []byte
	writes int
	syncs  int
	closed bool
}

func newWatchStorage() *watchStorage {
	return &watchStorage{files: map[string]*watchSink{}, events: make(chan struct{}, 1)}
}

func (s *watchStorage) notify() {
	select {
	case s.events <- struct{}{}:
	default:
	}
}

func (s *watchStorage) Create(name string) (changelog.Sink, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := &watchSink{s: s}
	s.files[name] = k
	return k, "watch:" + name, nil
}

func (k *watchSink) Write(p []byte) (int, error) {
	k.s.mu.Lock()
	k.data = append(k.data, p...)
	k.writes++
	k.s.mu.Unlock()
	k.s.notify()
	return len(p), nil
}

func (k *watchSink) Sync() error {
	k.s.mu.Lock()
	k.syncs++
	k.s.mu.Unlock()
	return nil
}

func (k *watchSink) Close() error {
	k.s.mu.Lock()
	k.closed = true
	k.s.mu.Unlock()
	k.s.notify()
	return nil
}

// waitFor waits until cond (called with s.mu held) holds.
func (s *watchStorage) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := testutil.After(waitLimit)
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.events:
		case <-deadline:
			t.Fatalf("waited %v for %s", waitLimit, what)
		}
	}
}

func (s *watchStorage) file(name string) *watchSink { return s.files[name] }

// Records wait in Buf until the persist delay has passed since the last
// timed hand-off, then Tick hands them over (and the persister writes
// them before any Roll).
func TestWriterTickHandsOffAfterPersistDelay(t *testing.T) {
	st := newWatchStorage()
	t0 := time.Unix(5000, 0)
	prefix := "tick"
	w := changelog.NewWriter(changelog.WriterOptions{Storage: st, Prefix: prefix, PersistDelay: time.Second,
		HandOff: 1 << 20, Declarations: declarations(wDecls)}, 1, t0)
	defer w.Close()
	name := prefix + "-1.log"

	// Nothing buffered: a Tick hands nothing over, no file is begun.
	w.Tick(t0.Add(time.Hour))
	first := fixedRecs(5, 0)
	for _, x := range first {
		write(w, x)
	}
	n := len(w.Buf)
	w.Tick(t0.Add(999 * time.Millisecond))
	if len(w.Buf) != n {
		t.Fatalf("Tick before the persist delay handed over (Buf %d bytes, was %d)", len(w.Buf), n)
	}
	// The hour-later Tick with an empty buffer did not count as a hand-
	// off: the delay still runs from t0.
	w.Tick(t0.Add(time.Second))
	if len(w.Buf) != 0 {
		t.Fatalf("Tick after the persist delay left %d bytes in Buf", len(w.Buf))
	}
	// The persister writes them without a Roll: header, chunk header,
	// payload.
	want := changelog.HeaderLen + 8 + n
	st.waitFor(t, "the first hand-off to be written", func() bool {
		f := st.file(name)
		return f != nil && len(f.data) == want
	})

	second := fixedRecs(4, 1)
	for _, x := range second {
		write(w, x)
	}
	n2 := len(w.Buf)
	w.Tick(t0.Add(1999 * time.Millisecond)) // 0.999s since the last hand-off
	if len(w.Buf) != n2 {
		t.Fatalf("Tick 0.999s after the last hand-off handed over")
	}
	w.Tick(t0.Add(2 * time.Second))
	if len(w.Buf) != 0 {
		t.Fatalf("Tick a delay after the last hand-off left %d bytes", len(w.Buf))
	}
	want += 8 + n2
	st.waitFor(t, "the second hand-off to be written", func() bool { return len(st.file(name).data) == want })
	st.mu.Lock()
	closed := st.file(name).closed
	st.mu.Unlock()
	if closed {
		t.Fatal("the file was closed before any Roll")
	}

	seq := w.Roll()
	list, err := files(t, w, seq, seq)
	if err != nil || len(list) != 1 {
		t.Fatalf("Files = %v, %v", list, err)
	}
	st.mu.Lock()
	f := st.file(name)
	data, syncs, closed := append([]byte(nil), f.data...), f.syncs, f.closed
	st.mu.Unlock()
	if !closed || syncs == 0 {
		t.Fatalf("rolled file: closed %v, %d syncs; want closed after a sync", closed, syncs)
	}
	if list[0].Size != int64(len(data)) || list[0].Path != "watch:"+name {
		t.Fatalf("Files gives %+v; the file has %d bytes", list[0], len(data))
	}
	// Two hand-offs, two chunks; the Roll found nothing more to write.
	if c := chunkPayloads(t, data); len(c) != 2 {
		t.Fatalf("%d chunks, want one per Tick hand-off (2)", len(c))
	}
	got, err := parseAll(data, list[0].Size, list[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, "ticked file", append(first, second...), got)
}

// With a clock (WriterOptions.Now), Done hands records over once they
// have waited the persist delay, without a Tick: it reads the clock every
// 256 records, so a task too busy to tick still persists on time.
func TestWriterDoneHandsOffAfterPersistDelay(t *testing.T) {
	now := time.Unix(5000, 0)
	w := changelog.NewWriter(changelog.WriterOptions{Storage: testLogs, Prefix: uniquePrefix("done"),
		PersistDelay: 10 * time.Millisecond, HandOff: 1 << 20, Declarations: declarations(wDecls),
		Now: func() time.Time { return now }}, 1, now)
	defer w.Close()
	recs := fixedRecs(512, 0)
	for _, x := range recs[:255] {
		write(w, x)
	}
	now = now.Add(time.Second)
	if len(w.Buf) == 0 {
		t.Fatal("Done handed over before the clock was read")
	}
	write(w, recs[255]) // the 256th record: the clock is read
	if len(w.Buf) != 0 {
		t.Fatalf("Done left %d bytes in Buf after the persist delay", len(w.Buf))
	}
	for _, x := range recs[256:511] {
		write(w, x)
	}
	now = now.Add(9 * time.Millisecond)
	write(w, recs[511]) // read again, within the delay of the last hand-off
	if len(w.Buf) == 0 {
		t.Fatal("Done handed over within the persist delay of the last hand-off")
	}
	seq := w.Roll()
	list, err := files(t, w, seq, seq)
	if err != nil || len(list) != 1 {
		t.Fatalf("Files = %v, %v", list, err)
	}
	data, err := changelog.ReadFile(vfs.Default, testLogs, list[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if c := chunkPayloads(t, data); len(c) != 2 {
		t.Fatalf("%d chunks, want 2 (the timed hand-off and the roll)", len(c))
	}
	got, err := parseAll(data, list[0].Size, list[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, "file", recs, got)
}

// Close waits for the persister to write what it was handed; a file no
// Roll ended is closed (not synced as a finished file) and never listed.
func TestWriterCloseFlushesHandedOff(t *testing.T) {
	st := newWatchStorage()
	t0 := time.Unix(0, 0)
	w := changelog.NewWriter(changelog.WriterOptions{Storage: st, Prefix: "close", PersistDelay: time.Millisecond,
		HandOff: 32, Declarations: declarations(wDecls)}, 1, t0)
	recs := fixedRecs(30, 2)
	for _, x := range recs {
		write(w, x)
	}
	w.Tick(t0.Add(time.Second))  // hand over the rest
	write(w, fixedRecs(1, 3)[0]) // buffered, never handed over: dropped
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	f := st.file("close-1.log")
	data, closed := append([]byte(nil), f.data...), f.closed
	st.mu.Unlock()
	if !closed {
		t.Fatal("Close returned before the persister closed the open file")
	}
	got, err := parseAll(data, int64(len(data)), "close-1.log")
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, "handed-off records at Close", recs, got)
}

// A storage that always fails: Files reports the error for every file
// rolled, after the configured attempts; Failed names the last such file;
// nothing hangs, and the writer as a whole (Err, Close) is not broken.
func TestWriterWriteErrorMissingDir(t *testing.T) {
	for _, handOff := range []int{64, 1 << 20} {
		t.Run(fmt.Sprint(handOff), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "missing", changelog.DirName)
			w := changelog.NewWriter(changelog.WriterOptions{Storage: changelog.FSStorage{FS: vfs.Default, Dir: dir},
				Prefix: "err", HandOff: handOff, MaxAttempts: 3, Declarations: declarations(wDecls)}, 1, time.Unix(0, 0))
			defer w.Close()
			for i := 0; i < 3; i++ {
				for _, x := range fixedRecs(20, i) {
					write(w, x)
				}
				s := w.Roll()
				list, err := files(t, w, s, s)
				if err == nil || len(list) != 0 {
					t.Fatalf("Files = %v, %v; want an error", list, err)
				}
				if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "write state changelog") || !strings.Contains(err.Error(), "3 attempts") {
					t.Fatalf("error %q: want the missing directory's, as a write of the state changelog after 3 attempts", err)
				}
				if got := w.Failed(); got != s {
					t.Fatalf("Failed() = %d; want %d", got, s)
				}
			}
			w.Forget(4)
			if got := w.Failed(); got != 0 {
				t.Fatalf("Failed() after Forget = %d", got)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the writer created %s", dir)
			}
		})
	}
}

// A failed write, fsync or close of a file, injected once: the file is
// written anew at its roll and comes back whole. Injected every time, it
// fails after the attempts, the error names it, and the next file is fine.
func TestWriterInjectedErrors(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpClose} {
		for _, always := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/always=%v", op, always), func(t *testing.T) {
				dir := fsDir(t)
				match := func(o vfs.Op, path string) bool { return o == op && strings.HasSuffix(path, "-2.log") }
				var inj vfs.Injector = vfs.FailNth(1, match)
				if op == vfs.OpWrite {
					inj = vfs.FailNth(3, match)
				}
				if always {
					inj = vfs.InjectorFunc(func(o vfs.Op, path string) error {
						if match(o, path) {
							return vfs.ErrInjected
						}
						return nil
					})
				}
				efs := vfs.ErrorFS{FS: vfs.Default, Inj: inj}
				w := changelog.NewWriter(changelog.WriterOptions{Storage: changelog.FSStorage{FS: efs, Dir: dir},
					Prefix: "inj", HandOff: 64, MaxAttempts: 3, Declarations: declarations(wDecls)}, 1, time.Unix(0, 0))
				defer w.Close()
				recs := fixedRecs(10, 0)
				for _, x := range recs {
					write(w, x)
				}
				w.Roll()
				ok, err := files(t, w, 1, 1)
				if err != nil || len(ok) != 1 {
					t.Fatalf("file 1: %v, %v", ok, err)
				}
				checkFile(t, vfs.Default, ok[0], appendDecls(nil, wDecls), recs)
				recs2 := fixedRecs(10, 1)
				for _, x := range recs2 {
					write(w, x)
				}
				w.Roll()
				list, err := files(t, w, 1, 2)
				if !always {
					if err != nil || len(list) != 2 {
						t.Fatalf("Files(1, 2) = %v, %v; want both files, the second rewritten", list, err)
					}
					checkFile(t, vfs.Default, list[1], appendDecls(nil, wDecls), recs2)
					return
				}
				if err == nil || !errors.Is(err, vfs.ErrInjected) {
					t.Fatalf("Files(1, 2) = %v, %v; want the injected error", list, err)
				}
				if !strings.Contains(err.Error(), filepath.Join(dir, "inj-2.log")) {
					t.Fatalf("error %q does not name the file", err)
				}
				if w.Failed() != 2 {
					t.Fatalf("Failed() = %d; want 2", w.Failed())
				}
				recs3 := fixedRecs(10, 2)
				for _, x := range recs3 {
					write(w, x)
				}
				w.Roll()
				list, err = files(t, w, 3, 3)
				if err != nil || len(list) != 1 {
					t.Fatalf("Files(3, 3) = %v, %v; a later file is written", list, err)
				}
				checkFile(t, vfs.Default, list[0], appendDecls(nil, wDecls), recs3)
			})
		}
	}
}

// Property: any interleaving of records (SetStringVarint's among them),
// ticks and rolls, with any hand-off size, gives back exactly the records
// of each rolled file, in order, in files numbered by the rolls that had
// records.
func TestWriterProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ds := genDecls(t)
		handOff := rapid.SampledFrom([]int{1, 16, 64, 1000, 1 << 16}).Draw(t, "hand-off")
		inFlight := rapid.SampledFrom([]int{0, handOff * 3, handOff * 200}).Draw(t, "in-flight")
		delay := time.Duration(rapid.IntRange(0, 3).Draw(t, "delay")) * time.Second
		first := rapid.Int64Range(0, 1000).Draw(t, "first")
		now := time.Unix(rapid.Int64Range(0, 1<<40).Draw(t, "t0"), 0)
		prefix := uniquePrefix("prop")
		w := changelog.NewWriter(changelog.WriterOptions{Storage: testLogs, Prefix: prefix,
			PersistDelay: delay, HandOff: handOff, InFlight: inFlight, Declarations: declarations(ds)}, first, now)
		defer w.Close()

		written := map[int64][]rec{}
		var cur []rec
		steps := rapid.IntRange(0, 80).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0:
				seq := w.Roll()
				if len(cur) > 0 {
					written[seq] = cur
				}
				cur = nil
			case 1:
				now = now.Add(time.Duration(rapid.IntRange(0, 2500).Draw(t, "advance-ms")) * time.Millisecond)
				w.Tick(now)
			case 2, 3, 4:
				x := genSetString(t, ds)
				write(w, x)
				cur = append(cur, x)
			default:
				x := genRec(t, ds)
				write(w, x)
				cur = append(cur, x)
			}
		}
		last := w.Roll()
		if len(cur) > 0 {
			written[last] = cur
		}
		got, err := files(t, w, first, last)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(written) {
			t.Fatalf("%d files, want %d", len(got), len(written))
		}
		decls := appendDecls(nil, ds)
		for i, f := range got {
			if i > 0 && f.Seq <= got[i-1].Seq {
				t.Fatalf("files out of order: %d after %d", f.Seq, got[i-1].Seq)
			}
			want, ok := written[f.Seq]
			if !ok {
				t.Fatalf("file %d, but nothing was written before that roll", f.Seq)
			}
			checkFile(t, vfs.Default, f, decls, want)
			if err := changelog.Remove(vfs.Default, testLogs, f.Path); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// countingReadBack is a file system storage that counts read-backs and
// may change what it reads back.
type countingReadBack struct {
	changelog.FSStorage
	reads   atomic.Int64
	corrupt bool
}

func (s *countingReadBack) ReadBack(path string, n int64) ([]byte, error) {
	s.reads.Add(1)
	b, err := s.FSStorage.ReadBack(path, n)
	if err == nil && s.corrupt && len(b) > 0 {
		b[len(b)-1] ^= 1
	}
	return b, err
}

// On a storage that reads files back, a file keeps in memory only what it
// wrote since its last fsync; a write that fails after several fsyncs is
// retried from what is read back, and the file comes back whole. A read-
// back that is not what was written fails the file (after every attempt)
// rather than writing it wrong.
func TestWriterRetryReadsBackWhatWasFsynced(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("corrupt=%v", corrupt), func(t *testing.T) {
			dir := fsDir(t)
			// The 40th write of the file fails: after a dozen fsyncs (one
			// every 64 bytes, of batches of 64 bytes: two writes each).
			inj := vfs.FailNth(40, func(o vfs.Op, path string) bool { return o == vfs.OpWrite && strings.HasSuffix(path, "-1.log") })
			st := &countingReadBack{FSStorage: changelog.FSStorage{FS: vfs.ErrorFS{FS: vfs.Default, Inj: inj}, Dir: dir}, corrupt: corrupt}
			w := changelog.NewWriter(changelog.WriterOptions{Storage: st, Prefix: "rb", HandOff: 64, SyncEvery: 64,
				MaxAttempts: 3, Declarations: declarations(wDecls)}, 1, time.Unix(0, 0))
			defer w.Close()
			recs := fixedRecs(60, 0)
			for _, x := range recs {
				write(w, x)
			}
			w.Roll()
			list, err := files(t, w, 1, 1)
			if st.reads.Load() == 0 {
				t.Fatal("the retry did not read back the fsynced part: the writer kept the whole file in memory")
			}
			if corrupt {
				if err == nil || !strings.Contains(err.Error(), "not what was written") {
					t.Fatalf("Files = %v, %v; want the read-back's mismatch", list, err)
				}
				if st.reads.Load() != 2 {
					t.Errorf("%d read-backs; want one for each of the two retries", st.reads.Load())
				}
				if w.Failed() != 1 {
					t.Errorf("Failed() = %d; want the file, 1", w.Failed())
				}
				return
			}
			if err != nil || len(list) != 1 {
				t.Fatalf("Files = %v, %v; want the file, rewritten", list, err)
			}
			checkFile(t, vfs.Default, list[0], appendDecls(nil, wDecls), recs)
		})
	}
}

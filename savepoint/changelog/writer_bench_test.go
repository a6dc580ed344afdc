package changelog_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/gflink/gflink/savepoint/changelog"
	"github.com/gflink/gflink/savepoint/vfs"
)

// BenchmarkWriterSetStringVarint: a word count's value records through the
// writer with the engine's batching defaults (persist delay 10 ms, hand-off
// at 5 MB, 100 MB in flight) into files, rolled every 8 M records as a
// checkpoint would at full speed, and each file forgotten after its roll.
// Reported per record: the wall time on the recording goroutine and the
// process's CPU (the persister's writes, fsyncs and page faults included).
func BenchmarkWriterSetStringVarint(b *testing.B) {
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "word-" + strconv.Itoa(i*7919%1000000)
	}
	dir := b.TempDir()
	w := changelog.NewWriter(changelog.WriterOptions{Storage: changelog.FSStorage{FS: vfs.Default, Dir: dir}, Prefix: "bench",
		PersistDelay: 10 * time.Millisecond, HandOff: 5 << 20, InFlight: 100 << 20, MaxAttempts: 1, Now: time.Now,
		Declarations: func(dst []byte) []byte { return changelog.AppendDeclare(dst, 1, 0, "count") }}, 1, time.Now())
	defer w.Close()
	const perRoll = 8 << 20
	cpu0, start := processCPU(), time.Now()
	n := 0
	for i := 0; b.Loop(); i++ {
		w.SetStringVarint(1, i&127, keys[i&(1<<16-1)], int64(i>>16&63))
		if n++; n == perRoll {
			n = 0
			seq := w.Roll()
			if _, err := w.Files(seq, seq); err != nil {
				b.Fatal(err)
			}
			w.Forget(seq + 1)
		}
	}
	seq := w.Roll()
	if _, err := w.Files(seq, seq); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "wall-ns/record")
	if haveCPUTime {
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/record")
	}
}

// discardStorage's files drop what is written: BenchmarkWriterRecordPath
// measures the task goroutine's side alone.
type discardStorage struct{}

type discardSink struct{}

func (discardStorage) Create(name string) (changelog.Sink, string, error) {
	return discardSink{}, "/discard/" + name, nil
}
func (discardSink) Write(p []byte) (int, error) { return len(p), nil }
func (discardSink) Sync() error                 { return nil }
func (discardSink) Close() error                { return nil }

// BenchmarkWriterRecordPath: SetStringVarint as a word count's task calls
// it, into files that discard their bytes, so that what is measured is
// the recording side: the encoding and the batching checks per record
// (rolled every 8 M records, so that written buffers are reused).
func BenchmarkWriterRecordPath(b *testing.B) {
	keys := make([]string, 1<<10)
	for i := range keys {
		keys[i] = "w" + strconv.Itoa(i*7919%1000000)
	}
	w := changelog.NewWriter(changelog.WriterOptions{Storage: discardStorage{}, Prefix: "bench",
		PersistDelay: 10 * time.Millisecond, HandOff: 5 << 20, InFlight: 100 << 20, MaxAttempts: 1, Now: time.Now,
		Declarations: func(dst []byte) []byte { return changelog.AppendDeclare(dst, 1, 0, "count") }}, 1, time.Now())
	defer w.Close()
	n := 0
	for i := 0; b.Loop(); i++ {
		w.SetStringVarint(1, i&127, keys[i&(1<<10-1)], int64(i>>10&63))
		if n++; n == 8<<20 { // a checkpoint's roll, as at full speed
			n = 0
			seq := w.Roll()
			if _, err := w.Files(seq, seq); err != nil {
				b.Fatal(err)
			}
			w.Forget(seq + 1)
		}
	}
}

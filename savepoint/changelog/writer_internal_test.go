package changelog

import (
	"fmt"
	"testing"
	"time"
)

// TestWriterReusesFixedBuffers: record buffers all have bufferSize's
// capacity; a full one is handed over rather than grown, and once a
// roll has the written ones back, new batches take them instead of
// allocating. Fails if a buffer grows (a record finding no room) or if
// written buffers are not reused.
func TestWriterReusesFixedBuffers(t *testing.T) {
	w := NewWriter(WriterOptions{Storage: MemoryStorage{}, Prefix: fmt.Sprint("reuse-", time.Now().UnixNano()),
		PersistDelay: time.Hour, HandOff: 5 << 20, InFlight: 100 << 20, MaxAttempts: 1,
		Declarations: func(dst []byte) []byte { return AppendDeclare(dst, 1, 0, "count") }}, 1, time.Now())
	defer w.Close()
	if w.bufSize != 1<<20 {
		t.Fatalf("buffer size %d with a 5 MB hand-off, want 1 MB", w.bufSize)
	}
	seen := map[*byte]bool{}
	record := func(i int) {
		w.SetStringVarint(1, i%128, fmt.Sprintf("word-%07d", i%100000), int64(i))
		if cap(w.Buf) != w.bufSize {
			t.Fatalf("record %d: buffer capacity %d, want %d (grown, not handed over)", i, cap(w.Buf), w.bufSize)
		}
		seen[&w.Buf[:1][0]] = true
	}
	const perFile = 200_000 // ~4 MB: several buffers a file
	for i := range perFile {
		record(i)
	}
	first := len(seen)
	if first < 3 {
		t.Fatalf("%d buffers for %d records; want several", first, perFile)
	}
	seq := w.Roll()
	w.mu.Lock()
	for w.rolled < seq {
		w.cond.Wait()
	}
	w.mu.Unlock()
	for i := range perFile {
		record(perFile + i)
	}
	if len(seen) > first+1 {
		t.Fatalf("the second file used %d new buffers; want the first file's back (at most the one in use at its roll)", len(seen)-first)
	}
}

package changelog

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestWriterReusesFixedBuffers: record buffers all have bufferSize's
// capacity; a full one is handed over rather than grown, and once a
// roll has the written ones back, new batches take them instead of
// allocating. Fails if a buffer grows (a record finding no room) or if
// written buffers are not reused.
func TestWriterReusesFixedBuffers(t *testing.T) {
	w := NewWriter(WriterOptions{Storage: NewMemoryStorage(), Prefix: fmt.Sprint("reuse-", time.Now().UnixNano()),
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

// TestWriterSmallBatchesGoAsCopies: a batch the persist delay hands over
// while it fills less than half its buffer goes as a copy of its size, and
// the task keeps its buffer: its file holds the batch until the roll, so
// handing over the buffer itself held bufferSize per 10 ms batch however few
// records it had. Fails if a small batch takes its buffer along.
func TestWriterSmallBatchesGoAsCopies(t *testing.T) {
	now := time.Unix(1000, 0)
	w := NewWriter(WriterOptions{Storage: NewMemoryStorage(), Prefix: fmt.Sprint("small-", time.Now().UnixNano()),
		PersistDelay: 10 * time.Millisecond, HandOff: 5 << 20, InFlight: 100 << 20, MaxAttempts: 1,
		Declarations: func(dst []byte) []byte { return AppendDeclare(dst, 1, 0, "count") }}, 1, now)
	defer w.Close()
	w.SetStringVarint(1, 0, "first", 1)
	buf := &w.Buf[:1][0]
	for i := range 100 {
		w.SetStringVarint(1, i%128, fmt.Sprint("word-", i), int64(i))
		now = now.Add(10 * time.Millisecond)
		w.Tick(now)
		if len(w.Buf) != 0 {
			t.Fatalf("batch %d was not handed over after the persist delay", i)
		}
		if &w.Buf[:1][0] != buf || cap(w.Buf) != w.bufSize {
			t.Fatalf("batch %d of a few records took the task's %d-byte buffer along", i, w.bufSize)
		}
	}
	seq := w.Roll()
	w.mu.Lock()
	for w.rolled < seq {
		w.cond.Wait()
	}
	f, ok := w.files[seq]
	w.mu.Unlock()
	if !ok || f.Size <= HeaderLen {
		t.Fatalf("file %d after the roll: %+v, %v", seq, f, ok)
	}
}

// TestWriterFastPathKeepsHandOffs: SetStringVarint's common record skips
// Done, so it must never leave the buffer where Done would have handed it
// over — at HandOff, within bufferSlack of its capacity — and must still
// hand a batch over once it has waited the persist delay (the clock read
// every 256 records). Fails if room is computed past a threshold or the
// fast path loses the clock.
func TestWriterFastPathKeepsHandOffs(t *testing.T) {
	for _, handOff := range []int{1000, 5000, 5 << 20} {
		t.Run(fmt.Sprint("hand-off ", handOff), func(t *testing.T) {
			now := time.Unix(1000, 0)
			w := NewWriter(WriterOptions{Storage: NewMemoryStorage(), Prefix: fmt.Sprint("fast-", handOff, "-", time.Now().UnixNano()),
				PersistDelay: 10 * time.Millisecond, HandOff: handOff, InFlight: 100 << 20, MaxAttempts: 1,
				Now:          func() time.Time { return now },
				Declarations: func(dst []byte) []byte { return AppendDeclare(dst, 1, 0, "count") }}, 1, now)
			defer w.Close()
			for i := range 200_000 {
				key := "word-0123456789abcdefghij"[:i%26]
				w.SetStringVarint(1, i%128, key, int64(i*7919%20000-10000))
				if len(w.Buf) >= handOff || cap(w.Buf)-len(w.Buf) < bufferSlack || cap(w.Buf) != w.bufSize {
					t.Fatalf("record %d left %d of %d bytes in the buffer (hand-off at %d, slack %d)", i, len(w.Buf), cap(w.Buf), handOff, bufferSlack)
				}
			}
			// 256 records of ~12 bytes in a new file stay below the size
			// thresholds of 5000 and more; after the delay, one of them
			// must hand the batch over.
			if handOff < 5000 {
				return
			}
			w.Roll()
			now = now.Add(20 * time.Millisecond)
			handed := false
			for i := range 256 {
				w.SetStringVarint(1, i%128, "word", int64(i))
				handed = handed || len(w.Buf) == 0
			}
			if !handed {
				t.Fatalf("256 records after the persist delay, and the batch (%d bytes) was not handed over", len(w.Buf))
			}
		})
	}
}

// TestShortSetStoresAgree: the word-sized short set (format_le.go) writes
// the same bytes as the byte-by-byte one every processor can run, for keys
// of every length the short set takes and values of every varint length,
// and writes nothing past the record.
func TestShortSetStoresAgree(t *testing.T) {
	values := []int64{0, -1, 1, 63, -64, 64, -65, 8191, -8192, 8192, -8193, 1 << 20, math.MaxInt64, math.MinInt64}
	for l := 0; l < 0x80; l++ {
		key := strings.Repeat("k", l)
		if l > 0 {
			key = key[:l-1] + string(rune('a'+l%26)) // the last byte differs
		}
		for _, v := range values {
			for _, n := range []int{0, 1, 5} {
				a := bytes.Repeat([]byte{0xa5}, n+l+setStringVarintMax+8)
				b := bytes.Clone(a)
				got := appendSetStringVarint(a[:n], n, 0x7f, 0x7f, key, v)
				want := appendShortSet(b[:n], n, 0x7f, 0x7f, key, v)
				if !bytes.Equal(got, want) {
					t.Fatalf("key of %d bytes, value %d, at %d: %x, want %x", l, v, n, got, want)
				}
				for i, c := range a[len(got):] {
					if c != 0xa5 {
						t.Fatalf("key of %d bytes, value %d, at %d: byte %d past the record is %#x", l, v, n, i, c)
					}
				}
			}
		}
	}
}

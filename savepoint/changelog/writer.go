package changelog

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"time"
)

// File is a closed log file.
type File struct {
	Seq  int64
	Path string
	Size int64
	// CRC32C is the checksum of the whole file, computed as it was
	// written; a checkpoint records it.
	CRC32C uint32
}

// WriterOptions shape one subtask's log.
type WriterOptions struct {
	Storage Storage
	// Prefix names the writer's files: <Prefix>-<seq>.log.
	Prefix string
	// PersistDelay: records wait at most this long on the task before they
	// are handed to the persister (dstl.dfs.batch.persist-delay).
	PersistDelay time.Duration
	// HandOff: so many buffered bytes are handed over at once, without
	// waiting for the delay (the smaller of dstl.dfs.batch.persist-size-
	// threshold and dstl.dfs.preemptive-persist-threshold); a full record
	// buffer (bufferSize, at most 1 MB) is handed over sooner.
	HandOff int
	// InFlight bounds the bytes handed over but not yet written
	// (dstl.dfs.upload.max-in-flight): beyond it the task waits, which is
	// backpressure rather than unbounded memory.
	InFlight int
	// MaxAttempts: a file whose write failed is written anew at its roll,
	// up to this many attempts in all (dstl.dfs.upload.max-attempts).
	MaxAttempts int
	// Declarations appends a declaration of every state the writer's
	// records may refer to; every file starts with them.
	Declarations func(dst []byte) []byte
	// Now, when set, is the clock Done reads (every 256 records) to hand
	// records over once they have waited the persist delay, as Tick does.
	Now func() time.Time
	// SyncEvery: a file being written is fsynced after this many bytes
	// (0: 2 MB).
	SyncEvery int
}

type batch struct {
	data []byte
	seq  int64
	roll bool
}

// Writer appends one subtask's state changes to its log. The record side
// (Head, Buf, Done, Tick, Roll) belongs to the task goroutine; a persister
// goroutine writes what the task hands over, in order, to the current
// file, and closes (fsyncs) the file at each Roll — a checkpoint's or a
// materialization's boundary. Files are never appended to once closed,
// so a closed file's size is final and a checkpoint can record it.
type Writer struct {
	o WriterOptions
	// Buf holds records not yet handed over (task goroutine).
	Buf      []byte
	fresh    bool // the next record starts a file: declarations first
	seq      int64
	lastHand time.Time
	records  uint32 // records since the clock was last read (Done)
	bufSize  int    // every record buffer's capacity (bufferSize)
	// syncEvery is o.SyncEvery or its default; readBack the storage if
	// it reads its files back.
	syncEvery int
	readBack  ReadBacker
	// room: SetStringVarint's record may go in without Done's checks
	// while len(Buf)+len(key) <= room (and Buf has bufSize's capacity);
	// -1 while a file is not begun (declarations first) and once closed.
	room int
	ch   chan batch
	free chan []byte

	mu     sync.Mutex
	cond   *sync.Cond
	rolled int64 // every file up to this one is closed (or never existed)
	files  map[int64]File
	failed map[int64]error
	done   chan struct{}
}

// NewWriter starts a writer whose first file is number first.
func NewWriter(o WriterOptions, first int64, now time.Time) *Writer {
	if o.HandOff <= 0 {
		o.HandOff = 1 << 20
	}
	size := bufferSize(o.HandOff)
	depth := 2
	if o.InFlight > size {
		depth = min(maxDepth, o.InFlight/size)
	}
	w := &Writer{o: o, fresh: true, room: -1, seq: first, lastHand: now, rolled: first - 1, bufSize: size,
		ch: make(chan batch, depth), free: make(chan []byte, freeBuffers), files: map[int64]File{}, failed: map[int64]error{}, done: make(chan struct{})}
	w.syncEvery = cmp.Or(o.SyncEvery, syncEvery)
	w.readBack, _ = o.Storage.(ReadBacker)
	w.cond = sync.NewCond(&w.mu)
	w.Buf = make([]byte, 0, size)
	go w.persist()
	return w
}

// Declare records a state registered while a file is open; a file not yet
// begun declares it with the others.
func (w *Writer) Declare(id uint32, kind byte, name string) {
	if !w.fresh {
		w.Buf = AppendDeclare(w.Buf, id, kind, name)
	}
}

// Head starts a change record in Buf; the caller appends its payload to
// Buf and calls Done.
func (w *Writer) Head(op Op, id uint32, kg int, key []byte) {
	w.declare()
	w.Buf = AppendHead(w.Buf, op, id, kg, key)
}

// HeadString starts a record about a string key (AppendHeadString).
func (w *Writer) HeadString(op Op, id uint32, kg int, key string) {
	w.declare()
	w.Buf = AppendHeadString(w.Buf, op, id, kg, key)
}

// SetStringVarint writes a whole record: AppendSetStringVarint, then Done.
// It runs once per state change on the task's thread, where at full speed
// every nanosecond is ~1% of a word count's throughput: the common record
// — one-byte id, key group and key length, in a buffer with room for it
// and far from a hand-off — is written with one check and no call to
// Done, whose conditions it cannot meet (room is below them by the
// largest such record).
func (w *Writer) SetStringVarint(id uint32, kg int, key string, v int64) {
	if n := len(w.Buf); n+len(key) <= w.room && cap(w.Buf) == w.bufSize && id < 0x80 && uint(kg) < 0x80 && len(key) < 0x80 {
		w.Buf = appendSetStringVarint(w.Buf, n, id, kg, key, v)
		if w.records++; w.records%256 == 0 && w.o.Now != nil {
			w.Tick(w.o.Now())
		}
		return
	}
	w.declare()
	w.Buf = AppendSetStringVarint(w.Buf, id, kg, key, v)
	w.Done()
}

// declare starts a new file with the declarations of the states.
func (w *Writer) declare() {
	if w.fresh {
		w.fresh = false
		w.Buf = w.o.Declarations(w.Buf)
		if w.ch != nil {
			// The largest record of SetStringVarint's fast path is
			// len(key)+13 bytes (setStringVarintMax).
			w.room = min(w.o.HandOff-1, w.bufSize-bufferSlack) - setStringVarintMax
		}
	}
}

// Done ends a record: a buffer at HandOff, within bufferSlack of its
// capacity, or grown past it by a large record, is handed over at once,
// and so is one that has waited the persist delay (with Now; the clock is
// read every 256 records). Why not only Tick: a task at full speed is
// never idle and may fire no timer for long, and its batches then grew
// until HandOff (5 MB by default) — late for the delay, and, grown by
// doubling, 600 MB/s of garbage at 6 M records/s, a collection every
// 200 ms.
func (w *Writer) Done() {
	if len(w.Buf) >= w.o.HandOff || cap(w.Buf)-len(w.Buf) < bufferSlack || cap(w.Buf) != w.bufSize {
		w.handOff(false, time.Time{})
	} else if w.records++; w.records%256 == 0 && w.o.Now != nil {
		w.Tick(w.o.Now())
	}
}

// Tick hands buffered records over once they have waited the persist
// delay; the task calls it now and then (and when idle).
func (w *Writer) Tick(now time.Time) {
	if len(w.Buf) > 0 && now.Sub(w.lastHand) >= w.o.PersistDelay {
		w.handOff(false, now)
	}
}

// Roll ends the current file: everything recorded so far goes into it (or
// into earlier files), everything after into later ones. It returns the
// number of the file it ended.
func (w *Writer) Roll() int64 {
	seq := w.seq
	w.handOff(true, time.Time{})
	w.seq++
	w.fresh = true
	w.room = -1
	return seq
}

// Seq is the number of the file being written.
func (w *Writer) Seq() int64 { return w.seq }

func (w *Writer) handOff(roll bool, now time.Time) {
	if w.ch == nil {
		w.Buf = w.Buf[:0] // closed: what is recorded now is dropped (see Close)
		return
	}
	n := len(w.Buf)
	if n == 0 {
		if roll {
			w.ch <- batch{seq: w.seq, roll: true} // a roll alone: Buf is kept
		}
		return
	}
	if n < w.bufSize/2 && cap(w.Buf) == w.bufSize {
		// A batch handed over by the delay, at a low rate: its file keeps
		// it until the roll (for a retry), so it goes as a copy of its
		// size and the buffer stays. Handed over whole, every 10 ms batch
		// of a few records held 1 MB until the roll — 100 MB a subtask at
		// a checkpoint a second, whatever the rate.
		w.ch <- batch{data: slices.Clone(w.Buf), seq: w.seq, roll: roll}
		w.Buf = w.Buf[:0]
	} else {
		w.ch <- batch{data: w.Buf, seq: w.seq, roll: roll}
		select {
		case b := <-w.free:
			w.Buf = b[:0]
		default:
			w.Buf = make([]byte, 0, w.bufSize)
		}
	}
	if !now.IsZero() {
		w.lastHand = now
	}
}

// bufferSize is the capacity of the writer's record buffers: HandOff,
// within [4 KB, 1 MB]. Every buffer has it, and a full one is handed over
// (Done) rather than grown, so that written buffers can be reused as they
// are. Why fixed: buffers sized after the last batch were as often too
// small — grown by doubling, each step a copy — or too big to pool (a
// 10 ms batch at 8 M records/s is 1.2 MB), and a fresh buffer is zeroed
// and faulted in page by page: the growing copies and the zeroing were a
// fifth of the writer's CPU in BenchmarkWriterSetStringVarint. At full
// speed a buffer now holds ~8 ms of records, a write of 1 MB.
func bufferSize(handOff int) int {
	return min(max(handOff, 4<<10), 1<<20)
}

const (
	// bufferSlack: a buffer with less room than this is handed over at
	// the end of a record, so that the next one rarely has to grow it (a
	// word count's record is ~20 bytes; a larger record still fits, by
	// growing the buffer, which is then not reused).
	bufferSlack = 256
	// freeBuffers bounds the written buffers kept for reuse (to 128 MB).
	// A file keeps its buffers for a retry until they are fsynced (on a
	// storage that reads back) or until its roll (on others), so the pool
	// refills every few buffers, or at each roll with up to a checkpoint
	// interval's worth — about 120 at full speed — and holds at most what
	// the file held.
	freeBuffers = 128
	// maxDepth bounds the batches handed over but not yet written, with
	// max-in-flight: 100 buffers of 1 MB by default.
	maxDepth = 128
)

// logFile is the file being written: its batches are kept until the roll
// has it on disk, so that a failed write can be retried whole — or, on a
// storage that reads its files back (ReadBacker), only the batches since
// the last fsync: what was fsynced is read back for a retry. At full
// speed a file holds a checkpoint interval of changes (tens of MB a
// second per subtask), which kept whole until the roll made the
// changelog's memory 1.7 times the state's.
type logFile struct {
	seq     int64
	sink    Sink
	path    string
	size    int64
	batches [][]byte
	// synced is how many of the file's bytes were fsynced with their
	// batches let go, syncedCRC their checksum; prefix holds them once
	// read back for a retry.
	synced    int64
	syncedCRC uint32
	prefix    []byte
	err       error // the first write error; the file is rewritten at the roll
	// unsynced counts the bytes written since the last fsync.
	unsynced int64
	// crc is the CRC-32C of what was written to sink so far.
	crc uint32
}

// persist writes handed-over batches, in order.
func (w *Writer) persist() {
	defer close(w.done)
	var cur *logFile
	for b := range w.ch {
		if len(b.data) > 0 {
			if cur == nil {
				cur = &logFile{seq: b.seq}
			}
			cur.batches = append(cur.batches, b.data)
			if cur.err == nil {
				cur.err = w.write(cur, b.data)
				if cur.err == nil && cur.unsynced == 0 && w.readBack != nil {
					// On disk: a retry reads these bytes back.
					cur.synced, cur.syncedCRC = cur.size, cur.crc
					w.recycle(cur.batches)
					cur.batches = cur.batches[:0]
				}
			}
		}
		if !b.roll {
			continue
		}
		var f File
		var err error
		if cur != nil {
			f, err = w.finish(cur)
			w.recycle(cur.batches)
			cur = nil
		}
		w.mu.Lock()
		if err != nil {
			w.failed[b.seq] = err
		} else if f.Path != "" {
			w.files[f.Seq] = f
		}
		w.rolled = b.seq
		w.cond.Broadcast()
		w.mu.Unlock()
	}
	if cur != nil && cur.sink != nil {
		// A file no checkpoint ended: nothing refers to it. In memory it
		// is dropped rather than kept for the life of the process.
		if d, ok := cur.sink.(interface{ discard() }); ok {
			d.discard()
		} else {
			cur.sink.Close()
		}
	}
}

// recycle puts written buffers back in the pool.
func (w *Writer) recycle(batches [][]byte) {
	for _, d := range batches {
		if cap(d) != w.bufSize {
			continue // grown for a large record
		}
		select {
		case w.free <- d:
		default:
		}
	}
}

// create creates the file and writes start into it: the header, or on a
// retry the part of the file that was fsynced before.
func (w *Writer) create(f *logFile, start []byte) error {
	name := fmt.Sprintf("%s-%d.log", w.o.Prefix, f.seq)
	s, path, err := w.o.Storage.Create(name)
	if err != nil {
		f.path = name
		return err
	}
	f.sink, f.path, f.size, f.crc, f.unsynced = s, path, int64(len(start)), crc32.Checksum(start, crcTab), int64(len(start))
	_, err = s.Write(start)
	return err
}

// write appends one batch as a chunk, creating the file first.
func (w *Writer) write(f *logFile, data []byte) error {
	if f.sink == nil {
		if err := w.create(f, AppendHeader(nil)); err != nil {
			return err
		}
	}
	var hdr [chunkHeaderLen]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(data)))
	binary.BigEndian.PutUint32(hdr[4:], crc32.Checksum(data, crcTab))
	if _, err := f.sink.Write(hdr[:]); err != nil {
		return err
	}
	// The file's checksum, for the checkpoints that record the file (the
	// chunks' own checksums leave the header and the framing unchecked).
	f.crc = crc32.Update(crc32.Update(f.crc, crcTab, hdr[:]), crcTab, data)
	_, err := f.sink.Write(data)
	f.size += chunkHeaderLen + int64(len(data))
	f.unsynced += chunkHeaderLen + int64(len(data))
	if err == nil && f.unsynced >= int64(w.syncEvery) {
		// Flushed to disk as it goes, on this goroutine: the checkpoint's
		// fsync at the roll then has only the tail left to wait for.
		err, f.unsynced = f.sink.Sync(), 0
	}
	return err
}

// syncEvery: a file being written is fsynced after this many bytes, by
// default.
const syncEvery = 2 << 20

// finish puts the file on disk at a roll: fsynced and closed, or, after a
// failed write, rewritten from its batches (dstl.dfs.upload.max-attempts).
func (w *Writer) finish(f *logFile) (File, error) {
	err := f.err
	if err == nil {
		err = f.sink.Sync()
		if cerr := f.sink.Close(); err == nil {
			err = cerr
		}
		f.sink = nil
	}
	for attempt := 1; err != nil && attempt < max(1, w.o.MaxAttempts); attempt++ {
		if f.sink != nil {
			f.sink.Close()
		}
		f.sink, f.err = nil, nil
		if err = w.rewriteSynced(f); err == nil {
			for _, d := range f.batches {
				if err = w.write(f, d); err != nil {
					break
				}
			}
		}
		if err == nil {
			err = f.sink.Sync()
			if cerr := f.sink.Close(); err == nil {
				err = cerr
			}
			f.sink = nil
		}
	}
	if err != nil {
		if f.sink != nil {
			f.sink.Close()
		}
		return File{}, fmt.Errorf("write state changelog %s (%d attempts): %w", f.path, max(1, w.o.MaxAttempts), err)
	}
	return File{Seq: f.seq, Path: f.path, Size: f.size, CRC32C: f.crc}, nil
}

// rewriteSynced starts a retry of a file whose fsynced part is no longer
// in memory: that part is read back (once; a retry that fails keeps it
// for the next) and checked against the checksum computed as it was
// written, then written into the file anew.
func (w *Writer) rewriteSynced(f *logFile) error {
	if f.synced == 0 {
		return nil
	}
	if f.prefix == nil {
		b, err := w.readBack.ReadBack(f.path, f.synced)
		if err != nil {
			return fmt.Errorf("read back the written part of %s: %w", f.path, err)
		}
		if crc32.Checksum(b, crcTab) != f.syncedCRC {
			return fmt.Errorf("read back the written part of %s: it is not what was written", f.path)
		}
		f.prefix = b
	}
	return w.create(f, f.prefix)
}

// Failed returns the last file that could not be written, 0 if none:
// checkpoints that need it fail until a materialization covers it.
func (w *Writer) Failed() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last int64
	for s := range w.failed {
		last = max(last, s)
	}
	return last
}

// Files waits until file to is closed and returns the closed files from
// from to to, in order (files with no records were never created).
func (w *Writer) Files(from, to int64) ([]File, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.rolled < to {
		w.cond.Wait()
	}
	for s, err := range w.failed {
		if s >= from && s <= to {
			return nil, err
		}
	}
	var out []File
	for s, f := range w.files {
		if s >= from && s <= to {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b File) int { return int(a.Seq - b.Seq) })
	return out, nil
}

// Forget drops the bookkeeping of files before seq: no checkpoint to come
// refers to them (a materialization covers them). Deleting them is the
// shared-state registry's job.
func (w *Writer) Forget(before int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.files {
		if s < before {
			delete(w.files, s)
		}
	}
	for s := range w.failed {
		if s < before {
			delete(w.failed, s)
		}
	}
}

// Close stops the persister after it wrote what it was handed; records
// still in Buf (no checkpoint ended them) are dropped.
func (w *Writer) Close() error {
	if w.ch == nil {
		return nil
	}
	close(w.ch)
	<-w.done
	w.ch = nil
	w.room = -1
	return nil
}

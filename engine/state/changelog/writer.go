package changelog

import (
	"encoding/binary"
	"errors"
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
	// threshold and dstl.dfs.preemptive-persist-threshold).
	HandOff int
	// InFlight bounds the bytes handed over but not yet written
	// (dstl.dfs.upload.max-in-flight): beyond it the task waits, which is
	// backpressure rather than unbounded memory.
	InFlight int
	// Declarations appends a declaration of every state the writer's
	// records may refer to; every file starts with them.
	Declarations func(dst []byte) []byte
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
	ch       chan batch
	free     chan []byte

	mu     sync.Mutex
	cond   *sync.Cond
	rolled int64 // every file up to this one is closed (or never existed)
	files  map[int64]File
	err    error
	done   chan struct{}
}

// NewWriter starts a writer whose first file is number first.
func NewWriter(o WriterOptions, first int64, now time.Time) *Writer {
	if o.HandOff <= 0 {
		o.HandOff = 1 << 20
	}
	depth := 2
	if o.InFlight > o.HandOff {
		depth = min(64, o.InFlight/o.HandOff)
	}
	w := &Writer{o: o, fresh: true, seq: first, lastHand: now, rolled: first - 1,
		ch: make(chan batch, depth), free: make(chan []byte, depth+1), files: map[int64]File{}, done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	w.Buf = make([]byte, 0, w.o.HandOff+w.o.HandOff/8)
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
	if w.fresh {
		w.fresh = false
		w.Buf = w.o.Declarations(w.Buf)
	}
	w.Buf = AppendHead(w.Buf, op, id, kg, key)
}

// Done ends a record: a full buffer is handed over at once.
func (w *Writer) Done() {
	if len(w.Buf) >= w.o.HandOff {
		w.handOff(false, time.Time{})
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
	return seq
}

// Seq is the number of the file being written.
func (w *Writer) Seq() int64 { return w.seq }

func (w *Writer) handOff(roll bool, now time.Time) {
	if len(w.Buf) == 0 && !roll {
		return
	}
	w.ch <- batch{data: w.Buf, seq: w.seq, roll: roll}
	select {
	case b := <-w.free:
		w.Buf = b[:0]
	default:
		w.Buf = make([]byte, 0, w.o.HandOff+w.o.HandOff/8)
	}
	if !now.IsZero() {
		w.lastHand = now
	}
}

// persist writes handed-over batches, in order.
func (w *Writer) persist() {
	defer close(w.done)
	var (
		cur  Sink
		path string
		size int64
		err  error
	)
	for b := range w.ch {
		if err == nil && len(b.data) > 0 {
			if cur == nil {
				name := fmt.Sprintf("%s-%d.log", w.o.Prefix, b.seq)
				if cur, path, err = w.o.Storage.Create(name); err == nil {
					_, err = cur.Write(AppendHeader(nil))
					size = HeaderLen
				}
			}
			if err == nil {
				var hdr [chunkHeaderLen]byte
				binary.BigEndian.PutUint32(hdr[:], uint32(len(b.data)))
				binary.BigEndian.PutUint32(hdr[4:], crc32.Checksum(b.data, crcTab))
				if _, err = cur.Write(hdr[:]); err == nil {
					_, err = cur.Write(b.data)
				}
				size += chunkHeaderLen + int64(len(b.data))
			}
		}
		select {
		case w.free <- b.data:
		default:
		}
		if !b.roll {
			if err != nil {
				w.fail(err)
			}
			continue
		}
		var f File
		if cur != nil {
			if err == nil {
				err = cur.Sync()
			}
			if cerr := cur.Close(); err == nil {
				err = cerr
			}
			f, cur = File{Seq: b.seq, Path: path, Size: size}, nil
		}
		w.mu.Lock()
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("write state changelog %s: %w", path, err)
		}
		if f.Path != "" && err == nil {
			w.files[f.Seq] = f
		}
		w.rolled = b.seq
		w.cond.Broadcast()
		w.mu.Unlock()
	}
	if cur != nil {
		cur.Close() // a file no checkpoint ended: nothing refers to it
	}
}

func (w *Writer) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = fmt.Errorf("write state changelog: %w", err)
	}
	w.cond.Broadcast()
	w.mu.Unlock()
}

// Err is the first write error, after which the log has a gap: the task
// must fail over rather than checkpoint on.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Files waits until file to is closed and returns the closed files from
// from to to, in order (files with no records were never created).
func (w *Writer) Files(from, to int64) ([]File, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.rolled < to && w.err == nil {
		w.cond.Wait()
	}
	if w.err != nil {
		return nil, w.err
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
	return errors.Join(w.Err())
}

package api

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// PrintSink writes records to W, one per line (Flink's print()): their
// AppendTo when they are Appenders, else their String or fmt's %v (see
// RecordText). Lines are collected in a buffer and written in chunks of
// whole lines — when the buffer passes 64 KiB, before every checkpoint
// barrier is passed on, whenever the task runs out of input (so that a
// slow stream's lines appear at once), at the end of input and on close —
// never one write per record. The chunks of the subtasks sharing W never
// interleave. Printing is not transactional: after a recovery, lines are
// printed again.
type PrintSink[T any] struct {
	W io.Writer
	// Prefix, when set, replaces Flink's "<subtask>> " prefix.
	Prefix string

	mu sync.Mutex
}

// printFlushSize is the size at which a print writer writes its lines
// without waiting for a barrier or for its task to run out of input.
const printFlushSize = 64 << 10

// CreateWriter implements Sink.
func (s *PrintSink[T]) CreateWriter(ctx SinkContext) (SinkWriter[T], error) {
	prefix := s.Prefix
	if prefix == "" && ctx.Parallelism > 1 {
		prefix = strconv.Itoa(ctx.Subtask+1) + "> "
	}
	// The buffer grows as lines come (and keeps its size once flushed):
	// a thousand subtasks that print little do not hold 64 KiB each.
	return &printWriter[T]{s: s, prefix: prefix, text: NewRecordText[T]()}, nil
}

type printWriter[T any] struct {
	s      *PrintSink[T]
	prefix string
	text   *RecordText[T]
	buf    []byte
	// err is the error of a write on idle, which has no one to return it
	// to: the next Write, Flush or Close does.
	err  error
	sent int64 // bytes written (numBytesSend)
}

// NumBytesSend implements BytesSendWriter: the bytes of the lines written.
func (w *printWriter[T]) NumBytesSend() int64 { return w.sent }

func (w *printWriter[T]) Write(v T) error {
	if w.err != nil {
		return w.err
	}
	w.buf = append(w.buf, w.prefix...)
	w.buf = w.text.Append(w.buf, v)
	w.buf = append(w.buf, '\n')
	if len(w.buf) >= printFlushSize {
		return w.Flush(false)
	}
	return nil
}

// Flush writes the buffered lines in one write. Lines of one subtask are
// written whole, never interleaved with another subtask's.
func (w *printWriter[T]) Flush(bool) error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	w.s.mu.Lock()
	n, err := w.s.W.Write(w.buf)
	w.sent += int64(n)
	if f, ok := w.s.W.(*bufio.Writer); ok && err == nil {
		err = f.Flush()
	}
	w.s.mu.Unlock()
	w.buf = w.buf[:0]
	if err != nil {
		w.err = fmt.Errorf("print: %w", err)
	}
	return w.err
}

// Idle writes what is buffered: the task has no input for now, and a line
// must not wait for the next one.
func (w *printWriter[T]) Idle() { w.Flush(false) }

func (w *printWriter[T]) Close() error { return w.Flush(true) }

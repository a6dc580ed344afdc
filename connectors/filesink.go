package connectors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/gflink/gflink/savepoint/vfs"
	"github.com/gflink/gflink/stream"
)

// FileSink writes records as lines into part files in Dir, with Flink's
// part-file lifecycle, and commits them with two-phase commit:
//
//   - in-progress: ".part-<run>-<subtask>-<n>.inprogress", hidden, being written;
//   - pending: the same file, closed and fsynced when it rolls — at every
//     checkpoint, and on RollSize and RollInterval;
//   - finished: renamed to "part-<run>-<subtask>-<n>" once the checkpoint
//     that covers it has completed.
//
// Only finished files are output. After any failure — a task error, kill -9,
// a restore from a savepoint — the finished files hold every record exactly
// once: a restore commits the pending files its checkpoint recorded (again,
// idempotently) and deletes the hidden files its own failed attempts wrote
// after it. <run> is random for every attempt, so no attempt overwrites
// another's file.
type FileSink[T any] struct {
	Dir string
	// RollSize rolls the in-progress file when it reaches this many bytes
	// (default 128 MiB, as in Flink's DefaultRollingPolicy).
	RollSize int64
	// RollInterval rolls the in-progress file when it is this old (default
	// 60 s).
	RollInterval time.Duration
	// Format renders a record. By default a record is rendered as the print
	// sink renders it: AppendTo for an stream.Appender, else String or
	// fmt's %v (stream.RecordText), straight into the file's buffer.
	Format func(T) string
	// FS is the filesystem (vfs.Default if nil).
	FS vfs.FS
}

const (
	defaultRollSize     = 128 << 20
	defaultRollInterval = time.Minute
	inProgressSuffix    = ".inprogress"
	// fileBufSize is the size at which a writer writes its buffer to the
	// in-progress file; it also does when the file rolls, at every
	// checkpoint and at the end of input.
	fileBufSize = 64 << 10
)

func (s *FileSink[T]) fs() vfs.FS {
	if s.FS == nil {
		return vfs.Default
	}
	return s.FS
}

// fileCommittable names a pending file and the finished name it gets.
// Dir is the absolute directory it was written in: a job restored with
// another --output (or from another working directory) still commits each
// file where it was written, so the output of both runs is complete.
// Committables of older builds have no Dir and mean the sink's own.
type fileCommittable struct {
	Dir      string `json:"dir,omitempty"`
	Pending  string `json:"pending"`
	Finished string `json:"finished"`
}

// CreateWriter implements stream.Sink.
func (s *FileSink[T]) CreateWriter(ctx stream.SinkContext) (stream.SinkWriter[T], error) {
	if err := s.fs().MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("output directory %s: %w", s.Dir, err)
	}
	w := &fileWriter[T]{s: s, dir: dir, prefix: fmt.Sprintf("part-%s-%d-", ctx.RunID, ctx.Subtask),
		rollSize: s.RollSize, rollInterval: s.RollInterval, text: stream.NewRecordText[T]()}
	if w.rollSize <= 0 {
		w.rollSize = defaultRollSize
	}
	if w.rollInterval <= 0 {
		w.rollInterval = defaultRollInterval
	}
	return w, nil
}

// CreateCommitter implements stream.TwoPhaseCommittingSink.
func (s *FileSink[T]) CreateCommitter(stream.SinkContext) (stream.Committer, error) {
	return &fileCommitter{fs: s.fs(), dir: s.Dir}, nil
}

// CleanUp implements stream.RecoveryCleaner: hidden part files written by
// this job's earlier attempts that the restored checkpoint does not
// reference were written after it by an attempt that failed; they can
// never be committed. Other files — another job's, even in this directory —
// are left alone.
func (s *FileSink[T]) CleanUp(ctx stream.SinkContext, committables [][]byte) error {
	if len(ctx.PreviousRunIDs) == 0 {
		return nil
	}
	keep := map[string]bool{}
	for _, b := range committables {
		var c fileCommittable
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("file sink committable: %w", err)
		}
		keep[c.Pending] = true
	}
	entries, err := s.fs().ReadDir(s.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, inProgressSuffix) || keep[name] {
			continue
		}
		for _, run := range ctx.PreviousRunIDs {
			if strings.HasPrefix(name, ".part-"+run+"-") {
				if err := s.fs().Remove(filepath.Join(s.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
	}
	return nil
}

type fileWriter[T any] struct {
	s            *FileSink[T]
	dir          string // s.Dir, absolute
	prefix       string
	counter      int
	rollSize     int64
	rollInterval time.Duration

	cur     vfs.File
	curName string // finished name of the in-progress file
	curSize int64
	// flushed is what of curSize has been written to the file; the kernel
	// is asked to start writing it to disk every writebackEvery bytes
	// (without waiting: startedTo), so that the fsync when the file rolls —
	// at every checkpoint, on the task's goroutine — waits for the tail
	// only, not for a second of output.
	flushed, startedTo int64
	opened             time.Time
	writes             int // records written, to read the clock only now and then
	text               *stream.RecordText[T]
	buf                []byte
	pending            []fileCommittable
	sent               int64 // bytes written to part files (numBytesSend)
}

// NumBytesSend implements stream.BytesSendWriter: the bytes written to part
// files (buffered lines count once they are written).
func (w *fileWriter[T]) NumBytesSend() int64 { return w.sent }

func (w *fileWriter[T]) Write(v T) error {
	if w.cur == nil {
		if err := w.openPart(); err != nil {
			return err
		}
	}
	start := len(w.buf)
	if w.s.Format != nil {
		w.buf = append(w.buf, w.s.Format(v)...)
		w.buf = append(w.buf, '\n')
	} else {
		w.buf = append(w.text.Append(w.buf, v), '\n')
	}
	w.curSize += int64(len(w.buf) - start)
	if len(w.buf) >= fileBufSize {
		if err := w.flushBuf(); err != nil {
			return err
		}
	}
	if w.curSize >= w.rollSize {
		return w.roll()
	}
	// The rollover interval is checked every 1024 records: reading the clock
	// for every record costs more than the rest of a write.
	if w.writes++; w.writes&1023 == 0 && time.Since(w.opened) >= w.rollInterval {
		return w.roll()
	}
	return nil
}

func (w *fileWriter[T]) openPart() error {
	w.curName = fmt.Sprintf("%s%d", w.prefix, w.counter)
	w.counter++
	f, err := w.s.fs().Create(filepath.Join(w.dir, "."+w.curName+inProgressSuffix))
	if err != nil {
		return fmt.Errorf("open part file: %w", err)
	}
	w.cur, w.curSize, w.opened = f, 0, time.Now()
	w.flushed, w.startedTo = 0, 0
	return nil
}

// writebackEvery is how often an in-progress file's bytes are handed to
// the kernel's writeback (as the checkpoint files are).
const writebackEvery = 1 << 20

func (w *fileWriter[T]) flushBuf() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.cur.Write(w.buf); err != nil {
		return fmt.Errorf("write part file: %w", err)
	}
	w.flushed += int64(len(w.buf))
	w.sent += int64(len(w.buf))
	w.buf = w.buf[:0]
	if w.flushed-w.startedTo >= writebackEvery {
		vfs.StartWriteback(w.cur, w.startedTo, w.flushed-w.startedTo)
		w.startedTo = w.flushed
	}
	return nil
}

// roll closes the in-progress file: it becomes pending, durable on disk,
// waiting for the checkpoint that will commit it.
func (w *fileWriter[T]) roll() error {
	if w.cur == nil {
		return nil
	}
	if err := w.flushBuf(); err != nil {
		return err
	}
	if err := w.cur.Sync(); err != nil {
		return fmt.Errorf("sync part file: %w", err)
	}
	if err := w.cur.Close(); err != nil {
		return fmt.Errorf("close part file: %w", err)
	}
	w.pending = append(w.pending, fileCommittable{Dir: w.dir, Pending: "." + w.curName + inProgressSuffix, Finished: w.curName})
	w.cur = nil
	return nil
}

// Flush writes the buffered lines to the in-progress file; PrepareCommit,
// which follows at every checkpoint and at the end of input, rolls it.
func (w *fileWriter[T]) Flush(bool) error {
	if w.cur == nil {
		return nil
	}
	return w.flushBuf()
}

// PrepareCommit rolls the in-progress file (rolling on every checkpoint)
// and hands over the pending files.
func (w *fileWriter[T]) PrepareCommit() ([][]byte, error) {
	if err := w.roll(); err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(w.pending))
	for _, p := range w.pending {
		b, _ := json.Marshal(p)
		out = append(out, b)
	}
	w.pending = w.pending[:0]
	return out, nil
}

// Close abandons the in-progress file: what it holds was not covered by a
// checkpoint, and will be written again after a restore (or was already
// handed over by PrepareCommit at the end of input).
func (w *fileWriter[T]) Close() error {
	if w.cur != nil {
		w.cur.Close()
		w.cur = nil
	}
	return nil
}

type fileCommitter struct {
	fs  vfs.FS
	dir string
}

// Commit renames pending files to their finished names, in the directory
// each was written in. It is idempotent, as Flink's FileSink committer is
// after a recovery:
//   - the finished file exists: committed before;
//   - neither the pending nor the finished file exists, in a directory that
//     does: committed before and since moved away by a consumer (Flink's
//     commitAfterRecovery takes a missing temporary file as a commit that
//     happened);
//   - the pending file exists: rename it.
//
// Every directory a committable names is fsynced before Commit returns,
// also when its files were renamed by an earlier attempt whose fsync
// failed. A committable no restart can commit — its directory is gone, or
// its names leave the directory (a snapshot edited by hand) — suppresses
// restarts: the job fails once, naming the file, instead of restarting
// forever. Other rename errors may pass (a full disk, a permission an
// operator fixes) and go through the restart strategy.
func (c *fileCommitter) Commit(committables [][]byte) (err error) {
	dirs := map[string]bool{}
	defer func() {
		// Even when a later committable fails: the renames made so far
		// must be durable before anyone relies on them.
		for dir := range dirs {
			if serr := vfs.SyncDir(c.fs, dir); serr != nil && err == nil {
				err = fmt.Errorf("commit part files in %s: %w", dir, serr)
			}
		}
	}()
	for _, b := range committables {
		var fc fileCommittable
		if err := json.Unmarshal(b, &fc); err != nil {
			return fmt.Errorf("file sink committable: %w", err)
		}
		if err := checkPartName(fc.Pending, fc.Finished); err != nil {
			return stream.SuppressRestarts(err)
		}
		dir := fc.Dir
		if dir == "" {
			dir = c.dir
		}
		if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
			if fc.Dir != "" {
				return stream.SuppressRestarts(fmt.Errorf("file sink committable names the directory %q, which is not an absolute, clean path", fc.Dir))
			}
		}
		finished := filepath.Join(dir, fc.Finished)
		if st, err := c.fs.Stat(dir); err != nil || !st.IsDir() {
			return stream.SuppressRestarts(fmt.Errorf("cannot commit part file %s: its directory %s is gone (%v)", finished, dir, err))
		}
		dirs[dir] = true
		if _, err := c.fs.Stat(finished); err == nil {
			continue // committed before
		}
		err := c.fs.Rename(filepath.Join(dir, fc.Pending), finished)
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := c.fs.Stat(filepath.Join(dir, fc.Pending)); errors.Is(serr, fs.ErrNotExist) {
				continue // committed before, and moved away since
			}
		}
		if err != nil {
			return fmt.Errorf("cannot commit part file %s: %w", finished, err)
		}
	}
	return nil
}

// checkPartName refuses committables whose names would leave their
// directory: they come from a snapshot, which a user can edit.
func checkPartName(names ...string) error {
	for _, n := range names {
		if n == "" || n != filepath.Base(n) || n == "." || n == ".." {
			return fmt.Errorf("file sink committable names %q, which is not a part file name", n)
		}
	}
	return nil
}

func (c *fileCommitter) Close() error { return nil }

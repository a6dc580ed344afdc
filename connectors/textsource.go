// Package connectors holds gflink's built-in sources and sinks: a text-file
// source that reads files in byte-range splits and resumes from offsets, a
// deterministic generator source, and a file sink with Flink's part-file
// lifecycle.
package connectors

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gflink/gflink/stream"
	"golang.org/x/sys/unix"
)

// TextFileSource reads text files line by line. Each file is cut into
// byte-range splits; a line belongs to the split in which it starts. A
// split's position is the offset of its next line, so a restored reader
// resumes exactly where the checkpoint was taken: the files are a
// replayable source.
type TextFileSource struct {
	Paths []string
	// Rate throttles each reader to Rate/parallelism units per second (0:
	// as fast as possible). Units are lines, or Weigh(line) if set.
	Rate  float64
	Weigh func(line string) int
	// SplitSize is the target split size; 0 picks one from the total size
	// and the parallelism.
	SplitSize int64
}

// textSplit is a byte range of a file, with the offset of its next line.
type textSplit struct {
	Path  string `json:"path"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	// Pos is the offset of the next line to read; -1 until the reader has
	// skipped the partial line a split may start in.
	Pos int64 `json:"pos"`
}

const minSplitSize = 256 << 10

// CheckInputFiles reports the first path that is not a readable regular
// file, so that a job can refuse a bad input before it is submitted rather
// than fail while enumerating its splits.
func CheckInputFiles(paths []string) error {
	for _, p := range paths {
		if _, err := statInput(p); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("cannot read input file %s: %w", p, unwrapPath(err))
		}
		f.Close()
	}
	return nil
}

// CheckCreatableDir reports why dir could not be created (or used, if it
// exists), without creating anything: the nearest existing ancestor must be
// a directory this process may write in.
func CheckCreatableDir(dir string) error {
	p := filepath.Clean(dir)
	for {
		st, err := os.Stat(p)
		switch {
		case err == nil && !st.IsDir():
			return fmt.Errorf("%s: not a directory", p)
		case err == nil:
			if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR):
			return fmt.Errorf("%s: %w", p, unwrapPath(err))
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}

func statInput(p string) (os.FileInfo, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("cannot read input file %s: %w", p, unwrapPath(err))
	}
	if st.IsDir() {
		return nil, fmt.Errorf("input %s is a directory, not a file", p)
	}
	return st, nil
}

// unwrapPath drops the *PathError's "stat <path>: " prefix: the message
// already names the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Splits implements stream.Source.
func (s *TextFileSource) Splits(parallelism int) ([][]byte, error) {
	var total int64
	sizes := make([]int64, len(s.Paths))
	for i, p := range s.Paths {
		st, err := statInput(p)
		if err != nil {
			return nil, err
		}
		sizes[i] = st.Size()
		total += st.Size()
	}
	size := s.SplitSize
	if size <= 0 {
		size = max(minSplitSize, total/int64(4*parallelism)+1)
	}
	var out [][]byte
	for i, p := range s.Paths {
		for start := int64(0); start < sizes[i] || start == 0; start += size {
			end := min(start+size, sizes[i])
			b, _ := json.Marshal(textSplit{Path: p, Start: start, End: end, Pos: -1})
			out = append(out, b)
			if end >= sizes[i] {
				break
			}
		}
	}
	return out, nil
}

// CheckRestoredSplits implements stream.RestoredSplitsChecker. A restored
// reader continues the snapshot's splits (finished ones stay in its state),
// so they must cover exactly this job's files — the same files, as often
// (a file given twice is read twice), each still the size it was: otherwise
// a new file would be ignored, or positions in one file read in another.
// Files are compared as files, so another spelling of a path or a symlink
// to the same file is the same input.
func (s *TextFileSource) CheckRestoredSplits(splits [][]byte) error {
	type input struct {
		path    string // as the snapshot or the job names it
		info    os.FileInfo
		n       int   // occurrences in the input list
		covered int64 // bytes the snapshot's splits cover
	}
	var old []*input
	find := func(list []*input, st os.FileInfo) *input {
		for _, in := range list {
			if os.SameFile(in.info, st) {
				return in
			}
		}
		return nil
	}
	var oldNames []string
	for _, b := range splits {
		var sp textSplit
		if err := json.Unmarshal(b, &sp); err != nil || sp.Path == "" {
			return inputMismatch(splits, "reads the files "+strings.Join(s.Paths, ", "))
		}
		st, err := os.Stat(sp.Path)
		if err != nil {
			return fmt.Errorf("the snapshot's source read %s, which cannot be read here: %w", sp.Path, unwrapPath(err))
		}
		in := find(old, st)
		if in == nil {
			in = &input{path: sp.Path, info: st}
			old = append(old, in)
		}
		if sp.Start == 0 {
			// Every occurrence of a file in the input list has one split
			// that starts at 0.
			in.n++
			oldNames = append(oldNames, sp.Path)
		}
		in.covered = max(in.covered, sp.End)
	}
	var cur []*input
	for _, p := range s.Paths {
		st, err := statInput(p)
		if err != nil {
			return err
		}
		in := find(cur, st)
		if in == nil {
			in = &input{path: p, info: st}
			cur = append(cur, in)
		}
		in.n++
	}
	same := len(old) == len(cur)
	for _, in := range cur {
		if o := find(old, in.info); o == nil || o.n != in.n {
			same = false
		}
	}
	if !same {
		return fmt.Errorf("the snapshot's source read %s; this job reads %s", strings.Join(oldNames, ", "), strings.Join(s.Paths, ", "))
	}
	for _, in := range cur {
		if was := find(old, in.info).covered; in.info.Size() != was {
			return fmt.Errorf("input file %s has %d bytes but had %d when the snapshot was taken; a restored source reads only the bytes it knew of", in.path, in.info.Size(), was)
		}
	}
	return nil
}

// CreateReader implements stream.Source.
func (s *TextFileSource) CreateReader(ctx stream.SourceContext) (stream.SourceReader[string], error) {
	r := &textReader{src: s}
	if s.Rate > 0 {
		r.rate = s.Rate / float64(ctx.Parallelism)
	}
	return r, nil
}

type textReader struct {
	src    *TextFileSource
	splits []*textSplit
	cur    *textSplit
	f      *os.File
	br     *bufio.Reader

	rate    float64
	started time.Time
	weight  float64
	bytes   int64 // read in all by this reader (numBytesIn)
}

// NumBytesIn implements stream.BytesInReader: the bytes of the lines read,
// line ends included.
func (r *textReader) NumBytesIn() int64 { return r.bytes }

func (r *textReader) AddSplits(splits [][]byte) error {
	for _, b := range splits {
		var s textSplit
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("text source split: %w", err)
		}
		r.splits = append(r.splits, &s)
	}
	return nil
}

// open positions the reader at the current split's next line.
func (r *textReader) open() error {
	s := r.cur
	f, err := os.Open(s.Path)
	if err != nil {
		return err
	}
	r.f = f
	if s.Pos < 0 {
		s.Pos = s.Start
		if s.Start > 0 {
			// Skip the line that started in the previous split.
			if _, err := f.Seek(s.Start-1, io.SeekStart); err != nil {
				return err
			}
			r.br = bufio.NewReaderSize(f, 64<<10)
			skipped, err := r.br.ReadSlice('\n')
			for errors.Is(err, bufio.ErrBufferFull) {
				n := len(skipped)
				skipped, err = r.br.ReadSlice('\n')
				s.Pos += int64(n)
			}
			if err != nil && err != io.EOF {
				return err
			}
			s.Pos += int64(len(skipped)) - 1
			return nil
		}
	}
	if _, err := f.Seek(s.Pos, io.SeekStart); err != nil {
		return err
	}
	r.br = bufio.NewReaderSize(f, 64<<10)
	return nil
}

func (r *textReader) closeCur() {
	if r.f != nil {
		r.f.Close()
		r.f, r.br = nil, nil
	}
	r.cur = nil
}

const linesPerPoll = 256

func (r *textReader) PollNext(out stream.Collector[string]) (stream.InputStatus, error) {
	if r.rate > 0 {
		if r.started.IsZero() {
			r.started = time.Now()
		}
		if r.weight >= r.rate*time.Since(r.started).Seconds() {
			return stream.NothingAvailable, nil
		}
	}
	for n := 0; n < linesPerPoll; n++ {
		if r.cur == nil {
			if len(r.splits) == 0 {
				return stream.EndOfInput, nil
			}
			// Finished splits stay in the list (with Pos >= End), so that
			// they are part of every snapshot; skip them here.
			var next *textSplit
			for _, s := range r.splits {
				if s.Pos < s.End || s.Pos < 0 {
					next = s
					break
				}
			}
			if next == nil {
				return stream.EndOfInput, nil
			}
			r.cur = next
			if err := r.open(); err != nil {
				return stream.MoreAvailable, fmt.Errorf("read %s: %w", next.Path, err)
			}
		}
		s := r.cur
		if s.Pos >= s.End {
			s.Pos = s.End
			r.closeCur()
			continue
		}
		line, err := r.br.ReadString('\n')
		if len(line) == 0 && err == io.EOF {
			s.Pos = s.End
			r.closeCur()
			continue
		}
		if err != nil && err != io.EOF {
			return stream.MoreAvailable, fmt.Errorf("read %s: %w", s.Path, err)
		}
		s.Pos += int64(len(line))
		r.bytes += int64(len(line))
		line = trimEOL(line)
		out.Collect(line)
		if r.rate > 0 {
			if r.src.Weigh != nil {
				r.weight += float64(r.src.Weigh(line))
			} else {
				r.weight++
			}
			if r.weight >= r.rate*time.Since(r.started).Seconds() {
				return stream.NothingAvailable, nil
			}
		}
	}
	return stream.MoreAvailable, nil
}

func trimEOL(s string) string {
	if n := len(s); n > 0 && s[n-1] == '\n' {
		s = s[:n-1]
		if n := len(s); n > 0 && s[n-1] == '\r' {
			s = s[:n-1]
		}
	}
	return s
}

// NextPollTime implements stream.AvailabilityWaiter: when the rate allows
// the next line.
func (r *textReader) NextPollTime() time.Time {
	if r.rate <= 0 {
		return time.Now()
	}
	return paceTime(r.started, r.weight, r.rate)
}

func (r *textReader) SnapshotState(int64) ([][]byte, error) {
	out := make([][]byte, 0, len(r.splits))
	for _, s := range r.splits {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (r *textReader) Close() error {
	r.closeCur()
	return nil
}

// TotalRecords implements stream.CountedSource: the lines of the files,
// counted by reading them once (a few GB/s), as the reader splits them: a
// last line without a newline counts too.
func (s *TextFileSource) TotalRecords() (int64, bool) {
	var n int64
	buf := make([]byte, 256<<10)
	for _, p := range s.Paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, false
		}
		last := byte('\n')
		for {
			k, err := f.Read(buf)
			if k > 0 {
				n += int64(bytes.Count(buf[:k], []byte{'\n'}))
				last = buf[k-1]
			}
			if err != nil {
				break
			}
		}
		f.Close()
		if last != '\n' {
			n++
		}
	}
	return n, true
}

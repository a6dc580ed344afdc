package changelog

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Index holds the change records of restored log files grouped by key
// group, for replay. Records of one key group keep their log order; records
// of different key groups change different entries, so key groups replay in
// any order, one after the other with their state hot in the cache, or on
// several goroutines. (Replaying in log order instead jumps from key group
// to key group at every record: at 1 M keys each record then waits for a
// cache miss, and that was most of a recovery's time.)
//
// The records are copied as they are in their file, so the files' bytes
// need not be kept; the copy is about the size of the records. Files are
// indexed on several goroutines, each into segments of its own that keep
// their file's declarations, and a key group then reads its segments in
// file order.
type Index struct {
	start int
	kgs   [][]segment // per key group of the range, in log order
	n     int
	kinds map[string]stateSeen
}

// segment is one file's records of one key group.
type segment struct {
	data  []byte
	decls *declTable // the file's state ids
}

type stateSeen struct {
	kind byte
	file string
}

// Contents is one log file to index: its bytes (Data, or Read to read
// them on the worker that indexes the file, into the worker's buffer buf
// where it can: see ReadFileInto), the size its checkpoint recorded, and
// its name for errors.
type Contents struct {
	Name string
	Data []byte
	Read func(buf *[]byte) ([]byte, error)
	Size int64
	// CRC32C is the checksum the checkpoint recorded of the first Size
	// bytes; HasCRC is false for a checkpoint written before log files had
	// checksums (its chunks are still checked).
	CRC32C uint32
	HasCRC bool
}

// NewIndex returns an empty index keeping the key groups start..end.
func NewIndex(start, end int) *Index {
	return &Index{start: start, kgs: make([][]segment, end-start+1), kinds: map[string]stateSeen{}}
}

// fileIndex is one file's part of an index, before it is added.
type fileIndex struct {
	kgs   [][]byte
	decls declTable
	kinds map[string]byte // states the kept records change
	n     int
	err   error
}

// Add reads log files, in log order, each as Parse does (anything wrong
// is ErrCorrupt), on up to workers goroutines, and keeps the records of the
// index's key groups. A state recorded with two kinds is ErrCorrupt, naming
// both files. On error the index is unchanged.
func (x *Index) Add(files []Contents, workers int) error {
	workers = max(1, min(workers, len(files)))
	parts := make([]fileIndex, len(files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var buf []byte // the worker's read buffer: records are copied out
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				parts[i] = x.index(files[i], &buf)
				// Only the segments are kept, so that at most one table
				// per worker is alive (a file's table has a slot per key
				// group).
				parts[i].kgs = compact(parts[i].kgs)
			}
		})
	}
	wg.Wait()
	for i := range parts {
		if parts[i].err != nil {
			return parts[i].err
		}
	}
	// Kinds are checked in log order, before anything is added.
	seen := map[string]stateSeen{}
	for i, p := range parts {
		for name, kind := range p.kinds {
			was, ok := x.kinds[name]
			if !ok {
				was, ok = seen[name]
			}
			if ok && was.kind != kind {
				return fmt.Errorf("state %q is recorded with kind %d in %s and kind %d in %s: %w", name, was.kind, was.file, kind, files[i].Name, ErrCorrupt)
			}
			if !ok {
				seen[name] = stateSeen{kind: kind, file: files[i].Name}
			}
		}
	}
	for name, s := range seen {
		x.kinds[name] = s
	}
	for i := range parts {
		p := &parts[i]
		for _, seg := range p.kgs {
			kgi := int(seg[0]) | int(seg[1])<<8 | int(seg[2])<<16 | int(seg[3])<<24
			x.kgs[kgi] = append(x.kgs[kgi], segment{data: seg[4:], decls: &p.decls})
		}
		x.n += p.n
	}
	return nil
}

// compact keeps the non-empty key groups of a file's table, each prefixed
// with its key group index (4 bytes, little endian).
func compact(kgs [][]byte) [][]byte {
	var out [][]byte
	for kgi, b := range kgs {
		if len(b) > 0 {
			out = append(out, b)
			kgs[kgi] = nil
		}
	}
	return out
}

// index copies one file's records of the index's key groups, each key
// group's records prefixed with the key group's index (see compact).
func (x *Index) index(f Contents, buf *[]byte) fileIndex {
	p := fileIndex{kgs: make([][]byte, len(x.kgs)), kinds: map[string]byte{}}
	if f.Data == nil && f.Read != nil {
		if f.Data, p.err = f.Read(buf); p.err != nil {
			return p
		}
	}
	if f.HasCRC {
		if p.err = CheckCRC(f.Data, f.Size, f.Name, f.CRC32C); p.err != nil {
			return p
		}
	}
	// A key group's records start in a buffer of its share of the file,
	// and a quarter more: grown by doubling from a few hundred bytes, the
	// segments of a 1 M-key recovery allocated twice the log's size. (A
	// file that holds more key groups than the index keeps — after a
	// rescale — overestimates; clip, below, gives the excess back.)
	est := 256
	if len(x.kgs) > 0 {
		est = max(est, int(f.Size)/len(x.kgs)+int(f.Size)/len(x.kgs)/4)
	}
	var last string
	var lastKind byte
	p.err = parse(f.Data, f.Size, f.Name, func(r *Record, raw []byte) error {
		kgi := r.KeyGroup - x.start
		if kgi < 0 || kgi >= len(p.kgs) {
			return nil
		}
		// Records of a state come in runs: note its kind only when the
		// state changes.
		if p.n == 0 || r.State != last || r.Kind != lastKind {
			if k, ok := p.kinds[r.State]; ok && k != r.Kind {
				return fmt.Errorf("state %q is recorded with kinds %d and %d: %w", r.State, k, r.Kind, ErrCorrupt)
			}
			p.kinds[r.State] = r.Kind
			last, lastKind = r.State, r.Kind
		}
		seg := p.kgs[kgi]
		if seg == nil {
			seg = append(make([]byte, 0, est), byte(kgi), byte(kgi>>8), byte(kgi>>16), byte(kgi>>24))
		}
		p.kgs[kgi] = append(seg, raw...)
		p.n++
		return nil
	}, &p.decls)
	for i, seg := range p.kgs {
		if cap(seg) > 2*len(seg)+4096 {
			p.kgs[i] = slices.Clone(seg)
		}
	}
	return p
}

// Len returns the number of records kept.
func (x *Index) Len() int { return x.n }

// States calls f with the name and kind of every state the kept records
// change.
func (x *Index) States(f func(name string, kind byte)) {
	for name, s := range x.kinds {
		f(name, s.kind)
	}
}

// KeyGroup yields the records of key group kg, in log order (a record is
// valid during the call; its slices alias the index). KeyGroup may be
// called on several goroutines at once.
func (x *Index) KeyGroup(kg int, yield func(*Record) error) error {
	i := kg - x.start
	if i < 0 || i >= len(x.kgs) {
		return nil
	}
	r := new(Record)
	for _, seg := range x.kgs[i] {
		if err := parseRecords(seg.data, seg.decls, r, func(r *Record, _ []byte) error { return yield(r) }); err != nil {
			return err
		}
	}
	return nil
}

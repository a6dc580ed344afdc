package changelog

import (
	"encoding/binary"
	"fmt"
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
// The records are copied, each rewritten with an id of the index's own, so
// the files' bytes need not be kept; the copy is about the size of the
// records. Files are indexed on several goroutines, each into segments of
// its own, which a key group then reads in file order.
type Index struct {
	start int
	kgs   [][][]byte // per key group of the range: segments, in log order
	n     int

	mu    sync.Mutex // guards decls and ids while files are indexed
	decls declTable  // the index's state ids
	ids   map[string]uint64
}

// Contents is one log file to index: its bytes, the size its checkpoint
// recorded, and its name for errors.
type Contents struct {
	Name string
	Data []byte
	Size int64
}

// NewIndex returns an empty index keeping the key groups start..end.
func NewIndex(start, end int) *Index {
	return &Index{start: start, kgs: make([][][]byte, end-start+1), ids: map[string]uint64{}}
}

// Add reads log files, in log order, each as Parse does (anything wrong
// is ErrCorrupt), on up to workers goroutines, and keeps the records of the
// index's key groups. A state that appears with two kinds is ErrCorrupt.
// On error none of the files' records are kept.
func (x *Index) Add(files []Contents, workers int) error {
	type part struct {
		kgs [][]byte
		n   int
		err error
	}
	parts := make([]part, len(files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(workers, len(files))) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				p := &parts[i]
				p.kgs = make([][]byte, len(x.kgs))
				p.n, p.err = x.index(files[i], p.kgs)
			}
		})
	}
	wg.Wait()
	for _, p := range parts {
		if p.err != nil {
			return p.err
		}
	}
	for _, p := range parts {
		for i, seg := range p.kgs {
			if len(seg) > 0 {
				x.kgs[i] = append(x.kgs[i], seg)
			}
		}
		x.n += p.n
	}
	return nil
}

// index copies one file's records of the index's key groups into kgs.
func (x *Index) index(f Contents, kgs [][]byte) (int, error) {
	n := 0
	var id uint64
	var last string
	var lastKind byte
	err := parse(f.Data, f.Size, f.Name, func(r *Record, body []byte) error {
		i := r.KeyGroup - x.start
		if i < 0 || i >= len(kgs) {
			return nil
		}
		// Records of a state come in runs: look its id up only when the
		// state changes.
		if id == 0 || r.State != last || r.Kind != lastKind {
			var err error
			if id, err = x.id(r.State, r.Kind); err != nil {
				return err
			}
			last, lastKind = r.State, r.Kind
		}
		p := append(kgs[i], byte(r.Op))
		p = binary.AppendUvarint(p, id)
		kgs[i] = append(p, body...)
		n++
		return nil
	})
	return n, err
}

// id returns the index's id for a state, declaring it on first sight.
func (x *Index) id(name string, kind byte) (uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	d, ok := x.ids[name]
	if !ok {
		d = uint64(len(x.ids) + 1)
		x.ids[name] = d
		x.decls.set(d, name, kind)
	} else if was, _ := x.decls.get(d); was.kind != kind {
		return 0, fmt.Errorf("state %q is recorded with kinds %d and %d: %w", name, was.kind, kind, ErrCorrupt)
	}
	return d, nil
}

// Len returns the number of records kept.
func (x *Index) Len() int { return x.n }

// States calls f with the name and kind of every state the kept records
// change.
func (x *Index) States(f func(name string, kind byte)) {
	x.decls.each(func(d decl) { f(d.name, d.kind) })
}

// KeyGroup yields the records of key group kg, in log order (a record is
// valid during the call; its slices alias the index). KeyGroup may be
// called on several goroutines at once.
func (x *Index) KeyGroup(kg int, yield func(*Record) error) error {
	i := kg - x.start
	if i < 0 || i >= len(x.kgs) {
		return nil
	}
	for _, seg := range x.kgs[i] {
		if err := parseRecords(seg, &x.decls, func(r *Record, _ []byte) error { return yield(r) }); err != nil {
			return err
		}
	}
	return nil
}

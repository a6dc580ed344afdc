package changelog_test

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/gflink/gflink/savepoint/changelog"
	"pgregory.net/rapid"
)

// logFile writes one log file: declarations of ds, then recs in chunks of
// up to three records.
func logFile(ds []decl, recs []rec) []byte {
	data := changelog.AppendChunk(changelog.AppendHeader(nil), appendDecls(nil, ds))
	for i := 0; i < len(recs); i += 3 {
		var p []byte
		for _, x := range recs[i:min(i+3, len(recs))] {
			p = appendRec(p, x)
		}
		data = changelog.AppendChunk(data, p)
	}
	return data
}

// indexed reads every key group of the range back from x.
func indexed(t tb, x *changelog.Index, start, end int) map[int][]changelog.Record {
	t.Helper()
	out := map[int][]changelog.Record{}
	for kg := start; kg <= end; kg++ {
		err := x.KeyGroup(kg, func(r *changelog.Record) error {
			c := *r
			out[kg] = append(out[kg], c)
			return nil
		})
		if err != nil {
			t.Fatalf("KeyGroup(%d): %v", kg, err)
		}
	}
	return out
}

// TestIndexKeepsLogOrderPerKeyGroup: whatever the files, their order, the
// key-group range and the number of goroutines, each key group yields
// exactly its records of the range, in log order — file by file, record by
// record — which is what makes replay by key group equal to replay in log
// order.
func TestIndexKeepsLogOrderPerKeyGroup(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// The same states in every file, under ids of each file's own (as
		// logs of different old subtasks have them).
		states := genDecls(t)
		start := rapid.IntRange(0, 40).Draw(t, "start")
		end := start + rapid.IntRange(0, 40).Draw(t, "width")
		var files []changelog.Contents
		want := map[int][]rec{}
		n := 0
		for f := range rapid.IntRange(0, 4).Draw(t, "files") {
			ids := rapid.Permutation([]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 70000}).Draw(t, fmt.Sprint("ids", f))
			ds := make([]decl, len(states))
			for i, d := range states {
				ds[i] = decl{id: ids[i], kind: d.kind, name: d.name}
			}
			var recs []rec
			for range rapid.IntRange(0, 30).Draw(t, fmt.Sprint("records", f)) {
				x := genRec(t, ds)
				x.r.KeyGroup = rapid.IntRange(0, 90).Draw(t, "kg")
				recs = append(recs, x)
				if x.r.KeyGroup >= start && x.r.KeyGroup <= end {
					want[x.r.KeyGroup] = append(want[x.r.KeyGroup], x)
					n++
				}
			}
			data := logFile(ds, recs)
			size := int64(len(data))
			data = append(data, pattern(rapid.IntRange(0, 20).Draw(t, "tail"), 9)...) // beyond the recorded size
			c := changelog.Contents{Name: fmt.Sprint("f", f), Data: data, Size: size}
			if rapid.Bool().Draw(t, fmt.Sprint("lazy", f)) {
				// Read by the indexing worker into its buffer, as from a
				// file: the buffer is then reused for the worker's next
				// file, so records the index kept pointing into it would
				// change under it and fail the comparison below.
				c.Data, c.Read = nil, func(buf *[]byte) ([]byte, error) {
					*buf = append((*buf)[:0], data...)
					return *buf, nil
				}
			}
			files = append(files, c)
		}
		x := changelog.NewIndex(start, end)
		// Added in one call or several, in log order.
		split := rapid.IntRange(0, len(files)).Draw(t, "split")
		workers := rapid.IntRange(1, 3).Draw(t, "workers")
		for _, part := range [][]changelog.Contents{files[:split], files[split:]} {
			if err := x.Add(part, workers); err != nil {
				t.Fatalf("Add: %v", err)
			}
		}
		if x.Len() != n {
			t.Fatalf("Len() = %d, want %d", x.Len(), n)
		}
		got := indexed(t, x, start-1, end+1)
		for kg := start - 1; kg <= end+1; kg++ {
			checkRecords(t, fmt.Sprint("key group ", kg), want[kg], got[kg])
		}
		seen := map[string]byte{}
		x.States(func(name string, kind byte) { seen[name] = kind })
		for _, ws := range want {
			for _, w := range ws {
				if k, ok := seen[w.r.State]; !ok || k != w.r.Kind {
					t.Fatalf("States() = %v: state %q (kind %d) missing", seen, w.r.State, w.r.Kind)
				}
			}
		}
	})
}

// TestIndexRejectsCorruptLogs: a corrupt file or a state recorded with two
// kinds fails Add with ErrCorrupt, naming the file or the state, and the
// index keeps none of the records.
func TestIndexRejectsCorruptLogs(t *testing.T) {
	good := logFile([]decl{dValue}, []rec{newRec(dValue, changelog.OpSet, 3, []byte("a"), []byte("1"), nil, 0, 0)})
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1 // the last chunk's checksum no longer matches
	otherKind := decl{id: dValue.id, kind: dValue.kind + 1, name: dValue.name}
	conflict := logFile([]decl{otherKind}, []rec{newRec(otherKind, changelog.OpClear, 3, []byte("a"), nil, nil, 0, 0)})
	okFile := changelog.Contents{Name: "ok.log", Data: good, Size: int64(len(good))}
	for _, tc := range []struct {
		name  string
		files []changelog.Contents
		in    []string
	}{
		{"a checksum mismatch", []changelog.Contents{okFile, {Name: "bad.log", Data: bad, Size: int64(len(bad))}}, []string{"bad.log"}},
		{"a file shorter than recorded", []changelog.Contents{{Name: "short.log", Data: good[:20], Size: int64(len(good))}}, []string{"short.log"}},
		// Named in log order, whichever goroutine read which file first.
		{"a state with two kinds", []changelog.Contents{okFile, {Name: "other.log", Data: conflict, Size: int64(len(conflict))}},
			[]string{fmt.Sprintf("state %q is recorded with kind %d in ok.log and kind %d in other.log", dValue.name, dValue.kind, otherKind.kind)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, workers := range []int{1, 2} {
				x := changelog.NewIndex(0, 127)
				err := x.Add(tc.files, workers)
				for _, in := range tc.in {
					if !errors.Is(err, changelog.ErrCorrupt) || !strings.Contains(err.Error(), in) {
						t.Fatalf("Add (%d workers) = %v, want ErrCorrupt saying %q", workers, err, in)
					}
				}
				if x.Len() != 0 || len(indexed(t, x, 0, 127)) != 0 {
					t.Fatalf("Add failed but the index kept %d records", x.Len())
				}
				states := 0
				x.States(func(string, byte) { states++ })
				if states != 0 {
					t.Fatalf("Add failed but the index kept %d states", states)
				}
			}
		})
	}
	// A file that cannot be read fails Add with the read's error.
	gone := errors.New("no such file")
	unreadable := changelog.Contents{Name: "gone.log", Read: func(*[]byte) ([]byte, error) { return nil, gone }, Size: 100}
	for _, workers := range []int{1, 2} {
		x := changelog.NewIndex(0, 127)
		if err := x.Add([]changelog.Contents{okFile, unreadable}, workers); !errors.Is(err, gone) || x.Len() != 0 {
			t.Fatalf("Add with an unreadable file (%d workers) = %v, %d records kept; want its error, none kept", workers, err, x.Len())
		}
	}
	// A failed Add leaves what earlier ones added as it was.
	x := changelog.NewIndex(0, 127)
	if err := x.Add([]changelog.Contents{okFile}, 1); err != nil {
		t.Fatal(err)
	}
	if err := x.Add([]changelog.Contents{{Name: "other.log", Data: conflict, Size: int64(len(conflict))}}, 1); !errors.Is(err, changelog.ErrCorrupt) {
		t.Fatalf("Add of a file with another kind = %v, want ErrCorrupt", err)
	}
	var kinds []byte
	x.States(func(_ string, k byte) { kinds = append(kinds, k) })
	if x.Len() != 1 || len(kinds) != 1 || kinds[0] != dValue.kind {
		t.Fatalf("after the failed Add: %d records, kinds %v; want 1 record of kind %d", x.Len(), kinds, dValue.kind)
	}
}

// TestParseRejectsARedeclaredID: within a file an id stands for one state;
// declared again as another, the records around it could not be told
// apart, so the file is corrupt.
func TestParseRejectsARedeclaredID(t *testing.T) {
	p := appendDecls(nil, []decl{dValue, dValue}) // the same again is fine
	p = appendDecls(p, []decl{{id: dValue.id, kind: dValue.kind, name: "another"}})
	data := changelog.AppendChunk(changelog.AppendHeader(nil), p)
	_, err := parseAll(data, int64(len(data)), "redeclared.log")
	if !errors.Is(err, changelog.ErrCorrupt) || !strings.Contains(err.Error(), `"another"`) {
		t.Fatalf("Parse = %v, want ErrCorrupt naming the second declaration", err)
	}
}

// TestIndexChecksFileChecksums: a log file whose checkpoint recorded its
// checksum is refused, naming it, when its bytes differ — even when every
// chunk of it is intact (another log file put in its place, the header's
// version changed) — and the index is left unchanged; a file recorded
// without a checksum is read by its chunks' alone.
func TestIndexChecksFileChecksums(t *testing.T) {
	a := setString(dValue, 3, "apple", 1)
	b := setString(dValue, 3, "grape", 9)
	written, other := logFile([]decl{dValue}, []rec{a}), logFile([]decl{dValue}, []rec{b})
	if len(written) != len(other) {
		t.Fatal("the two logs must have the same size")
	}
	sum := crc32.Checksum(written, crc32.MakeTable(crc32.Castagnoli))
	v1 := slices.Clone(written)
	v1[11] = 1 // version 1: the same bytes read as records without short sets
	for name, data := range map[string][]byte{"another log file": other, "version changed": v1} {
		x := changelog.NewIndex(0, 127)
		err := x.Add([]changelog.Contents{{Name: "/dstl/a-1.log", Data: data, Size: int64(len(data)), CRC32C: sum, HasCRC: true}}, 1)
		if !errors.Is(err, changelog.ErrCorrupt) || !strings.Contains(err.Error(), "changelog file /dstl/a-1.log is damaged") {
			t.Errorf("%s: Add = %v; want a refusal naming the file", name, err)
		}
		if x.Len() != 0 {
			t.Errorf("%s: the index holds %d records after a refusal", name, x.Len())
		}
	}
	x := changelog.NewIndex(0, 127)
	if err := x.Add([]changelog.Contents{{Name: "/dstl/a-1.log", Data: written, Size: int64(len(written)), CRC32C: sum, HasCRC: true}}, 1); err != nil || x.Len() != 1 {
		t.Fatalf("the file as written: %v, %d records", err, x.Len())
	}
	x = changelog.NewIndex(0, 127)
	if err := x.Add([]changelog.Contents{{Name: "/dstl/a-1.log", Data: other, Size: int64(len(other))}}, 1); err != nil || x.Len() != 1 {
		t.Fatalf("without a recorded checksum: %v, %d records", err, x.Len())
	}
}

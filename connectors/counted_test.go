package connectors

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTotalRecords: bounded sources count the records they emit in all —
// a file's lines as its reader splits them (an empty line is one, a last
// line without a newline is one), generated text's lines, a slice's
// items; unbounded or unreadable ones say they do not know.
func TestTotalRecords(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("one\n\nthree\n"), 0o600)
	os.WriteFile(b, []byte("x\ny"), 0o600)
	for _, tc := range []struct {
		name string
		src  interface{ TotalRecords() (int64, bool) }
		n    int64
		ok   bool
	}{
		{"files", &TextFileSource{Paths: []string{a, b}}, 5, true},
		{"a missing file", &TextFileSource{Paths: []string{filepath.Join(dir, "nope")}}, 0, false},
		{"generated words", &WordGenerator{Words: 25, WordsPerLine: 10}, 3, true},
		{"generated lines", &WordGenerator{Lines: 7}, 7, true},
		{"unbounded", &WordGenerator{}, -1, false},
		{"elements", &Elements[int]{Items: []int{1, 2, 3}}, 3, true},
	} {
		n, ok := tc.src.TotalRecords()
		if ok != tc.ok || ok && n != tc.n {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, n, ok, tc.n, tc.ok)
		}
	}
	// The reader emits exactly as many lines.
	src := &TextFileSource{Paths: []string{a, b}}
	splits, err := src.Splits(1)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, src, splits, func(int) bool { return false })
	if int64(len(got)) != 5 {
		t.Errorf("the reader emitted %d lines: %q", len(got), got)
	}
}

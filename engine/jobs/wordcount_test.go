package jobs

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/gflink/gflink/connectors"

	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type words []string

func (w *words) Collect(s string) { *w = append(*w, s) }

func TestTokenize(t *testing.T) {
	for in, want := range map[string][]string{
		"To be, or not to be,--that is the question:--": {"to", "be", "or", "not", "to", "be", "that", "is", "the", "question"},
		"Devoutly to be wish'd.":                        {"devoutly", "to", "be", "wish", "d"},
		"Naïve CAFÉ, über-cool 42x":                     {"naïve", "café", "über", "cool", "x"},
		"":                                              nil,
		"  ... ":                                        nil,
	} {
		var got words
		Tokenize(in, &got)
		if !slices.Equal(got, want) {
			t.Errorf("Tokenize(%q) = %q; want %q", in, got, want)
		}
		if n := CountWords(in); n != len(want) {
			t.Errorf("CountWords(%q) = %d; want %d", in, n, len(want))
		}
	}
}

// tokenizeRef is Tokenize as first written: every word built in a buffer.
func tokenizeRef(line string) []string {
	var out []string
	var w []byte
	for _, r := range line {
		if unicode.IsLetter(r) {
			w = utf8.AppendRune(w, unicode.ToLower(r))
		} else if len(w) > 0 {
			out = append(out, string(w))
			w = w[:0]
		}
	}
	if len(w) > 0 {
		out = append(out, string(w))
	}
	return out
}

// Tokenize, with its ASCII fast path, splits exactly as the plain
// definition does, on any text.
func TestTokenizeAgreesWithItsDefinition(t *testing.T) {
	letters := rapid.SampledFrom([]rune("abcxyzABCXYZéÉïßΣς 0,.-\t\u00a0\uFFFD"))
	rapid.Check(t, func(t *rapid.T) {
		var s string
		if rapid.Bool().Draw(t, "arbitrary") {
			s = rapid.String().Draw(t, "line")
		} else {
			s = string(rapid.SliceOf(letters).Draw(t, "runes"))
		}
		var got words
		Tokenize(s, &got)
		if want := tokenizeRef(s); !slices.Equal(got, want) {
			t.Fatalf("Tokenize(%q) = %q; want %q", s, got, want)
		}
	})
}

// Tokenize's lower-case ASCII words are substrings of their line (no copy
// per word); the others, which had to be lowered, are not.
func TestTokenizeSharesTheLineWhenItCan(t *testing.T) {
	line := "to be, or NOT to bé: that is the Question"
	var got words
	Tokenize(line, &got)
	lo, hi := uintptr(unsafe.Pointer(unsafe.StringData(line))), uintptr(unsafe.Pointer(unsafe.StringData(line)))+uintptr(len(line))
	for _, w := range got {
		p := uintptr(unsafe.Pointer(unsafe.StringData(w)))
		shares := lo <= p && p < hi
		lowered := w == "not" || w == "bé" || w == "question"
		if want := !lowered; shares != want {
			t.Errorf("%q shares the line's memory: %v, want %v", w, shares, want)
		}
	}
}

func BenchmarkTokenize(b *testing.B) {
	g := &connectors.WordGenerator{Distinct: 100_000, Seed: 7, WordsPerLine: 10}
	lines := make([]string, 1024)
	var buf []byte
	for i := range lines {
		buf = g.Line(int64(i), buf)
		lines[i] = string(buf)
	}
	var n countWords
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Tokenize(lines[i&1023], &n)
	}
}

type countWords int

func (c *countWords) Collect(string) { *c++ }

func TestCountWordsAgreesWithTokenize(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "line")
		var got words
		Tokenize(s, &got)
		if CountWords(s) != len(got) {
			t.Fatalf("CountWords(%q) = %d; Tokenize gives %d words", s, CountWords(s), len(got))
		}
	})
}

func TestWordCountRecordRoundTrip(t *testing.T) {
	for _, r := range []WordCountRecord{{"to", 4}, {"a,b", 1}, {"", 0}} {
		got, ok := ParseWordCountRecord(r.String())
		if !ok || got != r {
			t.Errorf("round trip of %v: %v %v", r, got, ok)
		}
	}
	for _, bad := range []string{"to,4", "(to 4)", "(to,x)", "Job has been submitted"} {
		if _, ok := ParseWordCountRecord(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// AppendTo, which the sinks print with, writes exactly String's bytes.
func TestWordCountRecordAppendToIsString(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := WordCountRecord{Word: rapid.String().Draw(t, "word"), Count: rapid.Int64().Draw(t, "count")}
		prefix := rapid.SliceOf(rapid.Byte()).Draw(t, "prefix")
		got := r.AppendTo(slices.Clone(prefix))
		if want := string(prefix) + r.String(); string(got) != want {
			t.Fatalf("AppendTo = %q; want %q", got, want)
		}
	})
}

func TestWordCountArgs(t *testing.T) {
	o, err := ParseWordCountArgs([]string{"--input", "a", "--input", "b", "--rate", "100", "--output", "out"})
	if err != nil || !slices.Equal(o.Inputs, []string{"a", "b"}) || o.Rate != 100 || o.Output != "out" {
		t.Fatalf("%+v %v", o, err)
	}
	o, err = ParseWordCountArgs([]string{"--generate", "unbounded", "--distinct", "5"})
	if err != nil || o.Generate != -1 || o.Distinct != 5 {
		t.Fatalf("%+v %v", o, err)
	}
	o, err = ParseWordCountArgs([]string{"--discard"})
	if err != nil || !o.Discard || o.Output != "" {
		t.Fatalf("--discard: %+v %v", o, err)
	}
	// A directory named discard is an --output like any other.
	o, err = ParseWordCountArgs([]string{"--output", "discard"})
	if err != nil || o.Discard || o.Output != "discard" {
		t.Fatalf("--output discard: %+v %v", o, err)
	}
	for _, bad := range [][]string{{"--generate", "0"}, {"--rate", "-1"}, {"--input", "a", "--generate", "5"}, {"extra"}, {"--nope"},
		{"--discard", "--output", "out"}, {"--discard", "--upsert", "t.txt"}} {
		_, err := ParseWordCountArgs(bad)
		var u *UsageError
		if err == nil || !strings.HasPrefix(err.Error(), "wordcount: ") {
			t.Errorf("%q: err %v", bad, err)
		} else if !asUsage(err, &u) {
			t.Errorf("%q: not a usage error", bad)
		}
	}
}

func asUsage(err error, u **UsageError) bool {
	e, ok := err.(*UsageError)
	*u = e
	return ok
}

func TestRegistry(t *testing.T) {
	r := Builtin().With(Job{Name: "mine"})
	if !slices.Equal(r.Names(), []string{"mine", "sessionize", "windowwordcount", "wordcount"}) {
		t.Fatalf("names %v", r.Names())
	}
	if _, ok := Builtin().Lookup("mine"); ok {
		t.Fatal("With must not change the built-in registry")
	}
}

// TestLookupAcceptsDisplayName: `run WordCount` (the name `list` shows)
// finds the wordcount job, in any case; an unknown name is not found.
func TestLookupAcceptsDisplayName(t *testing.T) {
	r := Builtin()
	for _, name := range []string{"wordcount", "WordCount", "WORDCOUNT", "wordCount"} {
		if j, ok := r.Lookup(name); !ok || j.Name != "wordcount" {
			t.Errorf("Lookup(%q) = %q, %v; want wordcount", name, j.Name, ok)
		}
	}
	if _, ok := r.Lookup("word count"); ok {
		t.Error("Lookup(\"word count\") found a job")
	}
	// An exact name wins over another job's case-insensitive match.
	r = r.With(Job{Name: "WordCount"})
	if j, _ := r.Lookup("WordCount"); j.DisplayName != "" {
		t.Errorf("Lookup(WordCount) took the built-in job over the one named exactly so")
	}
}

// --rate accepts any number >= 0; +Inf (and a huge rate) means as fast as
// possible; NaN and negative rates are usage errors that name the value.
func TestWordCountRateArgs(t *testing.T) {
	for in, want := range map[string]float64{"0": 0, "12.5": 12.5, "1e308": 1e308, "Inf": 0, "+Inf": 0, "infinity": 0} {
		o, err := ParseWordCountArgs([]string{"--generate", "10", "--rate", in})
		if err != nil || o.Rate != want {
			t.Errorf("--rate %s: rate %v, err %v; want %v", in, o.Rate, err, want)
		}
	}
	for _, in := range []string{"NaN", "-1", "-Inf"} {
		_, err := ParseWordCountArgs([]string{"--rate", in})
		var u *UsageError
		if err == nil || !asUsage(err, &u) {
			t.Errorf("--rate %s: err %v; want a usage error", in, err)
			continue
		}
		if !strings.Contains(err.Error(), "--rate") || !strings.Contains(err.Error(), ">= 0") {
			t.Errorf("--rate %s: %q must name the flag and what is accepted", in, err)
		}
	}
	if _, err := ParseWordCountArgs([]string{"--rate", "NaN"}); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("--rate NaN: %v must name the value", err)
	}
}

// TestWordCountFileURIs: files may be given as file: URIs wherever a path
// is; --output file:///x once wrote into ./file:/x.
func TestWordCountFileURIs(t *testing.T) {
	o, err := ParseWordCountArgs([]string{"--input", "file:///data/a.txt", "--input", "file:/data/b%20c.txt", "--input", "rel.txt", "--output", "file:///out"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/data/a.txt", "/data/b c.txt", "rel.txt"}; !slices.Equal(o.Inputs, want) || o.Output != "/out" {
		t.Errorf("inputs %q, output %q; want %q and /out", o.Inputs, o.Output, want)
	}
	if o, err := ParseWordCountArgs([]string{"--upsert", "file://localhost/t.tsv"}); err != nil || o.Upsert != "/t.tsv" {
		t.Errorf("--upsert file://localhost/t.tsv: %q, %v", o.Upsert, err)
	}
	for arg, want := range map[string]string{
		"hdfs:///x":        "not the 'hdfs' scheme",
		"file://nas/share": "it names host 'nas'",
	} {
		if _, err := ParseWordCountArgs([]string{"--output", arg}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--output %s: %v; want an error saying %q", arg, err, want)
		}
	}
}

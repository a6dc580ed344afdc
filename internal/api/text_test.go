package api

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

type appendVal struct {
	s string
	n int64
}

func (v appendVal) AppendTo(dst []byte) []byte {
	return strconv.AppendInt(append(append(dst, '<'), v.s...), v.n, 10)
}

func (v appendVal) String() string { return "<" + v.s + strconv.FormatInt(v.n, 10) }

type appendPtr struct{ s string }

func (p *appendPtr) AppendTo(dst []byte) []byte { return append(dst, p.s...) }

type stringerVal struct{ n int }

func (v stringerVal) String() string { return "s" + strconv.Itoa(v.n) }

// ptrStringer has String on the pointer only: fmt does not call it for a
// value, and neither may RecordText.
type ptrStringer struct{ n int }

func (p *ptrStringer) String() string { return "never" }

// errStringer is an error and a Stringer: fmt prefers Error.
type errStringer struct{}

func (errStringer) Error() string  { return "error" }
func (errStringer) String() string { return "string" }

type word string

func renderAll[T any](vs ...T) string {
	r := NewRecordText[T]()
	var b []byte
	for _, v := range vs {
		b = append(r.Append(b, v), '|')
	}
	return string(b)
}

func TestRecordTextRendersAsFmtWould(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{renderAll(appendVal{"a", 1}, appendVal{"b", -2}), "<a1|<b-2|"},
		{renderAll(&appendPtr{"x"}, nil), "x|<nil>|"},
		{renderAll(stringerVal{1}, stringerVal{2}), "s1|s2|"},
		{renderAll(ptrStringer{3}), "{3}|"},
		{renderAll(errStringer{}), "error|"},
		{renderAll("a", "b c"), "a|b c|"},
		{renderAll[word]("w"), "w|"},
		{renderAll(1, -2), "1|-2|"},
		{renderAll[any](appendVal{"a", 1}, stringerVal{2}, 3, nil), "<a1|s2|3|<nil>|"},
		{renderAll[fmt.Stringer](appendVal{"a", 1}, stringerVal{2}), "<a1|s2|"},
		{renderAll[error](errors.New("e")), "e|"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// Rendering a record through AppendTo allocates nothing beyond the buffer.
func TestRecordTextDoesNotAllocate(t *testing.T) {
	r := NewRecordText[appendVal]()
	s := NewRecordText[string]()
	buf := make([]byte, 0, 64)
	v := appendVal{"word", 12345}
	if n := testing.AllocsPerRun(100, func() { buf = r.Append(buf[:0], v) }); n != 0 {
		t.Errorf("AppendTo: %v allocations per record", n)
	}
	if n := testing.AllocsPerRun(100, func() { buf = s.Append(buf[:0], "word") }); n != 0 {
		t.Errorf("string: %v allocations per record", n)
	}
}

func TestRecordTextAgreesWithFmt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := stringerVal{rapid.Int().Draw(t, "n")}
		if got, want := string(NewRecordText[stringerVal]().Append(nil, v)), fmt.Sprint(v); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		a := appendVal{rapid.String().Draw(t, "s"), rapid.Int64().Draw(t, "i")}
		if got, want := string(NewRecordText[appendVal]().Append(nil, a)), a.String(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

// chunkWriter records every write.
type chunkWriter struct{ chunks []string }

func (c *chunkWriter) Write(p []byte) (int, error) {
	c.chunks = append(c.chunks, string(p))
	return len(p), nil
}

// The print writer writes whole lines in large chunks: on size, on flush
// (barriers, end of input), on idle and on close — never per record.
func TestPrintWriterWritesWholeLinesInChunks(t *testing.T) {
	out := &chunkWriter{}
	s := &PrintSink[appendVal]{W: out}
	w, err := s.CreateWriter(SinkContext{Subtask: 1, Parallelism: 3})
	if err != nil {
		t.Fatal(err)
	}
	pw := w.(*printWriter[appendVal])
	var want strings.Builder
	for i := range 10_000 {
		v := appendVal{"w", int64(i)}
		if err := w.Write(v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&want, "2> %v\n", v)
	}
	if len(out.chunks) == 0 || len(out.chunks) > 3 {
		t.Fatalf("%d writes for 10,000 lines; want a few chunks of 64 KiB", len(out.chunks))
	}
	w.Write(appendVal{"idle", 1})
	want.WriteString("2> <idle1\n")
	n := len(out.chunks)
	pw.Idle()
	if len(out.chunks) != n+1 {
		t.Fatalf("idle wrote %d chunks; want 1", len(out.chunks)-n)
	}
	pw.Idle() // nothing buffered: nothing written
	w.Write(appendVal{"end", 2})
	want.WriteString("2> <end2\n")
	if err := w.Flush(true); err != nil {
		t.Fatal(err)
	}
	w.Write(appendVal{"close", 3})
	want.WriteString("2> <close3\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range out.chunks {
		if c == "" || !strings.HasSuffix(c, "\n") || !strings.HasPrefix(c, "2> ") {
			t.Fatalf("chunk %d is not whole lines: %.20q…%.20q", i, c, c[max(0, len(c)-20):])
		}
	}
	if got := strings.Join(out.chunks, ""); got != want.String() {
		t.Fatalf("printed bytes differ from fmt's lines")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A write that fails on idle is reported by the writer's next call.
func TestPrintWriterReportsAnIdleWriteError(t *testing.T) {
	w, _ := (&PrintSink[int]{W: failWriter{}}).CreateWriter(SinkContext{Parallelism: 1})
	w.Write(1)
	w.(*printWriter[int]).Idle()
	if err := w.Write(2); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Write after a failed idle write: %v", err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after a failed write: nil")
	}
}

// wcLike is a word count update with only String: it renders as fmt
// would, through String.
type wcLike struct {
	w string
	n int64
}

func (v wcLike) String() string { return "(" + v.w + "," + strconv.FormatInt(v.n, 10) + ")" }

// BenchmarkPrintWriter is the print sink's cost per line: rendering into
// its buffer and writing 64 KiB chunks to a writer that discards them.
// "fmt" is how every line was printed before (fmt.Appendln of a
// Stringer); "String" is a type without AppendTo; "AppendTo" a type with
// it, such as word count's records.
func BenchmarkPrintWriter(b *testing.B) {
	bench := func(b *testing.B, write func(i int) error) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := write(i); err != nil {
				b.Fatal(err)
			}
		}
	}
	words := []string{"to", "be", "or", "not", "question", "whether", "nobler", "suffer"}
	b.Run("fmt", func(b *testing.B) {
		var buf []byte
		bench(b, func(i int) error {
			buf = fmt.Appendln(buf, wcLike{words[i&7], int64(i)})
			if len(buf) >= printFlushSize {
				buf = buf[:0]
			}
			return nil
		})
	})
	b.Run("String", func(b *testing.B) {
		w, _ := (&PrintSink[wcLike]{W: io.Discard}).CreateWriter(SinkContext{Parallelism: 1})
		bench(b, func(i int) error { return w.Write(wcLike{words[i&7], int64(i)}) })
	})
	b.Run("AppendTo", func(b *testing.B) {
		w, _ := (&PrintSink[appendVal]{W: io.Discard}).CreateWriter(SinkContext{Parallelism: 1})
		bench(b, func(i int) error { return w.Write(appendVal{words[i&7], int64(i)}) })
	})
}

package connectors

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/gflink/gflink/engine"
)

// WordGenerator is a deterministic source of text lines for benchmarks and
// tests: line i holds WordsPerLine pseudo-random words drawn uniformly from
// Distinct distinct words. The same settings always produce the same text,
// so runs can be compared. Lines are positions, so it is replayable.
type WordGenerator struct {
	// Lines is the number of lines; 0 means unbounded.
	Lines        int64
	WordsPerLine int
	Distinct     int
	Seed         uint64
	// Rate throttles the whole source to this many words per second (0:
	// as fast as possible).
	Rate float64
}

// Word returns the k-th distinct word: k written in base 26 with letters.
func Word(k int) string {
	var b [16]byte
	i := len(b)
	for {
		i--
		b[i] = byte('a' + k%26)
		k /= 26
		if k == 0 {
			break
		}
	}
	return string(b[i:])
}

// wordIndex is the index (in [0, distinct)) of the n-th word of the text.
func wordIndex(seed uint64, n int64, distinct int) int {
	x := uint64(n) + seed*0x9E3779B97F4A7C15
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return int(x % uint64(distinct))
}

// Line returns line i of the generated text.
func (g *WordGenerator) Line(i int64, buf []byte) []byte {
	buf = buf[:0]
	wpl := int64(g.wordsPerLine())
	for w := int64(0); w < wpl; w++ {
		if w > 0 {
			buf = append(buf, ' ')
		}
		buf = append(buf, Word(wordIndex(g.Seed, i*wpl+w, g.distinct()))...)
	}
	return buf
}

func (g *WordGenerator) wordsPerLine() int {
	if g.WordsPerLine <= 0 {
		return 10
	}
	return g.WordsPerLine
}

func (g *WordGenerator) distinct() int {
	if g.Distinct <= 0 {
		return 10000
	}
	return g.Distinct
}

// genSplit is a range of line numbers [Next, End); End < 0 is unbounded.
// Splits are interleaved for unbounded input: split k of n produces lines
// k, k+n, k+2n, …
type genSplit struct {
	Next, End, Step int64
}

func (s genSplit) encode() []byte {
	b := binary.AppendVarint(nil, s.Next)
	b = binary.AppendVarint(b, s.End)
	return binary.AppendVarint(b, s.Step)
}

func decodeGenSplit(b []byte) (genSplit, error) {
	var s genSplit
	var n int
	for _, p := range []*int64{&s.Next, &s.End, &s.Step} {
		*p, n = binary.Varint(b)
		if n <= 0 {
			return s, fmt.Errorf("generator split: truncated")
		}
		b = b[n:]
	}
	return s, nil
}

// Splits implements engine.Source: one interleaved split per subtask.
func (g *WordGenerator) Splits(parallelism int) ([][]byte, error) {
	out := make([][]byte, parallelism)
	end := int64(-1)
	if g.Lines > 0 {
		end = g.Lines
	}
	for k := range parallelism {
		out[k] = genSplit{Next: int64(k), End: end, Step: int64(parallelism)}.encode()
	}
	return out, nil
}

// CreateReader implements engine.Source.
func (g *WordGenerator) CreateReader(ctx engine.SourceContext) (engine.SourceReader[string], error) {
	r := &genReader{g: g}
	if g.Rate > 0 {
		r.rate = g.Rate / float64(ctx.Parallelism) / float64(g.wordsPerLine())
	}
	return r, nil
}

type genReader struct {
	g       *WordGenerator
	splits  []genSplit
	buf     []byte
	rate    float64 // lines per second
	started time.Time
	emitted float64
}

func (r *genReader) AddSplits(splits [][]byte) error {
	for _, b := range splits {
		s, err := decodeGenSplit(b)
		if err != nil {
			return err
		}
		r.splits = append(r.splits, s)
	}
	return nil
}

func (r *genReader) PollNext(out engine.Collector[string]) (engine.InputStatus, error) {
	budget := math.MaxInt
	if r.rate > 0 {
		if r.started.IsZero() {
			r.started = time.Now()
		}
		budget = int(r.rate*time.Since(r.started).Seconds() - r.emitted)
		if budget <= 0 {
			return engine.NothingAvailable, nil
		}
	}
	for n := 0; n < linesPerPoll && n < budget; n++ {
		i := -1
		for k, s := range r.splits {
			if s.End < 0 || s.Next < s.End {
				i = k
				break
			}
		}
		if i < 0 {
			return engine.EndOfInput, nil
		}
		s := &r.splits[i]
		r.buf = r.g.Line(s.Next, r.buf)
		out.Collect(string(r.buf))
		s.Next += s.Step
		r.emitted++
	}
	return engine.MoreAvailable, nil
}

func (r *genReader) NextPollTime() time.Time {
	if r.rate <= 0 {
		return time.Now()
	}
	return r.started.Add(time.Duration((r.emitted + 1) / r.rate * float64(time.Second)))
}

func (r *genReader) SnapshotState(int64) ([][]byte, error) {
	out := make([][]byte, len(r.splits))
	for i, s := range r.splits {
		out[i] = s.encode()
	}
	return out, nil
}

func (r *genReader) Close() error { return nil }

package connectors

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/gflink/gflink/stream"
)

// WordGenerator is a deterministic source of text lines for benchmarks and
// tests: line i holds WordsPerLine pseudo-random words drawn uniformly from
// Distinct distinct words. The same settings always produce the same text,
// so runs can be compared. Lines are positions, so it is replayable.
type WordGenerator struct {
	// Words, if > 0, is the number of words: the text ends there, its last
	// line possibly short. Otherwise Lines is the number of lines; both 0
	// means unbounded.
	Words        int64
	Lines        int64
	WordsPerLine int
	Distinct     int
	Seed         uint64
	// Rate throttles the whole source to this many words per second (0:
	// as fast as possible).
	Rate float64
	// Skew, if > 1, draws words by a Zipf law of that exponent (word k,
	// the k-th most frequent, about (k+1)^-Skew as often as the most
	// frequent) rather than uniformly: hot keys, as in most real streams.
	Skew float64
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
	return int(mix(uint64(n)+seed*0x9E3779B97F4A7C15) % uint64(distinct))
}

// mix is SplitMix64's finalizer: consecutive numbers in, unrelated bits out.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// zipfRank is the rank (in [0, distinct)) of the n-th word of a text
// whose words follow a Zipf law of exponent s > 1, by the inverse of the
// law's continuous approximation, P(rank < k) = (1 - (k+1)^(1-s)) / (1 -
// (distinct+1)^(1-s)), at a uniform point derived from n.
func zipfRank(seed uint64, n int64, distinct int, s float64) int {
	u := float64(mix(uint64(n)+seed*0x9E3779B97F4A7C15)>>11) / (1 << 53)
	tail := 1 - math.Pow(float64(distinct)+1, 1-s)
	k := int(math.Pow(1-u*tail, 1/(1-s))) - 1
	return min(max(k, 0), distinct-1)
}

// Line returns line i of the generated text.
func (g *WordGenerator) Line(i int64, buf []byte) []byte {
	buf = buf[:0]
	wpl := int64(g.wordsPerLine())
	for w := int64(0); w < wpl; w++ {
		n := i*wpl + w
		if g.Words > 0 && n >= g.Words {
			break
		}
		if w > 0 {
			buf = append(buf, ' ')
		}
		k := wordIndex(g.Seed, n, g.distinct())
		if g.Skew > 1 {
			k = zipfRank(g.Seed, n, g.distinct(), g.Skew)
		}
		buf = append(buf, Word(k)...)
	}
	return buf
}

// lines is the number of lines of the text, or -1 when it is unbounded.
func (g *WordGenerator) lines() int64 {
	switch {
	case g.Words > 0:
		wpl := int64(g.wordsPerLine())
		return (g.Words + wpl - 1) / wpl
	case g.Lines > 0:
		return g.Lines
	}
	return -1
}

// words is the number of words of the text, or -1 when it is unbounded.
func (g *WordGenerator) words() int64 {
	if n := g.lines(); n >= 0 && g.Words <= 0 {
		return n * int64(g.wordsPerLine())
	}
	if g.Words > 0 {
		return g.Words
	}
	return -1
}

// describe names the text in messages.
func (g *WordGenerator) describe() string {
	return describeText(g.text())
}

func describeText(t genText) string {
	size := "an unbounded stream of words"
	if t.Words >= 0 {
		size = fmt.Sprintf("%d words", t.Words)
	}
	skew := ""
	if t.Skew != 0 {
		skew = fmt.Sprintf(", Zipf s=%g", t.Skew)
	}
	return fmt.Sprintf("%s (%d distinct%s, seed %d, %d per line)", size, t.Distinct, skew, t.Seed, t.PerLine)
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
// k, k+n, k+2n, … A split also records the text it belongs to, so that a
// restore into a generator of other text is refused rather than reading
// positions of one text from another.
type genSplit struct {
	Next, End, Step int64
	text            genText
	// legacy: written before splits recorded their text (no tag), so the
	// text cannot be checked.
	legacy bool
}

// genText identifies a generated text; Words < 0 is unbounded.
type genText struct {
	Words    int64
	Distinct int64
	Seed     uint64
	PerLine  int64
	Skew     float64 // 0: uniform
}

// genSplitTag starts every encoded generator split.
const genSplitTag = 'G'

func (g *WordGenerator) text() genText {
	t := genText{Words: g.words(), Distinct: int64(g.distinct()), Seed: g.Seed, PerLine: int64(g.wordsPerLine())}
	if g.Skew > 1 {
		t.Skew = g.Skew
	}
	return t
}

func (s genSplit) encode() []byte {
	b := []byte{genSplitTag}
	for _, v := range []int64{s.Next, s.End, s.Step, s.text.Words, s.text.Distinct, s.text.PerLine} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, s.text.Seed)
	if s.text.Skew != 0 { // after the seed, so that a uniform text's split reads as before
		b = binary.AppendUvarint(b, math.Float64bits(s.text.Skew))
	}
	return b
}

var errNotGenSplit = fmt.Errorf("not a word generator's split")

func decodeGenSplit(b []byte) (genSplit, error) {
	var s genSplit
	if len(b) == 0 {
		return s, errNotGenSplit
	}
	if b[0] != genSplitTag {
		// The layout before the tag: exactly three varints. (A tagged
		// split is eight integers, an elements split two or four; 'G'
		// cannot start a legacy one, whose Next is not negative.)
		for _, p := range []*int64{&s.Next, &s.End, &s.Step} {
			v, n := binary.Varint(b)
			if n <= 0 {
				return s, errNotGenSplit
			}
			*p, b = v, b[n:]
		}
		if len(b) != 0 || s.Step <= 0 || s.Next < 0 {
			return s, errNotGenSplit
		}
		s.legacy = true
		return s, nil
	}
	b = b[1:]
	for _, p := range []*int64{&s.Next, &s.End, &s.Step, &s.text.Words, &s.text.Distinct, &s.text.PerLine} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return s, errNotGenSplit
		}
		*p, b = v, b[n:]
	}
	seed, n := binary.Uvarint(b)
	if n <= 0 || s.Step <= 0 || s.Next < 0 {
		return s, errNotGenSplit
	}
	s.text.Seed, b = seed, b[n:]
	if len(b) > 0 {
		skew, n := binary.Uvarint(b)
		if n != len(b) {
			return s, errNotGenSplit
		}
		s.text.Skew = math.Float64frombits(skew)
	}
	return s, nil
}

// Splits implements stream.Source: one interleaved split per subtask.
func (g *WordGenerator) Splits(parallelism int) ([][]byte, error) {
	out := make([][]byte, parallelism)
	for k := range parallelism {
		out[k] = genSplit{Next: int64(k), End: g.lines(), Step: int64(parallelism), text: g.text()}.encode()
	}
	return out, nil
}

// CheckRestoredSplits implements stream.RestoredSplitsChecker: the splits
// must be positions in this generator's text.
func (g *WordGenerator) CheckRestoredSplits(splits [][]byte) error {
	want := g.text()
	for _, b := range splits {
		s, err := decodeGenSplit(b)
		if err != nil {
			return inputMismatch(splits, "generates "+g.describe())
		}
		if !s.legacy && s.text != want {
			return fmt.Errorf("the snapshot's source generated %s; this job's generates %s",
				describeText(s.text), g.describe())
		}
	}
	return nil
}

// CreateReader implements stream.Source.
func (g *WordGenerator) CreateReader(ctx stream.SourceContext) (stream.SourceReader[string], error) {
	r := &genReader{g: g}
	if throttled(g.Rate) {
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

func (r *genReader) PollNext(out stream.Collector[string]) (stream.InputStatus, error) {
	budget := linesPerPoll
	if r.rate > 0 {
		if r.started.IsZero() {
			r.started = time.Now()
		}
		// Compared as floats: a huge rate would overflow an int (1e308
		// words/s became a negative budget, and nothing was ever emitted).
		avail := r.rate*time.Since(r.started).Seconds() - r.emitted
		if avail < 1 {
			return stream.NothingAvailable, nil
		}
		if avail < float64(budget) {
			budget = int(avail)
		}
	}
	for n := 0; n < budget; n++ {
		i := -1
		for k, s := range r.splits {
			if s.End < 0 || s.Next < s.End {
				i = k
				break
			}
		}
		if i < 0 {
			return stream.EndOfInput, nil
		}
		s := &r.splits[i]
		r.buf = r.g.Line(s.Next, r.buf)
		out.Collect(string(r.buf))
		s.Next += s.Step
		r.emitted++
	}
	return stream.MoreAvailable, nil
}

func (r *genReader) NextPollTime() time.Time {
	if r.rate <= 0 {
		return time.Now()
	}
	return paceTime(r.started, r.emitted+1, r.rate)
}

func (r *genReader) SnapshotState(int64) ([][]byte, error) {
	out := make([][]byte, len(r.splits))
	for i, s := range r.splits {
		out[i] = s.encode()
	}
	return out, nil
}

func (r *genReader) Close() error { return nil }

// TotalRecords implements stream.CountedSource: the lines of a bounded
// text.
func (g *WordGenerator) TotalRecords() (int64, bool) {
	n := g.lines()
	return n, n >= 0
}

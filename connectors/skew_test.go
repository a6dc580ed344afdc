package connectors

import (
	"math"
	"strings"
	"testing"
)

// TestSkewedWordsFollowTheirLaw: with Skew, words follow the Zipf law's
// continuous approximation — the share of the top ranks is the law's —
// the same words every time, and the split records the exponent, so that
// a restore into a generator of another skew is refused.
func TestSkewedWordsFollowTheirLaw(t *testing.T) {
	const distinct, words, s = 1_000_000, 400_000, 1.1
	g := &WordGenerator{Words: words, Distinct: distinct, Seed: 3, WordsPerLine: 10, Skew: s}
	var top [4]int // words of rank < 1, 10, 100, 1000
	var buf []byte
	for i := range int64(words / 10) {
		buf = g.Line(i, buf)
		for _, w := range strings.Fields(string(buf)) {
			for j, k := range []int{0, 9, 99, 999} {
				if wordRank(w) <= k {
					top[j]++
				}
			}
		}
	}
	tail := 1 - math.Pow(distinct+1, 1-s)
	for j, k := range []int{1, 10, 100, 1000} {
		want := (1 - math.Pow(float64(k)+1, 1-s)) / tail
		if got := float64(top[j]) / words; math.Abs(got-want) > 0.01 {
			t.Errorf("words of the %d most frequent: %.4f of the text, the law says %.4f", k, got, want)
		}
	}
	if again := g.Line(7, nil); string(again) != string(g.Line(7, nil)) {
		t.Fatal("a line differs between two calls")
	}
	splits, err := g.Splits(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CheckRestoredSplits(splits); err != nil {
		t.Fatalf("its own splits: %v", err)
	}
	uniform := &WordGenerator{Words: words, Distinct: distinct, Seed: 3, WordsPerLine: 10}
	err = uniform.CheckRestoredSplits(splits)
	if err == nil || !strings.Contains(err.Error(), "Zipf s=1.1") {
		t.Fatalf("a uniform generator restoring a skewed one's splits: %v", err)
	}
	if err := g.CheckRestoredSplits(mustSplits(t, uniform)); err == nil {
		t.Fatal("a skewed generator restores a uniform one's splits")
	}
}

func mustSplits(t *testing.T, g *WordGenerator) [][]byte {
	t.Helper()
	s, err := g.Splits(2)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wordRank inverts Word.
func wordRank(w string) int {
	k := 0
	for i := 0; i < len(w); i++ {
		k = k*26 + int(w[i]-'a')
	}
	return k
}

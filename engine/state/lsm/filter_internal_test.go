package lsm

import (
	"fmt"
	"testing"
)

// TestKeyFilterHasNoFalseNegativesAndFewFalsePositives: every key added
// may be there; of keys never added, about 1 % may be (the blocked layout
// costs a little over a plain bloom filter's 0.8 % at 10 bits a key).
func TestKeyFilterHasNoFalseNegativesAndFewFalsePositives(t *testing.T) {
	const n = 200_000
	f := newKeyFilter(n)
	for i := range n {
		if !f.add(fmt.Appendf(nil, "in-%d", i)) {
			t.Fatalf("add %d of a filter of %d refused", i, n)
		}
	}
	if f.add([]byte("one too many")) {
		t.Fatal("a full filter took one more key")
	}
	for i := range n {
		if !f.mayContain(fmt.Appendf(nil, "in-%d", i)) {
			t.Fatalf("key %d added, not found", i)
		}
	}
	fp := 0
	for i := range n {
		if f.mayContain(fmt.Appendf(nil, "out-%d", i)) {
			fp++
		}
	}
	rate := float64(fp) / n
	t.Logf("%.2f %% false positives", 100*rate)
	if rate > 0.015 {
		t.Errorf("%.2f %% false positives, want about 1 %%", 100*rate)
	}
	if empty := newKeyFilter(10); empty.mayContain([]byte("x")) {
		t.Error("an empty filter may contain a key")
	}
}

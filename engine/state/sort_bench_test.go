package state

import (
	"slices"
	"testing"
)

// sortBenchGroup is one key group of the benchmarks' state (~7,800
// entries) in an encoder's scratch.
func sortBenchGroup() (*encScratch, int) {
	sc := new(encScratch)
	ser := SerializerFor[string]()
	n := 0
	for i := 0; n < 7800; i++ {
		k := benchKey(i)
		if KeyGroupForHash(ser.Hash(k), 128) != 5 {
			continue
		}
		off := len(sc.arena)
		sc.arena = ser.Append(sc.arena, k)
		kl := len(sc.arena) - off
		sc.arena = SerializerFor[int64]().Append(sc.arena, int64(i))
		sc.add(off, kl)
		n++
	}
	return sc, n
}

// BenchmarkSortKeyGroup: the radix sort of one key group's entries.
func BenchmarkSortKeyGroup(b *testing.B) {
	sc, n := sortBenchGroup()
	keys := make([]sortKey, n)
	tmp := make([]sortKey, n)
	for b.Loop() {
		for i := range keys {
			keys[i] = sortKey{i: uint32(i)}
		}
		sortKeys(keys, tmp, sc.ents, sc.arena, 0, false)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
}

// BenchmarkSortKeyGroupComparison: the same with a comparison sort on the
// key bytes, as encoding sorted before.
func BenchmarkSortKeyGroupComparison(b *testing.B) {
	sc, n := sortBenchGroup()
	keys := make([]sortKey, n)
	for b.Loop() {
		for i := range keys {
			keys[i] = sortKey{i: uint32(i)}
		}
		slices.SortFunc(keys, func(x, y sortKey) int { return compareEntries(sc.arena, &sc.ents[x.i], &sc.ents[y.i], false) })
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
}

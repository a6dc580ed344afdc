package lsm

import "github.com/cespare/xxhash/v2"

// keyFilter is a bloom filter of up to a fixed number of keys, at about 1 %
// false positives (10 bits and 7 probes a key).
type keyFilter struct {
	bits     []uint64
	n, limit int
}

const filterProbes = 7

func newKeyFilter(limit int) *keyFilter {
	words := (limit*10 + 63) / 64
	return &keyFilter{bits: make([]uint64, words), limit: limit}
}

// probes yields the bits of key (double hashing).
func (f *keyFilter) probes(key []byte, visit func(bit uint64) bool) bool {
	h := xxhash.Sum64(key)
	h1, h2 := h&0xffffffff, h>>32|1
	m := uint64(len(f.bits)) * 64
	for i := range uint64(filterProbes) {
		if !visit((h1 + i*h2) % m) {
			return false
		}
	}
	return true
}

// add adds key; false once the filter holds its limit of keys (it is
// then useless).
func (f *keyFilter) add(key []byte) bool {
	if f.n >= f.limit {
		return false
	}
	f.n++
	f.probes(key, func(b uint64) bool { f.bits[b/64] |= 1 << (b % 64); return true })
	return true
}

// mayContain says whether key may have been added.
func (f *keyFilter) mayContain(key []byte) bool {
	if f.n == 0 {
		return false // nothing evicted yet: every key not in rows is new
	}
	return f.probes(key, func(b uint64) bool { return f.bits[b/64]&(1<<(b%64)) != 0 })
}

package lsm

import "github.com/cespare/xxhash/v2"

// keyFilter is a bloom filter of up to a fixed number of keys, at about 1 %
// false positives (10 bits a key). It is blocked: a key's 7 bits lie in one
// 64-byte block, so that adding or testing a key reads one cache line
// rather than seven (at 10 M keys the filter is 12 MB, and each probe of a
// plain bloom filter missed the cache: 5 s of a 40 s run on rocksdb).
type keyFilter struct {
	bits     []uint64
	blocks   uint64
	n, limit int
}

const (
	filterProbes = 7
	blockWords   = 8 // 512 bits: a cache line
)

func newKeyFilter(limit int) *keyFilter {
	blocks := (limit*10 + 511) / 512
	return &keyFilter{bits: make([]uint64, blocks*blockWords), blocks: uint64(blocks), limit: limit}
}

// probes yields the bits of key: a block chosen by the hash's upper half,
// the bits within it by double hashing of the lower half.
func (f *keyFilter) probes(key []byte, visit func(bit uint64) bool) bool {
	h := xxhash.Sum64(key)
	base := (h >> 32) * f.blocks >> 32 * 512
	h1, h2 := h&0xffff, (h>>16)&0xffff|1
	for i := range uint64(filterProbes) {
		if !visit(base + (h1+i*h2)&511) {
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

package state

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
)

// encScratch is reusable scratch for encoding one state's entries of one key
// group in canonical order: every entry's bytes (key, then value) are
// appended to arena, ents indexes them, and emit sorts the index by key and
// copies the entries out. Nothing is allocated per entry once the buffers
// have grown.
type encScratch struct {
	arena []byte
	ents  []sortEntry
	keys  []sortKey // the order of ents, sorted by emit
	tmp   []sortKey
	inner *encScratch // for values that sort their own entries (map state)
	// For strMap.encodeOrdered: the slots of ents, the payload being
	// merged, one key being merged.
	slots []uint32
	out   []byte
	cur   []byte
	sink  byte
	// gath is the chunk of slots an ordered encode copies out, a
	// *[gatherChunk]strSlot[E] for the table's E (kept, not allocated per
	// key group).
	gath any
}

// sortEntry is one entry of the arena: key bytes [off, off+klen), entry
// bytes [off, off+n).
type sortEntry struct {
	off  uint32
	klen uint32
	n    uint32
}

// sortKey is what the radix sort moves: 8 key bytes of entry i, from the
// depth being sorted on (16 bytes, against 24 for moving entries).
type sortKey struct {
	pfx uint64
	i   uint32
}

var scratchPool = sync.Pool{New: func() any { return new(encScratch) }}

func (sc *encScratch) reset() {
	sc.arena, sc.ents = sc.arena[:0], sc.ents[:0]
}

func (sc *encScratch) sub() *encScratch {
	if sc.inner == nil {
		sc.inner = new(encScratch)
	}
	return sc.inner
}

// add indexes the entry that starts at off, with a key of klen bytes and
// ending at the end of the arena.
func (sc *encScratch) add(off, klen int) {
	if uint64(len(sc.arena)) > math.MaxUint32 { // uint64: on 32-bit platforms a length never is
		panic(fmt.Sprintf("state: one state's entries of one key group exceed %d bytes", uint32(math.MaxUint32)))
	}
	sc.ents = append(sc.ents, sortEntry{off: uint32(off), klen: uint32(klen), n: uint32(len(sc.arena) - off)})
}

// emit sorts the entries by encoded key (then, with tie, by the varint that
// follows equal keys) and appends uvarint count and the entries; with
// lenPrefix, the uvarint length of those bytes comes first.
func (sc *encScratch) emit(dst []byte, tie, lenPrefix bool) []byte {
	keys := sc.sorted(tie)
	n := len(keys)
	size := uvarintLen(uint64(n)) + len(sc.arena)
	dst = slices.Grow(dst, size+binary.MaxVarintLen64)
	if lenPrefix {
		dst = binary.AppendUvarint(dst, uint64(size))
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, k := range keys {
		e := &sc.ents[k.i]
		dst = append(dst, sc.arena[e.off:e.off+e.n]...)
	}
	return dst
}

// emitGrouped is emit with the length prefix for entries whose equal keys
// are entries of one key's map (arena: key, then user key and value): each
// key is written once, then the uvarint count of its entries and their
// bytes, sorted — by user key, as map state writes them, since encoded
// user keys are prefix-free and so order the user key and value bytes
// together as they order alone.
func (sc *encScratch) emitGrouped(dst []byte) []byte {
	keys := sc.sorted(false)
	run := func(i int) int {
		k := sc.ents[keys[i].i].key(sc.arena)
		j := i + 1
		for j < len(keys) && bytes.Equal(sc.ents[keys[j].i].key(sc.arena), k) {
			j++
		}
		return j
	}
	val := func(k sortKey) []byte { e := &sc.ents[k.i]; return sc.arena[e.off+e.klen : e.off+e.n] }
	n, size := 0, 0
	for i := 0; i < len(keys); {
		j := run(i)
		n++
		size += int(sc.ents[keys[i].i].klen) + uvarintLen(uint64(j-i))
		for _, k := range keys[i:j] {
			size += len(val(k))
		}
		i = j
	}
	size += uvarintLen(uint64(n))
	dst = slices.Grow(dst, size+binary.MaxVarintLen64)
	dst = binary.AppendUvarint(dst, uint64(size))
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := 0; i < len(keys); {
		j := run(i)
		r := keys[i:j]
		for a := 1; a < len(r); a++ { // a key has few entries
			for b := a; b > 0 && bytes.Compare(val(r[b]), val(r[b-1])) < 0; b-- {
				r[b], r[b-1] = r[b-1], r[b]
			}
		}
		dst = append(dst, sc.ents[r[0].i].key(sc.arena)...)
		dst = binary.AppendUvarint(dst, uint64(len(r)))
		for _, k := range r {
			dst = append(dst, val(k)...)
		}
		i = j
	}
	return dst
}

// sorted returns the order of the entries by encoded key (then, with tie,
// by the varint that follows equal keys).
func (sc *encScratch) sorted(tie bool) []sortKey {
	n := len(sc.ents)
	if cap(sc.keys) < n {
		sc.keys = make([]sortKey, n+n/4)
		sc.tmp = make([]sortKey, n+n/4)
	}
	keys := sc.keys[:n]
	for i := range keys {
		keys[i].i = uint32(i)
	}
	sortKeys(keys, sc.tmp[:n], sc.ents, sc.arena, 0, tie)
	return keys
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func (e *sortEntry) key(arena []byte) []byte { return arena[e.off : e.off+e.klen] }

// compareEntries orders entries by key bytes, then (tie) by the varint that
// follows the key.
func compareEntries(arena []byte, a, b *sortEntry, tie bool) int {
	if c := bytes.Compare(a.key(arena), b.key(arena)); c != 0 || !tie {
		return c
	}
	ta, _ := binary.Varint(arena[a.off+a.klen : a.off+a.n])
	tb, _ := binary.Varint(arena[b.off+b.klen : b.off+b.n])
	return cmp.Compare(ta, tb)
}

// prefixAt returns the key's 8 bytes from depth on, big-endian, padded with
// zeros.
func prefixAt(arena []byte, e *sortEntry, depth int) uint64 {
	start, end := int(e.off)+depth, int(e.off+e.klen)
	if end-start >= 8 {
		return binary.BigEndian.Uint64(arena[start:])
	}
	var p uint64
	for i := start; i < end; i++ {
		p = p<<8 | uint64(arena[i])
	}
	if end > start {
		p <<= 8 * uint(8-(end-start))
	}
	return p
}

// sortKeys sorts a, whose entries' keys share their first depth bytes,
// into the order of compareEntries: a radix sort on 8 key bytes at a time,
// which orders distinct keys exactly as a byte comparison would because
// encoded keys are prefix-free (a shorter key padded with zeros never ties
// with a longer one it is not a prefix of). Runs that tie on all 8 bytes
// recurse on the next 8 when every key in them is longer; otherwise (equal
// keys, or a serializer that is not prefix-free) they are sorted by
// comparison.
func sortKeys(a, tmp []sortKey, ents []sortEntry, arena []byte, depth int, tie bool) {
	if len(a) <= 24 {
		insertionSort(a, ents, arena, tie)
		return
	}
	for i := range a {
		a[i].pfx = prefixAt(arena, &ents[a[i].i], depth)
	}
	radixSortPrefix(a, tmp)
	next := depth + 8
	for i := 0; i < len(a); {
		j := i + 1
		for j < len(a) && a[j].pfx == a[i].pfx {
			j++
		}
		if j-i > 1 {
			run := a[i:j]
			longer := true
			for _, k := range run {
				if int(ents[k.i].klen) <= next {
					longer = false
					break
				}
			}
			if longer {
				sortKeys(run, tmp[i:j], ents, arena, next, tie)
			} else {
				slices.SortFunc(run, func(x, y sortKey) int { return compareEntries(arena, &ents[x.i], &ents[y.i], tie) })
			}
		}
		i = j
	}
}

func insertionSort(a []sortKey, ents []sortEntry, arena []byte, tie bool) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && compareEntries(arena, &ents[a[j-1].i], &ents[a[j].i], tie) > 0; j-- {
			a[j-1], a[j] = a[j], a[j-1]
		}
	}
}

// radixSortPrefix sorts a by pfx: least significant byte first, skipping
// the bytes that are the same in every entry.
func radixSortPrefix(a, tmp []sortKey) {
	var counts [8][256]uint32
	for i := range a {
		p := a[i].pfx
		for b := range 8 {
			counts[b][byte(p>>(8*b))]++
		}
	}
	src, dst := a, tmp[:len(a)]
	n := uint32(len(a))
	for b := range 8 {
		c := &counts[b]
		sh := 8 * uint(b)
		if c[byte(a[0].pfx>>sh)] == n {
			continue
		}
		var sum uint32
		for d := range c {
			cnt := c[d]
			c[d] = sum
			sum += cnt
		}
		for i := range src {
			d := byte(src[i].pfx >> sh)
			dst[c[d]] = src[i]
			c[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &a[0] {
		copy(a, src)
	}
}

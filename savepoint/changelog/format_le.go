//go:build amd64 || arm64 || 386

package changelog

import (
	"unsafe"
)

// appendSetStringVarint writes AppendSetStringVarint's common case through a
// pointer, in word-sized stores: it runs once per state change on the
// task's thread, and the checked byte-by-byte version with a memmove call
// per key cost ~12 ns of a word count's ~85 ns per record. The caller has
// checked that dst has room for the record (at most len(key)+13 bytes) and
// that id, kg and len(key) are under 128. Only on little-endian
// processors that load and store unaligned words cheaply (format_other.go
// elsewhere).
func appendSetStringVarint(dst []byte, n int, id uint32, kg int, key string, v int64) []byte {
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(dst)), n)
	l := len(key)
	// The 3-byte head in one 4-byte store: the key or the value (a record
	// has at least 4 bytes) overwrites the byte after it.
	*(*uint32)(p) = uint32(shortSet|id) | uint32(kg)<<8 | uint32(l)<<16
	k := unsafe.Add(p, 3)
	src := unsafe.Pointer(unsafe.StringData(key))
	// The key with overlapping word loads and stores, no call: keys of 4
	// to 16 bytes (most words) take two loads and two stores. (Through a
	// function, ~1 ns more a record in BenchmarkWriterRecordPath.)
	switch {
	case l >= 8 && l <= 16:
		*(*uint64)(k) = *(*uint64)(src)
		*(*uint64)(unsafe.Add(k, l-8)) = *(*uint64)(unsafe.Add(src, l-8))
	case l >= 4 && l < 8:
		*(*uint32)(k) = *(*uint32)(src)
		*(*uint32)(unsafe.Add(k, l-4)) = *(*uint32)(unsafe.Add(src, l-4))
	case l > 16:
		copy(unsafe.Slice((*byte)(k), l), key)
	default: // up to 3 bytes
		for i := range l {
			*(*byte)(unsafe.Add(k, i)) = key[i]
		}
	}
	q := unsafe.Add(k, l)
	x := uint64(v<<1) ^ uint64(v>>63) // zigzag, as binary.AppendVarint
	switch {
	case x < 0x80:
		*(*byte)(q) = byte(x)
		return dst[:n+3+l+1]
	case x < 0x4000:
		*(*uint16)(q) = uint16(x&0x7f|0x80) | uint16(x>>7)<<8
		return dst[:n+3+l+2]
	}
	w := uintptr(0)
	for ; x >= 0x80; x >>= 7 {
		*(*byte)(unsafe.Add(q, w)) = byte(x) | 0x80
		w++
	}
	*(*byte)(unsafe.Add(q, w)) = byte(x)
	return dst[:n+3+l+int(w)+1]
}

//go:build amd64 || arm64 || 386

package changelog

import (
	"unsafe"
)

// appendSetStringVarint writes AppendSetStringVarint's common case through a
// pointer, in word-sized stores: it runs once per state change on the
// task's thread, and the checked byte-by-byte version with a memmove call
// per key cost ~12 ns of a word count's ~85 ns per record. The caller has
// checked that dst has room for the record (at most len(key)+16 bytes) and
// that id, kg and len(key) fit one byte each. Only on little-endian
// processors that load and store unaligned words cheaply (format_other.go
// elsewhere).
func appendSetStringVarint(dst []byte, n int, id uint32, kg int, key string, v int64) []byte {
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(dst)), n)
	l := len(key)
	// The 5-byte head in one 8-byte store: the key and the value overwrite
	// the 3 bytes after it, or they lie past the record, in room the
	// caller checked.
	*(*uint64)(p) = uint64(OpSet) | uint64(id)<<8 | uint64(kg)<<16 | uint64(l+1)<<24 | uint64(l)<<32
	k := unsafe.Add(p, 5)
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
	case x < 0x80: // the value's length (1), then the value
		*(*uint16)(q) = uint16(1 | x<<8)
		return dst[:n+5+l+2]
	case x < 0x4000:
		*(*uint32)(q) = uint32(2 | (x&0x7f|0x80)<<8 | (x>>7)<<16)
		return dst[:n+5+l+3]
	}
	w := uintptr(1)
	for ; x >= 0x80; x >>= 7 {
		*(*byte)(unsafe.Add(q, w)) = byte(x) | 0x80
		w++
	}
	*(*byte)(unsafe.Add(q, w)) = byte(x)
	*(*byte)(q) = byte(w) // at most 10 bytes: a one-byte length
	return dst[:n+5+l+1+int(w)]
}

//go:build !(amd64 || arm64 || 386)

package changelog

// appendSetStringVarint writes AppendSetStringVarint's common case with
// checked byte stores (format_le.go has the word-sized version for the
// processors that allow it). The caller has checked that dst has room for
// the record and that id, kg and len(key) fit one byte each.
func appendSetStringVarint(dst []byte, n int, id uint32, kg int, key string, v int64) []byte {
	b := dst[n : n+5+len(key)+1+10]
	b[0], b[1], b[2], b[3], b[4] = byte(OpSet), byte(id), byte(kg), byte(len(key)+1), byte(len(key))
	copy(b[5:], key)
	p := b[5+len(key):]
	x := uint64(v<<1) ^ uint64(v>>63) // zigzag, as binary.AppendVarint
	w := 1
	for ; x >= 0x80; x >>= 7 {
		p[w] = byte(x) | 0x80
		w++
	}
	p[w] = byte(x)
	p[0] = byte(w) // at most 10 bytes: a one-byte length
	return dst[:n+5+len(key)+1+w]
}

//go:build !(amd64 || arm64 || 386)

package changelog

// appendSetStringVarint is appendShortSet where word-sized stores are not
// cheap or not little-endian (format_le.go has the word-sized version).
func appendSetStringVarint(dst []byte, n int, id uint32, kg int, key string, v int64) []byte {
	return appendShortSet(dst, n, id, kg, key, v)
}

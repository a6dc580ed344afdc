package state

// encodeKG encodes a key group of a snapshot whose store cannot fail in
// these tests (memory, or an LSM on a healthy disk); a failure panics,
// which fails the test.
func encodeKG(s interface {
	EncodeKeyGroup([]byte, int) ([]byte, error)
}, dst []byte, kg int) []byte {
	b, err := s.EncodeKeyGroup(dst, kg)
	if err != nil {
		panic(err)
	}
	return b
}

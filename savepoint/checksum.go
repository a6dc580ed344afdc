package savepoint

import (
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strconv"
)

// NewCRC32C returns a hash computing the checksum _metadata records of the
// files a snapshot references: CRC-32C (Castagnoli), as every checksum of
// the format.
func NewCRC32C() hash.Hash32 { return crc32.New(castagnoli) }

// FormatCRC32C is a file checksum as _metadata records it: 8 lower-case
// hex digits.
func FormatCRC32C(sum uint32) string { return fmt.Sprintf("%08x", sum) }

// ParseCRC32C reads a checksum _metadata records; ok is false when none
// is recorded ("").
func ParseCRC32C(s string) (sum uint32, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	if len(s) != 8 {
		return 0, false, fmt.Errorf("crc32c %q is not 8 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return 0, false, fmt.Errorf("crc32c %q is not 8 hex digits", s)
	}
	return uint32(v), true, nil
}

// ChecksumError is a file whose content does not match the checksum its
// snapshot recorded: damaged, or replaced by another file.
type ChecksumError struct {
	File             string
	Recorded, Actual uint32
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("state file %s is damaged: its CRC-32C is %08x, _metadata recorded %08x", e.File, e.Actual, e.Recorded)
}

func (e *ChecksumError) Unwrap() error { return ErrCorrupt }

// checkedReader checks the size and recorded checksum of a file as it is
// read to its end.
type checkedReader struct {
	r    io.Reader
	h    hash.Hash32
	n    int64
	name string
	size int64
	sum  uint32
	has  bool
}

// newCheckedReader reads r, a file a snapshot records with size bytes and
// the checksum crc ("": none).
func newCheckedReader(r io.Reader, name string, size int64, crc string) (*checkedReader, error) {
	sum, has, err := ParseCRC32C(crc)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w: %w", name, err, ErrCorrupt)
	}
	return &checkedReader{r: r, h: NewCRC32C(), name: name, size: size, sum: sum, has: has}, nil
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.size {
		return n, fmt.Errorf("state file %s has more than the %d bytes _metadata records: %w", c.name, c.size, ErrCorrupt)
	}
	c.h.Write(p[:n])
	return n, err
}

// check is called once r is read to its end.
func (c *checkedReader) check() error {
	if c.n != c.size {
		return fmt.Errorf("state file %s has %d bytes, _metadata records %d: %w", c.name, c.n, c.size, ErrCorrupt)
	}
	if got := c.h.Sum32(); c.has && got != c.sum {
		return &ChecksumError{File: c.name, Recorded: c.sum, Actual: got}
	}
	return nil
}

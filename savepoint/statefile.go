package savepoint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"strings"

	"github.com/gflink/gflink/savepoint/vfs"
)

// StateFileVersion is the version of state files this build writes.
const StateFileVersion = 1

var stateFileMagic = [8]byte{'G', 'F', 'L', 'K', 'S', 'T', 'A', 'T'}

// stateFileHeaderLen is magic plus a 4-byte version.
const stateFileHeaderLen = 12

// StateFileWriter writes a state file to w as its blocks come: a header,
// then blocks, each a payload followed by the CRC-32C of the payload.
// Offsets and lengths handed out cover payload and CRC, so a reader can
// check any block alone. Streaming keeps a checkpoint from holding its
// whole state in memory a second time.
type StateFileWriter struct {
	w    io.Writer
	size int64
	err  error
	crc  [4]byte
}

// NewStateFileWriter starts a state file on w.
func NewStateFileWriter(w io.Writer) *StateFileWriter {
	sw := &StateFileWriter{w: w}
	var h [stateFileHeaderLen]byte
	copy(h[:], stateFileMagic[:])
	binary.BigEndian.PutUint32(h[8:], StateFileVersion)
	sw.write(h[:])
	return sw
}

func (sw *StateFileWriter) write(b []byte) {
	if sw.err != nil {
		return
	}
	n, err := sw.w.Write(b)
	sw.size += int64(n)
	sw.err = err
}

// AddBlock writes a block and returns where it is; the first write error
// is kept and returned by every later call and by Err.
func (sw *StateFileWriter) AddBlock(payload []byte) (offset, length int64, err error) {
	offset = sw.size
	sw.write(payload)
	binary.BigEndian.PutUint32(sw.crc[:], crc32.Checksum(payload, castagnoli))
	sw.write(sw.crc[:])
	return offset, sw.size - offset, sw.err
}

// Err is the first write error, if any.
func (sw *StateFileWriter) Err() error { return sw.err }

// Empty reports whether no block was added.
func (sw *StateFileWriter) Empty() bool { return sw.size == stateFileHeaderLen }

// Size is the file's length so far.
func (sw *StateFileWriter) Size() int64 { return sw.size }

// StateFileBuilder assembles a state file in memory (a StateFileWriter on
// a buffer).
type StateFileBuilder struct {
	buf bytes.Buffer
	w   *StateFileWriter
}

// NewStateFileBuilder starts a state file.
func NewStateFileBuilder() *StateFileBuilder {
	b := &StateFileBuilder{}
	b.buf.Grow(4096)
	b.w = NewStateFileWriter(&b.buf)
	return b
}

// AddBlock appends a block and returns where it is.
func (b *StateFileBuilder) AddBlock(payload []byte) (offset, length int64) {
	offset, length, _ = b.w.AddBlock(payload) // a bytes.Buffer does not fail
	return offset, length
}

// Bytes returns the file's content.
func (b *StateFileBuilder) Bytes() []byte { return b.buf.Bytes() }

// Empty reports whether no block was added.
func (b *StateFileBuilder) Empty() bool { return b.w.Empty() }

// Size is the file's length so far.
func (b *StateFileBuilder) Size() int64 { return b.w.Size() }

// BlockReader reads checksummed blocks from a snapshot's state files and
// inlined handles, caching open files.
type BlockReader struct {
	FS  vfs.FS
	Dir string // the directory holding _metadata
	// files caches open state files by relative path.
	files map[string]*stateFile
}

type stateFile struct {
	f    vfs.File
	size int64
}

// Close closes the cached files.
func (r *BlockReader) Close() error {
	for _, sf := range r.files {
		sf.f.Close()
	}
	r.files = nil
	return nil
}

// Read returns the payload of the block at [offset, offset+length) of the
// handle, after checking its CRC. Offsets and lengths come from metadata
// and are checked against the data before anything is allocated.
func (r *BlockReader) Read(h *StreamStateHandle, offset, length int64) ([]byte, error) {
	if h == nil {
		return nil, fmt.Errorf("state block at %d has no stream handle: %w", offset, ErrCorrupt)
	}
	if length < 4 {
		return nil, fmt.Errorf("state block of %d bytes is too short: %w", length, ErrCorrupt)
	}
	if offset < 0 {
		return nil, fmt.Errorf("state block at negative offset %d: %w", offset, ErrCorrupt)
	}
	var block []byte
	name := "inline state"
	if h.Path == "" {
		if n := int64(len(h.Inline)); offset > n || length > n-offset {
			return nil, fmt.Errorf("inline state block [%d,+%d) is outside %d bytes: %w", offset, length, len(h.Inline), ErrCorrupt)
		}
		block = h.Inline[offset : offset+length]
	} else {
		name = filepath.Join(r.Dir, h.Path)
		sf, err := r.open(h.Path)
		if err != nil {
			return nil, err
		}
		if offset > sf.size || length > sf.size-offset {
			return nil, fmt.Errorf("state file '%s' is truncated (block at %d, %d bytes, file has %d): %w", name, offset, length, sf.size, ErrCorrupt)
		}
		block = make([]byte, length)
		if n, err := sf.f.ReadAt(block, offset); n < len(block) {
			if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("state file '%s' is truncated (block at %d, %d bytes): %w", name, offset, length, ErrCorrupt)
			}
			return nil, fmt.Errorf("read state file '%s': %w", name, err)
		}
	}
	payload := block[:len(block)-4]
	stored := binary.BigEndian.Uint32(block[len(block)-4:])
	if got := crc32.Checksum(payload, castagnoli); got != stored {
		return nil, fmt.Errorf("%s: block at offset %d failed its checksum (stored %08x, computed %08x): %w", name, offset, stored, got, ErrCorrupt)
	}
	return payload, nil
}

// FileSize returns the size of a state file of the snapshot, after
// checking its header.
func (r *BlockReader) FileSize(rel string) (int64, error) {
	sf, err := r.open(rel)
	if err != nil {
		return 0, err
	}
	return sf.size, nil
}

func (r *BlockReader) open(rel string) (*stateFile, error) {
	if sf, ok := r.files[rel]; ok {
		return sf, nil
	}
	if filepath.IsAbs(rel) || !filepath.IsLocal(rel) && !isSharedRef(rel) {
		return nil, fmt.Errorf("state file path '%s' points outside the snapshot: %w", rel, ErrCorrupt)
	}
	name := filepath.Join(r.Dir, rel)
	f, err := r.FS.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open state file: %w", err)
	}
	hdr := make([]byte, stateFileHeaderLen)
	if n, _ := f.ReadAt(hdr, 0); n < len(hdr) || [8]byte(hdr[:8]) != stateFileMagic {
		f.Close()
		return nil, fmt.Errorf("'%s' is not a gflink state file: %w", name, ErrCorrupt)
	}
	if v := binary.BigEndian.Uint32(hdr[8:]); v != StateFileVersion {
		f.Close()
		return nil, &versionError{fmt.Sprintf("state file '%s' has format version %d; this gflink reads version %d", name, v, StateFileVersion)}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat state file '%s': %w", name, err)
	}
	if r.files == nil {
		r.files = map[string]*stateFile{}
	}
	sf := &stateFile{f: f, size: fi.Size()}
	r.files[rel] = sf
	return sf, nil
}

// isSharedRef reports whether rel points into a shared/ directory: the
// job's own ("../shared/<file>"), or, for a job restored in CLAIM mode
// from another job's incremental checkpoint, that job's beside it
// ("../../<jobId>/shared/<file>"). These are the only places outside its
// own directory a checkpoint may reference.
func isSharedRef(rel string) bool {
	parts := strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/")
	switch len(parts) {
	case 3:
		return parts[0] == ".." && parts[1] == SharedDirName && isPlainName(parts[2])
	case 5:
		return parts[0] == ".." && parts[1] == ".." && isPlainName(parts[2]) && parts[3] == SharedDirName && isPlainName(parts[4])
	}
	return false
}

func isPlainName(s string) bool { return s != "" && s != "." && s != ".." }

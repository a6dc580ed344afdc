package savepoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

func crcOf(b []byte) string {
	h := savepoint.NewCRC32C()
	h.Write(b)
	return savepoint.FormatCRC32C(h.Sum32())
}

// TestNativeFileChecksum: a native file is verified, and copied for a
// restore, against the size and checksum _metadata records; a damaged or
// swapped file is refused naming it. A file recorded without a checksum
// (a snapshot written before checksums) is checked by size only.
func TestNativeFileChecksum(t *testing.T) {
	dir := t.TempDir()
	body := []byte("MANIFEST: the LSM's tables and their key ranges")
	f := savepoint.NativeFile{Name: "MANIFEST-000001", Path: "b1-MANIFEST-000001", Size: int64(len(body)), CRC32C: crcOf(body)}
	path := filepath.Join(dir, f.Path)
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyTo := func() error {
		dst := filepath.Join(t.TempDir(), f.Name)
		return savepoint.CopyNativeFile(vfs.Default, dir, f, dst)
	}
	write(body)
	if err := savepoint.VerifyNativeFile(vfs.Default, dir, f); err != nil {
		t.Fatalf("intact: %v", err)
	}
	if err := copyTo(); err != nil {
		t.Fatalf("copy intact: %v", err)
	}
	flipped := []byte(string(body))
	flipped[7] ^= 0x01
	write(flipped)
	for what, err := range map[string]error{"verify": savepoint.VerifyNativeFile(vfs.Default, dir, f), "copy": copyTo()} {
		var ce *savepoint.ChecksumError
		if !errors.As(err, &ce) || !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "_metadata recorded "+f.CRC32C) {
			t.Errorf("%s a flipped file: %v; want a checksum error naming it", what, err)
		}
	}
	write(append(body, '!'))
	for what, err := range map[string]error{"verify": savepoint.VerifyNativeFile(vfs.Default, dir, f), "copy": copyTo()} {
		if !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s a longer file: %v; want a refusal naming it", what, err)
		}
	}
	write(body[:10])
	if err := copyTo(); !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), "has 10 bytes, _metadata records") {
		t.Errorf("copy a shorter file: %v", err)
	}
	// Without a checksum, only the size is checked.
	old := f
	old.CRC32C = ""
	write(flipped)
	if err := savepoint.VerifyNativeFile(vfs.Default, dir, old); err != nil {
		t.Errorf("a file recorded without a checksum, of its size: %v", err)
	}
	// A malformed checksum is a damaged _metadata.
	bad := f
	bad.CRC32C = "0123456g"
	write(body)
	if err := savepoint.VerifyNativeFile(vfs.Default, dir, bad); !errors.Is(err, savepoint.ErrCorrupt) {
		t.Errorf("a malformed checksum: %v", err)
	}
}

func TestParseCRC32C(t *testing.T) {
	for in, want := range map[string]struct {
		sum     uint32
		ok, err bool
	}{
		"":          {},
		"0badf00d":  {sum: 0x0badf00d, ok: true},
		"FFFFFFFF":  {sum: 0xffffffff, ok: true},
		"badf00d":   {err: true},
		"0badf00d0": {err: true},
		"-0000001":  {err: true},
		"+0000001":  {err: true},
		"0x000001":  {err: true},
	} {
		sum, ok, err := savepoint.ParseCRC32C(in)
		if sum != want.sum || ok != want.ok || (err != nil) != want.err {
			t.Errorf("ParseCRC32C(%q) = %x, %v, %v; want %x, %v, error %v", in, sum, ok, err, want.sum, want.ok, want.err)
		}
	}
	if s := savepoint.FormatCRC32C(0xabc); s != "00000abc" {
		t.Errorf("FormatCRC32C(0xabc) = %q", s)
	}
}

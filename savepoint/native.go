package savepoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gflink/gflink/savepoint/vfs"
)

// NativeFilePath returns where a native file of the snapshot in dir is: in
// dir, or in the job's shared/ directory beside it. Any other path is
// refused: _metadata may be crafted.
func NativeFilePath(dir string, f NativeFile) (string, error) {
	rel := f.Path
	if filepath.IsAbs(rel) || !filepath.IsLocal(rel) && !isSharedRef(rel) {
		return "", fmt.Errorf("native state file path '%s' points outside the snapshot: %w", rel, ErrCorrupt)
	}
	return filepath.Join(dir, rel), nil
}

// VerifyNativeFile checks that a native file is there with the size and
// checksum _metadata records (a file recorded without a checksum, by a
// build before checksums, is checked by size only).
func VerifyNativeFile(fsys vfs.FS, dir string, f NativeFile) error {
	p, err := NativeFilePath(dir, f)
	if err != nil {
		return err
	}
	info, err := fsys.Stat(p)
	if err != nil {
		return fmt.Errorf("native state file %s: %w", p, err)
	}
	if info.Size() != f.Size {
		return fmt.Errorf("native state file %s has %d bytes, _metadata records %d: %w", p, info.Size(), f.Size, ErrCorrupt)
	}
	if f.CRC32C == "" {
		return nil
	}
	in, err := fsys.Open(p)
	if err != nil {
		return fmt.Errorf("open native state file: %w", err)
	}
	defer in.Close()
	cr, err := newCheckedReader(in, p, f.Size, f.CRC32C)
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		if errors.Is(err, ErrCorrupt) {
			return err
		}
		return fmt.Errorf("read native state file %s: %w", p, err)
	}
	return cr.check()
}

// CopyNativeFile copies a native file of the snapshot in dir to dst on the
// local disk (where an LSM opens it), checking its size and checksum as
// it copies: the file may have changed since the snapshot was verified.
func CopyNativeFile(fsys vfs.FS, dir string, f NativeFile, dst string) error {
	p, err := NativeFilePath(dir, f)
	if err != nil {
		return err
	}
	in, err := fsys.Open(p)
	if err != nil {
		return fmt.Errorf("open native state file: %w", err)
	}
	defer in.Close()
	cr, err := newCheckedReader(in, p, f.Size, f.CRC32C)
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, cr)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return err
		}
		return fmt.Errorf("copy native state file %s: %w", p, err)
	}
	return cr.check()
}

// RemoveSharedFile deletes a file of a job's shared/ directory that no
// retained checkpoint refers to any more. It deletes only a regular file
// directly in a directory named shared, reached without symbolic links.
func RemoveSharedFile(fsys vfs.FS, path string) error {
	if filepath.Base(filepath.Dir(path)) != SharedDirName {
		return fmt.Errorf("refusing to delete %s: not in a %s/ directory", path, SharedDirName)
	}
	info, err := fsys.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("refusing to delete %s: not a regular file", path)
	}
	return fsys.RemoveBeneath(filepath.Dir(path), filepath.Base(path))
}

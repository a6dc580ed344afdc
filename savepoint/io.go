package savepoint

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/gflink/gflink/savepoint/vfs"
)

// WriteMetadata writes dir/_metadata atomically (temporary file, fsync,
// rename, fsync of the directory). It is the last write of a snapshot: until
// it is done, the directory is not a snapshot.
func WriteMetadata(fsys vfs.FS, dir string, m *Metadata) error {
	data, err := EncodeMetadata(m)
	if err != nil {
		return err
	}
	name := filepath.Join(dir, MetadataFileName)
	_, statErr := fsys.Stat(name)
	existed := !errors.Is(statErr, fs.ErrNotExist)
	if err := vfs.WriteFileAtomic(fsys, name, data); err != nil {
		// A failure after the rename (fsync of the directory) would leave a
		// _metadata behind although the snapshot is reported failed; a
		// later restore would then take it for complete. Remove it, unless
		// it was there before this call.
		if !existed {
			fsys.Remove(name)
		}
		return fmt.Errorf("write %s: %w", MetadataFileName, err)
	}
	return nil
}

// ReadMetadata reads and checks a _metadata file.
func ReadMetadata(fsys vfs.FS, file string) (*Metadata, error) {
	data, err := vfs.ReadFile(fsys, file)
	if err != nil {
		return nil, err
	}
	return DecodeMetadata(data, file)
}

// Discard deletes a snapshot directory written by gflink: _metadata first
// (so that a crash half-way never leaves a directory that looks complete but
// lacks state), then the state files it references, then the directory,
// which is removed only if nothing else is left in it. Files in shared/ are
// not touched: their owner is the job, not the snapshot.
func Discard(fsys vfs.FS, dir string, m *Metadata) error {
	var errs []error
	if err := fsys.Remove(filepath.Join(dir, MetadataFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("discard %s: %w", dir, err)
	}
	if m != nil {
		for _, rel := range m.Files() {
			if !filepath.IsLocal(rel) {
				continue
			}
			if err := fsys.Remove(filepath.Join(dir, rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := fsys.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		left, _ := fsys.ReadDir(dir)
		names := make([]string, 0, len(left))
		for _, e := range left {
			names = append(names, e.Name())
		}
		if len(names) == 0 {
			errs = append(errs, fmt.Errorf("discard %s: %w", dir, err))
		} else {
			errs = append(errs, fmt.Errorf("directory %s still holds files gflink did not write (%s), so it was left in place", dir, strings.Join(names, ", ")))
		}
	}
	return errors.Join(errs...)
}

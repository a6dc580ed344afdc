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
	if err := vfs.WriteFileAtomicPerm(fsys, name, data, vfs.PrivateFileMode); err != nil {
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
//
// The metadata may be crafted (disposal takes any path a user names), so
// nothing it names is trusted: every entry is checked before anything is
// deleted, and an entry that leaves dir — an absolute path, "..", or a
// symbolic link anywhere on its way — refuses the whole disposal, naming the
// entry. Removal itself resolves names beneath dir only (RemoveBeneath), so
// a directory swapped for a symbolic link after the check cannot redirect it.
func Discard(fsys vfs.FS, dir string, m *Metadata) error {
	if info, err := fsys.Lstat(dir); err == nil && info.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("discard %s: it is a symbolic link; name the snapshot directory itself", dir)
	}
	var files []string
	if m != nil {
		for _, rel := range m.Files() {
			if isSharedRef(rel) && !filepath.IsAbs(rel) {
				continue // the job's, not the snapshot's
			}
			if err := checkBeneath(fsys, dir, rel); err != nil {
				return fmt.Errorf("refusing to discard %s: its _metadata names the state file '%s', which %v; nothing was deleted", dir, rel, err)
			}
			files = append(files, filepath.Clean(rel))
		}
	}
	var errs []error
	if err := fsys.RemoveBeneath(dir, MetadataFileName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("discard %s: %w", dir, err)
	}
	for _, rel := range files {
		if err := fsys.RemoveBeneath(dir, rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
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

// checkBeneath checks that rel names a regular file (or nothing) inside dir
// reached without a symbolic link: each element is looked at with Lstat.
func checkBeneath(fsys vfs.FS, dir, rel string) error {
	if filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
		return errors.New("points outside the snapshot directory")
	}
	parts := strings.Split(filepath.Clean(rel), string(filepath.Separator))
	p := dir
	for i, part := range parts {
		p = filepath.Join(p, part)
		info, err := fsys.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // already gone: nothing to delete
		}
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("goes through the symbolic link %s", p)
		case i < len(parts)-1 && !info.IsDir():
			return fmt.Errorf("goes through %s, which is not a directory", p)
		case i == len(parts)-1 && !info.Mode().IsRegular():
			return fmt.Errorf("is not a regular file (%s)", info.Mode().Type())
		}
	}
	return nil
}

package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// NotPrivateError says why a directory or file that decides what gflink
// runs, or holds a secret, cannot be trusted: another local user could
// replace or read what is in it.
type NotPrivateError struct {
	What, Path, Reason, Fix string
}

func (e *NotPrivateError) Error() string {
	return fmt.Sprintf("Refusing %s %s: %s. %s", e.What, e.Path, e.Reason, e.Fix)
}

// CheckPrivate checks that name — a directory or file gflink made for this
// user — is owned by the user and writable by nobody else, without
// following a symbolic link in its last element: a link could point it
// anywhere. what names it in the error ("the job registry directory").
func CheckPrivate(fsys FS, name, what string) error {
	info, err := fsys.Lstat(name)
	if err != nil {
		return err
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return &NotPrivateError{What: what, Path: name, Reason: "it is a symbolic link",
			Fix: "Replace it with a directory of your own, or point the setting at the link's target."}
	}
	return checkOwnedAndClosed(info, name, what, false)
}

// CheckSecret is CheckPrivate for a file that holds a secret: nobody else
// may read it either.
func CheckSecret(fsys FS, name, what string) error {
	if err := CheckPrivate(fsys, name, what); err != nil {
		return err
	}
	info, err := fsys.Lstat(name)
	if err != nil {
		return err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return &NotPrivateError{What: what, Path: name,
			Reason: fmt.Sprintf("it is readable by group or others (%s), and it holds a secret", info.Mode()),
			Fix:    fmt.Sprintf("Run chmod 600 %s, and consider the secret known to others.", name)}
	}
	return nil
}

// CheckParent checks a directory that holds gflink's private directories
// (GFLINK_HOME, high-availability.storageDir): owned by this user or by
// root, and not writable by others unless it is sticky (as /tmp is: there
// nobody can rename or delete another user's entries). A symbolic link is
// followed: the user may point the setting at one.
func CheckParent(fsys FS, name, what string) error {
	info, err := fsys.Stat(name)
	if err != nil {
		return err
	}
	return checkOwnedAndClosed(info, name, what, true)
}

func checkOwnedAndClosed(info fs.FileInfo, name, what string, parent bool) error {
	me := uint32(os.Geteuid())
	if uid, ok := owner(info); ok && uid != me && !(parent && uid == 0) {
		return &NotPrivateError{What: what, Path: name,
			Reason: fmt.Sprintf("it belongs to uid %d, not to you (uid %d), so its owner decides what is in it", uid, me),
			Fix:    "Use a directory of your own (or chown it to yourself)."}
	}
	mode := info.Mode()
	if mode.Perm()&0o022 == 0 || parent && mode&fs.ModeSticky != 0 {
		return nil
	}
	return &NotPrivateError{What: what, Path: name,
		Reason: fmt.Sprintf("it is writable by group or others (%s), so another local user could replace what gflink reads there", mode),
		Fix:    fmt.Sprintf("Run chmod go-w %s.", name)}
}

// ReadRegularFile reads name only if it is a regular file: a FIFO, a
// device or a symbolic link in its place is refused rather than opened,
// since opening a FIFO blocks until someone writes to it (a command that
// read one would hang). On the operating system's filesystem the file is
// also opened without blocking and checked again once open, in case it was
// replaced in between.
func ReadRegularFile(fsys FS, name string) ([]byte, error) {
	info, err := fsys.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("not a regular file (%s)", info.Mode().Type())}
	}
	if _, ok := fsys.(osFS); !ok {
		return ReadFile(fsys, name)
	}
	f, err := openNonBlocking(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("not a regular file")}
	}
	return io.ReadAll(f)
}

// CheckOwned checks that a directory the user chose for gflink's private
// files (GFLINK_HOME) is theirs and writable by nobody else. A symbolic
// link is followed: the user may point the setting at one.
func CheckOwned(fsys FS, name, what string) error {
	info, err := fsys.Stat(name)
	if err != nil {
		return err
	}
	return checkOwnedAndClosed(info, name, what, false)
}

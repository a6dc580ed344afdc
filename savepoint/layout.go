package savepoint

import (
	"crypto/rand"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gflink/gflink/savepoint/vfs"
)

// Directory names of Flink's checkpoint layout:
//
//	<checkpoint-dir>/<jobId>/chk-<n>/_metadata
//	<checkpoint-dir>/<jobId>/shared/
//	<checkpoint-dir>/<jobId>/taskowned/
//	<savepoint-dir>/savepoint-<jobId[:6]>-<12 hex>/_metadata
const (
	CheckpointDirPrefix = "chk-"
	SharedDirName       = "shared"
	TaskOwnedDirName    = "taskowned"
	SavepointDirPrefix  = "savepoint-"
)

// JobCheckpointDir is <base>/<jobId>.
func JobCheckpointDir(base, jobID string) string { return filepath.Join(base, jobID) }

// CheckpointDir is <jobDir>/chk-<id>.
func CheckpointDir(jobDir string, id int64) string {
	return filepath.Join(jobDir, CheckpointDirPrefix+strconv.FormatInt(id, 10))
}

// ParseCheckpointDirName returns n for a directory named chk-<n>.
func ParseCheckpointDirName(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, CheckpointDirPrefix)
	if !ok || s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

// IsSavepointDirName reports whether name looks like savepoint-xxxxxx-yyyyyyyyyyyy.
func IsSavepointDirName(name string) bool {
	rest, ok := strings.CutPrefix(name, SavepointDirPrefix)
	if !ok {
		return false
	}
	job, random, ok := strings.Cut(rest, "-")
	return ok && len(job) <= 6 && len(random) == 12 && isHex(job) && isHex(random)
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// NewSavepointDir creates <target>/savepoint-<jobId[:6]>-<12 random hex>,
// trying up to ten names, as Flink does.
func NewSavepointDir(fsys vfs.FS, target, jobID string) (string, error) {
	prefix := jobID
	if len(prefix) > 6 {
		prefix = prefix[:6]
	}
	// Owner-only, as every snapshot file and directory: a job's state is
	// its user's.
	if err := fsys.MkdirAll(target, vfs.PrivateDirMode); err != nil {
		return "", fmt.Errorf("Failed to create savepoint directory at %s: %w", target, err)
	}
	for attempt := 0; attempt < 10; attempt++ {
		dir := filepath.Join(target, SavepointDirPrefix+prefix+"-"+randomHex(12))
		if _, err := fsys.Stat(dir); err == nil {
			continue
		}
		if err := fsys.MkdirAll(dir, vfs.PrivateDirMode); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("Failed to create savepoint directory at %s", target)
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return fmt.Sprintf("%x", b)[:n]
}

// LocalPath turns a checkpoint/savepoint pointer written as a plain path or
// a file: URI (file:/x, file:///x, file://localhost/x) into an absolute
// local path. Other schemes are refused: gflink's storage is the local
// filesystem. As in Flink's Path, everything after the authority of a file:
// URI is the path, '?' and '#' included; %XX escapes are decoded.
func LocalPath(ptr string) (string, error) {
	if ptr == "" {
		return "", fmt.Errorf("empty checkpoint pointer")
	}
	return localPath(ptr, "checkpoint/savepoint path", " Either the pointer path is invalid, or the checkpoint was created by a different state backend.")
}

// FilePath is LocalPath for any path a user gives (a job's --input or
// --output): a plain path or a file: URI, as an absolute local path. what
// names the argument in errors.
func FilePath(p, what string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s is empty", what)
	}
	return localPath(p, what, "")
}

func localPath(ptr, what, hint string) (string, error) {
	What := strings.ToUpper(what[:1]) + what[1:]
	invalid := func() error {
		return fmt.Errorf("%s '%s' is not a valid file URI.%s", What, ptr, hint)
	}
	p := ptr
	if i := strings.Index(ptr, ":"); i > 1 && !strings.ContainsAny(ptr[:i], `/\`) {
		if !strings.EqualFold(ptr[:i], "file") {
			u, err := url.Parse(ptr)
			if err != nil {
				return "", invalid()
			}
			return "", fmt.Errorf("Cannot access file system for %s '%s': gflink reads local paths and file: URIs, not the '%s' scheme.", what, ptr, u.Scheme)
		}
		p = ptr[i+1:]
		if rest, ok := strings.CutPrefix(p, "//"); ok {
			host, path, found := strings.Cut(rest, "/")
			if host != "" && !strings.EqualFold(host, "localhost") {
				return "", fmt.Errorf("%s '%s' is not a valid file URI: it names host '%s'; use file:/path or file:///path.", What, ptr, host)
			}
			p = ""
			if found {
				p = "/" + path
			}
		}
		p = unescapePath(p)
		if p == "" {
			return "", invalid()
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("Cannot access file system for %s '%s'.", what, ptr)
	}
	return abs, nil
}

// unescapePath decodes the %XX escapes of a URI path; a '%' not followed by
// two hex digits is kept as it is.
func unescapePath(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHexDigit(s[i+1]) && isHexDigit(s[i+2]) {
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			b.WriteByte(byte(v))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// URI renders a local path the way Flink prints locations: file:/abs/path.
// A '%' that would read as an escape is written as %25, so that LocalPath
// turns the URI back into the same path.
func URI(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	abs = filepath.ToSlash(abs)
	if strings.Contains(abs, "%") {
		var b strings.Builder
		for i := 0; i < len(abs); i++ {
			if abs[i] == '%' && i+2 < len(abs) && isHexDigit(abs[i+1]) && isHexDigit(abs[i+2]) {
				b.WriteString("%25")
				continue
			}
			b.WriteByte(abs[i])
		}
		abs = b.String()
	}
	return "file:" + abs
}

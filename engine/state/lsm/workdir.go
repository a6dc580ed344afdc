package lsm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// dirPrefix names a job's working directory under the local directory.
const dirPrefix = "gflink-lsm-"

// JobDir is one running job's working directory for its subtasks' stores,
// <localdir>/gflink-lsm-<jobId>-<nonce>. The process holds an exclusive
// lock on its LOCK file for as long as the job runs, so that the next
// process to start can tell the directory of a killed one (its lock is
// free) from one in use, and remove it.
type JobDir struct {
	path string
	lock *os.File
}

// NewJobDir removes the stale working directories under root (those whose
// lock no process holds) and creates a new one for jobID. It returns the
// directories it removed.
func NewJobDir(root, jobID string) (*JobDir, []string, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create state.backend.rocksdb.localdir %s: %w", root, err)
	}
	removed, err := removeStale(root)
	if err != nil {
		return nil, removed, err
	}
	var nonce [4]byte
	rand.Read(nonce[:])
	path := filepath.Join(root, dirPrefix+jobID+"-"+hex.EncodeToString(nonce[:]))
	if err := os.Mkdir(path, 0o700); err != nil {
		return nil, removed, fmt.Errorf("create the job's LSM working directory: %w", err)
	}
	lock, err := lockDir(path)
	if err != nil {
		os.RemoveAll(path)
		return nil, removed, err
	}
	return &JobDir{path: path, lock: lock}, removed, nil
}

// Path is the job's working directory.
func (d *JobDir) Path() string { return d.path }

// SubtaskDir is the working directory of one subtask's store in one
// attempt (a restarted attempt opens a new store from its checkpoint).
func (d *JobDir) SubtaskDir(uid string, subtask, attempt int) string {
	return filepath.Join(d.path, fmt.Sprintf("op_%s_%d_attempt_%d", sanitize(uid), subtask, attempt))
}

// SnapshotDir is where one subtask's store writes its files for snapshot
// id, before they are uploaded (removed then).
func (d *JobDir) SnapshotDir(uid string, subtask, attempt int, id int64) string {
	return fmt.Sprintf("%s-chk-%d", d.SubtaskDir(uid, subtask, attempt), id)
}

// sanitize keeps a uid usable as a path element.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == 0 {
			return '_'
		}
		return r
	}, s)
}

// Close removes the working directory and releases its lock.
func (d *JobDir) Close() error {
	err := os.RemoveAll(d.path)
	return errors.Join(err, d.lock.Close())
}

func removeStale(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read state.backend.rocksdb.localdir %s: %w", root, err)
	}
	var removed []string
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
			continue
		}
		p := filepath.Join(root, e.Name())
		lock, err := lockDir(p)
		if err != nil {
			continue // in use by a running job (or not ours to judge)
		}
		if err := os.RemoveAll(p); err == nil {
			removed = append(removed, p)
		}
		lock.Close()
	}
	return removed, nil
}

// Package jobregistry is the registry of the jobs this user runs:
// $GFLINK_HOME/jobs/<jobId>.json tells `gflink savepoint <jobId>` (and
// stop, cancel, list, checkpoint) which process runs a job, where its REST
// endpoint is, and the secret token that endpoint requires. Flink's client
// asks its cluster; gflink's jobs are processes, and this directory is
// their cluster.
//
// The entries hold tokens, so the directory is owner-only (0700) and every
// entry 0600: only the job's user can operate the job. An entry is still
// checked before it is used (Check), since a GFLINK_HOME may be shared or
// an entry left behind by a process whose pid was reused.
package jobregistry

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gflink/gflink/savepoint/vfs"
)

// Entry is a job's registration under $GFLINK_HOME/jobs/<jobId>.json: how
// to reach the process that runs it, and its latest state. A process
// writes it when its job starts, rewrites it at every status change, and
// leaves it with the final state when the job ends, so that `list -a`
// shows finished jobs.
type Entry struct {
	JobID            string `json:"jid"`
	Name             string `json:"name"`
	PID              int    `json:"pid"`
	Address          string `json:"address"`
	StartTime        int64  `json:"start-time"`
	EndTime          int64  `json:"end-time"`
	State            string `json:"state"`
	LastModification int64  `json:"last-modification"`
	Log              string `json:"log,omitempty"`
	// CheckpointDir is <execution.checkpointing.dir>/<jobId>, where the
	// job's checkpoints are (and stay, when retained, after it ended).
	CheckpointDir string `json:"checkpoint-dir,omitempty"`
	// Savepoints are the file: URIs of the savepoints the job took, newest
	// last: they are the user's and lie anywhere, so `checkpoints <jobId>`
	// finds them here after the job has ended.
	Savepoints []string `json:"savepoints,omitempty"`
	// Token is the secret every request to the job's REST endpoint must
	// carry (Authorization: Bearer <token>); empty when the job runs with
	// rest.authentication.enabled: false.
	Token string `json:"token,omitempty"`
	// Executable is the job process's executable (os.Executable), which
	// Check compares with /proc/<pid>/exe: a reused pid is not the job.
	Executable string `json:"executable,omitempty"`
}

// Terminal reports whether the entry's job has ended.
func (e *Entry) Terminal() bool {
	return e.State == "FINISHED" || e.State == "FAILED" || e.State == "CANCELED"
}

// Registry is the directory of entries.
type Registry struct {
	Dir string // $GFLINK_HOME/jobs
	FS  vfs.FS
	// Expiration is how long List keeps the entry of a job that has ended
	// (or whose process died) after its end (jobstore.expiration-time);
	// 0 keeps them for good, up to MaxEnded.
	Expiration time.Duration
	// MaxEnded is how many ended jobs List keeps (jobstore.max-capacity).
	MaxEnded int
	// Warn, when set, is told of entries List skips.
	Warn func(string)
	// Alive reports whether a process exists (overridable in tests).
	Alive func(pid int) bool
	// Executable returns the executable a process runs, or an error when
	// it cannot be read, as for another user's process (overridable in
	// tests).
	Executable func(pid int) (string, error)
}

// staleWrite is the age from which a temporary file of an atomic write
// is taken as left over by a killed process.
const staleWrite = time.Minute

// DefaultMaxEnded is how many ended jobs are kept for `list -a` unless
// configured (jobstore.max-capacity).
const DefaultMaxEnded = 200

// NewRegistry opens the registry of a gflink home directory.
func NewRegistry(home string) *Registry {
	return &Registry{Dir: filepath.Join(home, "jobs"), FS: vfs.Default, Alive: processAlive, Executable: processExecutable, MaxEnded: DefaultMaxEnded}
}

// validJobID is what a registered job id looks like: the file name of
// its entry is built from it.
var validJobID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// ValidJobID reports whether id is a job id as gflink writes them (32
// lower-case hexadecimal digits).
func ValidJobID(id string) bool { return validJobID.MatchString(id) }

// Trusted checks that nobody but this user can change the registry:
// GFLINK_HOME and its jobs directory (where they exist) must be the user's
// and writable by nobody else. The entries decide where commands send the
// job's token and what they delete.
func (r *Registry) Trusted() error {
	home := filepath.Dir(r.Dir)
	if err := vfs.CheckOwned(r.FS, home, "GFLINK_HOME"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r.untrusted(err)
	}
	if err := vfs.CheckPrivate(r.FS, r.Dir, "the job registry directory"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r.untrusted(err)
	}
	return nil
}

func (r *Registry) untrusted(err error) error {
	var np *vfs.NotPrivateError
	if errors.As(err, &np) {
		np.Fix += " Or set GFLINK_HOME to a directory of your own (default ~/.gflink)."
		return np
	}
	return err
}

// processExecutable reads /proc/<pid>/exe. The kernel lets only the
// process's owner (or root) read it, so this also tells another user's
// process apart.
func processExecutable(pid int) (string, error) {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	// A binary replaced on disk (go build, an upgrade) reads as "<path>
	// (deleted)"; the process is still the one that registered.
	return strings.TrimSuffix(exe, " (deleted)"), err
}

// SelfExecutable is what a job process records as its Executable.
func SelfExecutable() string {
	exe, err := processExecutable(os.Getpid())
	if err != nil {
		exe, _ = os.Executable()
	}
	return exe
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A process killed (kill -9) but not yet reaped by its parent is a
	// zombie: signal 0 reaches it, yet it runs nothing. A parent that
	// never reaps (a script's subshell, a container without an init)
	// keeps it so for good.
	return !zombie(pid)
}

// zombie reports whether /proc says the process has exited (state Z or X,
// the field after the command name in parentheses, which may itself hold
// spaces and parentheses). Without /proc it cannot tell: not a zombie.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	st := b[i+2]
	return st == 'Z' || st == 'X'
}

// runs reports whether e's process still runs the job: it is alive, and
// (when /proc tells) runs the executable the entry records. A pid reused by
// another program or another user's process means the job's process died.
func (r *Registry) runs(e *Entry) bool {
	if !r.Alive(e.PID) {
		return false
	}
	if e.Executable == "" {
		return true // Check refuses it, naming why
	}
	exe, err := r.Executable(e.PID)
	switch {
	case err == nil:
		return exe == e.Executable
	case errors.Is(err, fs.ErrPermission):
		return false // another user's process
	}
	return true // cannot tell (no /proc): Check decides
}

func (r *Registry) path(jobID string) string { return filepath.Join(r.Dir, jobID+".json") }

// Put writes an entry atomically, owner-only: it holds the job's token.
func (r *Registry) Put(e Entry) error {
	if !ValidJobID(e.JobID) {
		return fmt.Errorf("register job: %q is not a job id (32 lower-case hexadecimal digits)", e.JobID)
	}
	if err := r.Trusted(); err != nil {
		return fmt.Errorf("register job: %w", err)
	}
	if err := r.FS.MkdirAll(r.Dir, vfs.PrivateDirMode); err != nil {
		return fmt.Errorf("register job: %w", err)
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomicPerm(r.FS, r.path(e.JobID), b, vfs.PrivateFileMode); err != nil {
		return fmt.Errorf("register job: %w", err)
	}
	return nil
}

// Get reads one entry; the unfinished entry of a process that died (its
// pid gone, a zombie, or reused by another program) is retired to lostDir
// and reported as not found.
func (r *Registry) Get(jobID string) (*Entry, error) {
	if !ValidJobID(jobID) {
		return nil, fmt.Errorf("%q is not a job id: %w", jobID, fs.ErrNotExist)
	}
	if err := r.Trusted(); err != nil {
		return nil, err
	}
	b, err := vfs.ReadRegularFile(r.FS, r.path(jobID))
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		e, err := r.decode(jobID, b)
		if err != nil {
			return nil, err
		}
		if e.Terminal() || r.runs(e) {
			return e, nil
		}
		// The process was found dead after its entry was read: it may
		// have written its final status in between (a job that finished
		// and exited). A dead process writes no more, so a second read
		// tells; retiring what the first read said would throw away a
		// FINISHED entry and report the job lost.
		again, err := vfs.ReadRegularFile(r.FS, r.path(jobID))
		if err != nil {
			return nil, err
		}
		if bytes.Equal(again, b) {
			r.retire(jobID, *e)
			return nil, fs.ErrNotExist
		}
		if attempt == 2 {
			// Still being rewritten: not retired on a version that was
			// never checked; the next reader looks again.
			return nil, fs.ErrNotExist
		}
		b = again // rewritten: by the process before it died, or by another (high availability)
	}
}

// decode parses the entry of jobID's file: its jid must be the file's, as
// every path built from an entry is built from the file name.
func (r *Registry) decode(jobID string, b []byte) (*Entry, error) {
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("job registry entry %s: %w", r.path(jobID), err)
	}
	if e.JobID != jobID {
		return nil, &ForgedEntryError{JobID: jobID, File: r.path(jobID), Reason: fmt.Sprintf("its jid %q is not the job id of its file name", e.JobID)}
	}
	return &e, nil
}

// lostDir keeps the entries of processes that died without ending their
// job: out of every listing, but their checkpoint directory stays known,
// so that `checkpoints <jobId>` finds what a killed job left.
func (r *Registry) lostDir() string { return filepath.Join(r.Dir, "lost") }

// retire moves a dead process's entry (of jobID's file) out of the
// registry into lostDir, keeping the newest MaxEnded there.
func (r *Registry) retire(jobID string, e Entry) {
	if err := r.FS.MkdirAll(r.lostDir(), vfs.PrivateDirMode); err == nil {
		if b, err := json.MarshalIndent(e, "", "  "); err == nil {
			vfs.WriteFileAtomicPerm(r.FS, filepath.Join(r.lostDir(), jobID+".json"), b, vfs.PrivateFileMode)
		}
	}
	r.FS.Remove(r.path(jobID))
	des, err := r.FS.ReadDir(r.lostDir())
	if err != nil || len(des) <= r.maxEnded() {
		return
	}
	type aged struct {
		name string
		mod  int64
	}
	var all []aged
	for _, de := range des {
		if info, err := de.Info(); err == nil {
			all = append(all, aged{de.Name(), info.ModTime().UnixNano()})
		}
	}
	slices.SortStableFunc(all, func(a, b aged) int { return cmp.Compare(a.mod, b.mod) })
	for _, a := range all[:max(len(all)-r.maxEnded(), 0)] {
		r.FS.Remove(filepath.Join(r.lostDir(), a.name))
	}
}

// Lost returns the entry of a job whose process died without ending it
// (see lostDir), or an error wrapping fs.ErrNotExist.
func (r *Registry) Lost(jobID string) (*Entry, error) {
	if !ValidJobID(jobID) {
		return nil, fmt.Errorf("%q is not a job id: %w", jobID, fs.ErrNotExist)
	}
	if err := r.Trusted(); err != nil {
		return nil, err
	}
	b, err := vfs.ReadRegularFile(r.FS, filepath.Join(r.lostDir(), jobID+".json"))
	if err != nil {
		return nil, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("lost job entry %s: %w", jobID, err)
	}
	if e.JobID != jobID {
		return nil, fmt.Errorf("lost job entry %s: its jid %q is not the job id of its file name: %w", jobID, e.JobID, fs.ErrNotExist)
	}
	return &e, nil
}

func (r *Registry) maxEnded() int {
	if r.MaxEnded <= 0 {
		return DefaultMaxEnded
	}
	return r.MaxEnded
}

// List returns every entry, oldest first. Entries of processes that died
// without ending their job are retired (see lostDir); ended jobs are kept
// for Expiration after their end and at most MaxEnded of them. A file
// that is not a regular file named <job id>.json, or whose jid is not its
// name's, is skipped (and reported to Warn): nothing path-like is ever
// listed or built into a path.
func (r *Registry) List() ([]Entry, error) {
	if err := r.Trusted(); err != nil {
		return nil, err
	}
	des, err := r.FS.ReadDir(r.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".inprogress") {
			// An atomic write's temporary file: one a process was killed in
			// the middle of writing stays, holding the job's token. A
			// write takes milliseconds, so one a minute old is left over.
			if info, err := de.Info(); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) > staleWrite {
				r.FS.Remove(filepath.Join(r.Dir, name))
			}
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || de.IsDir() {
			continue
		}
		if !ValidJobID(id) {
			r.warn(fmt.Sprintf("Ignoring %s in the job registry: %q is not a job id.", filepath.Join(r.Dir, name), id))
			continue
		}
		e, err := r.Get(id)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				r.warn(fmt.Sprintf("Ignoring the job registry entry %s: %v", filepath.Join(r.Dir, name), err))
			}
			continue
		}
		out = append(out, *e)
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return cmp.Compare(a.StartTime, b.StartTime) })
	drop := r.expired(out)
	out = slices.DeleteFunc(out, func(e Entry) bool { return drop[e.JobID] && r.removeIfUnchanged(e) })
	r.expireLost()
	return out, nil
}

// removeIfUnchanged removes e's file if it still holds e: a job may have
// registered again under the same id since it was read (high availability
// and pipeline.job-id reuse ids), and its new entry must stay.
func (r *Registry) removeIfUnchanged(e Entry) bool {
	b, err := vfs.ReadRegularFile(r.FS, r.path(e.JobID))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	now, err := r.decode(e.JobID, b)
	if err != nil || !reflect.DeepEqual(*now, e) {
		return false
	}
	return r.FS.Remove(r.path(e.JobID)) == nil
}

func (r *Registry) warn(msg string) {
	if r.Warn != nil {
		r.Warn(msg)
	}
}

// ended is when an entry's job ended: its end time, else its last
// status change; false when the entry says neither.
func (e *Entry) ended() (time.Time, bool) {
	switch {
	case e.EndTime > 0:
		return time.UnixMilli(e.EndTime), true
	case e.LastModification > 0:
		return time.UnixMilli(e.LastModification), true
	}
	return time.Time{}, false
}

// expired picks the ended jobs beyond MaxEnded (the oldest) and those that
// ended more than Expiration ago.
func (r *Registry) expired(entries []Entry) map[string]bool {
	drop := map[string]bool{}
	var ended []Entry
	for _, e := range entries {
		if e.Terminal() {
			ended = append(ended, e)
		}
	}
	for i, e := range ended {
		at, known := e.ended()
		if i < len(ended)-r.maxEnded() || r.Expiration > 0 && known && time.Since(at) > r.Expiration {
			drop[e.JobID] = true
		}
	}
	return drop
}

// expireLost removes the entries of lost jobs older than Expiration.
func (r *Registry) expireLost() {
	if r.Expiration <= 0 {
		return
	}
	des, err := r.FS.ReadDir(r.lostDir())
	if err != nil {
		return
	}
	for _, de := range des {
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) > r.Expiration {
			r.FS.Remove(filepath.Join(r.lostDir(), de.Name()))
		}
	}
}

// Clear removes the entries of every job that is not running — ended
// ones, and those of processes that died (lost) — and returns their ids.
func (r *Registry) Clear() ([]string, error) {
	entries, err := r.List()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.Terminal() && r.removeIfUnchanged(e) {
			ids = append(ids, e.JobID)
		}
	}
	des, _ := r.FS.ReadDir(r.lostDir())
	for _, de := range des {
		if id, ok := strings.CutSuffix(de.Name(), ".json"); ok && ValidJobID(id) {
			if err := r.FS.Remove(filepath.Join(r.lostDir(), de.Name())); err == nil {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// Home returns $GFLINK_HOME, default ~/.gflink.
func Home(getenv func(string) string) string {
	if h := getenv("GFLINK_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".gflink")
	}
	return ".gflink"
}

// StatusRank orders statuses so that a registry entry never goes back from
// a terminal status to an earlier one when updates race.
func StatusRank(s string) int {
	switch s {
	case "FINISHED", "FAILED", "CANCELED":
		return 2
	case "":
		return 0
	}
	return 1
}

// ForgedEntryError says why a registry entry cannot be trusted.
type ForgedEntryError struct {
	JobID, File, Reason string
}

func (e *ForgedEntryError) Error() string {
	return fmt.Sprintf("Refusing the registry entry of job %s (%s): %s. Remove the file if the job is gone, or use -m host:port with --token.", e.JobID, e.File, e.Reason)
}

// Check verifies, before a command acts on it, that a running job's entry
// describes a gflink process of this user on this machine: its process
// runs the executable the entry records (a dead pid, a reused one, or a
// process of another program or user fails), and its address is on this
// machine. Whether the endpoint serves the entry's job is the caller's
// check, over REST.
func (r *Registry) Check(e *Entry) error {
	forged := func(format string, args ...any) error {
		return &ForgedEntryError{JobID: e.JobID, File: r.path(e.JobID), Reason: fmt.Sprintf(format, args...)}
	}
	if !r.Alive(e.PID) {
		return forged("its process %d is not running", e.PID)
	}
	if e.Executable == "" {
		return forged("it records no executable, so process %d cannot be told to be gflink", e.PID)
	}
	exe, err := r.Executable(e.PID)
	if err != nil {
		return forged("process %d is not one of yours (%v)", e.PID, err)
	}
	if exe != e.Executable {
		return forged("process %d runs %s, not the gflink executable %s the entry records", e.PID, exe, e.Executable)
	}
	if err := checkLocalAddress(e.Address); err != nil {
		return forged("%v", err)
	}
	return nil
}

// checkLocalAddress accepts an endpoint on this machine only: a loopback,
// unspecified (0.0.0.0, ::) or local interface address. A job always
// registers the address it bound itself, so anything else was not written
// by a job and would send the command (and the token) to another host.
// Host names are refused rather than resolved: a job records an IP address.
func checkLocalAddress(address string) error {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return fmt.Errorf("its address %q is not a URL", address)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil {
		return fmt.Errorf("its address %s names a host, not this machine's IP address", address)
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return nil
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return nil
		}
	}
	return fmt.Errorf("its address %s is not on this machine", address)
}

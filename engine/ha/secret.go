package ha

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gflink/gflink/savepoint/vfs"
)

// Secret is the cluster's root secret: 256 random bits in
// <storageDir>/<cluster-id>/cluster-secret, owner-only, made by the
// cluster's first process. Everything that proves "written by this
// cluster" derives from it, each with its own key, so that one leaking
// does not give the others away:
//
//   - the REST token every leader's endpoint requires (it travels in
//     requests, so it must not be the root);
//   - the ZooKeeper digest credentials of the creator ACL;
//   - the HMAC key that seals the job graph, checkpoint and counter
//     pointers in ZooKeeper, so that a znode written by anyone else (a
//     ZooKeeper user with world access, another cluster) is refused.
//
// The storage directories are checked before the secret is trusted:
// owned by this user and writable by nobody else.
type Secret struct {
	root []byte
}

// secretFile is the root secret's name in the cluster's storage.
const secretFile = "cluster-secret"

func (s *Secret) derive(purpose string) []byte {
	m := hmac.New(sha256.New, s.root)
	m.Write([]byte("gflink " + purpose))
	return m.Sum(nil)
}

// RESTToken is the bearer token of the cluster's REST endpoints.
func (s *Secret) RESTToken() string { return hex.EncodeToString(s.derive("rest token")) }

// digest is the ZooKeeper digest identity of the cluster's processes.
func (s *Secret) digest() string {
	return "gflink:" + hex.EncodeToString(s.derive("zookeeper digest"))
}

// seal is the HMAC of a pointer's fields, each separated by a NUL so that
// no two lists of fields seal alike.
func (s *Secret) seal(fields ...string) string {
	m := hmac.New(sha256.New, s.derive("pointer"))
	m.Write([]byte(strings.Join(fields, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// PrepareStorage makes the cluster's directories in storageDir (owner-only)
// and its secret, if missing, after checking that nobody else can write
// them: a leader and its standbys trust what they read there.
func PrepareStorage(cfg *Config) (*Secret, error) {
	return loadSecret(cfg, true)
}

// ReadSecret reads the cluster's secret without creating anything (the
// CLI's side), after the same checks.
func ReadSecret(cfg *Config) (*Secret, error) {
	return loadSecret(cfg, false)
}

func loadSecret(cfg *Config, create bool) (*Secret, error) {
	const fix = "high-availability.storageDir"
	if err := vfs.CheckParent(vfs.Default, cfg.StorageDir, fix); err != nil {
		if errors.Is(err, fs.ErrNotExist) && create {
			if err := os.MkdirAll(cfg.StorageDir, vfs.PrivateDirMode); err != nil {
				return nil, fmt.Errorf("high-availability.storageDir: %w", err)
			}
		} else {
			return nil, storageError(err)
		}
	}
	dirs := []struct{ path, what string }{
		{cfg.clusterStorage(), "the cluster's storage directory"},
		{filepath.Join(cfg.StorageDir, "job-result-store"), "the job result store"},
		{cfg.jobResultDir(), "the cluster's job result store"},
	}
	for _, d := range dirs {
		if create {
			if err := os.Mkdir(d.path, vfs.PrivateDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("high-availability.storageDir: %w", err)
			}
		}
		if err := vfs.CheckPrivate(vfs.Default, d.path, d.what); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, notStarted(cfg, d.path)
			}
			return nil, storageError(err)
		}
		if create {
			// Closed to reading too (an older gflink made them 0755).
			os.Chmod(d.path, vfs.PrivateDirMode)
		}
	}
	name := filepath.Join(cfg.clusterStorage(), secretFile)
	for {
		if err := vfs.CheckSecret(vfs.Default, name, "the cluster's secret"); err == nil {
			data, err := os.ReadFile(name)
			if err != nil {
				return nil, fmt.Errorf("read the cluster's secret: %w", err)
			}
			root, err := hex.DecodeString(strings.TrimSpace(string(data)))
			if err != nil || len(root) < 32 {
				return nil, fmt.Errorf("the cluster's secret %s is damaged (not 64 hexadecimal digits): remove it only if no process of cluster %s runs, and restart them", name, cfg.ClusterID)
			}
			return &Secret{root: root}, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, storageError(err)
		}
		if !create {
			return nil, notStarted(cfg, name)
		}
		root := make([]byte, 32)
		rand.Read(root)
		// Written whole under a temporary name, then linked into place:
		// a process starting at the same moment finds no secret or all
		// of it, never an empty file.
		tmp, err := os.CreateTemp(cfg.clusterStorage(), ".cluster-secret-*")
		if err != nil {
			return nil, fmt.Errorf("create the cluster's secret: %w", err)
		}
		_, err = tmp.WriteString(hex.EncodeToString(root) + "\n")
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Link(tmp.Name(), name)
		}
		os.Remove(tmp.Name())
		if errors.Is(err, fs.ErrExist) {
			continue // another process of the cluster made it first
		}
		if err != nil {
			return nil, fmt.Errorf("write the cluster's secret: %w", err)
		}
		return &Secret{root: root}, nil
	}
}

// notStarted: the cluster's storage lacks what its first process makes.
func notStarted(cfg *Config, missing string) error {
	return fmt.Errorf("read the cluster's secret: %s does not exist: no process of cluster %s has started with high-availability.storageDir %s", missing, cfg.ClusterID, cfg.StorageDir)
}

func storageError(err error) error { return fmt.Errorf("high-availability.storageDir: %w", err) }

// sealedPointer is what gflink writes into a znode that tells a leader what
// to run or restore: the value (a path, a number), the SHA-256 of the file
// it points to, and an HMAC over both and the znode's place, keyed by the
// cluster's secret.
type sealedPointer struct {
	Value  string `json:"value"`
	SHA256 string `json:"sha256,omitempty"`
	HMAC   string `json:"hmac"`
}

// ForgedPointerError is a znode gflink did not write: not sealed, or
// sealed with another key, or for another place.
type ForgedPointerError struct {
	Node, Reason string
}

func (e *ForgedPointerError) Error() string {
	return fmt.Sprintf("Refusing the znode %s: %s. No process of this cluster wrote it (it was written by another ZooKeeper user, another cluster, or a gflink without this cluster's secret), so nothing it names is run or restored. Use high-availability.zookeeper.client.acl: creator so that only this cluster can write its znodes.", e.Node, e.Reason)
}

// sealPointer encodes a pointer for node. place binds it to what the znode
// stands for (kind, job, checkpoint), so that a sealed value cannot be
// copied to another znode.
func (s *Services) sealPointer(value, digest string, place ...string) []byte {
	p := sealedPointer{Value: value, SHA256: digest}
	p.HMAC = s.secret.seal(append(append([]string{}, place...), value, digest)...)
	data, _ := json.Marshal(p)
	return data
}

// openPointer decodes and authenticates a sealed pointer read from node.
func (s *Services) openPointer(node string, data []byte, place ...string) (sealedPointer, error) {
	var p sealedPointer
	if err := json.Unmarshal(data, &p); err != nil || p.HMAC == "" {
		return p, &ForgedPointerError{Node: node, Reason: "it holds no sealed pointer (" + quoteShort(data) + ")"}
	}
	want := s.secret.seal(append(append([]string{}, place...), p.Value, p.SHA256)...)
	if !hmac.Equal([]byte(want), []byte(p.HMAC)) {
		return p, &ForgedPointerError{Node: node, Reason: "its HMAC does not match the cluster's secret"}
	}
	return p, nil
}

func quoteShort(b []byte) string {
	s := string(b)
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// fileSHA256 is the hex SHA-256 of data.
func fileSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

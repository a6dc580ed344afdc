package engine

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/engine/state/lsm"
)

// stateBackends makes the keyed state backends of a job's operators, as
// state.backend.type says: Go maps (hashmap), or one embedded LSM per
// stateful subtask (rocksdb), in a working directory of the job's that is
// removed when the job ends.
type stateBackends struct {
	kind        string
	dir         *lsm.JobDir // rocksdb only
	cacheSize   int64
	writeBuffer int64
}

// newStateBackends reads the backend's options; for rocksdb it creates the
// job's working directory (removing those that killed processes left).
func newStateBackends(c *config.Configuration, jobID string, log *slog.Logger) (*stateBackends, error) {
	kind, err := StateBackend.Get(c)
	if err != nil {
		return nil, err
	}
	b := &stateBackends{kind: kind}
	if kind != StateBackendRocksDB {
		return b, nil
	}
	cache, err := RocksDBBlockCacheSize.Get(c)
	if err != nil {
		return nil, err
	}
	wb, err := RocksDBWriteBufferSize.Get(c)
	if err != nil {
		return nil, err
	}
	b.cacheSize, b.writeBuffer = int64(cache), int64(wb)
	root, err := lsmLocalDir(c)
	if err != nil {
		return nil, err
	}
	dir, removed, err := lsm.NewJobDir(root, jobID)
	for _, r := range removed {
		log.Info("Removed the LSM working directory of a job that is no longer running: " + r)
	}
	if err != nil {
		return nil, err
	}
	b.dir = dir
	log.Info("Using the embedded LSM state backend (Pebble) for state.backend.type=rocksdb", "dir", dir.Path())
	return b, nil
}

// lsmLocalDir is state.backend.rocksdb.localdir, else the first of
// io.tmp.dirs, else $GFLINK_HOME/tmp.
func lsmLocalDir(c *config.Configuration) (string, error) {
	if d, ok, err := RocksDBLocalDir.Lookup(c); err != nil || ok && d != "" {
		return d, err
	}
	if ds, ok, err := IOTmpDirs.Lookup(c); err != nil {
		return "", err
	} else if ok {
		for _, d := range strings.FieldsFunc(ds, func(r rune) bool { return r == ',' || r == os.PathListSeparator }) {
			if d = strings.TrimSpace(d); d != "" {
				return d, nil
			}
		}
	}
	return filepath.Join(jobregistry.Home(os.Getenv), "tmp"), nil
}

// name is the backend's name (hashmap or rocksdb).
func (b *stateBackends) name() string {
	if b == nil {
		return StateBackendHashMap
	}
	return b.kind
}

// close removes the job's working directory.
func (b *stateBackends) close() error {
	if b == nil || b.dir == nil {
		return nil
	}
	return b.dir.Close()
}

// newKeyedBackend makes the backend of one keyed operator subtask.
func newKeyedBackend[K comparable](b *stateBackends, keySer state.KeySerializer[K], maxPar int, kgr state.KeyGroupRange, uid string, subtask, attempt int) (state.Backend[K], error) {
	if b == nil || b.kind != StateBackendRocksDB {
		return state.NewKeyedBackend(keySer, maxPar, kgr), nil
	}
	store, err := lsm.Open(lsm.Options{Dir: b.dir.SubtaskDir(uid, subtask, attempt), BlockCacheSize: b.cacheSize, WriteBufferSize: b.writeBuffer})
	if err != nil {
		return nil, fmt.Errorf("open the LSM state backend of %s (subtask %d): %w", uid, subtask, err)
	}
	return state.NewLSMBackend(store, keySer, maxPar, kgr), nil
}

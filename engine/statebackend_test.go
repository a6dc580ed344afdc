package engine

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/savepoint"
)

// A CLAIM restore lets incremental checkpoints refer to the restored
// checkpoint's shared SST files, by paths relative to the new job's
// checkpoint directories, with the checksums recorded at their upload; its
// private files, and shared files in another base directory, are uploaded
// again instead.
func TestClaimedShared(t *testing.T) {
	base := "/ck"
	old := filepath.Join(base, "0123456789abcdef0123456789abcdef", "chk-7")
	h := &savepoint.NativeStateHandle{BackendID: "b1", Files: []savepoint.NativeFile{
		{Name: "000004.sst", Path: "../shared/b0-000004.sst", Size: 4, CRC32C: "0000abcd"},
		{Name: "000009.sst", Path: "../shared/b1-000009.sst", Size: 9},
		{Name: "MANIFEST-000001", Path: "b1-MANIFEST-000001"},
	}}
	got := task.ClaimedShared(old, h, filepath.Join(base, "fedcba9876543210fedcba9876543210"))
	want := map[string]savepoint.NativeFile{
		"000004.sst": {Name: "000004.sst", Path: "../../0123456789abcdef0123456789abcdef/shared/b0-000004.sst", Size: 4, CRC32C: "0000abcd"},
		"000009.sst": {Name: "000009.sst", Path: "../../0123456789abcdef0123456789abcdef/shared/b1-000009.sst", Size: 9},
	}
	if !maps.Equal(got, want) {
		t.Errorf("claimed %v; want %v", got, want)
	}
	if got := task.ClaimedShared(old, h, "/elsewhere/fedcba9876543210fedcba9876543210"); len(got) != 0 {
		t.Errorf("from another base directory: claimed %v; want nothing", got)
	}
}

// TestLSMLocalDirTakesFileURIs: state.backend.rocksdb.localdir and
// io.tmp.dirs take paths and file: URIs (file:///x once made ./file:/x);
// with neither, the directory the job master gives ($GFLINK_HOME/tmp).
func TestLSMLocalDirTakesFileURIs(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"state.backend.rocksdb.localdir", "file:///var/lsm", "/var/lsm"},
		{"state.backend.rocksdb.localdir", "/var/lsm", "/var/lsm"},
		{"io.tmp.dirs", "file:///tmp/a,/tmp/b", "/tmp/a"},
		{"io.tmp.dirs", "/tmp/a:/tmp/b", "/tmp/a"},
	} {
		c := config.New()
		c.SetString(tc.key, tc.value, "-D")
		if got, err := task.LSMLocalDir(c, "/home/tmp"); err != nil || got != tc.want {
			t.Errorf("%s=%s: %q, %v; want %q", tc.key, tc.value, got, err, tc.want)
		}
	}
	if got, err := task.LSMLocalDir(config.New(), "/home/tmp"); err != nil || got != "/home/tmp" {
		t.Errorf("with neither key set: %q, %v; want the job master's default, /home/tmp", got, err)
	}
	c := config.New()
	c.SetString("state.backend.rocksdb.localdir", "hdfs:///lsm", "-D")
	if _, err := task.LSMLocalDir(c, "/home/tmp"); err == nil || !strings.Contains(err.Error(), "state.backend.rocksdb.localdir") {
		t.Errorf("hdfs: %v; want an error naming the key", err)
	}
}

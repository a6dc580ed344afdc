package ha

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/engine/ha/zktest"
	"github.com/gflink/gflink/savepoint/vfs"
	"github.com/go-zookeeper/zk"
)

// outsider is a ZooKeeper client that is not a process of the cluster:
// another user who can reach the quorum.
func outsider(t *testing.T, addr string, digest string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if digest != "" {
		if err := c.AddAuth("digest", []byte(digest)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// leaderWithJob makes a leader that stored a job graph and registered
// checkpoint 1.
func leaderWithJob(t *testing.T, cfg *Config) (*Services, *JobStores) {
	t.Helper()
	s := connect(t, cfg)
	l, err := s.Contend(context.Background(), Candidate{PID: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := l.ForJob("job")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.PutSubmittedJob(SubmittedJob{JobID: "job", Job: "wordcount", Args: []string{"--input", "words.txt"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.ReserveCheckpointID(1); err != nil {
		t.Fatal(err)
	}
	if err := j.AddCheckpoint(1, snapshotDir(t, "chk-1"), false); err != nil {
		t.Fatal(err)
	}
	return s, j
}

// TestCreatorACLKeepsOthersOut: by default (acl creator) a ZooKeeper
// client without the cluster's credentials can neither read nor change
// the cluster's znodes, nor enter its election.
func TestCreatorACLKeepsOthersOut(t *testing.T) {
	zkSrv := zktest.Start(t)
	cfg := testConfig(t, zkSrv.Addr)
	if cfg.ACL != ACLCreator {
		t.Fatalf("default acl %q; want creator", cfg.ACL)
	}
	s, _ := leaderWithJob(t, cfg)
	for name, digest := range map[string]string{"no credentials": "", "other credentials": "gflink:guess"} {
		t.Run(name, func(t *testing.T) {
			o := outsider(t, zkSrv.Addr, digest)
			for _, p := range []string{s.jobGraphNode("job"), s.checkpointsDir("job") + "/" + checkpointName(1, false), s.counterNode("job")} {
				if _, _, err := o.Get(p); !errors.Is(err, zk.ErrNoAuth) {
					t.Errorf("read %s: %v; want ErrNoAuth", p, err)
				}
				if _, err := o.Set(p, []byte("/home/attacker/graph.json"), -1); !errors.Is(err, zk.ErrNoAuth) {
					t.Errorf("overwrite %s: %v; want ErrNoAuth", p, err)
				}
				if err := o.Delete(p, -1); !errors.Is(err, zk.ErrNoAuth) {
					t.Errorf("delete %s: %v; want ErrNoAuth", p, err)
				}
			}
			for _, p := range []string{s.checkpointsDir("job") + "/" + checkpointName(99, false), s.latchDir() + "/latch-"} {
				if _, err := o.Create(p, []byte("x"), 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
					t.Errorf("create %s: %v; want ErrNoAuth", p, err)
				}
			}
			// The shared root stays open for other clusters, but nobody
			// may delete it.
			if _, err := o.Create("/flink/other-cluster-"+strings.ReplaceAll(name, " ", "-"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Errorf("another cluster's root under /flink: %v", err)
			}
		})
	}
	acl, _, err := s.conn.GetACL(s.cfg.Root)
	if err != nil || len(acl) != 1 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, "gflink:") {
		t.Errorf("the cluster root's ACL %+v, %v; want the cluster's digest identity only", acl, err)
	}
	// The cluster's other processes read everything.
	if sj, err := connect(t, cfg).SubmittedJob("job"); err != nil || sj == nil {
		t.Errorf("a standby reads the job graph: %+v, %v", sj, err)
	}
}

// TestForgedPointersAreRefused: with acl open, anyone can write the
// cluster's znodes; what they write is refused, never run or restored.
func TestForgedPointersAreRefused(t *testing.T) {
	zkSrv := zktest.Start(t)
	cfg := testConfig(t, zkSrv.Addr)
	cfg.ACL = ACLOpen
	s, _ := leaderWithJob(t, cfg)
	standby := connect(t, cfg)
	attacker := outsider(t, zkSrv.Addr, "")
	graphNode := s.jobGraphNode("job")
	genuine, _, err := attacker.Get(graphNode)
	if err != nil {
		t.Fatal(err)
	}
	// The attacker's own job graph.
	evil := filepath.Join(t.TempDir(), "graph.json")
	os.WriteFile(evil, []byte(`{"jobId":"job","job":"wordcount","args":["--input","/root/secret","--output","/tmp/loot"]}`), 0o644)
	var sealed sealedPointer
	json.Unmarshal(genuine, &sealed)
	for name, data := range map[string]string{
		"a plain path":                     evil,
		"a sealed pointer to another file": mustJSON(sealedPointer{Value: evil, SHA256: sealed.SHA256, HMAC: sealed.HMAC}),
		"a made-up seal":                   mustJSON(sealedPointer{Value: evil, SHA256: strings.Repeat("0", 64), HMAC: strings.Repeat("ab", 32)}),
	} {
		if _, err := attacker.Set(graphNode, []byte(data), -1); err != nil {
			t.Fatal(err)
		}
		sj, err := standby.SubmittedJob("job")
		var forged *ForgedPointerError
		if !errors.As(err, &forged) || sj != nil {
			t.Errorf("%s in %s: %+v, %v; want a refusal", name, graphNode, sj, err)
		}
		if err != nil && !strings.Contains(err.Error(), "nothing it names is run or restored") {
			t.Errorf("%s: the refusal %q does not say what happens", name, err)
		}
	}
	// The pointer restored, but the file it seals edited.
	attacker.Set(graphNode, genuine, -1)
	file := standby.jobGraphFile("job")
	os.WriteFile(file, []byte(`{"jobId":"job","job":"wordcount","args":["--input","/root/secret"]}`), 0o600)
	if sj, err := standby.SubmittedJob("job"); !errors.As(err, new(*ForgedPointerError)) {
		t.Errorf("an edited job graph file: %+v, %v; want a refusal", sj, err)
	}

	// Below the newest genuine checkpoint (1), a forged one and a genuine
	// seal copied to another id are left out; above it, either stops the
	// recovery (it might have replaced the real newest).
	cpNode := s.checkpointsDir("job") + "/" + checkpointName(1, false)
	genuineCP, _, _ := attacker.Get(cpNode)
	evilCP := snapshotDir(t, "evil-chk")
	attacker.Create(s.checkpointsDir("job")+"/"+checkpointName(0, false), []byte(filepath.Join(evilCP, "_metadata")), 0, zk.WorldACL(zk.PermAll))
	attacker.Create(s.checkpointsDir("job")+"/"+checkpointName(0, true), genuineCP, 0, zk.WorldACL(zk.PermAll))
	cps, err := standby.Checkpoints("job")
	if err != nil || len(cps) != 1 || cps[0].ID != 1 {
		t.Fatalf("registered checkpoints %+v, %v; want only the genuine checkpoint 1", cps, err)
	}
	for _, above := range [][]byte{[]byte(filepath.Join(evilCP, "_metadata")), genuineCP} {
		n := s.checkpointsDir("job") + "/" + checkpointName(7, false)
		attacker.Create(n, above, 0, zk.WorldACL(zk.PermAll))
		if got, err := standby.Checkpoints("job"); !errors.As(err, new(*ForgedPointerError)) || !strings.Contains(err.Error(), "the job is not recovered") {
			t.Errorf("a forged checkpoint above the newest: %+v, %v; want a refusal to recover", got, err)
		}
		attacker.Delete(n, -1)
	}
	// Its _metadata replaced after registration.
	os.WriteFile(cps[0].Metadata, []byte("another _metadata"), 0o600)
	data, _ := os.ReadFile(cps[0].Metadata)
	if err := cps[0].CheckMetadata(data); !errors.As(err, new(*ForgedPointerError)) {
		t.Errorf("a replaced _metadata: %v; want a refusal", err)
	}

	// A forged checkpoint id counter.
	attacker.Set(s.counterNode("job"), []byte("1"), -1)
	if n, err := standby.CheckpointIDCounter("job"); !errors.As(err, new(*ForgedPointerError)) {
		t.Errorf("a forged counter: %d, %v; want a refusal", n, err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestStorageMustBePrivate: the cluster's secret and job graph are trusted
// only in directories nobody else can write, and the secret only if
// nobody else can read it.
func TestStorageMustBePrivate(t *testing.T) {
	base := func(t *testing.T) *Config {
		dir := t.TempDir()
		return &Config{StorageDir: dir, ClusterID: "c", ACL: ACLCreator}
	}
	t.Run("a world-writable storageDir", func(t *testing.T) {
		cfg := base(t)
		os.Chmod(cfg.StorageDir, 0o777)
		_, err := PrepareStorage(cfg)
		if err == nil || !strings.Contains(err.Error(), "writable by group or others") || !strings.Contains(err.Error(), "chmod go-w "+cfg.StorageDir) {
			t.Fatalf("PrepareStorage: %v; want a refusal saying how to fix it", err)
		}
	})
	t.Run("a sticky world-writable storageDir (as /tmp)", func(t *testing.T) {
		cfg := base(t)
		os.Chmod(cfg.StorageDir, 0o777|os.ModeSticky)
		if _, err := PrepareStorage(cfg); err != nil {
			t.Fatalf("PrepareStorage: %v", err)
		}
	})
	t.Run("a group-writable cluster directory", func(t *testing.T) {
		cfg := base(t)
		if _, err := PrepareStorage(cfg); err != nil {
			t.Fatal(err)
		}
		os.Chmod(cfg.clusterStorage(), 0o770)
		if _, err := ReadSecret(cfg); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
			t.Fatalf("ReadSecret: %v; want a refusal", err)
		}
	})
	t.Run("a readable secret", func(t *testing.T) {
		cfg := base(t)
		if _, err := PrepareStorage(cfg); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(cfg.clusterStorage(), secretFile), 0o644)
		if _, err := ReadSecret(cfg); err == nil || !strings.Contains(err.Error(), "readable by group or others") {
			t.Fatalf("ReadSecret: %v; want a refusal", err)
		}
	})
	t.Run("a cluster directory of another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give a directory to another user")
		}
		cfg := base(t)
		os.Mkdir(cfg.clusterStorage(), 0o700)
		os.Chown(cfg.clusterStorage(), 65534, 65534)
		_, err := PrepareStorage(cfg)
		var np *vfs.NotPrivateError
		if !errors.As(err, &np) || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Fatalf("PrepareStorage: %v; want a refusal naming the owner", err)
		}
	})
	t.Run("the secret is made once, owner-only", func(t *testing.T) {
		cfg := base(t)
		a, err := PrepareStorage(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ReadSecret(cfg)
		if err != nil || a.RESTToken() != b.RESTToken() {
			t.Fatalf("ReadSecret: %v", err)
		}
		for _, d := range []string{cfg.clusterStorage(), cfg.jobResultDir()} {
			if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v, %v; want 0700", d, fi.Mode(), err)
			}
		}
	})
}

// TestCreatorClaimsZnodesMadeOpen: a cluster whose znodes were made open
// (by acl open, or a gflink without ACLs) is claimed under creator: the
// znodes get the cluster's ACL, a latch of someone else's is deleted; a
// cluster root someone else owns is refused, naming it.
func TestCreatorClaimsZnodesMadeOpen(t *testing.T) {
	zkSrv := zktest.Start(t)
	cfg := testConfig(t, zkSrv.Addr)
	open := *cfg
	open.ACL = ACLOpen
	before := connect(t, &open)
	if _, err := before.Contend(context.Background(), Candidate{PID: 1}, nil); err != nil {
		t.Fatal(err)
	}
	attacker := outsider(t, zkSrv.Addr, "")
	// A persistent latch that would sort first and lead for ever.
	if _, err := attacker.Create(before.latchDir()+"/forged-0000000000", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	before.Close()
	s := connect(t, cfg) // creator
	l, err := s.Contend(context.Background(), Candidate{PID: 2}, nil)
	if err != nil {
		t.Fatalf("contending over znodes made open: %v", err)
	}
	defer l.Release()
	for _, p := range []string{s.cfg.Root, s.latchDir()} {
		if _, err := attacker.Create(p+"/x", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("create under %s after the claim: %v; want ErrNoAuth", p, err)
		}
	}
	if ok, _, _ := s.conn.Exists(s.latchDir() + "/forged-0000000000"); ok {
		t.Error("the forged latch is still there")
	}

	// A root squatted by someone with credentials of their own.
	squat := testConfig(t, zkSrv.Addr)
	owner := outsider(t, zkSrv.Addr, "mallory:secret")
	squat.ClusterID, squat.Root = "squatted", "/flink/squatted"
	if _, err := owner.Create(squat.Root, nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, err = connect(t, squat).Contend(context.Background(), Candidate{PID: 3}, nil)
	if err == nil || !strings.Contains(err.Error(), squat.Root) {
		t.Fatalf("contending under a squatted root: %v; want a refusal naming it", err)
	}
}

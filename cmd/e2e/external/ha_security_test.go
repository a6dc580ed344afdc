package external

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/go-zookeeper/zk"
)

// zkOutsider connects to the cluster's ZooKeeper as someone who is not one
// of its processes: no credentials.
func zkOutsider(t *testing.T, c *haCluster) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(c.cfg.Servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// TestHAForgedJobGraphIsNotRun: with the open ACL, a local user points the
// job graph znode at a graph of their own that reads a root-only file
// into their directory. When the leader dies, the standby refuses it,
// says so, and runs nothing.
func TestHAForgedJobGraphIsNotRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	c := newHACluster(t, "1s", "wordcount", "--input", "words.txt", "--rate", "2000")
	c.flags = append(c.flags, "-Dhigh-availability.zookeeper.client.acl=open")
	writeWords(t, filepath.Join(c.dir, "words.txt"), 4000, 300)
	leader := c.start()
	c.leader(nil, 30*time.Second)
	standby := c.start()
	waitOutput(t, &standby.stdout, "Standing by")

	secret := filepath.Join(c.dir, "secret.txt")
	os.WriteFile(secret, []byte("topsecret words\n"), 0o600)
	loot := filepath.Join(c.dir, "loot")
	graph := filepath.Join(c.dir, "attacker-graph.json")
	data, _ := json.Marshal(map[string]any{"jobId": c.cfg.JobID, "job": "wordcount", "args": []string{"--input", secret, "--output", loot}})
	os.WriteFile(graph, data, 0o644)
	node := "/flink/test/jobgraphs/" + c.cfg.JobID
	if _, err := zkOutsider(t, c).Set(node, []byte(graph), -1); err != nil {
		t.Fatalf("the open ACL let nobody overwrite %s: %v", node, err)
	}

	leader.cmd.Process.Kill()
	select {
	case <-standby.done:
	case <-testutil.After(60 * time.Second):
		t.Fatalf("the standby neither refused nor ran within 60 s:\n%s", c.logs())
	}
	if standby.err == nil {
		t.Errorf("the standby exited 0 after a forged job graph")
	}
	if !strings.Contains(standby.stderr.String(), "Refusing the znode "+node) {
		t.Errorf("the standby's refusal does not name the znode:\n%s", c.logs())
	}
	if _, err := os.Stat(loot); err == nil {
		t.Fatalf("the standby ran the forged job graph: %s exists", loot)
	}
	if strings.Contains(standby.stdout.String(), "topsecret") {
		t.Fatalf("the standby read the secret file:\n%s", standby.stdout.String())
	}
}

// TestHAForgedLeaderAddressGetsNoToken: with the open ACL, a local user
// writes their own listener's address into the leader's connection info.
// savepoint, stop, cancel and checkpoint refuse it and send it no token.
func TestHAForgedLeaderAddressGetsNoToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newHACluster(t, "2s", "wordcount", "--generate", "unbounded", "--rate", "2000")
	c.flags = append(c.flags, "-Dhigh-availability.zookeeper.client.acl=open")
	c.start()
	c.leader(nil, 30*time.Second)

	var mu sync.Mutex
	var caught []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			caught = append(caught, r.Method+" "+r.URL.Path+": "+a)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"authentication":true,"proof":"00"}`))
	}))
	defer fake.Close()
	node := "/flink/test/leader/rest_server/connection_info"
	o := zkOutsider(t, c)
	info, _, err := o.Get(node)
	if err != nil {
		t.Fatal(err)
	}
	var li map[string]any
	json.Unmarshal(info, &li)
	li["address"] = fake.URL
	forged, _ := json.Marshal(li)
	if _, err := o.Set(node, forged, -1); err != nil {
		t.Fatalf("the open ACL let nobody overwrite %s: %v", node, err)
	}
	// Each command looks for another leader for a session timeout (a
	// failover also leaves a stale address) before it refuses: they run
	// at once.
	var wg sync.WaitGroup
	for _, args := range [][]string{
		{"savepoint", c.cfg.JobID, filepath.Join(c.dir, "attacker-sp")},
		{"stop", "--savepointPath", filepath.Join(c.dir, "attacker-sp"), c.cfg.JobID},
		{"checkpoint", c.cfg.JobID},
		{"cancel", c.cfg.JobID},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := gflinkCmd(c.dir, append(args[:1:1], append(append([]string{}, c.flags...), args[1:]...)...)...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "Refusing to send the job's token to "+fake.URL) {
				t.Errorf("gflink %s with a forged leader address: %v\n%s", args[0], err, out)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(caught) > 0 {
		t.Fatalf("the forged leader received the cluster's token: %q", caught)
	}
}

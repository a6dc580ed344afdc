package external

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/engine/ha/zktest"
	"github.com/gflink/gflink/internal/clitest"
	"github.com/gflink/gflink/internal/testutil"
)

// haCluster is a set of gflink processes started with the same high
// availability configuration, against a real ZooKeeper.
type haCluster struct {
	t     *testing.T
	dir   string
	flags []string
	cfg   *ha.Config
	args  []string // the job and its arguments

	mu    sync.Mutex
	procs []*haProc
}

type haProc struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	err            error
}

func newHACluster(t *testing.T, sessionTimeout string, args ...string) *haCluster {
	t.Helper()
	zk := zktest.Start(t)
	dir := t.TempDir()
	c := &haCluster{t: t, dir: dir, args: args, flags: []string{
		"-Dhigh-availability.type=zookeeper",
		"-Dhigh-availability.zookeeper.quorum=" + zk.Addr,
		"-Dhigh-availability.storageDir=" + filepath.Join(dir, "ha"),
		"-Dhigh-availability.cluster-id=test",
		"-Dhigh-availability.zookeeper.client.session-timeout=" + sessionTimeout,
		"-Dexecution.checkpointing.interval=100ms",
		"-Dexecution.checkpointing.dir=" + filepath.Join(dir, "ck"),
		"-Drest.port=0",
	}}
	conf := config.New()
	for _, fl := range c.flags {
		k, v, _ := config.ParseDynamicProperty(strings.TrimPrefix(fl, "-D"))
		conf.SetString(k, v, "-D")
	}
	cfg, err := ha.ConfigFrom(conf)
	if err != nil {
		t.Fatal(err)
	}
	c.cfg = cfg
	t.Cleanup(c.killAll)
	return c
}

// start starts one more process of the cluster.
func (c *haCluster) start() *haProc {
	c.t.Helper()
	p := &haProc{done: make(chan struct{})}
	p.cmd = gflinkCmd(c.dir, append(append([]string{"run"}, c.flags...), c.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

func (c *haCluster) killAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.done
	}
}

// leader waits until a process other than not leads and its job runs, and
// returns it.
func (c *haCluster) leader(not *haProc, within time.Duration) *haProc {
	c.t.Helper()
	deadline := testutil.Deadline(within)
	// The cluster's first process makes its secret, which the client
	// authenticates with.
	secret, err := ha.ReadSecret(c.cfg)
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		secret, err = ha.ReadSecret(c.cfg)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	svc, err := ha.Connect(context.Background(), c.cfg, secret, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	defer svc.Close()
	for time.Now().Before(deadline) {
		if info, err := svc.Leader(); err == nil && (not == nil || info.PID != not.cmd.Process.Pid) {
			c.mu.Lock()
			for _, p := range c.procs {
				if p.cmd.Process.Pid == info.PID && strings.Contains(p.stdout.String(), "Job has been submitted") {
					c.mu.Unlock()
					return p
				}
			}
			c.mu.Unlock()
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("no new leader running the job within %v", within)
	return nil
}

// wait waits for every process to exit, and fails the test if one does
// not exit 0.
func (c *haCluster) wait(within time.Duration) {
	c.t.Helper()
	deadline := testutil.After(within)
	c.mu.Lock()
	procs := append([]*haProc(nil), c.procs...)
	c.mu.Unlock()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			c.t.Fatalf("a process of the cluster did not exit within %v:\n%s", within, c.logs())
		}
	}
}

func (c *haCluster) logs() string {
	var b strings.Builder
	for i, p := range c.procs {
		fmt.Fprintf(&b, "--- process %d (pid %d, %v)\nstdout:\n%s\nstderr:\n%s\n", i, p.cmd.Process.Pid, p.err, p.stdout.String(), p.stderr.String())
	}
	return b.String()
}

var completedCheckpoint = regexp.MustCompile(`Completed checkpoint (\d+) for job ([0-9a-f]{32})`)

// checkOneRun checks what the processes printed: the job finished once,
// under one job id, every other surviving process found it ended, and no
// checkpoint id completed twice.
func (c *haCluster) checkOneRun(killed map[*haProc]bool) {
	c.t.Helper()
	finished, alreadyEnded := 0, 0
	ids := map[string]int{}
	jobIDs := map[string]bool{}
	for _, p := range c.procs {
		out, errOut := p.stdout.String(), p.stderr.String()
		if strings.Contains(out, "has finished.") {
			finished++
		}
		if strings.Contains(out, "already reached the globally terminal state FINISHED") {
			alreadyEnded++
		}
		for _, m := range completedCheckpoint.FindAllStringSubmatch(errOut, -1) {
			ids[m[1]]++
			jobIDs[m[2]] = true
		}
		if !killed[p] && p.err != nil {
			c.t.Errorf("a process that was not killed exited with %v", p.err)
		}
	}
	if finished != 1 {
		c.t.Errorf("the job finished %d times; want once:\n%s", finished, c.logs())
	}
	if want := len(c.procs) - len(killed) - 1; alreadyEnded != want {
		c.t.Errorf("%d standbys found the job ended; want %d:\n%s", alreadyEnded, want, c.logs())
	}
	for id, n := range ids {
		if n > 1 {
			c.t.Errorf("checkpoint %s completed %d times", id, n)
		}
	}
	if len(jobIDs) != 1 {
		c.t.Errorf("checkpoints of %d job ids: %v", len(jobIDs), jobIDs)
	}
}

// TestHAFailoverExactlyOnce: word count into the file sink, checkpoints
// every 100 ms, a leader and two standbys; the leader is killed with
// SIGKILL three times at random moments (a new standby joins each time):
// the job ends FINISHED once, under one job id, with every update exactly
// once in the finished part files, and checkpoint ids never repeat.
func TestHAFailoverExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	c := newHACluster(t, "1s", "-p", "2", "wordcount", "--input", "words.txt", "--rate", "6000", "--output", "out")
	want := writeWords(t, filepath.Join(c.dir, "words.txt"), 6000, 400)
	for range 3 {
		c.start()
	}
	killed := map[*haProc]bool{}
	var prev *haProc
	for kill := range 3 {
		l := c.leader(prev, 30*time.Second)
		time.Sleep(time.Duration(200+rand.IntN(1200)) * time.Millisecond)
		l.cmd.Process.Kill()
		<-l.done
		killed[l], prev = true, l
		t.Logf("kill %d: killed the leader (pid %d)", kill+1, l.cmd.Process.Pid)
		c.start()
	}
	c.wait(120 * time.Second)
	c.checkOneRun(killed)
	checkCommittedOnce(t, "after three failovers", filepath.Join(c.dir, "out"), want)
}

// TestHAFencingPausedLeader: the leader is paused (SIGSTOP) past its
// session timeout; the standby takes over; the old leader is resumed. It
// must learn that it lost the leadership, commit nothing of its own after
// it resumed, and stand by; the job ends with exact counts.
func TestHAFencingPausedLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and pauses processes")
	}
	c := newHACluster(t, "1s", "-p", "2", "wordcount", "--input", "words.txt", "--rate", "5000", "--output", "out")
	want := writeWords(t, filepath.Join(c.dir, "words.txt"), 4000, 300)
	c.start()
	old := c.leader(nil, 30*time.Second)
	c.start()
	out := filepath.Join(c.dir, "out")
	waitForFiles(t, filepath.Join(out, "part-*"), 2, 30*time.Second)
	old.cmd.Process.Signal(syscall.SIGSTOP)
	// The old leader's run ids: every part file so far is its.
	runs := map[string]bool{}
	parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
	for _, p := range parts {
		runs[strings.Split(filepath.Base(p), "-")[1]] = true
	}
	c.leader(old, 30*time.Second)
	waitForFiles(t, filepath.Join(out, "part-*"), len(parts)+2, 30*time.Second) // the new leader commits
	before := oldRunFiles(out, runs)
	old.cmd.Process.Signal(syscall.SIGCONT)
	c.wait(120 * time.Second)
	if after := oldRunFiles(out, runs); !sameSet(before, after) {
		t.Errorf("the resumed leader committed files: before %v, after %v", before, after)
	}
	if !strings.Contains(old.stderr.String(), "Lost leadership") {
		t.Errorf("the resumed leader's log does not say it lost the leadership:\n%s", old.stderr.String())
	}
	c.checkOneRun(nil)
	checkCommittedOnce(t, "after a paused leader", out, want)
}

func waitForFiles(t *testing.T, pattern string, n int, within time.Duration) {
	t.Helper()
	deadline := testutil.Deadline(within)
	for {
		m, _ := filepath.Glob(pattern)
		if len(m) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d files match %s after %v; want %d", len(m), pattern, within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// oldRunFiles lists the finished part files of the given run ids.
func oldRunFiles(out string, runs map[string]bool) map[string]bool {
	files := map[string]bool{}
	parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
	for _, p := range parts {
		if runs[strings.Split(filepath.Base(p), "-")[1]] {
			files[filepath.Base(p)] = true
		}
	}
	return files
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestHASavepointAndStopFollowTheLeader: savepoint and stop, without -m,
// reach the leader before and after a failover — also one issued while
// the killed leader's address is still published — and `run -s` of the
// savepoint works.
func TestHASavepointAndStopFollowTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	c := newHACluster(t, "1s", "wordcount", "--input", "words.txt", "--rate", "2000")
	want := writeWords(t, filepath.Join(c.dir, "words.txt"), 4000, 300)
	c.start()
	l := c.leader(nil, 30*time.Second)
	c.start()
	cli := func(args ...string) string {
		t.Helper()
		cmd := gflinkCmd(c.dir, append(args[:1:1], append(append([]string{}, c.flags...), args[1:]...)...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gflink %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	jobID := c.cfg.JobID
	for deadline := testutil.Deadline(30 * time.Second); ; {
		out := cli("list")
		if strings.Contains(out, jobID) && strings.Contains(out, "1 standing by") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list before the failover, with a leader and a standby:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := cli("savepoint", jobID, filepath.Join(c.dir, "sp")); !strings.Contains(out, "Savepoint completed") {
		t.Fatalf("savepoint before the failover:\n%s", out)
	}
	// The leader has completed a checkpoint (for the planted copy below):
	// on a loaded machine the savepoint can come first.
	waitForFiles(t, filepath.Join(c.dir, "ck", jobID, "chk-*", "_metadata"), 1, 30*time.Second)
	l.cmd.Process.Kill()
	<-l.done
	// A complete checkpoint that was never registered (as one the killed
	// leader wrote just before it died): the new leader must not take it.
	unregistered := plantUnregisteredCheckpoint(t, filepath.Join(c.dir, "ck", jobID))
	// At once: the dead leader's address is still published.
	if out := cli("savepoint", jobID, filepath.Join(c.dir, "sp")); !strings.Contains(out, "Savepoint completed") {
		t.Fatalf("savepoint during the failover:\n%s", out)
	}
	out := cli("stop", "--savepointPath", filepath.Join(c.dir, "sp"), jobID)
	m := regexp.MustCompile(`Savepoint completed. Path: (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("stop after the failover:\n%s", out)
	}
	c.wait(60 * time.Second)
	recovered := regexp.MustCompile(`Recovering job \S+ from checkpoint \d+ registered in ZooKeeper: (\S+)`)
	found := false
	for _, p := range c.procs {
		for _, m := range recovered.FindAllStringSubmatch(p.stdout.String(), -1) {
			found = true
			if strings.HasSuffix(m[1], filepath.Base(unregistered)) {
				t.Errorf("the new leader recovered from %s, which was never registered", m[1])
			}
		}
	}
	if !found {
		t.Errorf("no process recovered the job from a registered checkpoint:\n%s", c.logs())
	}
	if out := cli("list", "-a"); !strings.Contains(out, jobID) || !strings.Contains(out, "FINISHED") {
		t.Fatalf("list after the job ended:\n%s", out)
	}
	// The savepoint restores, without high availability, to exact counts.
	res := gflinkCmd(c.dir, "run", "-s", m[1], "wordcount", "--input", "words.txt")
	var stdout, stderr bytes.Buffer
	res.Stdout, res.Stderr = &stdout, &stderr
	if err := res.Run(); err != nil {
		t.Fatalf("run -s %s: %v\n%s", m[1], err, stderr.String())
	}
	var outs []string
	for _, p := range c.procs {
		outs = append(outs, p.stdout.String())
	}
	got := countsOf(append(outs, stdout.String())...)
	for w, n := range want {
		if got[w] != n {
			t.Fatalf("count of %q = %d after the restore; want %d", w, got[w], n)
		}
	}
}

// plantUnregisteredCheckpoint copies the job's newest complete checkpoint
// to a higher chk-N that no ZooKeeper entry points to, and returns it.
func plantUnregisteredCheckpoint(t *testing.T, jobDir string) string {
	t.Helper()
	metas, _ := filepath.Glob(filepath.Join(jobDir, "chk-*", "_metadata"))
	if len(metas) == 0 {
		t.Fatalf("no complete checkpoint in %s", jobDir)
	}
	src := filepath.Dir(metas[len(metas)-1])
	dst := filepath.Join(jobDir, "chk-999999")
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return dst
}

// TestHAClosedStdout: a leader whose stdout's reader goes away is cancelled
// as with Ctrl-C — it hands the job over — and exits 141, as a run without
// high availability does.
func TestHAClosedStdout(t *testing.T) {
	c := newHACluster(t, "2s", "wordcount", "--generate", "unbounded", "--rate", "20000")
	cmd := gflinkCmd(c.dir, append(append([]string{"run"}, c.flags...), c.args...)...)
	r, out, stderr := clitest.StartPiped(t, cmd)
	// Read until the job prints counts (it leads and runs), then go away.
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no counts before stdout ended: %v\n%s", err, stderr.String())
		}
		if strings.HasPrefix(line, "(") {
			break
		}
	}
	clitest.CloseWantingExit(t, cmd, r, stderr, exitBrokenPipe)
}

// Command failover measures JobManager high availability's failover time:
// from kill -9 of the leading gflink process to the standby's job RUNNING,
// over -kills kills, with a real ZooKeeper (Debian's package) and
// high-availability.zookeeper.client.session-timeout -session. It prints
// HA_FAILOVER, the median failover time ÷ the session timeout (a standby
// cannot take over before ZooKeeper expires the dead leader's session, so
// 1.0 is the floor), with min and max.
//
// Usage: go run ./scripts/failover -gflink ./gflink [-kills 10] [-session 2s]
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/engine/ha/zktest"
	"github.com/gflink/gflink/engine/rest"
)

var (
	bin     = flag.String("gflink", "gflink", "the gflink binary")
	kills   = flag.Int("kills", 10, "how many times the leader is killed")
	session = flag.Duration("session", 2*time.Second, "high-availability.zookeeper.client.session-timeout")
)

func main() {
	flag.Parse()
	dir, err := os.MkdirTemp("", "gflink-failover-")
	check(err)
	if os.Getenv("KEEP") == "" {
		defer os.RemoveAll(dir)
	}
	fmt.Println("# scratch", dir)
	zk, err := zktest.StartIn(filepath.Join(dir, "zk"))
	check(err)
	defer zk.Stop()
	flags := []string{
		"-Dhigh-availability.type=zookeeper",
		"-Dhigh-availability.zookeeper.quorum=" + zk.Addr,
		"-Dhigh-availability.storageDir=" + filepath.Join(dir, "ha"),
		"-Dhigh-availability.zookeeper.client.session-timeout=" + session.String(),
		"-Dexecution.checkpointing.interval=100ms",
		"-Dexecution.checkpointing.dir=" + filepath.Join(dir, "ck"),
		"-Drest.port=0",
	}
	conf := config.New()
	for _, f := range flags {
		k, v, _ := config.ParseDynamicProperty(f[2:])
		conf.SetString(k, v, "-D")
	}
	cfg, err := ha.ConfigFrom(conf)
	check(err)
	procs := map[int]*exec.Cmd{}
	start := func() {
		c := exec.Command(*bin, append(append([]string{"run"}, flags...), "wordcount", "--generate", "unbounded", "--rate", "200000", "--discard")...)
		c.Dir = dir
		c.Env = append(os.Environ(), "GFLINK_HOME="+filepath.Join(dir, "home"))
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("gflink-%d.log", len(procs))))
		check(err)
		c.Stdout, c.Stderr = log, log
		check(c.Start())
		procs[c.Process.Pid] = c
		go c.Wait()
	}
	defer func() {
		for _, c := range procs {
			c.Process.Kill()
		}
	}()
	for range 3 {
		start()
	}
	// The first process makes the cluster's secret, which this client
	// authenticates with.
	secret, err := ha.ReadSecret(cfg)
	for wait := time.Now().Add(time.Minute); err != nil && time.Now().Before(wait); secret, err = ha.ReadSecret(cfg) {
		time.Sleep(10 * time.Millisecond)
	}
	check(err)
	svc, err := ha.Connect(context.Background(), cfg, secret, nil)
	check(err)
	defer svc.Close()
	var times []float64
	prev := 0
	for k := range *kills {
		pid := waitRunning(svc, cfg.JobID, prev, time.Minute)
		time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
		t0 := time.Now()
		check(syscall.Kill(pid, syscall.SIGKILL))
		waitRunning(svc, cfg.JobID, pid, time.Minute)
		d := time.Since(t0)
		times = append(times, d.Seconds()/session.Seconds())
		fmt.Printf("# kill %d: failover in %v\n", k+1, d.Round(time.Millisecond))
		prev = pid
		start()
	}
	slices.Sort(times)
	fmt.Printf("HA_FAILOVER=%.3f min=%.3f max=%.3f n=%d\n", times[len(times)/2], times[0], times[len(times)-1], len(times))
}

// waitRunning waits until a process other than not leads and its job is
// RUNNING, and returns its pid.
func waitRunning(svc *ha.Services, jobID string, not int, within time.Duration) int {
	token := svc.RESTToken()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		info, err := svc.Leader()
		if err == nil && info.PID != not {
			c := rest.NewClient(info.Address)
			c.Token, c.Prove = token, true
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := c.JobStatus(ctx, jobID)
			cancel()
			c.CloseIdleConnections()
			if err == nil && st == "RUNNING" {
				return info.PID
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	check(fmt.Errorf("no leader other than %d ran the job within %v", not, within))
	return 0
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

// Package zktest starts a real ZooKeeper server (Debian's zookeeper
// package, on Java) for tests: standalone, on a free loopback port, with a
// temporary data directory, stopped when the test ends.
package zktest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Jar is where Debian's zookeeper package puts the server; its manifest
// names the libraries it needs.
const Jar = "/usr/share/java/zookeeper.jar"

// Server is a running ZooKeeper.
type Server struct {
	Addr string // 127.0.0.1:<port>
	cmd  *exec.Cmd
	done chan struct{}
}

// Available says why ZooKeeper cannot be started here, or "".
func Available() string {
	if _, err := exec.LookPath("java"); err != nil {
		return "java is not installed"
	}
	if _, err := os.Stat(Jar); err != nil {
		return Jar + " is missing"
	}
	return ""
}

// Start starts ZooKeeper for t. Without ZooKeeper installed the test is
// skipped with how to install it — or fails under CI=true, where .ci/run
// installs it and a skip would hide a missing test.
func Start(t testing.TB) *Server {
	t.Helper()
	if why := Available(); why != "" {
		msg := fmt.Sprintf("needs a real ZooKeeper, but %s: install it with apt-get install -y --no-install-recommends zookeeper (.ci/run does)", why)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	s, err := StartIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// tickTime is short so that tests can use short session timeouts:
// ZooKeeper grants between 2 and 20 ticks unless told otherwise.
const tickTime = 100 * time.Millisecond

// StartIn starts ZooKeeper with its data and log in dir (for programs
// such as scripts/failover; tests use Start). The caller stops it.
func StartIn(dir string) (*Server, error) {
	if why := Available(); why != "" {
		return nil, fmt.Errorf("cannot start ZooKeeper: %s: install it with apt-get install -y --no-install-recommends zookeeper", why)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("tickTime=%d\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nminSessionTimeout=%d\nmaxSessionTimeout=120000\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n",
		tickTime.Milliseconds(), filepath.Join(dir, "data"), port, 2*tickTime.Milliseconds())
	cfgFile := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command("java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dzookeeper.jmx.log4j.disable=true",
		"-cp", Jar, "org.apache.zookeeper.server.ZooKeeperServerMain", cfgFile)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so that Stop takes the JVM down whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ZooKeeper: %w", err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if s.ruok() {
			return s, nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "zookeeper.log"))
			return nil, fmt.Errorf("ZooKeeper exited at start: %s", tail(string(log)))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("ZooKeeper did not answer on %s within 60 s", s.Addr)
		}
	}
}

// ruok asks the four-letter-word question: a serving ZooKeeper answers imok.
func (s *Server) ruok() bool {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprint(c, "ruok")
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "imok")
}

// Stop kills ZooKeeper and waits for it to exit.
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

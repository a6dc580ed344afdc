// Package external holds gflink's end-to-end tests against real systems:
// high availability with a real ZooKeeper (failover, fencing of a paused
// leader, forged znodes), Kafka in and out (kfake, over TCP), a socket
// source. The test binary is gflink itself (clitest.Main). These tests
// live apart from cmd's so that each package stays within go test's
// ten-minute timeout under the race detector.
package external

import (
	"os/exec"
	"testing"

	"github.com/gflink/gflink/cmd"
	"github.com/gflink/gflink/internal/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, cmd.Main) }

// gflinkCmd runs this test binary as gflink in dir.
func gflinkCmd(dir string, args ...string) *exec.Cmd { return clitest.Command(dir, args...) }

// exitBrokenPipe is what gflink exits with when its stdout's reader went
// away.
const exitBrokenPipe = cmd.ExitBrokenPipe

type syncBuffer = clitest.SyncBuffer

var (
	writeWords = clitest.WriteWords
	countsOf   = clitest.CountsOf
	// checkCommittedOnce checks that the finished part files in a
	// directory hold every word count update exactly once.
	checkCommittedOnce = clitest.CheckCommittedOnce
	waitOutput         = clitest.WaitOutput
)

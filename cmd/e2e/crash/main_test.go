// Package crash holds gflink's crash tests: jobs killed with SIGKILL — in
// the middle of checkpoints, with the file sink, the rocksdb backend
// (incremental), unaligned checkpoints and the changelog — and every
// retained checkpoint restored, at other parallelisms, to exact counts.
// The test binary is gflink itself (clitest.Main). These tests live apart
// from cmd's so that each package stays within go test's ten-minute
// timeout under the race detector.
package crash

import (
	"os/exec"
	"testing"

	"github.com/gflink/gflink/cmd"
	"github.com/gflink/gflink/internal/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, cmd.Main) }

// gflinkCmd runs this test binary as gflink in dir.
func gflinkCmd(dir string, args ...string) *exec.Cmd { return clitest.Command(dir, args...) }

var (
	writeWords = clitest.WriteWords
	countsOf   = clitest.CountsOf
	// checkCommittedOnce checks that the finished part files in a
	// directory hold every word count update exactly once.
	checkCommittedOnce = clitest.CheckCommittedOnce
)

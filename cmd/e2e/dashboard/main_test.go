// Package dashboard tests gflink's web dashboard in a real browser:
// Debian's Chromium, driven with chromedp, against a job gflink runs.
// The test binary is gflink itself (clitest.Main).
package dashboard

import (
	"testing"

	"github.com/gflink/gflink/cmd"
	"github.com/gflink/gflink/internal/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, cmd.Main) }

package changelog_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine (a Writer's persister in particular) may outlive the
// package's tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

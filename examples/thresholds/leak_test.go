package main

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine may outlive the package's tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Package testutil is what gflink's tests share across packages: deadlines
// that scale with how slow the machine (or the build) is. A test waits on
// a condition, never a fixed sleep; its deadline only bounds a broken run,
// so it must be generous where the machine is loaded, under the race
// detector (about ten times slower), or both.
package testutil

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ScaleEnv multiplies every test deadline: GFLINK_TEST_TIMEOUT_SCALE=4
// for a machine four times slower than a quiet 2-core one.
const ScaleEnv = "GFLINK_TEST_TIMEOUT_SCALE"

var factor = sync.OnceValue(func() float64 {
	f := 1.0
	if raceEnabled {
		f = 5
	}
	if v, err := strconv.ParseFloat(os.Getenv(ScaleEnv), 64); err == nil && v > 0 {
		f = v
	}
	return f
})

// Scale is d for a test deadline: multiplied by GFLINK_TEST_TIMEOUT_SCALE,
// by default 1, or 5 under the race detector.
func Scale(d time.Duration) time.Duration { return time.Duration(float64(d) * factor()) }

// Deadline is the time d (scaled) from now.
func Deadline(d time.Duration) time.Time { return time.Now().Add(Scale(d)) }

// After is time.After of the scaled d.
func After(d time.Duration) <-chan time.Time { return time.After(Scale(d)) }

// RaceEnabled reports whether the tests run under the race detector.
func RaceEnabled() bool { return raceEnabled }

// Quick reports whether long randomised tests should draw fewer cases, and
// tests that repeat others on another backend skip: under -short, and under
// the race detector, which makes every test about ten times slower and
// looks for races, not for more failure points (the plain run covers
// those).
func Quick() bool { return testing.Short() || raceEnabled }

package gcpace

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPercentStartsTheNextCycleAtATenthAboveTheLiveHeapAndAFloor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		max  int
		want int
	}{
		{0, 100, 100},
		{1 << 20, 100, 100},         // a small heap: GOGC=100 as usual
		{17 << 20, 100, 100},        // 1.7 + 16 MB is above 100%: capped
		{32 << 20, 100, 60},         // 3.2 + 16 MB
		{64 << 20, 100, 35},         // 6.4 + 16 MB
		{512 << 20, 100, 13},        // 51.2 + 16 MB
		{1 << 30, 100, 11},          // 1 GiB: a tenth and 16 MB
		{uint64(10) << 30, 100, 10}, // the floor fades into the ratio
		{64 << 20, 30, 30},          // never above what the process had
		{1 << 20, 200, 200},         // a larger start is kept for small heaps
	} {
		if got := Percent(c.live, c.max); got != c.want {
			t.Errorf("Percent(%d MB, %d) = %d, want %d", c.live>>20, c.max, got, c.want)
		}
	}
}

func TestAJobPacesTheCollectorAndTheLastJobRestoresIt(t *testing.T) {
	if userPolicy() {
		t.Skip("GOGC or GOMEMLIMIT is set: gflink leaves the collector alone")
	}
	before := percent()
	releaseA := Acquire()
	releaseB := Acquire()
	// 96 MB of live, pointer-free state: the next cycle should start
	// about 25.6 MB above it, at ~26%, not at +100%.
	state := make([]byte, 96<<20)
	for i := range state {
		state[i] = byte(i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for percent() >= before {
		if time.Now().After(deadline) {
			t.Fatalf("the collector's percent stayed at %d with 96 MB live", percent())
		}
		runtime.GC() // each cycle's end runs the pacer
	}
	if p := percent(); p < 20 || p > 40 {
		t.Errorf("percent %d with 96 MB live: want about 26", p)
	}
	releaseA()
	releaseA() // a second release of the same job changes nothing
	if percent() >= before {
		t.Errorf("one job still runs, yet the percent is back at %d", percent())
	}
	releaseB()
	if got := percent(); got != before {
		t.Errorf("after the last job the percent is %d, want %d as before", got, before)
	}
	runtime.KeepAlive(state)
	// The pacer stops re-arming once nobody uses it.
	runtime.GC()
	runtime.GC()
	deadline = time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		a := armed
		mu.Unlock()
		if !a {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pacer is still armed with no job running")
		}
		runtime.GC()
	}
	if got := percent(); got != before {
		t.Errorf("a cycle after the last job set the percent to %d", got)
	}
}

// Package gcpace sets the Go garbage collector's heap headroom while jobs
// run, so that the process holds little more than the state it keeps.
//
// # Why
//
// The Go collector starts a cycle when the heap has grown by GOGC percent
// (100 by default) of what the last cycle found live. A stream job's heap
// is mostly keyed state — large, long-lived and free of pointers (the
// hashmap backend's tables keep keys in byte arenas and slots without
// pointers) — while its garbage is short-lived: lines, records, buffers.
// With GOGC=100 the heap grows to twice the state before each cycle, so
// word count over 1 M keys peaked at 150 MB of RSS around 60 MB of live
// heap, where a plain Go map holding the same keys takes about 90 MB.
//
// A cycle costs marking what is live and reachable through pointers, and
// pointer-free state is marked without being scanned: a cycle over 60 MB
// of keyed state takes well under a millisecond of CPU. So the headroom
// can be small for a large heap at almost no CPU cost. While a job runs,
// the collector's percent is set after every cycle so that the next one
// starts at
//
//	live × (1 + Ratio) + Floor
//
// (never above the percent the process started with): a small heap keeps
// the usual GOGC=100 pacing, a large one about a fifth of headroom.
//
// A user who sets GOGC or GOMEMLIMIT in the environment has chosen a
// policy; gflink then leaves the collector alone.
package gcpace

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

const (
	// Ratio is the headroom in proportion to the live heap.
	Ratio = 0.1
	// Floor is the headroom every heap gets: enough for a small job's
	// garbage to be collected no more often than with GOGC=100.
	Floor = 16 << 20
)

var (
	mu      sync.Mutex
	users   int  // jobs running
	armed   bool // a sentinel waits for the next cycle
	base    int  // the GC percent before the first job
	samples = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
)

// percent is the collector's GC percent now.
func percent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// userPolicy: the environment sets the collector's policy.
func userPolicy() bool {
	_, gogc := os.LookupEnv("GOGC")
	_, limit := os.LookupEnv("GOMEMLIMIT")
	return gogc || limit
}

// Acquire paces the collector until release is called (once per job:
// pacing ends when the last job releases it).
func Acquire() (release func()) {
	if userPolicy() {
		return func() {}
	}
	mu.Lock()
	users++
	if users == 1 {
		base = percent()
		if !armed {
			armed = true
			arm()
		}
	}
	mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if users--; users == 0 {
				debug.SetGCPercent(base)
			}
		})
	}
}

// sentinel is garbage as soon as it is armed: its finalizer runs after the
// cycle that found it unreachable. The pointer keeps it out of the tiny
// allocator, whose blocks may keep a finalized object alive.
type sentinel struct {
	_ *byte
	_ [16]byte
}

func arm() { runtime.SetFinalizer(&sentinel{}, onCycle) }

// onCycle runs on the runtime's finalizer goroutine after a cycle.
func onCycle(*sentinel) {
	mu.Lock()
	defer mu.Unlock()
	if users == 0 {
		armed = false
		return
	}
	metrics.Read(samples)
	if samples[0].Value.Kind() == metrics.KindUint64 {
		debug.SetGCPercent(Percent(samples[0].Value.Uint64(), base))
	}
	arm()
}

// Percent is the GC percent that starts the next cycle at
// live × (1 + Ratio) + Floor, at most max.
func Percent(live uint64, max int) int {
	if live == 0 {
		return max
	}
	p := int(100 * (Ratio + float64(Floor)/float64(live)))
	if max >= 0 && p > max {
		p = max
	}
	return p
}

package connectors

import (
	"math"
	"sync"
	"time"
)

// throttled reports whether a source's Rate limits it: a positive, finite
// rate. 0 means as fast as possible, and so does +Inf (a user asking for an
// infinite rate); NaN and negative rates are refused where they are parsed.
func throttled(rate float64) bool { return rate > 0 && !math.IsInf(rate, 1) }

// pacer paces a reader to rate units per second from its first poll: a
// unit may go while fewer than rate×elapsed have gone (so a reader may
// overshoot by the last item's weight, as Flink's rate-limited sources do).
type pacer struct {
	rate    float64 // units per second; 0: unthrottled
	started time.Time
	used    float64
}

func newPacer(rate float64, parallelism int) pacer {
	if !throttled(rate) {
		return pacer{}
	}
	return pacer{rate: rate / float64(max(parallelism, 1))}
}

// allows reports whether another item may go now.
func (p *pacer) allows() bool {
	if p.rate == 0 {
		return true
	}
	if p.started.IsZero() {
		p.started = time.Now()
	}
	return p.used < p.rate*time.Since(p.started).Seconds()
}

func (p *pacer) spend(units float64) { p.used += units }

// next is when the next item may go.
func (p *pacer) next() time.Time {
	if p.rate == 0 || p.started.IsZero() {
		return time.Now()
	}
	return paceTime(p.started, p.used, p.rate)
}

// paceTime is the first instant at which units have been allowed since
// start at rate units per second. It rounds up, and one nanosecond more:
// at an instant rounded down, the reader would find the unit not yet
// allowed, be told to come back at that same instant, and spin — forever
// on a clock that only moves when the reader waits (testing/synctest).
func paceTime(start time.Time, units, rate float64) time.Time {
	secs := min(units/rate, float64(365*24*3600)) // a tiny rate must not overflow a Duration
	return start.Add(time.Duration(math.Ceil(secs*float64(time.Second))) + 1)
}

// Throttle paces the records that pass it, over all the subtasks that
// share it, to a rate per second: a stand-in for a slow sink (a database
// that takes so many writes a second), which backpressures the job.
type Throttle struct {
	mu      sync.Mutex
	rate    float64
	started time.Time
	n       float64
}

// NewThrottle returns a throttle of rate records per second (0 or +Inf:
// no limit).
func NewThrottle(rate float64) *Throttle { return &Throttle{rate: rate} }

// Wait returns when the next record may pass.
func (t *Throttle) Wait() {
	if !throttled(t.rate) {
		return
	}
	t.mu.Lock()
	if t.started.IsZero() {
		t.started = time.Now()
	}
	at := paceTime(t.started, t.n, t.rate)
	t.n++
	t.mu.Unlock()
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
}

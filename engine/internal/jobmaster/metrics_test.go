package jobmaster

import (
	"testing"
	"time"

	"github.com/gflink/gflink/engine/internal/task"
)

// TestMeterRatesFollowTheReader: a rate compares a reading with a sample
// of the last 5 s when the reader polls that often, with its previous
// reading when it polls less often (a 15 s scrape), and with the task's
// start before the first reading — never with a reading of the same
// instant.
func TestMeterRatesFollowTheReader(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := &task.Metrics{Started: t0}
	var ms meters
	at := func(d time.Duration, in int64) (time.Time, time.Time) {
		m.RecordsIn.Store(in)
		cur, base := ms.rates(m, t0.Add(d))
		return cur.at, base.at
	}
	if _, base := at(time.Second, 100); !base.Equal(t0) {
		t.Errorf("first reading: base %v; want the task's start", base.Sub(t0))
	}
	if _, base := at(16*time.Second, 1100); !base.Equal(t0.Add(time.Second)) {
		t.Errorf("a reading 15 s after the last: base %v; want the last reading (1 s)", base.Sub(t0))
	}
	if _, base := at(16*time.Second+50*time.Millisecond, 1105); !base.Equal(t0.Add(time.Second)) {
		t.Errorf("a reading 50 ms after the last: base %v; want the one before it (1 s), not one 50 ms old", base.Sub(t0))
	}
	// Polled every second: the base is the oldest sample within 5 s.
	for s := 17; s <= 24; s++ {
		at(time.Duration(s)*time.Second, int64(s*100))
	}
	if _, base := at(25*time.Second, 2500); base.Before(t0.Add(20*time.Second)) || base.After(t0.Add(21*time.Second)) {
		t.Errorf("polled every second: base %v; want about 5 s before the reading", base.Sub(t0))
	}
}

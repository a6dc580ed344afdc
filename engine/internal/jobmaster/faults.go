package jobmaster

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/gflink/gflink/engine/config"
)

// FaultInjector fails a job's attempts on purpose, to show and test that a
// job recovers exactly: JobOptions.Faults, or by default the
// fault-injection.* keys. Source tasks call it, concurrently, as they emit.
type FaultInjector interface {
	// SourceEmitted is told how many records the sources of an attempt
	// have emitted so far and how many checkpoints it has completed; an
	// error fails the task whose records crossed the line.
	SourceEmitted(attempt int, emitted, checkpoints int64) error
}

// configFaults is the fault-injection.* keys' injector: once the sources
// of an attempt have emitted fault-injection.fail-after-records records
// (and, with fault-injection.after-checkpoints, that many checkpoints of
// the attempt have completed), the attempt fails, once — at most
// fault-injection.max-failures times in the job's life.
type configFaults struct {
	after, max, checkpoints int64
	injected                atomic.Int64
	lastFailed              atomic.Int64 // the last attempt failed, -1 for none
}

// faultsFromConfig returns the configured injector, or nil when
// fault-injection.fail-after-records is not set; it logs that faults will
// come, so that nobody mistakes them for real ones.
func faultsFromConfig(c *config.Configuration, log *slog.Logger) FaultInjector {
	fa, _ := FaultFailAfterRecords.Get(c)
	fm, _ := FaultMaxFailures.Get(c)
	fc, _ := FaultAfterCheckpoints.Get(c)
	if fa <= 0 {
		return nil
	}
	after := ""
	if fc > 0 {
		after = fmt.Sprintf(" and %d checkpoints complete", fc)
	}
	log.Warn(fmt.Sprintf("Fault injection is on: a task will fail after the sources emit %d records%s (at most %d times).", fa, after, fm))
	f := &configFaults{after: int64(fa), max: int64(fm), checkpoints: int64(fc)}
	f.lastFailed.Store(-1)
	return f
}

func (f *configFaults) SourceEmitted(attempt int, emitted, checkpoints int64) error {
	if emitted < f.after || checkpoints < f.checkpoints || f.injected.Load() >= f.max {
		return nil
	}
	last := f.lastFailed.Load()
	if last >= int64(attempt) || !f.lastFailed.CompareAndSwap(last, int64(attempt)) {
		return nil // this attempt has failed already
	}
	k := f.injected.Add(1)
	after := ""
	if f.checkpoints > 0 {
		after = fmt.Sprintf(" and %d checkpoints completed (fault-injection.after-checkpoints=%d)", checkpoints, f.checkpoints)
	}
	return fmt.Errorf("injected failure %d of %d, after the sources emitted %d records (fault-injection.fail-after-records=%d)%s",
		k, f.max, emitted, f.after, after)
}

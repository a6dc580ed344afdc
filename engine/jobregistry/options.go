package jobregistry

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/engine/config"
)

// The options of the registry, with the keys of Flink's job store (the
// JobManager's memory of ended jobs, which its `list -a` shows).
var (
	ExpirationTime = config.NewOption("jobstore.expiration-time", parseSeconds, config.FormatDuration,
		"a duration, e.g. '1 h' or '30 min'; a bare number means seconds, as in Flink").
		WithDefault(time.Hour).
		WithDescription("How long `gflink list -a` shows a job after it ended (or after its process died without ending it); older entries are removed from $GFLINK_HOME/jobs when `list` runs. 0 keeps them until jobstore.max-capacity is reached. `gflink list --clear` removes every ended job's entry at once.")
	MaxCapacity = config.Int("jobstore.max-capacity").WithDefault(DefaultMaxEnded).
			WithCheck(config.Positive).
			WithDescription("How many ended jobs `gflink list -a` keeps at most; the oldest go first. (Flink's default is unbounded.)")
)

// Options lists the registry's options.
func Options() []config.AnyOption { return []config.AnyOption{ExpirationTime, MaxCapacity} }

// parseSeconds reads Flink's jobstore.expiration-time: a number of
// seconds, or a duration with a unit.
func parseSeconds(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		if n < 0 {
			return 0, errors.New("must not be negative")
		}
		return time.Duration(n) * time.Second, nil
	}
	return config.ParseDuration(s)
}

// Configure sets the registry's limits from the configuration.
func (r *Registry) Configure(c *config.Configuration) error {
	exp, err := ExpirationTime.Get(c)
	if err != nil {
		return err
	}
	capacity, err := MaxCapacity.Get(c)
	if err != nil {
		return err
	}
	r.Expiration, r.MaxEnded = exp, capacity
	return nil
}

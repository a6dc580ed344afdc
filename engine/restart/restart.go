// Package restart holds Flink's four restart strategies as pure decision
// logic: told of each failure and its time, a strategy says whether the job
// may restart and after what delay. Time is passed in, never read.
package restart

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/gflink/gflink/engine/config"
)

// Strategy type names, as written in restart-strategy.type.
const (
	TypeNone             = "none"
	TypeFixedDelay       = "fixed-delay"
	TypeFailureRate      = "failure-rate"
	TypeExponentialDelay = "exponential-delay"
)

func parseType(s string) (string, error) {
	switch strings.ToLower(s) {
	case "none", "off", "disable":
		return TypeNone, nil
	case "fixed-delay", "fixeddelay":
		return TypeFixedDelay, nil
	case "failure-rate", "failurerate":
		return TypeFailureRate, nil
	case "exponential-delay", "exponentialdelay":
		return TypeExponentialDelay, nil
	}
	// Flink lower-cases the value before looking it up, and names the
	// lower-cased value.
	return "", fmt.Errorf("%s is an unknown value of RestartStrategyType.", strings.ToLower(s))
}

// The restart-strategy options, with Flink's (1.19+) defaults.
var (
	Type = config.NewOption("restart-strategy.type", parseType, func(s string) string { return s },
		"none (or off, disable), fixed-delay, failure-rate or exponential-delay").
		WithDeprecatedKeys("restart-strategy").
		WithDescription("How the job restarts after a failure. Unset: exponential-delay when checkpointing is enabled, none when it is not.")
	FixedDelayAttempts = config.Int("restart-strategy.fixed-delay.attempts").WithDefault(1).
				WithCheck(config.NonNegative).WithAccepted("an integer >= 0").
				WithDescription("fixed-delay: how many restarts before the job fails.")
	FixedDelayDelay = config.Duration("restart-strategy.fixed-delay.delay").WithDefault(time.Second).
			WithDescription("fixed-delay: the pause before each restart.")
	FailureRateMax = config.Int("restart-strategy.failure-rate.max-failures-per-interval").WithDefault(1).
			WithCheck(config.Positive).WithAccepted("an integer >= 1").
			WithDescription("failure-rate: how many failures within the interval are tolerated.")
	FailureRateInterval = config.Duration("restart-strategy.failure-rate.failure-rate-interval").WithDefault(time.Minute).
				WithDescription("failure-rate: the interval failures are counted over.")
	FailureRateDelay = config.Duration("restart-strategy.failure-rate.delay").WithDefault(time.Second).
				WithDescription("failure-rate: the pause before each restart.")
	ExpInitialBackoff = config.Duration("restart-strategy.exponential-delay.initial-backoff").WithDefault(time.Second).
				WithDescription("exponential-delay: the first pause.")
	ExpMaxBackoff = config.Duration("restart-strategy.exponential-delay.max-backoff").WithDefault(time.Minute).
			WithDescription("exponential-delay: the longest pause.")
	ExpMultiplier = config.Float("restart-strategy.exponential-delay.backoff-multiplier").WithDefault(1.5).
			WithCheck(func(f float64) error {
			if f < 1 {
				return errors.New("must be >= 1")
			}
			return nil
		}).WithAccepted("a decimal number >= 1").
		WithDescription("exponential-delay: each pause is the previous one times this.")
	ExpResetThreshold = config.Duration("restart-strategy.exponential-delay.reset-backoff-threshold").WithDefault(time.Hour).
				WithDescription("exponential-delay: after running this long without failure, the pause and the attempt count reset.")
	ExpJitter = config.Float("restart-strategy.exponential-delay.jitter-factor").WithDefault(0.1).
			WithCheck(func(f float64) error {
			if f < 0 || f > 1 {
				return errors.New("must be between 0 and 1")
			}
			return nil
		}).WithAccepted("a decimal number between 0 and 1").
		WithDescription("exponential-delay: each pause varies randomly by up to this fraction.")
	ExpAttempts = config.Int("restart-strategy.exponential-delay.attempts-before-reset-backoff").WithDefault(math.MaxInt32).
			WithCheck(config.Positive).WithAccepted("an integer >= 1").
			WithDescription("exponential-delay: how many restarts in a row (without a reset) before the job fails.")
)

// Options lists the restart options, for validation and docs.
func Options() []config.AnyOption {
	return []config.AnyOption{Type, FixedDelayAttempts, FixedDelayDelay, FailureRateMax, FailureRateInterval,
		FailureRateDelay, ExpInitialBackoff, ExpMaxBackoff, ExpMultiplier, ExpResetThreshold, ExpJitter, ExpAttempts}
}

// Strategy decides whether and when to restart after a failure.
type Strategy interface {
	// OnFailure records a failure at now and returns whether the job may
	// restart and the pause before it does.
	OnFailure(now time.Time) (restart bool, delay time.Duration)
	// String names the strategy and its settings, as in Flink's
	// "Recovery is suppressed by ..." message.
	String() string
}

// FromConfig builds the configured strategy. checkpointing says whether
// checkpointing is enabled, which decides the default.
func FromConfig(c *config.Configuration, checkpointing bool, rng *rand.Rand) (Strategy, error) {
	typ, set, err := Type.Lookup(c)
	if err != nil {
		return nil, err
	}
	if !set {
		if !checkpointing {
			return None{}, nil
		}
		// As Flink's RestartBackoffTimeStrategyFactoryLoader: the default
		// strategy takes the default settings, not the configured
		// restart-strategy.exponential-delay.* values.
		return &ExponentialDelay{Initial: ExpInitialBackoff.Default(), Max: ExpMaxBackoff.Default(),
			Multiplier: ExpMultiplier.Default(), ResetThreshold: ExpResetThreshold.Default(),
			Jitter: ExpJitter.Default(), AttemptsBeforeReset: ExpAttempts.Default(), rng: rng}, nil
	}
	var errs []error
	must := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var s Strategy
	switch typ {
	case TypeNone:
		s = None{}
	case TypeFixedDelay:
		f := &FixedDelay{}
		f.Attempts, err = FixedDelayAttempts.Get(c)
		must(err)
		f.Delay, err = FixedDelayDelay.Get(c)
		must(err)
		s = f
	case TypeFailureRate:
		f := &FailureRate{}
		f.MaxFailures, err = FailureRateMax.Get(c)
		must(err)
		f.Interval, err = FailureRateInterval.Get(c)
		must(err)
		f.Delay, err = FailureRateDelay.Get(c)
		must(err)
		s = f
	case TypeExponentialDelay:
		e := &ExponentialDelay{rng: rng}
		e.Initial, err = ExpInitialBackoff.Get(c)
		must(err)
		e.Max, err = ExpMaxBackoff.Get(c)
		must(err)
		e.Multiplier, err = ExpMultiplier.Get(c)
		must(err)
		e.ResetThreshold, err = ExpResetThreshold.Get(c)
		must(err)
		e.Jitter, err = ExpJitter.Get(c)
		must(err)
		e.AttemptsBeforeReset, err = ExpAttempts.Get(c)
		must(err)
		s = e
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// None never restarts.
type None struct{}

func (None) OnFailure(time.Time) (bool, time.Duration) { return false, 0 }
func (None) String() string                            { return "NoRestartBackoffTimeStrategy" }

// FixedDelay restarts up to Attempts times, pausing Delay each time.
type FixedDelay struct {
	Attempts int
	Delay    time.Duration
	used     int
}

func (f *FixedDelay) OnFailure(time.Time) (bool, time.Duration) {
	f.used++
	return f.used <= f.Attempts, f.Delay
}

func (f *FixedDelay) String() string {
	return fmt.Sprintf("FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=%d, backoffTimeMS=%d)", f.Attempts, f.Delay.Milliseconds())
}

// FailureRate restarts unless more than MaxFailures failures happened
// within Interval.
type FailureRate struct {
	MaxFailures int
	Interval    time.Duration
	Delay       time.Duration
	times       []time.Time // the last MaxFailures failures
}

func (f *FailureRate) OnFailure(now time.Time) (bool, time.Duration) {
	f.times = append(f.times, now)
	if len(f.times) > f.MaxFailures+1 {
		f.times = f.times[1:]
	}
	if len(f.times) > f.MaxFailures && now.Sub(f.times[0]) <= f.Interval {
		return false, 0
	}
	return true, f.Delay
}

func (f *FailureRate) String() string {
	return fmt.Sprintf("FailureRateRestartBackoffTimeStrategy(FailureRateRestartBackoffTimeStrategy(failuresIntervalMS=%d,backoffTimeMS=%d,maxFailuresPerInterval=%d)",
		f.Interval.Milliseconds(), f.Delay.Milliseconds(), f.MaxFailures)
}

// ExponentialDelay pauses Initial, then Multiplier times longer after each
// failure, up to Max, with ±Jitter randomness. After ResetThreshold without
// a failure the pause and the count start over; after AttemptsBeforeReset
// restarts in a row the job fails.
type ExponentialDelay struct {
	Initial, Max        time.Duration
	Multiplier          float64
	ResetThreshold      time.Duration
	Jitter              float64
	AttemptsBeforeReset int

	rng         *rand.Rand
	attempts    int
	lastRestart time.Time // when the job was last restarted
}

func (e *ExponentialDelay) OnFailure(now time.Time) (bool, time.Duration) {
	if e.attempts == 0 || now.Sub(e.lastRestart) >= e.ResetThreshold {
		e.attempts = 0
	}
	// As Flink: initial × multiplier^attempt, with jitter of ± factor × that,
	// then kept within [initial, max].
	base := 0.0
	if e.Initial > 0 {
		base = float64(e.Initial) * math.Pow(e.Multiplier, float64(e.attempts))
	}
	e.attempts++
	if e.attempts > e.AttemptsBeforeReset {
		return false, 0
	}
	d := base
	if e.Jitter > 0 && e.rng != nil {
		d += (e.rng.Float64()*2 - 1) * base * e.Jitter
	}
	delay := time.Duration(math.Max(math.Min(d, float64(e.Max)), float64(e.Initial)))
	e.lastRestart = now.Add(delay)
	return true, delay
}

func (e *ExponentialDelay) String() string {
	return fmt.Sprintf("ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS=%d, maxBackoffMS=%d, backoffMultiplier=%v, resetBackoffThresholdMS=%d, jitterFactor=%v, attemptsBeforeResetBackoff=%d)",
		e.Initial.Milliseconds(), e.Max.Milliseconds(), e.Multiplier, e.ResetThreshold.Milliseconds(), e.Jitter, e.AttemptsBeforeReset)
}

package restart

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/engine/config"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func conf(kv ...string) *config.Configuration {
	c := config.New()
	for i := 0; i < len(kv); i += 2 {
		c.SetString(kv[i], kv[i+1], "test")
	}
	return c
}

func seeded() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func mustFromConfig(t *testing.T, c *config.Configuration, checkpointing bool) Strategy {
	t.Helper()
	s, err := FromConfig(c, checkpointing, seeded())
	if err != nil {
		t.Fatalf("FromConfig: %v", err)
	}
	return s
}

func TestFromConfigDefaultWithoutCheckpointingIsNone(t *testing.T) {
	s := mustFromConfig(t, config.New(), false)
	if _, ok := s.(None); !ok {
		t.Fatalf("got %T (%v), want None", s, s)
	}
	if ok, _ := s.OnFailure(t0); ok {
		t.Fatal("None restarted")
	}
}

func TestFromConfigDefaultWithCheckpointingIsExponentialDelay(t *testing.T) {
	s := mustFromConfig(t, config.New(), true)
	e, ok := s.(*ExponentialDelay)
	if !ok {
		t.Fatalf("got %T (%v), want *ExponentialDelay", s, s)
	}
	want := ExponentialDelay{Initial: time.Second, Max: time.Minute, Multiplier: 1.5, ResetThreshold: time.Hour,
		Jitter: 0.1, AttemptsBeforeReset: math.MaxInt32}
	if e.Initial != want.Initial || e.Max != want.Max || e.Multiplier != want.Multiplier ||
		e.ResetThreshold != want.ResetThreshold || e.Jitter != want.Jitter || e.AttemptsBeforeReset != want.AttemptsBeforeReset {
		t.Fatalf("got %v, want the 1.19+ defaults %v", e, &want)
	}
	if e.rng == nil {
		t.Fatal("the default strategy got no random source: no jitter")
	}
}

// As in Flink's RestartBackoffTimeStrategyFactoryLoader, the default
// (unset type) strategy uses the default settings; the exponential-delay
// keys apply only when exponential-delay is chosen explicitly.
func TestFromConfigDefaultIgnoresExponentialKeys(t *testing.T) {
	c := conf("restart-strategy.exponential-delay.initial-backoff", "5 s",
		"restart-strategy.exponential-delay.attempts-before-reset-backoff", "3")
	e := mustFromConfig(t, c, true).(*ExponentialDelay)
	if e.Initial != time.Second || e.AttemptsBeforeReset != math.MaxInt32 {
		t.Fatalf("default strategy took configured values: %v", e)
	}
	c.SetString("restart-strategy.type", "exponential-delay", "test")
	e = mustFromConfig(t, c, true).(*ExponentialDelay)
	if e.Initial != 5*time.Second || e.AttemptsBeforeReset != 3 {
		t.Fatalf("explicit strategy ignored configured values: %v", e)
	}
}

func TestFromConfigAliases(t *testing.T) {
	cases := []struct {
		value string
		want  string // the String() prefix
	}{
		{"none", "NoRestartBackoffTimeStrategy"},
		{"off", "NoRestartBackoffTimeStrategy"},
		{"disable", "NoRestartBackoffTimeStrategy"},
		{"NONE", "NoRestartBackoffTimeStrategy"},
		{"Off", "NoRestartBackoffTimeStrategy"},
		{"DISABLE", "NoRestartBackoffTimeStrategy"},
		{"fixed-delay", "FixedDelayRestartBackoffTimeStrategy("},
		{"fixeddelay", "FixedDelayRestartBackoffTimeStrategy("},
		{"Fixed-Delay", "FixedDelayRestartBackoffTimeStrategy("},
		{"FIXEDDELAY", "FixedDelayRestartBackoffTimeStrategy("},
		{"failure-rate", "FailureRateRestartBackoffTimeStrategy("},
		{"failurerate", "FailureRateRestartBackoffTimeStrategy("},
		{"FailureRate", "FailureRateRestartBackoffTimeStrategy("},
		{"exponential-delay", "ExponentialDelayRestartBackoffTimeStrategy("},
		{"exponentialdelay", "ExponentialDelayRestartBackoffTimeStrategy("},
		{"Exponential-Delay", "ExponentialDelayRestartBackoffTimeStrategy("},
		{" fixed-delay ", "FixedDelayRestartBackoffTimeStrategy("},
	}
	for _, tc := range cases {
		for _, cp := range []bool{false, true} {
			s := mustFromConfig(t, conf("restart-strategy.type", tc.value), cp)
			if !strings.HasPrefix(s.String(), tc.want) {
				t.Errorf("type %q (checkpointing %v): got %s, want prefix %s", tc.value, cp, s, tc.want)
			}
		}
	}
}

// An explicit none wins over the checkpointing default.
func TestFromConfigExplicitNoneWithCheckpointing(t *testing.T) {
	s := mustFromConfig(t, conf("restart-strategy.type", "none"), true)
	if _, ok := s.(None); !ok {
		t.Fatalf("got %T, want None", s)
	}
}

func TestFromConfigUnknownValue(t *testing.T) {
	for _, v := range []string{"bogus", "Fixed_Delay", "always"} {
		_, err := FromConfig(conf("restart-strategy.type", v), true, seeded())
		if err == nil {
			t.Fatalf("%q: no error", v)
		}
		want := strings.ToLower(v) + " is an unknown value of RestartStrategyType."
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %q does not contain %q", v, err, want)
		}
		if !strings.Contains(err.Error(), "restart-strategy.type") {
			t.Errorf("%q: error %q does not name the key", v, err)
		}
	}
}

func TestFromConfigDeprecatedKey(t *testing.T) {
	s := mustFromConfig(t, conf("restart-strategy", "fixed-delay", "restart-strategy.fixed-delay.attempts", "4"), false)
	f, ok := s.(*FixedDelay)
	if !ok {
		t.Fatalf("got %T, want *FixedDelay", s)
	}
	if f.Attempts != 4 {
		t.Fatalf("attempts = %d, want 4", f.Attempts)
	}
	// An unknown value under the deprecated key names that key.
	_, err := FromConfig(conf("restart-strategy", "nope"), false, seeded())
	if err == nil || !strings.Contains(err.Error(), "nope is an unknown value of RestartStrategyType.") ||
		!strings.Contains(err.Error(), "'restart-strategy'") {
		t.Fatalf("err = %v", err)
	}
	// The current key wins over the deprecated one.
	s = mustFromConfig(t, conf("restart-strategy", "fixed-delay", "restart-strategy.type", "none"), true)
	if _, ok := s.(None); !ok {
		t.Fatalf("got %T, want None (restart-strategy.type wins)", s)
	}
}

func TestFromConfigBadSubOption(t *testing.T) {
	cases := [][]string{
		{"restart-strategy.type", "fixed-delay", "restart-strategy.fixed-delay.attempts", "-1"},
		{"restart-strategy.type", "fixed-delay", "restart-strategy.fixed-delay.delay", "soon"},
		{"restart-strategy.type", "failure-rate", "restart-strategy.failure-rate.max-failures-per-interval", "0"},
		{"restart-strategy.type", "exponential-delay", "restart-strategy.exponential-delay.jitter-factor", "2"},
		{"restart-strategy.type", "exponential-delay", "restart-strategy.exponential-delay.backoff-multiplier", "0.5"},
		{"restart-strategy.type", "exponential-delay", "restart-strategy.exponential-delay.attempts-before-reset-backoff", "0"},
	}
	for _, kv := range cases {
		s, err := FromConfig(conf(kv...), false, seeded())
		if err == nil {
			t.Errorf("%v: no error, got %v", kv, s)
			continue
		}
		var ve *config.ValueError
		if !errors.As(err, &ve) || ve.Key != kv[2] {
			t.Errorf("%v: error %v does not name %s", kv, err, kv[2])
		}
	}
}

func TestFixedDelayDefaults(t *testing.T) {
	s := mustFromConfig(t, conf("restart-strategy.type", "fixed-delay"), false)
	f := s.(*FixedDelay)
	if f.Attempts != 1 || f.Delay != time.Second {
		t.Fatalf("got %v, want 1 attempt, 1 s", f)
	}
	if got, want := s.String(), "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=1, backoffTimeMS=1000)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestFixedDelayAttemptsAndDelay(t *testing.T) {
	s := mustFromConfig(t, conf("restart-strategy.type", "fixed-delay",
		"restart-strategy.fixed-delay.attempts", "3", "restart-strategy.fixed-delay.delay", "250 ms"), false)
	now := t0
	for i := 1; i <= 3; i++ {
		ok, d := s.OnFailure(now)
		if !ok || d != 250*time.Millisecond {
			t.Fatalf("failure %d: (%v, %v), want (true, 250ms)", i, ok, d)
		}
		now = now.Add(time.Hour) // time does not matter for fixed-delay
	}
	if ok, _ := s.OnFailure(now); ok {
		t.Fatal("fourth failure restarted with 3 attempts")
	}
	if ok, _ := s.OnFailure(now.Add(24 * time.Hour)); ok {
		t.Fatal("restarted after the attempts were used up")
	}
}

func TestFixedDelayZeroAttempts(t *testing.T) {
	s := &FixedDelay{Attempts: 0, Delay: time.Second}
	if ok, _ := s.OnFailure(t0); ok {
		t.Fatal("restarted with 0 attempts")
	}
}

func TestFailureRateDefaults(t *testing.T) {
	s := mustFromConfig(t, conf("restart-strategy.type", "failure-rate"), false)
	f := s.(*FailureRate)
	if f.MaxFailures != 1 || f.Interval != time.Minute || f.Delay != time.Second {
		t.Fatalf("got %v", f)
	}
	want := "FailureRateRestartBackoffTimeStrategy(FailureRateRestartBackoffTimeStrategy(failuresIntervalMS=60000,backoffTimeMS=1000,maxFailuresPerInterval=1)"
	if s.String() != want {
		t.Fatalf("String() = %q, want %q", s, want)
	}
}

func TestFailureRateWindow(t *testing.T) {
	s := mustFromConfig(t, conf("restart-strategy.type", "failure-rate",
		"restart-strategy.failure-rate.max-failures-per-interval", "2",
		"restart-strategy.failure-rate.failure-rate-interval", "10 s",
		"restart-strategy.failure-rate.delay", "3 s"), false)
	// As Flink: a failure restarts unless it is the (max+1)-th within the
	// interval, "within" meaning now - oldest <= interval.
	check := []struct {
		at   time.Duration
		want bool
	}{
		{0, true},
		{2 * time.Second, true},
		{5 * time.Second, false},                     // 0, 2, 5: 5-0 <= 10
		{11 * time.Second, false},                    // 2, 5, 11: 11-2 <= 10
		{16 * time.Second, true},                     // 5, 11, 16: 16-5 > 10
		{17 * time.Second, false},                    // 11, 16, 17
		{26 * time.Second, false},                    // 16, 17, 26: exactly 10 s is still within
		{27*time.Second + time.Millisecond, true},    // 17, 26, 27.001: more than 10 s
		{27*time.Second + 2*time.Millisecond, false}, // 26, 27.001, 27.002
		{time.Hour, true},
		{time.Hour + time.Second, true},
		{time.Hour + 2*time.Second, false},
	}
	for _, st := range check {
		ok, d := s.OnFailure(t0.Add(st.at))
		if ok != st.want {
			t.Fatalf("failure at %v: restart = %v, want %v", st.at, ok, st.want)
		}
		if ok && d != 3*time.Second {
			t.Fatalf("failure at %v: delay %v, want 3s", st.at, d)
		}
	}
}

func TestFailureRateOnePerInterval(t *testing.T) {
	f := &FailureRate{MaxFailures: 1, Interval: time.Minute, Delay: time.Second}
	if ok, _ := f.OnFailure(t0); !ok {
		t.Fatal("first failure did not restart")
	}
	if ok, _ := f.OnFailure(t0.Add(30 * time.Second)); ok {
		t.Fatal("second failure within a minute restarted")
	}
	if ok, _ := f.OnFailure(t0.Add(91 * time.Second)); !ok {
		t.Fatal("failure 61 s after the previous one did not restart")
	}
}

func expDelay(t *testing.T, kv ...string) *ExponentialDelay {
	t.Helper()
	return mustFromConfig(t, conf(append([]string{"restart-strategy.type", "exponential-delay"}, kv...)...), true).(*ExponentialDelay)
}

func TestExponentialDelayGrowsAndCaps(t *testing.T) {
	e := expDelay(t, "restart-strategy.exponential-delay.initial-backoff", "1 s",
		"restart-strategy.exponential-delay.max-backoff", "10 s",
		"restart-strategy.exponential-delay.backoff-multiplier", "2",
		"restart-strategy.exponential-delay.jitter-factor", "0")
	now := t0
	want := []time.Duration{1, 2, 4, 8, 10, 10, 10}
	for i, w := range want {
		ok, d := e.OnFailure(now)
		if !ok || d != w*time.Second {
			t.Fatalf("failure %d: (%v, %v), want (true, %v)", i+1, ok, d, w*time.Second)
		}
		now = now.Add(d + time.Minute) // fails a minute after each restart
	}
}

func TestExponentialDelayDefaultMultiplier(t *testing.T) {
	e := expDelay(t, "restart-strategy.exponential-delay.jitter-factor", "0")
	var got []time.Duration
	now := t0
	for range 12 {
		_, d := e.OnFailure(now)
		got = append(got, d)
		now = now.Add(d + time.Second)
	}
	want := []time.Duration{1000, 1500, 2250, 3375, 5062, 7593, 11390, 17085, 25628, 38443, 57665, 60000}
	for i := range want {
		// Compare in milliseconds, as Flink computes them.
		if got[i].Milliseconds() != int64(want[i]) {
			t.Fatalf("delays %v, want (ms) %v", got, want)
		}
	}
}

func TestExponentialDelayJitter(t *testing.T) {
	e := expDelay(t, "restart-strategy.exponential-delay.initial-backoff", "1 s",
		"restart-strategy.exponential-delay.max-backoff", "100 h",
		"restart-strategy.exponential-delay.backoff-multiplier", "2",
		"restart-strategy.exponential-delay.jitter-factor", "0.25")
	now := t0
	base := time.Second
	distinct := map[time.Duration]bool{}
	for i := range 15 {
		ok, d := e.OnFailure(now)
		if !ok {
			t.Fatalf("failure %d did not restart", i+1)
		}
		lo := max(time.Duration(float64(base)*0.75), time.Second)
		hi := time.Duration(float64(base) * 1.25)
		if d < lo || d > hi {
			t.Fatalf("failure %d: delay %v outside [%v, %v] (base %v ± 25%%)", i+1, d, lo, hi, base)
		}
		distinct[d-base] = true
		base *= 2
		now = now.Add(d + time.Second)
	}
	if len(distinct) < 10 {
		t.Fatalf("jitter looks constant: %v", distinct)
	}
}

// Jitter never takes the pause above max-backoff or below initial-backoff.
func TestExponentialDelayJitterStaysWithinBounds(t *testing.T) {
	for seed := range uint64(50) {
		e := &ExponentialDelay{Initial: time.Second, Max: 5 * time.Second, Multiplier: 1.5, ResetThreshold: time.Hour,
			Jitter: 1, AttemptsBeforeReset: math.MaxInt32, rng: rand.New(rand.NewPCG(seed, 7))}
		now := t0
		for range 20 {
			ok, d := e.OnFailure(now)
			if !ok || d < time.Second || d > 5*time.Second {
				t.Fatalf("seed %d: (%v, %v) outside [1s, 5s]", seed, ok, d)
			}
			now = now.Add(d + time.Second)
		}
	}
}

func TestExponentialDelaySameSeedSameDelays(t *testing.T) {
	run := func() []time.Duration {
		e, err := FromConfig(conf("restart-strategy.type", "exponential-delay"), true, rand.New(rand.NewPCG(42, 42)))
		if err != nil {
			t.Fatal(err)
		}
		var out []time.Duration
		now := t0
		for range 8 {
			_, d := e.OnFailure(now)
			out = append(out, d)
			now = now.Add(d + time.Second)
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different delays: %v vs %v", a, b)
		}
	}
}

func TestExponentialDelayNilRandHasNoJitter(t *testing.T) {
	e := &ExponentialDelay{Initial: time.Second, Max: time.Minute, Multiplier: 2, ResetThreshold: time.Hour,
		Jitter: 0.5, AttemptsBeforeReset: 10}
	_, d1 := e.OnFailure(t0)
	_, d2 := e.OnFailure(t0.Add(2 * time.Second))
	if d1 != time.Second || d2 != 2*time.Second {
		t.Fatalf("delays %v, %v; want 1s, 2s", d1, d2)
	}
}

func TestExponentialDelayResetAfterThreshold(t *testing.T) {
	e := expDelay(t, "restart-strategy.exponential-delay.initial-backoff", "1 s",
		"restart-strategy.exponential-delay.max-backoff", "1 min",
		"restart-strategy.exponential-delay.backoff-multiplier", "2",
		"restart-strategy.exponential-delay.jitter-factor", "0",
		"restart-strategy.exponential-delay.reset-backoff-threshold", "10 min",
		"restart-strategy.exponential-delay.attempts-before-reset-backoff", "3")
	// Failures 1 s after each restart: 1 s, 2 s, 4 s.
	now := t0
	for _, w := range []time.Duration{1, 2, 4} {
		ok, d := e.OnFailure(now)
		if !ok || d != w*time.Second {
			t.Fatalf("got (%v, %v), want (true, %v)", ok, d, w*time.Second)
		}
		now = now.Add(d + time.Second)
	}
	restartedAt := now.Add(-time.Second)
	// Running just under the threshold since the last restart: no reset,
	// and the fourth restart in a row is refused.
	probe := *e
	if ok, _ := probe.OnFailure(restartedAt.Add(10*time.Minute - time.Millisecond)); ok {
		t.Fatal("restarted a fourth time with attempts-before-reset-backoff=3")
	}
	// Running the threshold since the last restart resets the pause and
	// the attempt count.
	now = restartedAt.Add(10 * time.Minute)
	for _, w := range []time.Duration{1, 2, 4} {
		ok, d := e.OnFailure(now)
		if !ok || d != w*time.Second {
			t.Fatalf("after reset: got (%v, %v), want (true, %v)", ok, d, w*time.Second)
		}
		now = now.Add(d + time.Second)
	}
	if ok, _ := e.OnFailure(now); ok {
		t.Fatal("restarted a fourth time in a row after the reset")
	}
}

// The threshold counts from the restart (failure time + pause), not from
// the failure.
func TestExponentialDelayResetCountsFromRestart(t *testing.T) {
	e := &ExponentialDelay{Initial: 30 * time.Second, Max: time.Hour, Multiplier: 2, ResetThreshold: time.Minute,
		AttemptsBeforeReset: math.MaxInt32}
	if _, d := e.OnFailure(t0); d != 30*time.Second {
		t.Fatalf("first pause %v", d)
	}
	// 70 s after the failure is only 40 s after the restart: no reset.
	if _, d := e.OnFailure(t0.Add(70 * time.Second)); d != time.Minute {
		t.Fatalf("second pause %v, want 1m (no reset)", d)
	}
	// The restart was at 70 s + 60 s = 130 s; a failure at 190 s resets.
	if _, d := e.OnFailure(t0.Add(190 * time.Second)); d != 30*time.Second {
		t.Fatalf("third pause %v, want 30s (reset)", d)
	}
}

func TestExponentialDelayAttemptsBeforeReset(t *testing.T) {
	e := expDelay(t, "restart-strategy.exponential-delay.attempts-before-reset-backoff", "2",
		"restart-strategy.exponential-delay.jitter-factor", "0")
	now := t0
	for i := range 2 {
		ok, d := e.OnFailure(now)
		if !ok {
			t.Fatalf("failure %d did not restart", i+1)
		}
		now = now.Add(d + time.Second)
	}
	if ok, d := e.OnFailure(now); ok || d != 0 {
		t.Fatalf("third failure: (%v, %v), want (false, 0)", ok, d)
	}
}

// A zero initial backoff must not make the attempt count reset forever.
func TestExponentialDelayZeroInitialStillCountsAttempts(t *testing.T) {
	e := &ExponentialDelay{Initial: 0, Max: time.Minute, Multiplier: 2, ResetThreshold: time.Hour, AttemptsBeforeReset: 2}
	for i := range 2 {
		if ok, d := e.OnFailure(t0.Add(time.Duration(i) * time.Second)); !ok || d != 0 {
			t.Fatalf("failure %d: (%v, %v)", i+1, ok, d)
		}
	}
	if ok, _ := e.OnFailure(t0.Add(3 * time.Second)); ok {
		t.Fatal("third failure restarted with attempts-before-reset-backoff=2")
	}
}

func TestStrings(t *testing.T) {
	if got := (None{}).String(); got != "NoRestartBackoffTimeStrategy" {
		t.Errorf("None: %q", got)
	}
	f := &FixedDelay{Attempts: 3, Delay: 1500 * time.Millisecond}
	if got, want := f.String(), "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=3, backoffTimeMS=1500)"; got != want {
		t.Errorf("FixedDelay: %q, want %q", got, want)
	}
	r := &FailureRate{MaxFailures: 2, Interval: 10 * time.Second, Delay: 3 * time.Second}
	if got, want := r.String(), "FailureRateRestartBackoffTimeStrategy(FailureRateRestartBackoffTimeStrategy(failuresIntervalMS=10000,backoffTimeMS=3000,maxFailuresPerInterval=2)"; got != want {
		t.Errorf("FailureRate: %q, want %q", got, want)
	}
	e := &ExponentialDelay{Initial: time.Second, Max: time.Minute, Multiplier: 1.5, ResetThreshold: time.Hour, Jitter: 0.1,
		AttemptsBeforeReset: math.MaxInt32}
	if got, want := e.String(), "ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS=1000, maxBackoffMS=60000, backoffMultiplier=1.5, resetBackoffThresholdMS=3600000, jitterFactor=0.1, attemptsBeforeResetBackoff=2147483647)"; got != want {
		t.Errorf("ExponentialDelay: %q, want %q", got, want)
	}
}

func TestOptionsListsEveryKey(t *testing.T) {
	keys := map[string]bool{}
	for _, o := range Options() {
		keys[o.Key()] = true
	}
	for _, k := range []string{"restart-strategy.type", "restart-strategy.fixed-delay.attempts", "restart-strategy.fixed-delay.delay",
		"restart-strategy.failure-rate.max-failures-per-interval", "restart-strategy.failure-rate.failure-rate-interval",
		"restart-strategy.failure-rate.delay", "restart-strategy.exponential-delay.initial-backoff",
		"restart-strategy.exponential-delay.max-backoff", "restart-strategy.exponential-delay.backoff-multiplier",
		"restart-strategy.exponential-delay.reset-backoff-threshold", "restart-strategy.exponential-delay.jitter-factor",
		"restart-strategy.exponential-delay.attempts-before-reset-backoff"} {
		if !keys[k] {
			t.Errorf("Options() lacks %s", k)
		}
	}
	if got := Type.DeprecatedKeys(); len(got) != 1 || got[0] != "restart-strategy" {
		t.Errorf("deprecated keys of restart-strategy.type: %v", got)
	}
}

package config

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// durationUnits lists Flink's TimeUtils labels in the order of its error
// message. The first label of each unit is the one used for display.
type durationUnit struct {
	name   string
	unit   time.Duration
	labels []string
}

var durationUnits = []durationUnit{
	{"DAYS", 24 * time.Hour, []string{"d", "day", "days"}},
	{"HOURS", time.Hour, []string{"h", "hour", "hours"}},
	{"MINUTES", time.Minute, []string{"min", "m", "minute", "minutes"}},
	{"SECONDS", time.Second, []string{"s", "sec", "secs", "second", "seconds"}},
	{"MILLISECONDS", time.Millisecond, []string{"ms", "milli", "millis", "millisecond", "milliseconds"}},
	{"MICROSECONDS", time.Microsecond, []string{"µs", "micro", "micros", "microsecond", "microseconds"}},
	{"NANOSECONDS", time.Nanosecond, []string{"ns", "nano", "nanos", "nanosecond", "nanoseconds"}},
}

func allDurationUnits() string {
	parts := make([]string, len(durationUnits))
	for i, u := range durationUnits {
		parts[i] = u.name + ": (" + strings.Join(u.labels, " | ") + ")"
	}
	return strings.Join(parts, ", ")
}

// splitNumber splits Flink's "<digits><optional whitespace><unit>" syntax.
func splitNumber(text string) (number, unit string, err error) {
	trimmed := strings.TrimSpace(text)
	if trimmed == "" {
		return "", "", errors.New("argument is an empty- or whitespace-only string")
	}
	pos := 0
	for pos < len(trimmed) && trimmed[pos] >= '0' && trimmed[pos] <= '9' {
		pos++
	}
	number = trimmed[:pos]
	if number == "" {
		return "", "", errors.New("text does not start with a number")
	}
	return number, strings.ToLower(strings.TrimSpace(trimmed[pos:])), nil
}

// ParseDuration parses a duration exactly as Flink's TimeUtils.parseDuration
// does: a non-negative integer followed by an optional unit; a bare number is
// milliseconds. "10s", "10 s", "1 min", "1m", "500ms", "2h" and "1d" are all
// accepted; "1.5s" and "-5s" are not.
func ParseDuration(text string) (time.Duration, error) {
	number, label, err := splitNumber(text)
	if err != nil {
		return 0, err
	}
	unit := time.Millisecond
	if label != "" {
		i := slices.IndexFunc(durationUnits, func(u durationUnit) bool { return slices.Contains(u.labels, label) })
		if i < 0 {
			return 0, fmt.Errorf("Time interval unit label '%s' does not match any of the recognized units: %s", label, allDurationUnits())
		}
		unit = durationUnits[i].unit
	}
	n, ok := new(big.Int).SetString(number, 10)
	if !ok {
		return 0, errors.New("text does not start with a number")
	}
	n.Mul(n, big.NewInt(int64(unit)))
	if !n.IsInt64() {
		return 0, fmt.Errorf("The value '%s' cannot be represented as Duration (numeric overflow).", number)
	}
	return time.Duration(n.Int64()), nil
}

// FormatDuration renders d the way Flink's documentation shows defaults: the
// largest unit that divides it exactly, with that unit's first label
// ("10 min", "1 s", "0 ms", "1 d").
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0 ms"
	}
	for _, u := range durationUnits {
		if d%u.unit == 0 {
			return fmt.Sprintf("%d %s", d/u.unit, u.labels[0])
		}
	}
	return fmt.Sprintf("%d ns", d)
}

package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ValueError is a configuration value that cannot be used. Its message names
// the key, the value, where it came from and what is accepted.
type ValueError struct {
	Key      string // the key as the user wrote it (possibly a deprecated name)
	Value    string
	Origin   Origin
	Accepted string
	Err      error
}

func (e *ValueError) Error() string {
	reason := strings.TrimSuffix(e.Err.Error(), ".")
	if IsSensitive(e.Key) && len(e.Value) >= 3 {
		// The reason may quote the value too. (A shorter one would mask
		// letters of the message, and is no secret.)
		reason = strings.ReplaceAll(reason, e.Value, HiddenContent)
	}
	return fmt.Sprintf("Invalid value '%s' for configuration key '%s' (from %s): %s. Accepted: %s.",
		Masked(e.Key, e.Value), e.Key, e.Origin, reason, strings.TrimSuffix(e.Accepted, "."))
}

func (e *ValueError) Unwrap() error { return e.Err }

// AnyOption is the type-independent view of an Option, used to validate a
// whole configuration and to document the keys gflink honours.
type AnyOption interface {
	Key() string
	DeprecatedKeys() []string
	HasDefault() bool
	DefaultString() string
	Accepted() string
	Description() string
	// Check parses the option's value in c, if set.
	Check(c *Configuration) error
	// UsesDeprecatedKey returns the deprecated key that supplied the value,
	// or "".
	UsesDeprecatedKey(c *Configuration) string
}

// Option is a typed configuration option: a Flink key, its deprecated
// names, a default and a parser.
type Option[T any] struct {
	key        string
	deprecated []string
	def        T
	hasDef     bool
	parse      func(string) (T, error)
	check      func(T) error
	format     func(T) string
	accepted   string
	desc       string
}

// NewOption declares an option. format renders the default for docs;
// accepted describes the accepted values for error messages.
func NewOption[T any](key string, parse func(string) (T, error), format func(T) string, accepted string) *Option[T] {
	return &Option[T]{key: key, parse: parse, format: format, accepted: accepted}
}

// WithDefault sets the default value.
func (o *Option[T]) WithDefault(v T) *Option[T] { o.def, o.hasDef = v, true; return o }

// WithDeprecatedKeys adds older key names, in order of preference.
func (o *Option[T]) WithDeprecatedKeys(keys ...string) *Option[T] {
	o.deprecated = append(o.deprecated, keys...)
	return o
}

// WithCheck adds a validation run after parsing.
func (o *Option[T]) WithCheck(check func(T) error) *Option[T] { o.check = check; return o }

// WithAccepted replaces the description of accepted values.
func (o *Option[T]) WithAccepted(s string) *Option[T] { o.accepted = s; return o }

// WithDescription documents the option.
func (o *Option[T]) WithDescription(s string) *Option[T] { o.desc = s; return o }

func (o *Option[T]) Key() string              { return o.key }
func (o *Option[T]) DeprecatedKeys() []string { return o.deprecated }
func (o *Option[T]) HasDefault() bool         { return o.hasDef }
func (o *Option[T]) Accepted() string         { return o.accepted }
func (o *Option[T]) Description() string      { return o.desc }

// DefaultString renders the default, or "none".
func (o *Option[T]) DefaultString() string {
	if !o.hasDef {
		return "none"
	}
	return o.format(o.def)
}

// Default returns the default value.
func (o *Option[T]) Default() T { return o.def }

func (o *Option[T]) keys() []string {
	return append([]string{o.key}, o.deprecated...)
}

// Lookup returns the configured value and whether one was set (under the
// current key or a deprecated one). An unparsable value is a *ValueError.
func (o *Option[T]) Lookup(c *Configuration) (T, bool, error) {
	var zero T
	key, v, ok := c.lookup(o.keys())
	if !ok {
		return o.def, false, nil
	}
	parsed, err := o.parse(strings.TrimSpace(v.Raw))
	if err == nil && o.check != nil {
		err = o.check(parsed)
	}
	if err != nil {
		return zero, true, &ValueError{Key: key, Value: v.Raw, Origin: v.Origin, Accepted: o.accepted, Err: err}
	}
	return parsed, true, nil
}

// Get returns the configured value, or the default when unset.
func (o *Option[T]) Get(c *Configuration) (T, error) {
	v, _, err := o.Lookup(c)
	return v, err
}

// Origin returns where the option's value came from (LayerDefault if unset).
func (o *Option[T]) Origin(c *Configuration) Origin {
	if _, v, ok := c.lookup(o.keys()); ok {
		return v.Origin
	}
	return Origin{}
}

// Check implements AnyOption. Every key the option is set under is
// checked, deprecated ones too: a bad value under an old key is a mistake
// even where the current key overrides it (Flink would ignore it quietly).
func (o *Option[T]) Check(c *Configuration) error {
	var errs []error
	for _, key := range o.keys() {
		v, ok := c.Get(key)
		if !ok {
			continue
		}
		parsed, err := o.parse(strings.TrimSpace(v.Raw))
		if err == nil && o.check != nil {
			err = o.check(parsed)
		}
		if err != nil {
			errs = append(errs, &ValueError{Key: key, Value: v.Raw, Origin: v.Origin, Accepted: o.accepted, Err: err})
		}
	}
	return errors.Join(errs...)
}

// UsesDeprecatedKey implements AnyOption.
func (o *Option[T]) UsesDeprecatedKey(c *Configuration) string {
	key, _, ok := c.lookup(o.keys())
	if ok && key != o.key {
		return key
	}
	return ""
}

// Validate checks every option against c and returns all problems, one per
// line, in the order the options are given.
func Validate(c *Configuration, opts []AnyOption) error {
	var errs []error
	for _, o := range opts {
		if err := o.Check(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DeprecationWarnings says, for each option set under an old name, which
// name to use instead (Flink logs the same warning).
func DeprecationWarnings(c *Configuration, opts []AnyOption) []string {
	var out []string
	for _, o := range opts {
		if old := o.UsesDeprecatedKey(c); old != "" {
			out = append(out, fmt.Sprintf("Config uses deprecated configuration key '%s' instead of proper key '%s'", old, o.Key()))
		}
	}
	return out
}

// Constructors for the value types Flink uses.

const durationAccepted = "a duration: a non-negative integer with an optional unit (d, h, min/m, s, ms, µs, ns), e.g. '10 s', '500ms', '1 min'; a bare number means milliseconds"

// Duration declares a Duration-typed option.
func Duration(key string) *Option[time.Duration] {
	return NewOption(key, ParseDuration, FormatDuration, durationAccepted)
}

// Memory declares a MemorySize-typed option.
func Memory(key string) *Option[MemorySize] {
	return NewOption(key, ParseMemorySize, MemorySize.String,
		"a memory size: a non-negative integer with an optional binary unit (b, k/kb, m/mb, g/gb, t/tb), e.g. '20 kb'; a bare number means bytes")
}

// Int declares an integer option.
func Int(key string) *Option[int] {
	return NewOption(key, parseInt, strconv.Itoa, "an integer")
}

func parseInt(s string) (int, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%s is out of the integer range [%d, %d]", s, math.MinInt32, math.MaxInt32)
		}
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return int(n), nil
}

// Float declares a floating-point option.
func Float(key string) *Option[float64] {
	return NewOption(key, func(s string) (float64, error) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("%q is not a number", s)
		}
		return f, nil
	}, func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }, "a decimal number")
}

// Bool declares a boolean option.
func Bool(key string) *Option[bool] {
	return NewOption(key, func(s string) (bool, error) {
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return false, fmt.Errorf("Unrecognized option for boolean: %s. Expected either true or false(case insensitive)", s)
	}, strconv.FormatBool, "true or false (case-insensitive)")
}

// String declares a string option.
func String(key string) *Option[string] {
	return NewOption(key, func(s string) (string, error) { return s, nil },
		func(s string) string { return s }, "any text")
}

// Enum declares an option whose value is one of constants, matched
// case-insensitively and returned in its canonical spelling. enumName is used
// in the error message, as Flink names the enum class.
func Enum(key, enumName string, constants ...string) *Option[string] {
	return EnumOf(key, enumName, constants...)
}

// EnumOf is Enum for a named string type: the option's value is one of the
// type's constants.
func EnumOf[T ~string](key, enumName string, constants ...T) *Option[T] {
	names := make([]string, len(constants))
	for i, c := range constants {
		names[i] = string(c)
	}
	return NewOption(key, func(s string) (T, error) {
		for _, c := range constants {
			if strings.EqualFold(s, string(c)) {
				return c, nil
			}
		}
		return "", fmt.Errorf("Could not parse value for enum %s. Expected one of: [%s]", enumName, strings.Join(names, ", "))
	}, func(v T) string { return string(v) }, "one of "+strings.Join(names, ", ")+" (case-insensitive)")
}

// Positive is a check for integers that must be > 0.
func Positive(n int) error {
	if n <= 0 {
		return fmt.Errorf("must be a positive number, got %d", n)
	}
	return nil
}

// NonNegative is a check for integers that must be >= 0.
func NonNegative(n int) error {
	if n < 0 {
		return fmt.Errorf("must be zero or positive, got %d", n)
	}
	return nil
}

// Misspellings warns about keys that are set but honoured by no option and
// lie within two edits of a key that is: almost always a typo that would
// otherwise be ignored in silence (Flink ignores unknown keys too). Keys far
// from every known one — the rest of a Flink cluster's configuration — pass
// without a word.
func Misspellings(c *Configuration, opts []AnyOption) []string {
	type candidate struct{ name, current string }
	known := map[string]bool{}
	var cands []candidate
	for _, o := range opts {
		for _, k := range append([]string{o.Key()}, o.DeprecatedKeys()...) {
			known[k] = true
			cands = append(cands, candidate{k, o.Key()})
		}
	}
	var out []string
	for _, k := range c.Keys() {
		if known[k] {
			continue
		}
		var best candidate
		bestDist := 3
		for _, cand := range cands {
			if d := editDistance(k, cand.name, bestDist); d < bestDist {
				best, bestDist = cand, d
			}
		}
		if best.name == "" {
			continue
		}
		v, _ := c.Get(k)
		hint := fmt.Sprintf("'%s'", best.name)
		if best.name != best.current {
			hint += fmt.Sprintf(" (now '%s')", best.current)
		}
		out = append(out, fmt.Sprintf("Configuration key '%s' (from %s) is not one gflink knows, so it has no effect; did you mean %s?", k, v.Origin, hint))
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, or limit when
// it is at least limit (the length difference alone decides most pairs).
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

package config

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// MemorySize is a number of bytes.
type MemorySize int64

type memoryUnit struct {
	multiplier int64
	labels     []string
}

var memoryUnits = []memoryUnit{
	{1, []string{"b", "bytes"}},
	{1 << 10, []string{"k", "kb", "kibibytes"}},
	{1 << 20, []string{"m", "mb", "mebibytes"}},
	{1 << 30, []string{"g", "gb", "gibibytes"}},
	{1 << 40, []string{"t", "tb", "tebibytes"}},
}

func allMemoryUnits() string {
	parts := make([]string, len(memoryUnits))
	for i, u := range memoryUnits {
		parts[i] = "(" + strings.Join(u.labels, " | ") + ")"
	}
	return strings.Join(parts, " / ")
}

// ParseMemorySize parses a memory size exactly as Flink's MemorySize.parse:
// binary units (k = 1024), a bare number is bytes.
func ParseMemorySize(text string) (MemorySize, error) {
	number, label, err := splitNumber(text)
	if err != nil {
		return 0, err
	}
	mult := int64(1)
	if label != "" {
		i := slices.IndexFunc(memoryUnits, func(u memoryUnit) bool { return slices.Contains(u.labels, label) })
		if i < 0 {
			return 0, fmt.Errorf("Memory size unit '%s' does not match any of the recognized units: %s", label, allMemoryUnits())
		}
		mult = memoryUnits[i].multiplier
	}
	n, _ := new(big.Int).SetString(number, 10)
	n.Mul(n, big.NewInt(mult))
	if !n.IsInt64() {
		return 0, fmt.Errorf("The value '%s' cannot be re represented as 64bit number of bytes (numeric overflow).", strings.TrimSpace(text))
	}
	return MemorySize(n.Int64()), nil
}

// String renders the size with the largest exact unit and its second label,
// as Flink does: "20 kb", "32 mb", "1 gb".
func (m MemorySize) String() string {
	if m == 0 {
		return "0 bytes"
	}
	for i := len(memoryUnits) - 1; i >= 0; i-- {
		u := memoryUnits[i]
		if int64(m)%u.multiplier == 0 {
			return fmt.Sprintf("%d %s", int64(m)/u.multiplier, u.labels[1])
		}
	}
	return fmt.Sprintf("%d bytes", int64(m))
}

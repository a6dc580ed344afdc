// Package config is gflink's Flink-style configuration: typed options with
// Flink's key names and deprecated aliases, Flink's duration and memory-size
// syntax, and loading flink-conf.yaml / config.yaml plus -D overrides, with
// every value remembering where it came from so that an error can say so.
package config

import (
	"fmt"
	"maps"
	"slices"
)

// Layer orders the places a value can come from; a higher layer overrides a
// lower one, whatever key name (current or deprecated) each used.
type Layer int

// The layers, lowest first.
const (
	LayerDefault Layer = iota
	LayerFile
	LayerDynamic // -D key=value
	LayerFlag    // explicit flags such as -p
)

// Origin says where a configuration value came from.
type Origin struct {
	Layer Layer
	File  string // the configuration file, for LayerFile
	Line  int    // 1-based line in File
	Flag  string // the flag as the user wrote it, for LayerDynamic and LayerFlag
}

// String renders the origin for error messages: "conf/flink-conf.yaml:12",
// "-D", "-p".
func (o Origin) String() string {
	switch o.Layer {
	case LayerFile:
		if o.Line > 0 {
			return fmt.Sprintf("%s:%d", o.File, o.Line)
		}
		return o.File
	case LayerDynamic, LayerFlag:
		return o.Flag
	default:
		return "default"
	}
}

// Value is a raw configuration value and its origin.
type Value struct {
	Raw    string
	Origin Origin
}

// Configuration is a set of raw key/value pairs. Options parse them.
type Configuration struct {
	values map[string]Value
}

// New returns an empty configuration: every option takes its default.
func New() *Configuration {
	return &Configuration{values: map[string]Value{}}
}

// Set sets key to raw. A value from a lower layer never replaces one from a
// higher layer, so layers may be applied in any order.
func (c *Configuration) Set(key, raw string, origin Origin) {
	if old, ok := c.values[key]; ok && old.Origin.Layer > origin.Layer {
		return
	}
	c.values[key] = Value{Raw: raw, Origin: origin}
}

// SetString sets key from program code (the highest layer), naming the flag
// or API call responsible.
func (c *Configuration) SetString(key, raw, flag string) {
	c.Set(key, raw, Origin{Layer: LayerFlag, Flag: flag})
}

// Unset removes key.
func (c *Configuration) Unset(key string) { delete(c.values, key) }

// Get returns the raw value under exactly this key.
func (c *Configuration) Get(key string) (Value, bool) {
	v, ok := c.values[key]
	return v, ok
}

// Keys returns the keys that are set, sorted.
func (c *Configuration) Keys() []string {
	return slices.Sorted(maps.Keys(c.values))
}

// Clone returns an independent copy.
func (c *Configuration) Clone() *Configuration {
	return &Configuration{values: maps.Clone(c.values)}
}

// lookup finds the value for a key or any of its deprecated names. The value
// from the highest layer wins; within one layer the current key wins over a
// deprecated one, as in Flink.
func (c *Configuration) lookup(keys []string) (key string, v Value, ok bool) {
	for _, k := range keys {
		cand, found := c.values[k]
		if !found {
			continue
		}
		if !ok || cand.Origin.Layer > v.Origin.Layer {
			key, v, ok = k, cand, true
		}
	}
	return key, v, ok
}

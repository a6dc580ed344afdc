package state

// # Sweeping one user key out of every key's map
//
// An event-time window operator keeps each key's open windows in map
// state, an entry per window start. When the watermark passes a window's
// end, every key holding that window fires it and drops it. With a timer
// per key and window, that costs a hash-set insert and a heap push when
// the window opens, and a heap pop, a set delete and two lookups of the
// key's map when it fires: most of a window job's time at 100 K keys.
// SweepMapEntry does the firing in one pass instead, and no timer is set
// at all. Such windows are declared as a sliced map state, whose every
// window is a table of its own on the hashmap backend: the pass is a scan
// of that one table, then dropped whole.

// SweepMapEntry calls f with every key of the backend's key groups whose
// map in ms holds uk, and that entry, then removes the entry; an error
// from f stops the sweep (the entry f failed on stays). f gets its own
// copy of the key. f must not write ms, nor read keyed state (the
// backend's current key is not f's). name is ms's name.
//
// A sliced map state (GetSlicedMapState) on the hashmap backend scans
// uk's own table and drops it; any other map state goes key by key through
// KeysOf, with each key current in turn.
func SweepMapEntry[K comparable, UK comparable, UV any](b Backend[K], name string, ms MapState[UK, UV], uk UK, f func(key K, uv UV) error) error {
	if s, ok := ms.(*slicedMapState[K, UK, UV]); ok {
		return s.sweep(uk, f)
	}
	keys, err := KeysOf(b, name)
	if err != nil {
		return err
	}
	for _, k := range keys {
		b.SetCurrentKey(k)
		uv, ok := ms.Get(uk)
		if !ok {
			continue
		}
		if err := f(k, uv); err != nil {
			return err
		}
		ms.Remove(uk)
	}
	return nil
}

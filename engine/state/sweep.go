package state

// # Sweeping one user key out of every key's map
//
// An event-time window operator keeps each key's open windows in map
// state, an entry per window start. When the watermark passes a window's
// end, every key holding that window fires it and drops it. With a timer
// per key and window, that costs a hash-set insert and a heap push when
// the window opens, and a heap pop, a set delete and two lookups of the
// key's map when it fires: most of a window job's time at 100 K keys.
// SweepMapEntry does the firing in one pass over the state's own table
// instead, in memory order, taking the entry out of each slot that holds
// it; no timer is set at all.

// SweepMapEntry calls f with every key of the backend's key groups whose
// map in ms holds uk, and that entry, then removes the entry; an error
// from f stops the sweep (the entry f failed on stays). f gets its own
// copy of the key. f must not write ms; the key it runs with is not the
// backend's current key (f may not read keyed state). name is ms's name.
//
// A sliced map state (GetSlicedMapState) on the hashmap backend scans
// uk's own table and drops it. A map state on the hashmap backend is
// swept in place wherever no snapshot reads its tables; other backends,
// and key groups a snapshot reads, go key by key through KeysOf.
func SweepMapEntry[K comparable, UK comparable, UV any](b Backend[K], name string, ms MapState[UK, UV], uk UK, f func(key K, uv UV) error) error {
	switch s := ms.(type) {
	case *mapState[K, UK, UV]:
		return s.sweep(uk, f)
	case *slicedMapState[K, UK, UV]:
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

func (s *mapState[K, UK, UV]) sweep(uk UK, f func(K, UV) error) error {
	if s.b.pins.pending.Load() {
		s.b.pins.drain()
	}
	for kgi := range s.t.kgs {
		if err := s.sweepKeyGroup(kgi, uk, f); err != nil {
			return err
		}
	}
	return nil
}

// sweepKeyGroup sweeps one key group. Keys whose map is a Go map (several
// entries) are noted and done afterwards through removeAt, which knows
// when such a map must be copied first.
func (s *mapState[K, UK, UV]) sweepKeyGroup(kgi int, uk UK, f func(K, UV) error) error {
	l := &s.t.kgs[kgi]
	if !l.base.made() && len(l.over) == 0 {
		return nil
	}
	if l.relGen != s.t.p.kgs[kgi].relGen {
		s.t.fold(kgi, l, s.t.p.foldBudget)
	}
	var later []K
	if len(l.over) == 0 && s.t.baseWritable(kgi, l) {
		var err error
		if l.base.s != nil {
			later, err = sweepStrMap(l.base.s, s.t.clone, uk, f)
		} else {
			later, err = sweepGoMap(l.base.m, uk, f)
		}
		if err != nil {
			return err
		}
	} else {
		// A snapshot reads this key group: its layers stay as they are,
		// and the removals go on top of them.
		v := view[K, mapEntry[UK, UV]]{base: l.base}
		for _, o := range l.over {
			v.over = append(v.over, o.m)
		}
		v.all(func(k K, e mapEntry[UK, UV]) bool {
			if _, ok := e.get(uk); ok {
				later = append(later, s.t.clone(k))
			}
			return true
		})
	}
	for _, k := range later {
		e, _ := s.t.get(kgi, k)
		uv, ok := e.get(uk)
		if !ok {
			continue
		}
		if err := f(k, uv); err != nil {
			return err
		}
		s.removeAt(kgi, k, uk)
	}
	return nil
}

// sweepStrMap takes uk out of the inline entries of m in place and returns
// the keys whose maps are Go maps holding uk. It walks the slots downwards
// from an empty one: a delete shifts back only entries of the run above
// the hole, up to the next empty slot, all of them visited already, and
// never moves an entry not visited yet; so each entry is seen once. Keys
// are copied (clone: the table's key copy) out of the table's memory,
// which a delete overwrites.
func sweepStrMap[K comparable, UK comparable, UV any](m *strMap[mapEntry[UK, UV]], clone func(K) K, uk UK, f func(K, UV) error) ([]K, error) {
	n := len(m.slots)
	top := 0
	for m.slots[top].h != 0 {
		top++ // the table is at most 3/4 full: there is an empty slot
	}
	var later []K
	for c := 1; c < n; c++ {
		i := (top - c + n) % n
		sl := &m.slots[i]
		if sl.h == 0 {
			continue
		}
		e := &sl.e
		if e.m != nil {
			if _, ok := e.m[uk]; ok {
				later = append(later, clone(fromString[K](m.keyOf(sl))))
			}
			continue
		}
		uv, ok := e.get(uk)
		if !ok {
			continue
		}
		if err := f(clone(fromString[K](m.keyOf(sl))), uv); err != nil {
			return nil, err
		}
		if e.two() {
			*e = e.without(uk)
		} else {
			m.delAt(i)
		}
	}
	return later, nil
}

// sweepGoMap is sweepStrMap for keys other than strings: deleting from a
// Go map while ranging over it is allowed.
func sweepGoMap[K comparable, UK comparable, UV any](m map[K]mapEntry[UK, UV], uk UK, f func(K, UV) error) ([]K, error) {
	var later []K
	for k, e := range m {
		if e.m != nil {
			if _, ok := e.m[uk]; ok {
				later = append(later, k)
			}
			continue
		}
		uv, ok := e.get(uk)
		if !ok {
			continue
		}
		if err := f(k, uv); err != nil {
			return nil, err
		}
		if e.two() {
			m[k] = e.without(uk)
		} else {
			delete(m, k)
		}
	}
	return later, nil
}

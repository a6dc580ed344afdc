package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// KeyedSnapshot is the synchronous part of a keyed state snapshot: an
// immutable view of every table. Encoding it (the asynchronous part) may run
// on another goroutine while the task goes on writing state; Release must be
// called once encoding is done, or abandoned.
type KeyedSnapshot struct {
	kgRange KeyGroupRange
	states  []capturedNamed
	clock   *cowClock
	gen     uint64
}

type capturedNamed struct {
	name   string
	kind   Kind
	typ    string
	tables capturedTables // nil for raw state
	raw    map[int][]byte
}

// StateInfo describes one state for listings: its name, kind, value type and
// number of entries (keys, or timers).
type StateInfo struct {
	Name    string
	Kind    Kind
	Type    string
	Entries int
}

// States describes the registered and the restored-but-unregistered states.
func (b *KeyedBackend[K]) States() []StateInfo {
	var out []StateInfo
	for name, s := range b.states {
		out = append(out, StateInfo{Name: name, Kind: s.kind(), Type: s.typeName(), Entries: s.count()})
	}
	for name, r := range b.pending {
		out = append(out, StateInfo{Name: name, Kind: r.kind, Type: r.typ, Entries: r.count})
	}
	slices.SortFunc(out, func(a, b StateInfo) int { return compareStrings(a.Name, b.Name) })
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Snapshot captures the backend's state in O(states × key groups) time.
func (b *KeyedBackend[K]) Snapshot() *KeyedSnapshot {
	s := &KeyedSnapshot{kgRange: b.kgRange, clock: &b.cow}
	for _, name := range slices.Sorted(maps.Keys(b.states)) {
		st := b.states[name]
		s.states = append(s.states, capturedNamed{name: name, kind: st.kind(), typ: st.typeName(), tables: st.capture()})
	}
	for _, name := range slices.Sorted(maps.Keys(b.pending)) {
		r := b.pending[name]
		s.states = append(s.states, capturedNamed{name: name, kind: r.kind, typ: r.typ, raw: r.byKG})
	}
	slices.SortFunc(s.states, func(a, b capturedNamed) int { return compareStrings(a.name, b.name) })
	s.gen = b.cow.capture()
	return s
}

// KeyGroupRange is the range the snapshot covers.
func (s *KeyedSnapshot) KeyGroupRange() KeyGroupRange { return s.kgRange }

// Release tells the backend the snapshot's tables are no longer read.
func (s *KeyedSnapshot) Release() {
	if s.clock != nil {
		s.clock.release(s.gen)
		s.clock = nil
	}
}

// EncodeKeyGroup appends the canonical encoding of one key group:
//
//	uvarint number of states
//	per state, in name order: string name, byte kind, string type,
//	    uvarint payload length, payload = uvarint count + entries
//
// States with no entries in the key group are left out. Strings are
// uvarint-length-prefixed UTF-8.
func (s *KeyedSnapshot) EncodeKeyGroup(dst []byte, kg int) []byte {
	kgi := kg - s.kgRange.Start
	type part struct {
		st      *capturedNamed
		payload []byte
	}
	var parts []part
	for i := range s.states {
		st := &s.states[i]
		var payload []byte
		if st.tables != nil {
			body, n := st.tables.encode(nil, kgi)
			if n == 0 {
				continue
			}
			payload = binary.AppendUvarint(make([]byte, 0, len(body)+4), uint64(n))
			payload = append(payload, body...)
		} else if p, ok := st.raw[kgi]; ok {
			payload = p
		} else {
			continue
		}
		parts = append(parts, part{st, payload})
	}
	dst = binary.AppendUvarint(dst, uint64(len(parts)))
	for _, p := range parts {
		dst = appendString(dst, p.st.name)
		dst = append(dst, byte(p.st.kind))
		dst = appendString(dst, p.st.typ)
		dst = appendBytes(dst, p.payload)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func readString(src []byte) (string, []byte, error) {
	b, rest, err := readBytes(src)
	return string(b), rest, err
}

// RestoreKeyGroup loads one key group's block, as written by
// EncodeKeyGroup, into the backend. States the operator has registered are
// decoded now; the others are kept until registered (or written back into
// the next snapshot unchanged).
func (b *KeyedBackend[K]) RestoreKeyGroup(kg int, block []byte) error {
	if !b.kgRange.Contains(kg) {
		return fmt.Errorf("key group %d is outside %v", kg, b.kgRange)
	}
	kgi := kg - b.kgRange.Start
	n, k := binary.Uvarint(block)
	if k <= 0 {
		return fmt.Errorf("key group %d: %w", kg, ErrShortBuffer)
	}
	rest := block[k:]
	for i := uint64(0); i < n; i++ {
		name, r, err := readString(rest)
		if err != nil || len(r) < 1 {
			return fmt.Errorf("key group %d: state header: %w", kg, errors.Join(err, ErrShortBuffer))
		}
		kind := Kind(r[0])
		typ, r, err := readString(r[1:])
		if err != nil {
			return fmt.Errorf("key group %d: state %q: %w", kg, name, err)
		}
		payload, r, err := readBytes(r)
		if err != nil {
			return fmt.Errorf("key group %d: state %q: %w", kg, name, err)
		}
		rest = r
		if st, ok := b.states[name]; ok {
			if st.kind() != kind {
				return fmt.Errorf("state %q was restored as %s state but is declared as %s state", name, kind, st.kind())
			}
			if err := st.restore(kgi, payload); err != nil {
				return fmt.Errorf("restore state %q (declared %s, snapshot has %s) in key group %d: %w", name, st.typeName(), typ, kg, err)
			}
			continue
		}
		raw := b.pending[name]
		if raw == nil {
			raw = &rawState{kind: kind, typ: typ, byKG: map[int][]byte{}}
			b.pending[name] = raw
		}
		if raw.kind != kind {
			return fmt.Errorf("state %q appears as both %s and %s state", name, raw.kind, kind)
		}
		raw.byKG[kgi] = slices.Clone(payload)
		if cnt, k := binary.Uvarint(payload); k > 0 {
			raw.count += int(cnt)
		}
	}
	if len(rest) != 0 {
		return fmt.Errorf("key group %d: %d unexpected trailing bytes", kg, len(rest))
	}
	return nil
}

// DropUnregistered discards restored state that no operator registered and
// returns the names dropped.
func (b *KeyedBackend[K]) DropUnregistered() []string {
	names := slices.Sorted(maps.Keys(b.pending))
	clear(b.pending)
	return names
}

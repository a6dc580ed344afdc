package state

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// KeyedSnapshot is the synchronous part of a keyed state snapshot: a view
// of every state's layers, pinned so that the task does not write them. It
// is encoded (the asynchronous part) on one goroutine, possibly while the
// task goes on writing state: EncodeKeyGroup encodes a key group and
// releases it; Release releases the key groups not encoded (call it when
// done, or to abandon the snapshot). A snapshot is not safe for concurrent
// encoding.
type KeyedSnapshot struct {
	kgRange KeyGroupRange
	states  []capturedNamed
	pins    *pinBook
	pin     uint64
	sc      *encScratch

	mu       sync.Mutex
	released []bool // per key group index
	closed   bool   // Release was called
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

// Snapshot captures the backend's state in O(states × key groups) time,
// without copying any entry: it pins the layers of every key group (see the
// top of backend.go).
func (b *KeyedBackend[K]) Snapshot() *KeyedSnapshot {
	s := &KeyedSnapshot{kgRange: b.kgRange, pins: b.pins, released: make([]bool, b.nkg)}
	s.pin = b.pins.pin()
	for name, st := range b.states {
		s.states = append(s.states, capturedNamed{name: name, kind: st.kind(), typ: st.typeName(), tables: st.capture()})
	}
	for name, r := range b.pending {
		s.states = append(s.states, capturedNamed{name: name, kind: r.kind, typ: r.typ, raw: maps.Clone(r.byKG)})
	}
	slices.SortFunc(s.states, func(a, b capturedNamed) int { return compareStrings(a.name, b.name) })
	return s
}

// KeyGroupRange is the range the snapshot covers.
func (s *KeyedSnapshot) KeyGroupRange() KeyGroupRange { return s.kgRange }

// ReleaseKeyGroup tells the backend that the snapshot no longer reads key
// group kg (EncodeKeyGroup does it for the key group it encodes). Releasing
// twice is harmless.
func (s *KeyedSnapshot) ReleaseKeyGroup(kg int) {
	kgi := kg - s.kgRange.Start
	s.mu.Lock()
	defer s.mu.Unlock()
	if kgi < 0 || kgi >= len(s.released) || s.released[kgi] {
		return
	}
	s.released[kgi] = true
	s.pins.release(kgi, s.pin)
}

// Release tells the backend the snapshot's layers are no longer read: every
// key group not released yet is.
func (s *KeyedSnapshot) Release() {
	for kg := s.kgRange.Start; kg <= s.kgRange.End; kg++ {
		s.ReleaseKeyGroup(kg)
	}
	s.mu.Lock()
	s.closed = true
	if s.sc != nil {
		scratchPool.Put(s.sc)
		s.sc = nil
	}
	s.mu.Unlock()
}

// EncodeKeyGroup appends the canonical encoding of one key group, then
// releases that key group (so the task stops keeping its layers for this
// snapshot; each key group can be written out as soon as it is encoded):
//
//	uvarint number of states
//	per state, in name order: string name, byte kind, string type,
//	    uvarint payload length, payload = uvarint count + entries
//
// States with no entries in the key group are left out. Strings are
// uvarint-length-prefixed UTF-8. It panics if the key group was released
// (encoded already): that is a bug of the caller; Release must not run
// while it does. Memory does not fail, so the error is always nil.
func (s *KeyedSnapshot) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	kgi := kg - s.kgRange.Start
	s.mu.Lock()
	if kgi < 0 || kgi >= len(s.released) || s.released[kgi] {
		s.mu.Unlock()
		panic(fmt.Sprintf("state: key group %d is outside %v or already released", kg, s.kgRange))
	}
	sc := s.sc // the encoder's scratch, reused from key group to key group
	s.sc = nil
	s.mu.Unlock()
	if sc == nil {
		sc = scratchPool.Get().(*encScratch)
	}
	defer func() {
		s.mu.Lock()
		if s.closed {
			scratchPool.Put(sc)
		} else {
			s.sc = sc
		}
		s.mu.Unlock()
	}()

	start := len(dst)
	dst = append(dst, 0) // the number of states, fixed below
	n := 0
	for i := range s.states {
		st := &s.states[i]
		mark := len(dst)
		dst = appendString(dst, st.name)
		dst = append(dst, byte(st.kind))
		dst = appendString(dst, st.typ)
		if st.tables != nil {
			var ok bool
			if dst, ok = st.tables.encode(sc, dst, kgi); !ok {
				dst = dst[:mark]
				continue
			}
		} else if p, ok := st.raw[kgi]; ok {
			dst = appendBytes(dst, p)
		} else {
			dst = dst[:mark]
			continue
		}
		n++
	}
	dst = putStateCount(dst, start, n)
	s.ReleaseKeyGroup(kg)
	return dst, nil
}

// putStateCount writes a key-group block's number of states, n, into the
// byte reserved for it at start, making room when it takes more than one.
func putStateCount(dst []byte, start, n int) []byte {
	if n < 0x80 {
		dst[start] = byte(n)
		return dst
	}
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(n))
	dst = slices.Insert(dst, start+1, hdr[1:h]...)
	copy(dst[start:], hdr[:h])
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
	return b.RestoreKeyGroups([]KeyGroupBlock{{KeyGroup: kg, Block: block}}, 1)
}

// KeyGroupBlock is one key group's block, as written by EncodeKeyGroup.
type KeyGroupBlock struct {
	KeyGroup int
	Block    []byte
}

// RestoreKeyGroups loads key groups' blocks, decoding registered states on
// up to workers goroutines (each key group's maps are its own, so key groups
// decode independently); the others are kept until registered. The blocks
// are not retained, except the payloads of unregistered states.
func (b *KeyedBackend[K]) RestoreKeyGroups(blocks []KeyGroupBlock, workers int) error {
	byKG, kgis, err := b.splitBlocks(blocks)
	if err != nil {
		return err
	}
	decode := func(kgi int) error {
		for _, p := range byKG[kgi] {
			if err := p.st.restore(p.kgi, p.payload); err != nil {
				return fmt.Errorf("restore state %q (declared %s, snapshot has %s) in key group %d: %w", p.name, p.st.typeName(), p.typ, p.kgi+b.kgRange.Start, err)
			}
		}
		return nil
	}
	err = inParallel(len(kgis), workers, func(i int) error { return decode(kgis[i]) })
	for _, st := range b.states {
		if f, ok := st.(restoreFinisher); ok {
			f.finishRestore()
		}
	}
	return err
}

// restorePart is one registered state's payload in one key group.
type restorePart struct {
	st      keyedState
	name    string
	typ     string
	kgi     int
	payload []byte
}

// splitBlocks parses every block's headers (cheap), on this goroutine: it
// returns the payloads of registered states by key group index, with the
// indexes sorted, and keeps those of unregistered states (keepRaw).
func (b *KeyedBackend[K]) splitBlocks(blocks []KeyGroupBlock) (map[int][]restorePart, []int, error) {
	byKG := map[int][]restorePart{}
	var kgis []int
	for _, blk := range blocks {
		kg := blk.KeyGroup
		if !b.kgRange.Contains(kg) {
			return nil, nil, fmt.Errorf("key group %d is outside %v", kg, b.kgRange)
		}
		kgi := kg - b.kgRange.Start
		err := forEachStatePayload(blk.Block, func(name string, kind Kind, typ string, payload []byte) error {
			st, ok := b.states[name]
			if !ok {
				return b.keepRaw(name, kind, typ, kgi, payload)
			}
			if st.kind() != kind {
				return fmt.Errorf("state %q was restored as %s state but is declared as %s state", name, kind, st.kind())
			}
			if _, seen := byKG[kgi]; !seen {
				kgis = append(kgis, kgi)
			}
			byKG[kgi] = append(byKG[kgi], restorePart{st, name, typ, kgi, payload})
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("key group %d: %w", kg, err)
		}
	}
	slices.Sort(kgis)
	return byKG, kgis, nil
}

// keepRaw keeps the payload of a state no operator registered (yet).
func (b *KeyedBackend[K]) keepRaw(name string, kind Kind, typ string, kgi int, payload []byte) error {
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
	return nil
}

// DropUnregistered discards restored state that no operator registered and
// returns the names dropped.
func (b *KeyedBackend[K]) DropUnregistered() []string {
	names := slices.Sorted(maps.Keys(b.pending))
	clear(b.pending)
	return names
}

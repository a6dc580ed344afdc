// Package changelog is gflink's state changelog (Flink's DSTL): the durable
// log of every keyed state change a subtask makes, written continuously to
// files under state.changelog.dstl.dfs.base-path so that a checkpoint only
// has to persist the log's tail. This package knows the log's bytes — the
// records, their framing into checksummed chunks, the files — and writes
// and reads them; what a record means to state is the state package's.
//
// A log file:
//
//	8 bytes  magic "GFLKCLOG"
//	4 bytes  version (2; version 1 files, which have no short sets, are
//	         read too), big endian
//	chunks   4 bytes payload length, 4 bytes CRC-32C of the payload (both
//	         big endian), then the payload: records, back to back
//
// A record (all but the short set begin with a 1-byte op):
//
//	declare: uvarint state id, 1 byte kind, uvarint-prefixed name
//	others:  uvarint state id, uvarint key group, uvarint-prefixed key,
//	         then by op: Set a prefixed value; ListAdd a prefixed element;
//	         ListSet a prefixed list (the canonical list encoding); MapPut a
//	         prefixed map key and a prefixed value; MapRemove a prefixed
//	         map key; TimerAdd and TimerDel a varint time; Clear nothing
//	short set: 1 byte 0x80 | state id, 1 byte key group, 1 byte key length,
//	         the key, a varint value: an OpSet of a string key (serialized
//	         as its length and bytes: the length byte and the key are that
//	         serialized key) and an integer value (serialized as a varint,
//	         which delimits itself), with id, key group and key length
//	         under 128. It is what a word count writes for every word, and
//	         it is 3 bytes shorter than the same OpSet (the key's and the
//	         value's lengths and the op): with the benchmarks' 4- and
//	         5-letter words ~8.5 bytes instead of ~11.5, a quarter of the
//	         log the persister writes and the task stores into buffers
//	         that are not in the cache.
//
// Every file starts with a declaration of each state it refers to (ids are
// per writer), so a file can be read on its own. A checkpoint records the
// CRC-32C of each file it refers to (File.CRC32C, computed as the file is
// written), which a restore checks (CheckCRC) before the chunks' own.
package changelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// Op is what a record does.
type Op byte

const (
	OpDeclare   Op = 1 // a state's id, kind and name
	OpSet       Op = 2 // value state: set the key's value
	OpClear     Op = 3 // any state: remove the key's entry
	OpListAdd   Op = 4 // list state: append an element
	OpListSet   Op = 5 // list state: replace the list
	OpMapPut    Op = 6 // map state: put a map entry
	OpMapRemove Op = 7 // map state: remove a map entry
	OpTimerAdd  Op = 8 // timer service: register a timer
	OpTimerDel  Op = 9 // timer service: delete (or fire) a timer
)

var (
	magic   = [8]byte{'G', 'F', 'L', 'K', 'C', 'L', 'O', 'G'}
	version = uint32(2)
	crcTab  = crc32.MakeTable(crc32.Castagnoli)
)

// shortSet marks a short set: a record whose first byte has this bit (no op
// has) is one, the low 7 bits its state id.
const shortSet = 0x80

// HeaderLen is the size of a log file's header.
const HeaderLen = 12

// chunkHeaderLen is a chunk's length and CRC.
const chunkHeaderLen = 8

// ErrCorrupt marks a log file that is not what its checkpoint recorded.
var ErrCorrupt = errors.New("corrupt state changelog")

// AppendHeader appends a log file's header.
func AppendHeader(dst []byte) []byte {
	dst = append(dst, magic[:]...)
	return binary.BigEndian.AppendUint32(dst, version)
}

// AppendChunk frames payload as one chunk.
func AppendChunk(dst, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(payload, crcTab))
	return append(dst, payload...)
}

// AppendDeclare appends a declaration of state id.
func AppendDeclare(dst []byte, id uint32, kind byte, name string) []byte {
	dst = append(dst, byte(OpDeclare))
	dst = binary.AppendUvarint(dst, uint64(id))
	dst = append(dst, kind)
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	return append(dst, name...)
}

// AppendHead appends the part every change record starts with.
func AppendHead(dst []byte, op Op, id uint32, kg int, key []byte) []byte {
	if id < 0x80 && kg < 0x80 && len(key) < 0x80 {
		// The common case (the default 128 key groups, short keys): every
		// uvarint is one byte.
		dst = append(dst, byte(op), byte(id), byte(kg), byte(len(key)))
		return append(dst, key...)
	}
	dst = append(dst, byte(op))
	dst = binary.AppendUvarint(dst, uint64(id))
	dst = binary.AppendUvarint(dst, uint64(kg))
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// AppendHeadString is AppendHead for a key that is a string serialized as
// its uvarint length and bytes (the state backends' string serializer),
// without serializing it into a buffer of its own first: a record head is
// most of what a word count's change costs the task.
func AppendHeadString(dst []byte, op Op, id uint32, kg int, key string) []byte {
	if id < 0x80 && kg < 0x80 && len(key) < 0x7f {
		dst = append(dst, byte(op), byte(id), byte(kg), byte(len(key)+1), byte(len(key)))
		return append(dst, key...)
	}
	dst = append(dst, byte(op))
	dst = binary.AppendUvarint(dst, uint64(id))
	dst = binary.AppendUvarint(dst, uint64(kg))
	dst = binary.AppendUvarint(dst, uint64(uvarintSize(uint64(len(key)))+len(key)))
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// setStringVarintMax is the most a short set takes besides its key: the
// 3-byte head and the value's varint.
const setStringVarintMax = 3 + binary.MaxVarintLen64

// AppendSetStringVarint appends a whole OpSet record about a string key
// (as AppendHeadString) whose value is an integer the state's serializer
// writes as binary.AppendVarint does: the record a word count writes for
// every input word. With id, key group and key length under 128 it is a
// short set, written in one step when dst has room: the general OpSet
// written piecewise, with its grows, length fix-up and serializer call,
// took 15 ns per record against 9 for the same bytes in one step, before
// the short set (BenchmarkRecordAppend: now ~10 against ~7). Otherwise it
// is the OpSet that AppendHeadString, BeginPrefixed, AppendVarint and
// FinishPrefixed write.
func AppendSetStringVarint(dst []byte, id uint32, kg int, key string, v int64) []byte {
	n := len(dst)
	if id >= 0x80 || uint(kg) >= 0x80 || len(key) >= 0x80 {
		dst = AppendHeadString(dst, OpSet, id, kg, key)
		dst, st := BeginPrefixed(dst)
		return FinishPrefixed(binary.AppendVarint(dst, v), st)
	}
	// Written in place (format_le.go, format_other.go), in room made first
	// if there is not (rarely: the writer's buffers have it).
	return appendSetStringVarint(slices.Grow(dst, len(key)+setStringVarintMax), n, id, kg, key, v)
}

// appendShortSet writes AppendSetStringVarint's short set with checked byte
// stores, on every processor (format_other.go); format_le.go has the
// word-sized version. The caller has checked that dst has room for the
// record and that id, kg and len(key) are under 128.
func appendShortSet(dst []byte, n int, id uint32, kg int, key string, v int64) []byte {
	b := dst[n : n+3+len(key)+binary.MaxVarintLen64]
	b[0], b[1], b[2] = byte(shortSet|id), byte(kg), byte(len(key))
	copy(b[3:], key)
	p := b[3+len(key):]
	x := uint64(v<<1) ^ uint64(v>>63) // zigzag, as binary.AppendVarint
	w := 0
	for ; x >= 0x80; x >>= 7 {
		p[w] = byte(x) | 0x80
		w++
	}
	p[w] = byte(x)
	return dst[:n+3+len(key)+w+1]
}

// uvarintSize is the length of x's uvarint encoding.
func uvarintSize(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// BeginPrefixed reserves a one-byte length in front of a value about to be
// appended; FinishPrefixed fills it in (widening it when the value is 128
// bytes or more). Serializers append in place this way, without a copy for
// the common small value.
func BeginPrefixed(dst []byte) ([]byte, int) { return append(dst, 0), len(dst) }

// FinishPrefixed completes what BeginPrefixed started at start.
func FinishPrefixed(dst []byte, start int) []byte {
	n := len(dst) - start - 1
	if n < 0x80 {
		dst[start] = byte(n)
		return dst
	}
	var lb [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(lb[:], uint64(n))
	dst = append(dst, lb[:w-1]...) // grow by the extra length bytes
	copy(dst[start+w:], dst[start+1:start+1+n])
	copy(dst[start:], lb[:w])
	return dst
}

// AppendPrefixed appends b with its length.
func AppendPrefixed(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Record is one change, as read back.
type Record struct {
	Op       Op
	State    string // the state's name
	Kind     byte
	KeyGroup int
	Key      []byte
	A, B     []byte // value, element, list or map key; B: a map value
	Time     int64  // timers
}

// Parse reads the records of one log file, of which the checkpoint recorded
// size bytes: bytes beyond it (a tail written after the checkpoint, torn by
// a crash or not) are never read. Anything wrong within size — a short
// file, a bad checksum, a record that does not parse — is ErrCorrupt. yield
// gets every change record in order (slices alias data).
func Parse(data []byte, size int64, name string, yield func(Record) error) error {
	return parse(data, size, name, func(r *Record, _ []byte) error { return yield(*r) }, new(declTable))
}

// CheckCRC checks a log file's bytes against the checksum its checkpoint
// recorded of the first size bytes: a damaged file, or another file put in
// its place, is ErrCorrupt (the chunks' own checksums leave the header and
// the chunk framing unchecked).
func CheckCRC(data []byte, size int64, name string, sum uint32) error {
	if size < 0 || int64(len(data)) < size {
		return fmt.Errorf("changelog file %s has %d bytes, its checkpoint recorded %d: %w", name, len(data), size, ErrCorrupt)
	}
	if got := crc32.Checksum(data[:size], crcTab); got != sum {
		return fmt.Errorf("changelog file %s is damaged: the CRC-32C of its first %d bytes is %08x, its checkpoint recorded %08x: %w", name, size, got, sum, ErrCorrupt)
	}
	return nil
}

// parse is Parse, yielding each record's bytes too, and keeping the file's
// declarations in decls.
func parse(data []byte, size int64, name string, yield func(r *Record, raw []byte) error, decls *declTable) error {
	if size < 0 || int64(len(data)) < size {
		return fmt.Errorf("changelog file %s has %d bytes, its checkpoint recorded %d: %w", name, len(data), size, ErrCorrupt)
	}
	data = data[:size]
	if len(data) < HeaderLen || [8]byte(data[:8]) != magic {
		return fmt.Errorf("%s is not a gflink changelog file: %w", name, ErrCorrupt)
	}
	v := binary.BigEndian.Uint32(data[8:12])
	if v < 1 || v > version {
		return fmt.Errorf("changelog file %s has version %d; this gflink reads versions 1 to %d: %w", name, v, version, ErrCorrupt)
	}
	decls.v1 = v == 1
	off := int64(HeaderLen)
	r := new(Record) // one for the file, reused: yield keeps none
	for rest := data[HeaderLen:]; len(rest) > 0; {
		if len(rest) < chunkHeaderLen {
			return fmt.Errorf("changelog file %s: chunk at offset %d is cut short: %w", name, off, ErrCorrupt)
		}
		n := int64(binary.BigEndian.Uint32(rest))
		if n > int64(len(rest)-chunkHeaderLen) {
			return fmt.Errorf("changelog file %s: chunk at offset %d claims %d bytes, %d are left: %w", name, off, n, len(rest)-chunkHeaderLen, ErrCorrupt)
		}
		payload := rest[chunkHeaderLen : chunkHeaderLen+n]
		if crc32.Checksum(payload, crcTab) != binary.BigEndian.Uint32(rest[4:]) {
			return fmt.Errorf("changelog file %s: checksum mismatch in the chunk at offset %d: %w", name, off, ErrCorrupt)
		}
		if err := parseRecords(payload, decls, r, yield); err != nil {
			return fmt.Errorf("changelog file %s, chunk at offset %d: %w", name, off, err)
		}
		rest = rest[chunkHeaderLen+n:]
		off += chunkHeaderLen + n
	}
	return nil
}

// parseRecords reads records back to back into r. yield gets each change
// record (valid during the call: records are not copied around) and its
// bytes, which an Index copies.
func parseRecords(p []byte, decls *declTable, r *Record, yield func(r *Record, raw []byte) error) error {
	return parseRecordsInline(p, decls, r, yield, true)
}

// parseRecordsInline is parseRecords with the inline reading of common
// records on or off; a test turns it off to hold the inline reading to the
// general one.
func parseRecordsInline(p []byte, decls *declTable, r *Record, yield func(r *Record, raw []byte) error, useInline bool) error {
	var err error
	for len(p) > 0 {
		raw := p
		if p[0]&shortSet != 0 && !decls.v1 {
			if p, err = parseShortSet(p, decls, r); err != nil {
				return err
			}
			if err := yield(r, raw[:len(raw)-len(p)]); err != nil {
				return err
			}
			continue
		}
		op := Op(p[0])
		// The common record — one-byte id, key group and key length, and
		// a value of fewer than 128 bytes — is read inline: calling
		// uvarint and prefixed for every field was a fifth of indexing
		// and replaying (BenchmarkChangelogReplay: ~57 ns per record
		// each, ~47 inline). Declarations, map puts, timers and anything
		// else are read by the general code below.
		inline := op == OpClear || op == OpSet || op == OpListAdd || op == OpListSet || op == OpMapRemove
		if useInline && inline && len(p) >= 5 && p[1]|p[2]|p[3] < 0x80 {
			if d, ok := decls.get(uint64(p[1])); ok {
				if k := 4 + int(p[3]); k < len(p) {
					r.set(op, d, int(p[2]), p[4:k:k], nil)
					rest := p[k:]
					switch op {
					case OpClear:
						p = rest
					case OpSet, OpListAdd, OpListSet, OpMapRemove:
						if n := 1 + int(rest[0]); rest[0] < 0x80 && n <= len(rest) {
							r.A, p = rest[1:n:n], rest[n:]
						}
					}
					if len(p) < len(raw) {
						if err := yield(r, raw[:len(raw)-len(p)]); err != nil {
							return err
						}
						continue
					}
				}
			}
		}
		p = p[1:]
		var id uint64
		if id, p, err = uvarint(p); err != nil {
			return err
		}
		if op == OpDeclare {
			if len(p) < 1 {
				return fmt.Errorf("declaration cut short: %w", ErrCorrupt)
			}
			kind := p[0]
			var name []byte
			if name, p, err = prefixed(p[1:]); err != nil {
				return err
			}
			if err := decls.set(id, string(name), kind); err != nil {
				return err
			}
			continue
		}
		d, ok := decls.get(id)
		if !ok {
			return fmt.Errorf("record of undeclared state %d: %w", id, ErrCorrupt)
		}
		r.set(op, d, 0, nil, nil)
		var kg uint64
		if kg, p, err = uvarint(p); err != nil {
			return err
		}
		r.KeyGroup = int(kg)
		if r.Key, p, err = prefixed(p); err != nil {
			return err
		}
		switch op {
		case OpClear:
		case OpSet, OpListAdd, OpListSet, OpMapRemove:
			r.A, p, err = prefixed(p)
		case OpMapPut:
			if r.A, p, err = prefixed(p); err == nil {
				r.B, p, err = prefixed(p)
			}
		case OpTimerAdd, OpTimerDel:
			t, k := binary.Varint(p)
			if k <= 0 {
				return fmt.Errorf("timer record cut short: %w", ErrCorrupt)
			}
			r.Time, p = t, p[k:]
		default:
			return fmt.Errorf("unknown record op %d: %w", op, ErrCorrupt)
		}
		if err != nil {
			return err
		}
		if err := yield(r, raw[:len(raw)-len(p)]); err != nil {
			return err
		}
	}
	return nil
}

// parseShortSet reads the short set p starts with into r and returns what
// follows it.
func parseShortSet(p []byte, decls *declTable, r *Record) ([]byte, error) {
	d, ok := decls.get(uint64(p[0] &^ shortSet))
	if !ok {
		return nil, fmt.Errorf("record of undeclared state %d: %w", p[0]&^shortSet, ErrCorrupt)
	}
	if len(p) < 3 {
		return nil, fmt.Errorf("short set cut short: %w", ErrCorrupt)
	}
	if p[1] >= 0x80 {
		return nil, fmt.Errorf("short set of key group %d (at most 127): %w", p[1], ErrCorrupt)
	}
	if p[2] >= 0x80 {
		return nil, fmt.Errorf("short set with a key of %d bytes (at most 127): %w", p[2], ErrCorrupt)
	}
	k := 3 + int(p[2])
	// The value's varint ends at its first byte under 0x80.
	e := k
	for e < len(p) && e-k < binary.MaxVarintLen64 && p[e] >= 0x80 {
		e++
	}
	if e >= len(p) || e-k == binary.MaxVarintLen64 {
		return nil, fmt.Errorf("short set cut short: %w", ErrCorrupt)
	}
	if e-k == binary.MaxVarintLen64-1 && p[e] > 1 {
		// The tenth byte holds the 64th bit only.
		return nil, fmt.Errorf("short set's value overflows 64 bits: %w", ErrCorrupt)
	}
	e++
	r.set(OpSet, d, int(p[1]), p[2:k:k], p[k:e:e])
	return p[e:], nil
}

// set fills r field by field. Records are parsed into one Record, on the
// heap, again and again: assigning it a new Record each time copied every
// pointer in it under the garbage collector's bulk write barrier, which a
// restore's allocations keep on — three quarters of the short set's
// parse (BenchmarkChangelogReplay). Pointers that do not change (the
// state's name, an absent B) are not written again.
func (r *Record) set(op Op, d decl, kg int, key, a []byte) {
	r.Op, r.Kind, r.KeyGroup, r.Time = op, d.kind, kg, 0
	if r.State != d.name {
		r.State = d.name
	}
	r.Key = key
	if a != nil || r.A != nil {
		r.A = a
	}
	if r.B != nil {
		r.B = nil
	}
}

// declTable maps a file's state ids to their declarations. Writers number
// states densely from 1, so a slice serves them (a map lookup per record was
// a tenth of replay); any other id the format allows goes to a map.
type declTable struct {
	small []decl
	big   map[uint64]decl
	// v1: the file is of version 1, which has no short sets; a byte with
	// their bit is an unknown op there.
	v1 bool
}

type decl struct {
	name     string
	kind     byte
	declared bool
}

// smallIDs is how many ids the slice holds at most.
const smallIDs = 1 << 12

// set declares id. An id stands for one state in a file (a writer's ids
// never change): declared again, it must be the same state, else records
// before and after could not be told apart.
func (t *declTable) set(id uint64, name string, kind byte) error {
	d := decl{name: name, kind: kind, declared: true}
	if was, ok := t.get(id); ok && was != d {
		return fmt.Errorf("state id %d declared as %q (kind %d) and as %q (kind %d): %w", id, was.name, was.kind, name, kind, ErrCorrupt)
	}
	if id < smallIDs {
		for uint64(len(t.small)) <= id {
			t.small = append(t.small, decl{})
		}
		t.small[id] = d
		return nil
	}
	if t.big == nil {
		t.big = map[uint64]decl{}
	}
	t.big[id] = d
	return nil
}

func (t *declTable) get(id uint64) (decl, bool) {
	if id < uint64(len(t.small)) {
		return t.small[id], t.small[id].declared
	}
	d, ok := t.big[id]
	return d, ok
}

// each calls f with every declaration.
func (t *declTable) each(f func(decl)) {
	for _, d := range t.small {
		if d.declared {
			f(d)
		}
	}
	for _, d := range t.big {
		f(d)
	}
}

func uvarint(p []byte) (uint64, []byte, error) {
	v, k := binary.Uvarint(p)
	if k <= 0 {
		return 0, nil, fmt.Errorf("record cut short: %w", ErrCorrupt)
	}
	return v, p[k:], nil
}

func prefixed(p []byte) ([]byte, []byte, error) {
	n, rest, err := uvarint(p)
	if err != nil {
		return nil, nil, err
	}
	if n > uint64(len(rest)) {
		return nil, nil, fmt.Errorf("record field of %d bytes, %d left: %w", n, len(rest), ErrCorrupt)
	}
	return rest[:n:n], rest[n:], nil
}

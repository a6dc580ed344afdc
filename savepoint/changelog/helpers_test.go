package changelog_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/gflink/gflink/savepoint/changelog"
	"pgregory.net/rapid"
)

// decl is a state a test's records refer to.
type decl struct {
	id   uint32
	kind byte
	name string
}

// rec is a record to write: the state's id and what Parse must give back.
type rec struct {
	id uint32
	r  changelog.Record
	// prefixed: write A (and B) with BeginPrefixed/FinishPrefixed rather
	// than AppendPrefixed (bit 0 for A, bit 1 for B).
	prefixed int
	// setString: written with Writer.SetStringVarint(id, kg, str, v).
	setString bool
	str       string
	v         int64
}

// genSetString is a record for Writer.SetStringVarint: keys and values
// around its one-byte and one- and two-byte-varint limits, key groups and
// ids on both sides of 0x80.
func genSetString(t *rapid.T, ds []decl) rec {
	d := rapid.SampledFrom(ds).Draw(t, "state")
	kg := rapid.OneOf(rapid.IntRange(0, 200), rapid.SampledFrom([]int{0x7f, 0x80, 32767})).Draw(t, "kg")
	key := rapid.OneOf(rapid.StringN(0, 20, -1),
		rapid.Map(rapid.SampledFrom([]int{0, 3, 4, 7, 8, 16, 17, 126, 127, 128}), func(n int) string { return strings.Repeat("k", n) })).Draw(t, "key")
	v := rapid.OneOf(rapid.Int64(), rapid.Int64Range(-10000, 10000),
		rapid.SampledFrom([]int64{0, -1, 63, 64, -64, -65, 8191, 8192, -8192, -8193, math.MaxInt64, math.MinInt64})).Draw(t, "v")
	return setString(d, kg, key, v)
}

// setString is the record AppendSetStringVarint(d.id, kg, key, v) writes.
func setString(d decl, kg int, key string, v int64) rec {
	ser := append(binary.AppendUvarint(nil, uint64(len(key))), key...)
	x := newRec(d, changelog.OpSet, kg, ser, binary.AppendVarint(nil, v), nil, 0, 0)
	x.setString, x.str, x.v = true, key, v
	return x
}

var allOps = []changelog.Op{changelog.OpSet, changelog.OpClear, changelog.OpListAdd, changelog.OpListSet,
	changelog.OpMapPut, changelog.OpMapRemove, changelog.OpTimerAdd, changelog.OpTimerDel}

func hasA(op changelog.Op) bool {
	switch op {
	case changelog.OpSet, changelog.OpListAdd, changelog.OpListSet, changelog.OpMapPut, changelog.OpMapRemove:
		return true
	}
	return false
}

func hasB(op changelog.Op) bool { return op == changelog.OpMapPut }

func isTimer(op changelog.Op) bool { return op == changelog.OpTimerAdd || op == changelog.OpTimerDel }

// newRec builds a record of op on state d, normalized the way Parse returns
// it: Key always non-nil, A and B non-nil exactly when the op has them.
func newRec(d decl, op changelog.Op, kg int, key, a, b []byte, tm int64, prefixed int) rec {
	r := changelog.Record{Op: op, State: d.name, Kind: d.kind, KeyGroup: kg, Key: nonNil(key)}
	if hasA(op) {
		r.A = nonNil(a)
	}
	if hasB(op) {
		r.B = nonNil(b)
	}
	if isTimer(op) {
		r.Time = tm
	}
	return rec{id: d.id, r: r, prefixed: prefixed}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func appendValue(dst, v []byte, viaBegin bool) []byte {
	if !viaBegin {
		return changelog.AppendPrefixed(dst, v)
	}
	dst, start := changelog.BeginPrefixed(dst)
	dst = append(dst, v...)
	return changelog.FinishPrefixed(dst, start)
}

// appendBody appends what follows a record's head.
func appendBody(dst []byte, x rec) []byte {
	switch {
	case hasB(x.r.Op):
		dst = appendValue(dst, x.r.A, x.prefixed&1 != 0)
		dst = appendValue(dst, x.r.B, x.prefixed&2 != 0)
	case hasA(x.r.Op):
		dst = appendValue(dst, x.r.A, x.prefixed&1 != 0)
	case isTimer(x.r.Op):
		dst = binary.AppendVarint(dst, x.r.Time)
	}
	return dst
}

func appendRec(dst []byte, x rec) []byte {
	if x.setString {
		return changelog.AppendSetStringVarint(dst, x.id, x.r.KeyGroup, x.str, x.v)
	}
	dst = changelog.AppendHead(dst, x.r.Op, x.id, x.r.KeyGroup, x.r.Key)
	return appendBody(dst, x)
}

func appendDecls(dst []byte, ds []decl) []byte {
	for _, d := range ds {
		dst = changelog.AppendDeclare(dst, d.id, d.kind, d.name)
	}
	return dst
}

func sameRecord(want, got changelog.Record) bool {
	return want.Op == got.Op && want.State == got.State && want.Kind == got.Kind && want.KeyGroup == got.KeyGroup &&
		bytes.Equal(want.Key, got.Key) && bytes.Equal(want.A, got.A) && bytes.Equal(want.B, got.B) &&
		(want.A == nil) == (got.A == nil) && (want.B == nil) == (got.B == nil) && want.Time == got.Time
}

func showRecord(r changelog.Record) string {
	short := func(b []byte) string {
		if b == nil {
			return "nil"
		}
		if len(b) > 16 {
			return fmt.Sprintf("%x…(%d bytes)", b[:16], len(b))
		}
		return fmt.Sprintf("%x", b)
	}
	return fmt.Sprintf("{op %d state %q kind %d kg %d key %s a %s b %s time %d}",
		r.Op, r.State, r.Kind, r.KeyGroup, short(r.Key), short(r.A), short(r.B), r.Time)
}

// parseAll parses data[:size] and returns the records, copied.
func parseAll(data []byte, size int64, name string) ([]changelog.Record, error) {
	var out []changelog.Record
	err := changelog.Parse(data, size, name, func(r changelog.Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func checkRecords(t tb, what string, want []rec, got []changelog.Record) {
	t.Helper()
	if len(got) != len(want) {
		n := min(len(got), len(want))
		for i := 0; i < n; i++ {
			if !sameRecord(want[i].r, got[i]) {
				t.Fatalf("%s: %d records, want %d; first difference at %d: got %s, want %s",
					what, len(got), len(want), i, showRecord(got[i]), showRecord(want[i].r))
			}
		}
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !sameRecord(want[i].r, got[i]) {
			t.Fatalf("%s: record %d is %s, want %s", what, i, showRecord(got[i]), showRecord(want[i].r))
		}
	}
}

// chunkPayloads splits a well-formed file into its chunks' payloads.
func chunkPayloads(t tb, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	rest := data[changelog.HeaderLen:]
	for len(rest) > 0 {
		if len(rest) < 8 {
			t.Fatalf("chunk header cut short: %d bytes left", len(rest))
		}
		n := int(binary.BigEndian.Uint32(rest))
		if n > len(rest)-8 {
			t.Fatalf("chunk of %d bytes, %d left", n, len(rest)-8)
		}
		out = append(out, rest[8:8+n])
		rest = rest[8+n:]
	}
	return out
}

// pattern is n deterministic bytes: values of any size without drawing
// each byte.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*31) + byte(i>>8)
	}
	return b
}

// Generators.

func genDecls(t *rapid.T) []decl {
	ids := rapid.SliceOfNDistinct(rapid.OneOf(rapid.Uint32Range(0, 300), rapid.Uint32()), 1, 5,
		func(v uint32) uint32 { return v }).Draw(t, "ids")
	ds := make([]decl, len(ids))
	for i, id := range ids {
		ds[i] = decl{id: id, kind: rapid.Byte().Draw(t, "kind"),
			name: rapid.StringMatching(`[a-z][a-z0-9-]{0,20}`).Draw(t, "name") + fmt.Sprint(i)}
	}
	return ds
}

func genBytes(t *rapid.T, label string) []byte {
	n := rapid.OneOf(rapid.IntRange(0, 140),
		rapid.SampledFrom([]int{0, 1, 127, 128, 129, 255, 300, 16383, 16384, 20000})).Draw(t, label+"-len")
	return pattern(n, rapid.Byte().Draw(t, label+"-seed"))
}

func genRec(t *rapid.T, ds []decl) rec {
	if rapid.IntRange(0, 3).Draw(t, "short set") == 0 {
		return genSetString(t, ds) // a short set where its id allows
	}
	d := rapid.SampledFrom(ds).Draw(t, "state")
	op := rapid.SampledFrom(allOps).Draw(t, "op")
	kg := rapid.OneOf(rapid.IntRange(0, 200), rapid.IntRange(0, 32767)).Draw(t, "kg")
	key := rapid.SliceOfN(rapid.Byte(), 0, 24).Draw(t, "key")
	var a, b []byte
	if hasA(op) {
		a = genBytes(t, "a")
	}
	if hasB(op) {
		b = genBytes(t, "b")
	}
	var tm int64
	if isTimer(op) {
		tm = rapid.Int64().Draw(t, "time")
	}
	return newRec(d, op, kg, key, a, b, tm, rapid.IntRange(0, 3).Draw(t, "prefixed"))
}

// testLogs holds the memory-storage log files of this package's external
// tests (a job has its own store; these tests share one).
var testLogs = changelog.NewMemoryStorage()

package changelog_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gflink/gflink/savepoint/changelog"
	"pgregory.net/rapid"
)

var (
	dValue = decl{id: 0, kind: 1, name: "count"}
	dList  = decl{id: 1, kind: 2, name: "events"}
	dMap   = decl{id: 300, kind: 3, name: "by-user"} // a two-byte uvarint id
	dTimer = decl{id: math.MaxUint32, kind: 9, name: "timers"}
)

// A value of every length around the one-byte reservation's limit, written
// with BeginPrefixed/FinishPrefixed, comes out exactly as AppendPrefixed
// writes it, and leaves the bytes in front of it alone.
func TestFinishPrefixedMatchesAppendPrefixed(t *testing.T) {
	lengths := []int{0, 1, 2, 126, 127, 128, 129, 255, 256, 300, 16383, 16384, 16385, 20000, 1 << 21}
	for n := 0; n < 300; n++ {
		lengths = append(lengths, n)
	}
	front := []byte("front matter")
	for _, n := range lengths {
		v := pattern(n, byte(n))
		want := changelog.AppendPrefixed(append([]byte(nil), front...), v)
		// Exact capacity so that widening must reallocate; and spare
		// capacity so that it must move in place.
		for _, spare := range []int{0, 64} {
			dst := make([]byte, len(front), len(front)+spare)
			copy(dst, front)
			dst, start := changelog.BeginPrefixed(dst)
			if start != len(front) {
				t.Fatalf("BeginPrefixed reserved at %d, want %d", start, len(front))
			}
			dst = append(dst, v...)
			got := changelog.FinishPrefixed(dst, start)
			if !bytes.Equal(got, want) {
				t.Fatalf("value of %d bytes (spare %d): FinishPrefixed gives %d bytes that differ from AppendPrefixed's %d",
					n, spare, len(got), len(want))
			}
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	var want []rec
	var payloads [][]byte
	var p []byte
	add := func(x rec) {
		p = appendRec(p, x)
		want = append(want, x)
	}
	cut := func() {
		payloads = append(payloads, p)
		p = nil
	}

	// First chunk: declarations of three states, then values of every
	// interesting length, via the one-byte reservation and via
	// AppendPrefixed.
	p = appendDecls(p, []decl{dValue, dList, dMap})
	for i, n := range []int{0, 1, 127, 128, 300, 20000} {
		add(newRec(dValue, changelog.OpSet, i*61, []byte{byte(i), 'k'}, pattern(n, byte(i)), nil, 0, 1))
		add(newRec(dValue, changelog.OpSet, 127+i, []byte("same-key"), pattern(n, byte(i+7)), nil, 0, 0))
	}
	add(newRec(dValue, changelog.OpClear, 128, nil, nil, nil, 0, 0))
	// Short sets between the others, of every length of varint.
	for i, v := range []int64{0, -1, 63, 64, 8191, 8192, math.MaxInt64, math.MinInt64} {
		add(setString(dValue, i*17, strings.Repeat("w", i*18), v))
	}
	add(newRec(dValue, changelog.OpSet, 3, []byte("after short sets"), []byte("y"), nil, 0, 0))
	cut()
	// Second chunk: lists and maps, values large and small, the map value
	// prefixed either way.
	add(newRec(dList, changelog.OpListAdd, 32767, pattern(300, 1), pattern(128, 2), nil, 0, 1))
	add(newRec(dList, changelog.OpListSet, 0, []byte("l"), pattern(20000, 3), nil, 0, 1))
	add(newRec(dList, changelog.OpListSet, 0, []byte("l"), nil, nil, 0, 0))
	add(newRec(dMap, changelog.OpMapPut, 5, []byte("u1"), pattern(127, 4), pattern(128, 5), 0, 1))
	add(newRec(dMap, changelog.OpMapPut, 5, []byte("u1"), pattern(300, 6), pattern(0, 7), 0, 2))
	add(newRec(dMap, changelog.OpMapPut, 5, []byte("u2"), pattern(1, 6), pattern(20000, 7), 0, 3))
	add(newRec(dMap, changelog.OpMapRemove, 5, []byte("u1"), pattern(127, 4), nil, 0, 1))
	add(newRec(dMap, changelog.OpClear, 5, []byte("u2"), nil, nil, 0, 0))
	cut()
	// An empty chunk is legal framing.
	cut()
	// Third chunk declares a fourth state late; records of all states
	// still resolve (declarations hold for the rest of the file).
	p = appendDecls(p, []decl{dTimer})
	for _, tm := range []int64{0, -1, 1, math.MinInt64, math.MaxInt64, 1700000000000} {
		add(newRec(dTimer, changelog.OpTimerAdd, 9, []byte("t"), nil, nil, tm, 0))
		add(newRec(dTimer, changelog.OpTimerDel, 10, []byte("t"), nil, nil, tm, 0))
	}
	add(newRec(dValue, changelog.OpSet, 1, []byte("after"), []byte("x"), nil, 0, 1))
	cut()

	data := changelog.AppendHeader(nil)
	if len(data) != changelog.HeaderLen || string(data[:8]) != "GFLKCLOG" || binary.BigEndian.Uint32(data[8:]) != 2 {
		t.Fatalf("header %q, want GFLKCLOG and version 2 in %d bytes", data, changelog.HeaderLen)
	}
	for _, pl := range payloads {
		data = changelog.AppendChunk(data, pl)
	}
	got, err := parseAll(data, int64(len(data)), "round-trip.log")
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, "round trip", want, got)
	if n := len(chunkPayloads(t, data)); n != len(payloads) {
		t.Fatalf("%d chunks, want %d", n, len(payloads))
	}
}

// Parse stops at, and returns, the first error yield returns.
func TestParseStopsAtYieldError(t *testing.T) {
	p := appendDecls(nil, []decl{dValue})
	for i := 0; i < 5; i++ {
		p = appendRec(p, newRec(dValue, changelog.OpSet, i, nil, []byte{byte(i)}, nil, 0, 0))
	}
	data := changelog.AppendChunk(changelog.AppendHeader(nil), p)
	stop := errors.New("stop here")
	calls := 0
	err := changelog.Parse(data, int64(len(data)), "f.log", func(r changelog.Record) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || errors.Is(err, changelog.ErrCorrupt) {
		t.Fatalf("Parse returned %v, want the yield's error (and not ErrCorrupt)", err)
	}
	if calls != 3 {
		t.Fatalf("yield called %d times after it failed at the 3rd", calls)
	}
}

// Property: any sequence of records of any ops over several states, split
// into any chunks, parses back exactly, in order; bytes written after the
// size the checkpoint recorded are never read.
func TestParseRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ds := genDecls(t)
		upfront := rapid.Bool().Draw(t, "declare-upfront")
		declared := map[uint32]bool{}
		var p []byte
		if upfront {
			p = appendDecls(p, ds)
		}
		data := changelog.AppendHeader(nil)
		var want []rec
		n := rapid.IntRange(0, 60).Draw(t, "records")
		for i := 0; i < n; i++ {
			x := genRec(t, ds)
			if !upfront && !declared[x.id] {
				for _, d := range ds {
					if d.id == x.id {
						p = appendDecls(p, []decl{d})
					}
				}
				declared[x.id] = true
			}
			p = appendRec(p, x)
			want = append(want, x)
			if rapid.IntRange(0, 3).Draw(t, "cut") == 0 {
				data = changelog.AppendChunk(data, p)
				p = nil
			}
		}
		if len(p) > 0 || rapid.Bool().Draw(t, "final-empty-chunk") {
			data = changelog.AppendChunk(data, p)
		}
		size := int64(len(data))
		// A tail after the recorded size: a torn chunk, garbage or
		// nothing.
		switch rapid.IntRange(0, 2).Draw(t, "tail") {
		case 1:
			more := changelog.AppendChunk(nil, appendRec(nil, genRec(t, ds)))
			data = append(data, more[:rapid.IntRange(0, len(more)).Draw(t, "torn-at")]...)
		case 2:
			data = append(data, rapid.SliceOfN(rapid.Byte(), 1, 40).Draw(t, "garbage")...)
		}
		got, err := parseAll(data, size, "prop.log")
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		checkRecords(t, "property", want, got)
	})
}

// twoChunkFile returns a valid file of two chunks, the records of its first
// chunk, and where the second chunk starts.
func twoChunkFile() (data []byte, first []rec, secondAt int) {
	p := appendDecls(nil, []decl{dValue, dMap})
	first = []rec{
		newRec(dValue, changelog.OpSet, 3, []byte("a"), []byte("1"), nil, 0, 0),
		newRec(dMap, changelog.OpMapPut, 4, []byte("b"), []byte("mk"), pattern(200, 1), 0, 3),
	}
	for _, x := range first {
		p = appendRec(p, x)
	}
	data = changelog.AppendChunk(changelog.AppendHeader(nil), p)
	secondAt = len(data)
	var q []byte
	q = appendRec(q, newRec(dValue, changelog.OpClear, 3, []byte("a"), nil, nil, 0, 0))
	q = appendRec(q, newRec(dMap, changelog.OpMapRemove, 4, []byte("b"), []byte("mk"), nil, 0, 0))
	data = changelog.AppendChunk(data, q)
	return data, first, secondAt
}

// fileWith is a valid header, then one chunk declaring dValue (id 0) and
// dMap (id 300), then a chunk holding payload.
func fileWith(payload []byte) []byte {
	data := changelog.AppendChunk(changelog.AppendHeader(nil), appendDecls(nil, []decl{dValue, dMap}))
	return changelog.AppendChunk(data, payload)
}

func TestParseCorrupt(t *testing.T) {
	good, first, secondAt := twoChunkFile()
	shortSetInV1 := fileWith([]byte{0x80, 0, 7, 1, 'k'})
	binary.BigEndian.PutUint32(shortSetInV1[8:], 1)
	clone := func() []byte { return append([]byte(nil), good...) }
	head := func(op changelog.Op, id uint32) []byte { return changelog.AppendHead(nil, op, id, 7, []byte("key")) }

	type tc struct {
		name string
		data []byte
		size int64
		// records yielded before the error (nil: none checked)
		before []rec
	}
	cases := []tc{
		{name: "file shorter than the recorded size", data: good, size: int64(len(good)) + 1},
		{name: "file far shorter than the recorded size", data: good[:5], size: int64(len(good))},
		{name: "empty file", data: nil, size: 0},
		{name: "recorded size within the header", data: good, size: 5},
		{name: "recorded size cuts a chunk header", data: good, size: int64(secondAt) + 5, before: first},
		{name: "recorded size cuts a chunk payload", data: good, size: int64(len(good)) - 1, before: first},
		{name: "version 3", data: func() []byte {
			d := clone()
			binary.BigEndian.PutUint32(d[8:], 3)
			return d
		}(), size: int64(len(good))},
		{name: "version 0", data: func() []byte {
			d := clone()
			binary.BigEndian.PutUint32(d[8:], 0)
			return d
		}(), size: int64(len(good))},
		{name: "chunk length beyond the data", data: func() []byte {
			d := clone()
			n := binary.BigEndian.Uint32(d[secondAt:])
			binary.BigEndian.PutUint32(d[secondAt:], n+1)
			return d
		}(), size: int64(len(good)), before: first},
		{name: "chunk length of 4 GiB", data: func() []byte {
			d := clone()
			binary.BigEndian.PutUint32(d[changelog.HeaderLen:], math.MaxUint32)
			return d
		}(), size: int64(len(good))},
		{name: "checksum field flipped", data: func() []byte {
			d := clone()
			d[secondAt+4] ^= 1
			return d
		}(), size: int64(len(good)), before: first},
		{name: "record of an undeclared state",
			data: fileWith(append(head(changelog.OpSet, 1), changelog.AppendPrefixed(nil, []byte("v"))...))},
		{name: "unknown op 0", data: fileWith(head(0, 0))},
		{name: "unknown op 10", data: fileWith(append(head(10, 300), 0))},
		{name: "unknown op 127", data: fileWith(head(127, 0))},
		{name: "value cut short", data: fileWith(append(head(changelog.OpSet, 0), 5, 'a', 'b'))},
		{name: "map value missing", data: fileWith(append(head(changelog.OpMapPut, 300), 1, 'k'))},
		{name: "timer cut short", data: fileWith(head(changelog.OpTimerAdd, 0))},
		{name: "key cut short", data: fileWith(append(changelog.AppendHead(nil, changelog.OpClear, 0, 7, nil)[:3], 9, 'x'))},
		{name: "state id cut short", data: fileWith([]byte{byte(changelog.OpSet), 0x80})},
		{name: "declaration cut short", data: fileWith(changelog.AppendDeclare(nil, 5, 1, "abc")[:3])},
		{name: "declaration name cut short", data: fileWith(changelog.AppendDeclare(nil, 5, 1, "abc")[:6])},
		{name: "uvarint overflow", data: fileWith(append([]byte{byte(changelog.OpSet)}, bytes.Repeat([]byte{0xff}, 11)...))},
		{name: "short set of an undeclared state", data: fileWith([]byte{0x80 | 1, 7, 1, 'k', 2})},
		{name: "short set of state 127, undeclared", data: fileWith([]byte{0xff, 7, 1, 'k', 2})},
		{name: "short set of one byte", data: fileWith([]byte{0x80})},
		{name: "short set without its key's length", data: fileWith([]byte{0x80, 7})},
		{name: "short set key cut short", data: fileWith([]byte{0x80, 7, 5, 'a', 'b'})},
		{name: "short set key of 128 bytes", data: fileWith(append(append([]byte{0x80, 7, 0x80}, bytes.Repeat([]byte{'k'}, 128)...), 2))},
		{name: "short set of key group 128", data: fileWith([]byte{0x80, 0x80, 1, 'k', 2})},
		{name: "short set value over 64 bits", data: fileWith(append(append([]byte{0x80, 7, 1, 'k'}, bytes.Repeat([]byte{0xff}, 9)...), 2))},
		{name: "short set in a version 1 file", data: shortSetInV1},
		{name: "short set without a value", data: fileWith([]byte{0x80, 7, 1, 'k'})},
		{name: "short set value cut short", data: fileWith([]byte{0x80, 7, 1, 'k', 0x81})},
		{name: "short set value of 11 bytes", data: fileWith(append(append([]byte{0x80, 7, 1, 'k'}, bytes.Repeat([]byte{0xff}, 10)...), 1))},
		{name: "short set then garbage", data: fileWith([]byte{0x80, 7, 1, 'k', 2, 0})},
	}
	for i := range 8 {
		d := clone()
		d[i] ^= 0x20
		cases = append(cases, tc{name: "bad magic byte " + string(rune('0'+i)), data: d, size: int64(len(d))})
	}
	// Every single flipped byte of each chunk's payload fails the
	// checksum; the records of the chunks before it were yielded, none of
	// the bad chunk's.
	for off := changelog.HeaderLen + 8; off < len(good); off++ {
		if off >= secondAt && off < secondAt+8 {
			continue
		}
		d := clone()
		d[off] ^= 0x41
		var before []rec
		if off > secondAt {
			before = first
		}
		cases = append(cases, tc{name: "payload byte flipped", data: d, size: int64(len(d)), before: before})
	}
	for _, c := range cases {
		size := c.size
		if size == 0 && c.data != nil {
			size = int64(len(c.data))
		}
		name := "/base/job/dstl/op-3-" + strings.ReplaceAll(c.name, " ", "_") + ".log"
		var got []changelog.Record
		err := changelog.Parse(c.data, size, name, func(r changelog.Record) error {
			got = append(got, r)
			return nil
		})
		if !errors.Is(err, changelog.ErrCorrupt) {
			t.Fatalf("%s: Parse returned %v, want ErrCorrupt", c.name, err)
		}
		if !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: error %q does not name the file", c.name, err)
		}
		if c.before != nil {
			checkRecords(t, c.name+": records before the corruption", c.before, got)
		}
		if c.name == "payload byte flipped" && len(got) != len(c.before) {
			t.Fatalf("%s: %d records yielded, want %d", c.name, len(got), len(c.before))
		}
	}
	// The untouched file is fine, so the errors above are the
	// corruptions'.
	if _, err := parseAll(good, int64(len(good)), "good.log"); err != nil {
		t.Fatal(err)
	}
	// And so is a record of a declared state: the undeclared one above
	// failed for its id.
	ok := fileWith(append(head(changelog.OpSet, 300), changelog.AppendPrefixed(nil, []byte("v"))...))
	if _, err := parseAll(ok, int64(len(ok)), "ok.log"); err != nil {
		t.Fatal(err)
	}
	// And the short sets above failed for what was cut or wrong: whole,
	// with a 10-byte value, they parse.
	for _, p := range [][]byte{{0x80, 7, 1, 'k', 2}, append(append([]byte{0x80, 7, 1, 'k'}, bytes.Repeat([]byte{0xff}, 9)...), 1)} {
		ok := fileWith(p)
		if got, err := parseAll(ok, int64(len(ok)), "ok.log"); err != nil || len(got) != 1 {
			t.Fatalf("short set %x: %d records, %v", p, len(got), err)
		}
	}
	// There, the short set's first byte is an op that version 1 does
	// not have: a record of state 0 (declared), key group 7, key "k".
	if _, err := parseAll(shortSetInV1, int64(len(shortSetInV1)), "v1.log"); err == nil || !strings.Contains(err.Error(), "unknown record op 128") {
		t.Fatalf("a short set's byte in a version 1 file: %v, want unknown record op 128", err)
	}
	// A version 1 file (no short sets) is read as it always was.
	v1 := clone()
	binary.BigEndian.PutUint32(v1[8:], 1)
	if got, err := parseAll(v1, int64(len(v1)), "v1.log"); err != nil || len(got) == 0 {
		t.Fatalf("version 1: %d records, %v", len(got), err)
	}
}

// Bytes after the recorded size — written after the checkpoint, torn by a
// crash or garbage — are never read.
func TestParseIgnoresTailBeyondSize(t *testing.T) {
	good, first, secondAt := twoChunkFile()
	all, err := parseAll(good, int64(len(good)), "good.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(first)+2 {
		t.Fatalf("%d records in the good file, want %d", len(all), len(first)+2)
	}
	extra := changelog.AppendChunk(nil, appendRec(nil, newRec(dValue, changelog.OpSet, 1, []byte("late"), []byte("v"), nil, 0, 0)))
	badCRC := append([]byte(nil), extra...)
	badCRC[len(badCRC)-1] ^= 0xff
	tails := map[string][]byte{
		"garbage":                   []byte("\xde\xad\xbe\xef garbage after the checkpoint"),
		"partial chunk header":      extra[:5],
		"partial chunk payload":     extra[:len(extra)-2],
		"complete chunk":            extra,
		"chunk with a bad checksum": badCRC,
		"chunk claiming 4 GiB":      {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1},
		"a second header":           changelog.AppendHeader(nil),
	}
	for what, tail := range tails {
		data := append(append([]byte(nil), good...), tail...)
		got, err := parseAll(data, int64(len(good)), "tail.log")
		if err != nil {
			t.Fatalf("tail %s: %v", what, err)
		}
		if len(got) != len(all) {
			t.Fatalf("tail %s: %d records, want %d", what, len(got), len(all))
		}
		for i := range got {
			if !sameRecord(all[i], got[i]) {
				t.Fatalf("tail %s: record %d is %s, want %s", what, i, showRecord(got[i]), showRecord(all[i]))
			}
		}
		// A checkpoint taken after the first chunk recorded its end:
		// the second chunk is a tail too.
		got, err = parseAll(data, int64(secondAt), "tail.log")
		if err != nil {
			t.Fatalf("tail %s, size at the first chunk's end: %v", what, err)
		}
		checkRecords(t, "first chunk only", first, got)
	}
	// A header alone is an empty log.
	got, err := parseAll(good, changelog.HeaderLen, "header-only.log")
	if err != nil || len(got) != 0 {
		t.Fatalf("header only: %d records, %v", len(got), err)
	}
}

// TestAppendHeadStringIsAppendHead: a string key written directly is the
// record head AppendHead writes for the key serialized first (uvarint
// length, bytes), for short and long keys, ids and key groups.
func TestAppendHeadStringIsAppendHead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		op := changelog.Op(rapid.IntRange(0, 255).Draw(t, "op"))
		id := uint32(rapid.SampledFrom([]int{0, 1, 0x7f, 0x80, 300, 1 << 20}).Draw(t, "id"))
		kg := rapid.SampledFrom([]int{0, 1, 0x7f, 0x80, 32767}).Draw(t, "kg")
		// Lengths around the one-byte uvarint limits (126–128 bytes)
		// drawn on purpose: StringN counts runes, not bytes.
		key := rapid.OneOf(rapid.StringN(0, 300, -1),
			rapid.Map(rapid.SampledFrom([]int{0, 1, 126, 127, 128, 129, 16383, 16384}), func(n int) string { return strings.Repeat("k", n) })).Draw(t, "key")
		prefix := []byte(rapid.StringN(0, 4, -1).Draw(t, "prefix"))
		ser := append(binary.AppendUvarint(nil, uint64(len(key))), key...)
		want := changelog.AppendHead(slices.Clone(prefix), op, id, kg, ser)
		if got := changelog.AppendHeadString(slices.Clone(prefix), op, id, kg, key); !bytes.Equal(got, want) {
			t.Fatalf("AppendHeadString = %x; AppendHead = %x", got, want)
		}
	})
}

// TestAppendSetStringVarint: the one-step value record reads back as the
// OpSet of the serialized key and the varint value, for values of every
// length, keys, ids and key groups around the one-byte limits, and buffers
// with and without room (the same bytes either way). Where all three are
// under 128 it is a short set (3 bytes of head, the key, the varint);
// elsewhere it is the piecewise OpSet's bytes.
func TestAppendSetStringVarint(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := uint32(rapid.SampledFrom([]int{0, 1, 0x7f, 0x80, 300}).Draw(t, "id"))
		kg := rapid.SampledFrom([]int{0, 1, 0x7f, 0x80, 32767}).Draw(t, "kg")
		key := rapid.OneOf(rapid.StringN(0, 140, -1),
			rapid.Map(rapid.SampledFrom([]int{0, 1, 3, 4, 7, 8, 16, 17, 125, 126, 127, 128}), func(n int) string { return strings.Repeat("k", n) })).Draw(t, "key")
		v := rapid.OneOf(rapid.Int64(), rapid.SampledFrom([]int64{0, -1, 63, 64, -64, -65, 8191, 8192, -8192, -8193, math.MaxInt64, math.MinInt64})).Draw(t, "v")
		prefix := []byte(rapid.StringN(0, 4, -1).Draw(t, "prefix"))
		room := rapid.IntRange(0, 200).Draw(t, "room")
		// Spare capacity filled with a pattern: the record must not
		// depend on what is there.
		dst := append(make([]byte, 0, len(prefix)+room), prefix...)
		copy(dst[len(dst):cap(dst)], bytes.Repeat([]byte{0xa5}, room))
		got := changelog.AppendSetStringVarint(dst, id, kg, key, v)
		if cap(dst) > 0 && &got[0] == &dst[:1][0] { // written in place
			if past := got[len(got):cap(got)]; bytes.Count(past, []byte{0xa5}) != len(past) {
				t.Fatalf("wrote past the record: %x", past)
			}
		}
		tight := changelog.AppendSetStringVarint(slices.Clip(slices.Clone(prefix)), id, kg, key, v)
		if !bytes.Equal(got, tight) {
			t.Fatalf("with room %d: %x; without: %x", room, got, tight)
		}
		if !bytes.Equal(got[:len(prefix)], prefix) {
			t.Fatalf("prefix %x became %x", prefix, got[:len(prefix)])
		}
		want := changelog.AppendHeadString(slices.Clone(prefix), changelog.OpSet, id, kg, key)
		want, st := changelog.BeginPrefixed(want)
		want = changelog.FinishPrefixed(binary.AppendVarint(want, v), st)
		short := id < 0x80 && kg < 0x80 && len(key) < 0x80
		switch {
		case short && len(got)-len(prefix) != 3+len(key)+len(binary.AppendVarint(nil, v)):
			t.Fatalf("short set of %d bytes for a key of %d: want its 3-byte head, the key and the varint", len(got)-len(prefix), len(key))
		case !short && !bytes.Equal(got, want):
			t.Fatalf("AppendSetStringVarint = %x; piecewise = %x", got, want)
		}
		d := decl{id: id, kind: 1, name: "count"}
		ser := append(binary.AppendUvarint(nil, uint64(len(key))), key...)
		r := newRec(d, changelog.OpSet, kg, ser, binary.AppendVarint(nil, v), nil, 0, 0)
		file := changelog.AppendChunk(changelog.AppendHeader(nil), append(appendDecls(nil, []decl{d}), got[len(prefix):]...))
		recs, err := parseAll(file, int64(len(file)), "one.log")
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, "read back", []rec{r}, recs)
	})
}

// BenchmarkRecordAppend: a word count's value record (string key, varint
// count) appended piecewise (head, prefixed value) and in one step.
func BenchmarkRecordAppend(b *testing.B) {
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "word-" + strconv.Itoa(i*7919%1000000)
	}
	buf := make([]byte, 0, 2<<20)
	b.Run("piecewise", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if len(buf) > 1<<20 {
				buf = buf[:0]
			}
			buf = changelog.AppendHeadString(buf, changelog.OpSet, 0, i&127, keys[i&4095])
			var st int
			buf, st = changelog.BeginPrefixed(buf)
			buf = changelog.FinishPrefixed(binary.AppendVarint(buf, int64(i)), st)
		}
	})
	b.Run("one-step", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if len(buf) > 1<<20 {
				buf = buf[:0]
			}
			buf = changelog.AppendSetStringVarint(buf, 0, i&127, keys[i&4095], int64(i))
		}
	})
}

// TestReadsVersion1File: a log file written by gflink before the short set
// (testdata/v1.log, format version 1: a word count's value records as
// general OpSets) reads as it did, alone and indexed together with a file
// of this version that has short sets of the same states.
func TestReadsVersion1File(t *testing.T) {
	data, err := os.ReadFile("testdata/v1.log")
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint32(data[8:12]); v != 1 {
		t.Fatalf("testdata/v1.log has version %d", v)
	}
	ser := func(s string) []byte { return append(binary.AppendUvarint(nil, uint64(len(s))), s...) }
	count, events := decl{id: 1, kind: 1, name: "count"}, decl{id: 2, kind: 2, name: "events"}
	byUser, timers := decl{id: 3, kind: 3, name: "by-user"}, decl{id: 4, kind: 9, name: "timers"}
	want := []rec{
		setString(count, 5, "hello", 1),
		setString(count, 5, "hello", 2),
		setString(count, 100, "world", -300),
		setString(count, 127, strings.Repeat("x", 126), 1<<40),
		newRec(count, changelog.OpClear, 5, ser("hello"), nil, nil, 0, 0),
		newRec(events, changelog.OpListAdd, 9, ser("k"), []byte("e1"), nil, 0, 0),
		newRec(byUser, changelog.OpMapPut, 200, ser("u"), []byte("mk"), []byte("mv"), 0, 0),
		newRec(byUser, changelog.OpMapRemove, 200, ser("u"), []byte("mk"), nil, 0, 0),
		newRec(timers, changelog.OpTimerAdd, 9, ser("k"), nil, nil, 1700000000000, 0),
		newRec(timers, changelog.OpTimerDel, 9, ser("k"), nil, nil, 1700000000000, 0),
		setString(count, 9, "k", 42),
	}
	got, err := parseAll(data, int64(len(data)), "v1.log")
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, "testdata/v1.log", want, got)

	// A version 2 file after it, its states numbered differently.
	count2 := decl{id: 7, kind: 1, name: "count"}
	later := []rec{setString(count2, 5, "hello", 3), setString(count2, 9, "k", 43), setString(count2, 100, "world", 1)}
	v2 := logFile([]decl{count2}, later)
	x := changelog.NewIndex(0, 255)
	if err := x.Add([]changelog.Contents{{Name: "v1.log", Data: data, Size: int64(len(data))}, {Name: "v2.log", Data: v2, Size: int64(len(v2))}}, 2); err != nil {
		t.Fatal(err)
	}
	for _, kg := range []int{5, 9, 100, 127, 200} {
		var wantKG []rec
		for _, r := range append(slices.Clone(want), later...) {
			if r.r.KeyGroup == kg {
				wantKG = append(wantKG, r)
			}
		}
		var gotKG []changelog.Record
		if err := x.KeyGroup(kg, func(r *changelog.Record) error {
			c := *r
			c.Key, c.A, c.B = bytes.Clone(r.Key), bytes.Clone(r.A), bytes.Clone(r.B)
			gotKG = append(gotKG, c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		checkRecords(t, fmt.Sprintf("key group %d", kg), wantKG, gotKG)
	}
}

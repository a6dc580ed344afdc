package changelog

import (
	"encoding/binary"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// A file holding all 128 key groups, indexed by an index that keeps 32 of
// them (a subtask after a rescale from 1 to 4): the segments are presized
// from the file's size over the index's key groups, four times what each
// gets, and must give the excess back once the file is indexed.
func TestIndexClipsSegmentsOfARescaledFile(t *testing.T) {
	data := AppendChunk(AppendHeader(nil), AppendDeclare(nil, 1, 0, "count"))
	var p []byte
	for i := range 128 * 200 {
		p = AppendHead(p, OpSet, 1, i%128, fmt.Appendf(nil, "key-%06d", i))
		p = AppendPrefixed(p, []byte{byte(i)})
		if len(p) > 4096 {
			data, p = AppendChunk(data, p), nil
		}
	}
	data = AppendChunk(data, p)
	x := NewIndex(32, 63)
	if err := x.Add([]Contents{{Name: "f", Data: data, Size: int64(len(data))}}, 1); err != nil {
		t.Fatal(err)
	}
	if x.Len() != 32*200 {
		t.Fatalf("Len() = %d, want %d", x.Len(), 32*200)
	}
	var kept, reserved int
	for _, segs := range x.kgs {
		for _, s := range segs {
			kept, reserved = kept+len(s.data), reserved+cap(s.data)
		}
	}
	if reserved > 2*kept+32*4096 {
		t.Fatalf("the index reserves %d bytes for %d kept: segments were not clipped", reserved, kept)
	}
}

// TestInlineParseIsGeneralParse: parseRecords reads common records inline;
// on record streams of every op, with fields of one and two length bytes,
// then cut short or with a byte changed, it yields the same records and
// the same error as with the inline reading off.
func TestInlineParseIsGeneralParse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var p []byte
		for range rapid.IntRange(0, 20).Draw(t, "records") {
			field := func(label string) []byte {
				return []byte(rapid.StringN(0, 140, -1).Draw(t, label))
			}
			// Unknown ops, undeclared ids (0, 7), declarations between
			// records and lengths written in more bytes than needed are
			// drawn too.
			op := Op(rapid.SampledFrom([]Op{OpClear, OpSet, OpListAdd, OpListSet, OpMapPut, OpMapRemove, OpTimerAdd, OpTimerDel, OpDeclare, 10, 127, shortSet}).Draw(t, "op"))
			if op == shortSet {
				id := uint32(rapid.SampledFrom([]int{1, 2, 0, 7}).Draw(t, "id"))
				p = AppendSetStringVarint(p, id, rapid.IntRange(0, 127).Draw(t, "kg"), string(field("key")), rapid.Int64().Draw(t, "v"))
				continue
			}
			if op == OpDeclare {
				p = AppendDeclare(p, uint32(rapid.SampledFrom([]int{1, 3, 200}).Draw(t, "declared")), 4, string(field("name")))
				continue
			}
			id := uint32(rapid.SampledFrom([]int{1, 2, 200, 0, 7}).Draw(t, "id"))
			kg := rapid.SampledFrom([]int{0, 5, 127, 128, 300}).Draw(t, "kg")
			if rapid.Bool().Draw(t, "long lengths") {
				// The key group and the key's length in two bytes each.
				key := field("key")
				p = append(append(append(p, byte(op)), byte(id)), byte(kg)|0x80, byte(kg>>7), byte(len(key))|0x80, byte(len(key)>>7))
				p = append(p, key...)
			} else {
				p = AppendHead(p, op, id, kg, field("key"))
			}
			switch op {
			case OpSet, OpListAdd, OpListSet, OpMapRemove:
				p = AppendPrefixed(p, field("a"))
			case OpMapPut:
				p = AppendPrefixed(AppendPrefixed(p, field("a")), field("b"))
			case OpTimerAdd, OpTimerDel:
				p = binary.AppendVarint(p, rapid.Int64().Draw(t, "ts"))
			}
		}
		if len(p) > 0 && rapid.Bool().Draw(t, "damage") {
			if rapid.Bool().Draw(t, "cut") {
				p = p[:rapid.IntRange(0, len(p)-1).Draw(t, "at")]
			} else {
				p[rapid.IntRange(0, len(p)-1).Draw(t, "byte")] = byte(rapid.IntRange(0, 255).Draw(t, "to"))
			}
		}
		read := func(inline bool) (string, error) {
			var decls declTable
			for _, id := range []uint64{1, 2, 200} {
				if err := decls.set(id, fmt.Sprint("s", id), byte(id)); err != nil {
					t.Fatal(err)
				}
			}
			var out []byte
			err := parseRecordsInline(p, &decls, new(Record), func(r *Record, raw []byte) error {
				out = fmt.Appendf(out, "%d %s %d %d %q %q %q %d %x\n", r.Op, r.State, r.Kind, r.KeyGroup, r.Key, r.A, r.B, r.Time, raw)
				return nil
			}, inline)
			return string(out), err
		}
		got, gotErr := read(true)
		want, wantErr := read(false)
		if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("inline: %s(%v)\ngeneral: %s(%v)", got, gotErr, want, wantErr)
		}
	})
}

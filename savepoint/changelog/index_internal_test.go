package changelog

import (
	"fmt"
	"testing"
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

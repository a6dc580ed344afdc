package task

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// Records in flight keep their key groups and their timestamps through an
// unaligned checkpoint: what a writer or capture encodes (AppendRecords),
// readInFlight restores — in every combination of keyed and stamped.
func TestInFlightRecordsKeepTimestamps(t *testing.T) {
	ser := state.SerializerFor[string]()
	recs := []string{"a", "bb", "", "dddd"}
	kgs := []uint64{network.PackKeyHash(3, 0xabcd<<32), network.PackKeyHash(0, 1<<40), network.PackKeyHash(127, 0), network.PackKeyHash(64, 7<<32)}
	tss := []int64{-5, 0, 1 << 40, -1 << 62}
	for _, keyed := range []bool{false, true} {
		for _, stamped := range []bool{false, true} {
			var meta []uint64
			for i := range recs {
				if keyed {
					meta = append(meta, kgs[i])
				}
				if stamped {
					meta = append(meta, uint64(tss[i]))
				}
			}
			d := network.ChannelData{Keyed: keyed, Stamped: stamped}
			network.AppendRecords(&d, ser, recs, meta)
			block := binary.BigEndian.AppendUint32(slices.Clone(d.Data), crc32.Checksum(d.Data, crc32.MakeTable(crc32.Castagnoli)))
			tk := &Task{Name: "t", svc: &Services{FS: vfs.Default}, Wiring: Wiring{InFlight: []restore.InFlight{{
				Stream: &savepoint.StreamStateHandle{Inline: block, Length: int64(len(block))},
				Keyed:  keyed, Stamped: stamped, Start: 0, End: 127}}}}
			got, err := readInFlight[string](tk, ser)
			if err != nil {
				t.Fatalf("keyed %v, stamped %v: %v", keyed, stamped, err)
			}
			if len(got) != 1 || !slices.Equal(got[0].Recs, recs) || !slices.Equal(got[0].KGs, meta) ||
				got[0].Keyed != keyed || got[0].Stamped != stamped {
				t.Fatalf("keyed %v, stamped %v: restored %+v, want records %q with metadata %v", keyed, stamped, got, recs, meta)
			}
			if !keyed && !stamped {
				continue
			}
			// A record cut inside its key group or timestamp is corrupt.
			cut := []byte{0x80}
			block = binary.BigEndian.AppendUint32(slices.Clone(cut), crc32.Checksum(cut, crc32.MakeTable(crc32.Castagnoli)))
			tk.InFlight[0].Stream = &savepoint.StreamStateHandle{Inline: block, Length: int64(len(block))}
			if _, err := readInFlight[string](tk, ser); !errors.Is(err, savepoint.ErrCorrupt) {
				t.Fatalf("keyed %v, stamped %v: a cut record restored with %v, want ErrCorrupt", keyed, stamped, err)
			}
		}
	}
}

package network

import (
	"encoding/binary"

	"github.com/gflink/gflink/engine/state"
)

// ChannelData is the encoded records of one channel: for output channel
// state, channel is the receiving subtask; for input channel state, the
// channel's index in the gate (negative for restored in-flight records not
// processed yet, -1-k for input edge k).
type ChannelData struct {
	Channel int
	Keyed   bool
	// Stamped: the records carry their timestamps.
	Stamped bool
	Records int64
	Data    []byte
}

// AppendRecords encodes records into d: each record's key group and hash
// first (uvarint) in a keyed exchange, so that restore routes it without
// the key function, then its timestamp (varint) where records carry one,
// then the record. meta is the records' Batch.KGs.
func AppendRecords[T any](d *ChannelData, ser state.Serializer[T], recs []T, meta []uint64) {
	stride := MetaStride(d.Keyed, d.Stamped)
	for i, r := range recs {
		m := meta[i*stride : i*stride+stride]
		if d.Keyed {
			d.Data = binary.AppendUvarint(d.Data, m[0])
			m = m[1:]
		}
		if d.Stamped {
			d.Data = binary.AppendVarint(d.Data, int64(m[0]))
		}
		d.Data = ser.Append(d.Data, r)
	}
	d.Records += int64(len(recs))
}

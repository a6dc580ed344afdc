package restore

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gflink/gflink/savepoint"
)

// Exchange is a data exchange of the new job: the records its sending
// operator emits to its receiving operator.
type Exchange struct {
	From, To string // the sending and receiving operators' uids
	// Keyed: a keyBy; records are routed by key group. Otherwise each
	// receiving subtask's records go to one new subtask.
	Keyed bool
	// Broadcast: every record went to every receiving subtask; its records
	// in flight restore only at the same parallelism (each subtask's own).
	Broadcast bool
	// Parallelism and MaxParallelism are the receiving operator's.
	Parallelism, MaxParallelism int
}

// InFlight is one channel's records in flight, to be fed to a receiving
// subtask before its live input.
type InFlight struct {
	Stream *savepoint.StreamStateHandle
	Keyed  bool
	// Stamped: each record carries its timestamp.
	Stamped bool
	// Start and End are the key groups the receiving subtask owns: in a
	// keyed exchange, records of other key groups are another subtask's.
	Start, End int
	// Edge is the exchange's index among the receiving task's inputs (set
	// by the caller).
	Edge int
}

// Owns reports whether a record of key group kg is the subtask's.
func (f InFlight) Owns(kg int) bool { return kg >= f.Start && kg <= f.End }

// InFlightFor plans the replay of an unaligned checkpoint's records in
// flight on exchange x, per new receiving subtask. A channel's records are
// replayed in the order they were sent: the receiver's input channel state
// (records it had received), then the sender's output channel state
// (records it had not sent). Records the receiver had restored and not yet
// processed (channel -1) come first of all. When the receiving operator's
// parallelism changed, a keyed exchange's records go to the subtask owning
// their key group (each subtask reads the blocks whose old owner's key
// groups overlap its own), a broadcast exchange's to new subtask j from old
// subtask j mod the old parallelism (whose broadcast state it restores),
// and other records go from old receiving subtask j to new subtask j mod
// the new parallelism.
func InFlightFor(m *savepoint.Metadata, x Exchange) ([][]InFlight, error) {
	type piece struct {
		recv, send int // old subtasks; send -1 for restored records
		output     bool
		h          savepoint.ChannelStateHandle
	}
	var pieces []piece
	oldRecvPar := 0
	if to := m.Operator(x.To); to != nil {
		oldRecvPar = to.Parallelism
		for _, st := range to.Subtasks {
			for _, h := range st.InputChannels {
				if h.Peer == x.From {
					pieces = append(pieces, piece{recv: st.Index, send: h.Channel, h: h})
				}
			}
		}
	}
	if from := m.Operator(x.From); from != nil {
		for _, st := range from.Subtasks {
			for _, h := range st.OutputChannels {
				if h.Peer == x.To {
					pieces = append(pieces, piece{recv: h.Channel, send: st.Index, output: true, h: h})
				}
			}
		}
	}
	if len(pieces) == 0 {
		return nil, nil
	}
	if oldRecvPar <= 0 {
		for _, p := range pieces {
			oldRecvPar = max(oldRecvPar, p.recv+1)
		}
	}
	slices.SortStableFunc(pieces, func(a, b piece) int {
		return cmp.Or(cmp.Compare(a.recv, b.recv), cmp.Compare(a.send, b.send), compareBool(a.output, b.output))
	})
	out := make([][]InFlight, x.Parallelism)
	for _, p := range pieces {
		if p.recv < 0 || p.recv >= oldRecvPar || p.h.Keyed != x.Keyed {
			return nil, fmt.Errorf("records in flight from %s to %s: channel to subtask %d of %d (keyed %v, the exchange's %v): %w",
				x.From, x.To, p.recv, oldRecvPar, p.h.Keyed, x.Keyed, savepoint.ErrCorrupt)
		}
		h := p.h.Stream
		if x.Broadcast {
			// Every old receiver had every record: new subtask j replays
			// what old subtask j mod the old parallelism had not
			// processed, as it restores that subtask's broadcast state.
			for j := p.recv; j < x.Parallelism; j += oldRecvPar {
				out[j] = append(out[j], InFlight{Stream: &h, Stamped: p.h.Stamped})
			}
			continue
		}
		if !x.Keyed {
			j := p.recv % x.Parallelism
			out[j] = append(out[j], InFlight{Stream: &h, Stamped: p.h.Stamped})
			continue
		}
		os, oe := subtaskKeyGroups(x.MaxParallelism, oldRecvPar, p.recv)
		for j := range out {
			s, e := subtaskKeyGroups(x.MaxParallelism, x.Parallelism, j)
			if s <= oe && os <= e {
				out[j] = append(out[j], InFlight{Stream: &h, Keyed: true, Stamped: p.h.Stamped, Start: s, End: e})
			}
		}
	}
	return out, nil
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}

// UnmatchedInFlight lists, as "from -> to", the exchanges the snapshot
// holds records in flight on that the new job does not have: those
// records cannot be restored (changing a job's topology needs a savepoint,
// which is aligned and holds none).
func UnmatchedInFlight(m *savepoint.Metadata, exchanges []Exchange) []string {
	have := map[[2]string]bool{}
	for _, x := range exchanges {
		have[[2]string{x.From, x.To}] = true
	}
	seen := map[[2]string]bool{}
	var out []string
	add := func(from, to string) {
		k := [2]string{from, to}
		if !have[k] && !seen[k] {
			seen[k] = true
			out = append(out, from+" -> "+to)
		}
	}
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			for _, h := range st.InputChannels {
				add(h.Peer, op.UID)
			}
			for _, h := range st.OutputChannels {
				add(op.UID, h.Peer)
			}
		}
	}
	return out
}

package savepoint

import (
	"encoding/binary"
	"fmt"
)

// Redistribution is how an operator list state is divided among subtasks
// when the parallelism changes (Flink's OperatorStateHandle.Mode).
type Redistribution byte

const (
	// SplitDistribute concatenates every subtask's list and splits it evenly.
	SplitDistribute Redistribution = 1
	// Union gives every subtask the whole concatenated list.
	Union Redistribution = 2
	// Broadcast is broadcast state: every subtask holds the same copy, so
	// new subtask i restores old subtask i mod the old parallelism's (as
	// Flink's BROADCAST mode does).
	Broadcast Redistribution = 3
)

func (r Redistribution) String() string {
	switch r {
	case SplitDistribute:
		return "operator-list"
	case Union:
		return "operator-union-list"
	case Broadcast:
		return "broadcast"
	}
	return fmt.Sprintf("redistribution(%d)", byte(r))
}

// OperatorListState is one named operator (non-keyed) list state: opaque
// elements, typically source splits with their offsets or sink committables.
type OperatorListState struct {
	Name  string
	Mode  Redistribution
	Items [][]byte
}

// EncodeOperatorState encodes a subtask's operator states:
//
//	uvarint number of states
//	per state: string name, byte mode, uvarint count, count × bytes
func EncodeOperatorState(states []OperatorListState) []byte {
	var buf []byte
	buf = binary.AppendUvarint(buf, uint64(len(states)))
	for _, s := range states {
		buf = appendLenPrefixed(buf, []byte(s.Name))
		buf = append(buf, byte(s.Mode))
		buf = binary.AppendUvarint(buf, uint64(len(s.Items)))
		for _, it := range s.Items {
			buf = appendLenPrefixed(buf, it)
		}
	}
	return buf
}

// DecodeOperatorState parses EncodeOperatorState's output.
func DecodeOperatorState(data []byte) ([]OperatorListState, error) {
	n, rest, err := uvarint(data)
	if err != nil {
		return nil, err
	}
	// Every state takes at least 3 bytes (name length, mode, count), so a
	// larger count is damage; checking it first keeps a corrupt count from
	// sizing a huge allocation.
	if n > uint64(len(rest))/3 {
		return nil, fmt.Errorf("operator state: %d states cannot fit in %d bytes: %w", n, len(rest), ErrCorrupt)
	}
	out := make([]OperatorListState, 0, n)
	for i := uint64(0); i < n; i++ {
		var s OperatorListState
		var name []byte
		if name, rest, err = lenPrefixed(rest); err != nil {
			return nil, err
		}
		if len(rest) < 1 {
			return nil, fmt.Errorf("operator state: truncated: %w", ErrCorrupt)
		}
		s.Name, s.Mode = string(name), Redistribution(rest[0])
		if s.Mode != SplitDistribute && s.Mode != Union && s.Mode != Broadcast {
			return nil, fmt.Errorf("operator state %q: unknown redistribution mode %d: %w", s.Name, rest[0], ErrCorrupt)
		}
		var cnt uint64
		if cnt, rest, err = uvarint(rest[1:]); err != nil {
			return nil, err
		}
		// Every item takes at least its 1-byte length.
		if cnt > uint64(len(rest)) {
			return nil, fmt.Errorf("operator state %q: %d items cannot fit in %d bytes: %w", s.Name, cnt, len(rest), ErrCorrupt)
		}
		s.Items = make([][]byte, 0, cnt)
		for j := uint64(0); j < cnt; j++ {
			var it []byte
			if it, rest, err = lenPrefixed(rest); err != nil {
				return nil, err
			}
			s.Items = append(s.Items, append([]byte(nil), it...))
		}
		out = append(out, s)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("operator state: %d trailing bytes: %w", len(rest), ErrCorrupt)
	}
	return out, nil
}

func appendLenPrefixed(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, nil, fmt.Errorf("operator state: truncated: %w", ErrCorrupt)
	}
	return v, b[k:], nil
}

func lenPrefixed(b []byte) ([]byte, []byte, error) {
	n, rest, err := uvarint(b)
	if err != nil {
		return nil, nil, err
	}
	if uint64(len(rest)) < n {
		return nil, nil, fmt.Errorf("operator state: truncated: %w", ErrCorrupt)
	}
	return rest[:n], rest[n:], nil
}

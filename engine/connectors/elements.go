package connectors

import (
	"encoding/binary"
	"fmt"

	"github.com/gflink/gflink/engine"
)

// Elements is a bounded source of the given records (Flink's
// fromElements). Positions are indexes, so it is replayable.
type Elements[T any] struct {
	Items []T
}

// Splits implements engine.Source: one contiguous range per subtask.
func (e *Elements[T]) Splits(parallelism int) ([][]byte, error) {
	out := make([][]byte, parallelism)
	n := len(e.Items)
	for k := range parallelism {
		b := binary.AppendUvarint(nil, uint64(k*n/parallelism))
		out[k] = binary.AppendUvarint(b, uint64((k+1)*n/parallelism))
	}
	return out, nil
}

// CreateReader implements engine.Source.
func (e *Elements[T]) CreateReader(engine.SourceContext) (engine.SourceReader[T], error) {
	return &elementsReader[T]{items: e.Items}, nil
}

type elementsReader[T any] struct {
	items  []T
	ranges [][2]uint64
}

func (r *elementsReader[T]) AddSplits(splits [][]byte) error {
	for _, b := range splits {
		next, n := binary.Uvarint(b)
		end, m := binary.Uvarint(b[max(n, 0):])
		if n <= 0 || m <= 0 || end > uint64(len(r.items)) {
			return fmt.Errorf("elements split: corrupt")
		}
		r.ranges = append(r.ranges, [2]uint64{next, end})
	}
	return nil
}

func (r *elementsReader[T]) PollNext(out engine.Collector[T]) (engine.InputStatus, error) {
	for n := 0; n < linesPerPoll; n++ {
		i := -1
		for k, rg := range r.ranges {
			if rg[0] < rg[1] {
				i = k
				break
			}
		}
		if i < 0 {
			return engine.EndOfInput, nil
		}
		out.Collect(r.items[r.ranges[i][0]])
		r.ranges[i][0]++
	}
	return engine.MoreAvailable, nil
}

func (r *elementsReader[T]) SnapshotState(int64) ([][]byte, error) {
	out := make([][]byte, len(r.ranges))
	for i, rg := range r.ranges {
		b := binary.AppendUvarint(nil, rg[0])
		out[i] = binary.AppendUvarint(b, rg[1])
	}
	return out, nil
}

func (r *elementsReader[T]) Close() error { return nil }

package connectors

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/gflink/gflink/stream"
)

// Elements is a bounded source of the given records (Flink's
// fromElements). Positions are indexes, so it is replayable.
type Elements[T any] struct {
	Items []T
	// Rate throttles each reader to Rate/parallelism units per second (0 or
	// +Inf: as fast as possible). Units are items, or Weigh(item) if set —
	// word count's built-in text is paced in words, like its files, so that
	// it runs long enough to be stopped with a savepoint.
	Rate  float64
	Weigh func(T) int
}

// Splits implements stream.Source: one contiguous range per subtask.
func (e *Elements[T]) Splits(parallelism int) ([][]byte, error) {
	out := make([][]byte, parallelism)
	n := len(e.Items)
	for k := range parallelism {
		out[k] = encodeElementsSplit(uint64(k*n/parallelism), uint64((k+1)*n/parallelism), uint64(n))
	}
	return out, nil
}

// An elements split is a tag, the range [next, end) and the number of
// items of the whole input, which a restore checks.
const elementsSplitTag = 'E'

func encodeElementsSplit(next, end, total uint64) []byte {
	b := binary.AppendUvarint([]byte{elementsSplitTag}, next)
	b = binary.AppendUvarint(b, end)
	return binary.AppendUvarint(b, total)
}

// decodeElementsSplit also reads the layout from before the tag (two
// uvarints: next, end), for which total is reported as legacyTotal. The
// number of integers tells them apart: a tagged split has four ('E' is
// one), a legacy one two.
func decodeElementsSplit(b []byte) (next, end, total uint64, ok bool) {
	ints := splitUvarints(b)
	switch {
	case len(ints) == 4 && ints[0] == elementsSplitTag:
		next, end, total = ints[1], ints[2], ints[3]
		return next, end, total, next <= end && end <= total
	case len(ints) == 2:
		return ints[0], ints[1], legacyTotal, ints[0] <= ints[1]
	}
	return 0, 0, 0, false
}

// legacyTotal stands for the unknown input size of a legacy split.
const legacyTotal = ^uint64(0)

// splitUvarints decodes b as a sequence of uvarints, or returns nil if it
// is not one (or holds more than four).
func splitUvarints(b []byte) []uint64 {
	var out []uint64
	for len(b) > 0 && len(out) <= 4 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return nil
		}
		out, b = append(out, v), b[n:]
	}
	if len(b) > 0 {
		return nil
	}
	return out
}

// CheckRestoredSplits implements stream.RestoredSplitsChecker: the splits
// must be ranges of an input of this many items.
func (e *Elements[T]) CheckRestoredSplits(splits [][]byte) error {
	for _, b := range splits {
		_, _, total, ok := decodeElementsSplit(b)
		if !ok {
			return inputMismatch(splits, fmt.Sprintf("reads an in-memory input of %d items", len(e.Items)))
		}
		if total != legacyTotal && total != uint64(len(e.Items)) {
			return fmt.Errorf("the snapshot's source read an in-memory input of %d items; this job's has %d", total, len(e.Items))
		}
	}
	return nil
}

// CreateReader implements stream.Source.
func (e *Elements[T]) CreateReader(ctx stream.SourceContext) (stream.SourceReader[T], error) {
	return &elementsReader[T]{items: e.Items, pace: newPacer(e.Rate, ctx.Parallelism), weigh: e.Weigh}, nil
}

type elementsReader[T any] struct {
	items  []T
	ranges [][2]uint64
	pace   pacer
	weigh  func(T) int
}

func (r *elementsReader[T]) AddSplits(splits [][]byte) error {
	for _, b := range splits {
		next, end, _, ok := decodeElementsSplit(b)
		if !ok || end > uint64(len(r.items)) {
			return fmt.Errorf("elements split: corrupt")
		}
		r.ranges = append(r.ranges, [2]uint64{next, end})
	}
	return nil
}

func (r *elementsReader[T]) PollNext(out stream.Collector[T]) (stream.InputStatus, error) {
	for n := 0; n < linesPerPoll; n++ {
		i := -1
		for k, rg := range r.ranges {
			if rg[0] < rg[1] {
				i = k
				break
			}
		}
		if i < 0 {
			return stream.EndOfInput, nil
		}
		if !r.pace.allows() {
			return stream.NothingAvailable, nil
		}
		item := r.items[r.ranges[i][0]]
		out.Collect(item)
		r.ranges[i][0]++
		if r.pace.rate > 0 {
			w := 1
			if r.weigh != nil {
				w = r.weigh(item)
			}
			r.pace.spend(float64(w))
		}
	}
	return stream.MoreAvailable, nil
}

// NextPollTime implements stream.AvailabilityWaiter: when the rate allows
// the next item.
func (r *elementsReader[T]) NextPollTime() time.Time { return r.pace.next() }

func (r *elementsReader[T]) SnapshotState(int64) ([][]byte, error) {
	out := make([][]byte, len(r.ranges))
	for i, rg := range r.ranges {
		out[i] = encodeElementsSplit(rg[0], rg[1], uint64(len(r.items)))
	}
	return out, nil
}

func (r *elementsReader[T]) Close() error { return nil }

// TotalRecords implements stream.CountedSource.
func (e *Elements[T]) TotalRecords() (int64, bool) { return int64(len(e.Items)), true }

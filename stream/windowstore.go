package stream

import (
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/internal/api"
)

// windowMap keeps a key's open windows in map state, an entry per window
// by its start. One value per key holding all its windows was measured
// too: on the hashmap backend at 1 M keys it kept checkpoints every second
// at no cost (RWIN_CK_1M 1.0, against 0.59 with a Go map of windows per
// key, which snapshots copy on write), but on the LSM every record then
// decodes and re-encodes all of the key's windows — 6 to 20 times slower
// for sliding windows and a window join's record lists — and a choice per
// backend would make the state's kind differ between backends, so that a
// canonical savepoint no longer moves a window job from one to the other.
//
// A direct window's end is its start plus the assigner's size: entries a
// swept operator wrote store no end (see sweptSerializer), and size, set
// for direct windows, fills it in.
type windowMap[ACC any] struct {
	m    state.MapState[int64, winEntry[ACC]]
	size int64
}

func newWindowMap[ACC any, K comparable](ctx *Context[K], name string, size int64) (windowMap[ACC], error) {
	m, err := api.GetMapStateWith[int64, winEntry[ACC]](ctx, name, state.SerializerFor[int64](),
		winEntrySerializer[ACC]{state.SerializerFor[ACC]()})
	return windowMap[ACC]{m, size}, err
}

func (s windowMap[ACC]) Get(start int64) (winEntry[ACC], bool) {
	e, ok := s.m.Get(start)
	if ok && s.size > 0 {
		e.end = start + s.size
	}
	return e, ok
}
func (s windowMap[ACC]) Put(start int64, e winEntry[ACC]) { s.m.Put(start, e) }
func (s windowMap[ACC]) Remove(start int64)               { s.m.Remove(start) }
func (s windowMap[ACC]) All(f func(start int64, e winEntry[ACC]) bool) {
	s.m.All(func(start int64, e winEntry[ACC]) bool {
		if s.size > 0 {
			e.end = start + s.size
		}
		return f(start, e)
	})
}

// sweptSerializer is a swept operator's window entry: its accumulator
// alone in memory — a table slot half the size of a full entry's, for a
// count — written in winEntry's format, so that a savepoint restores
// under either kind of operator: with no end (0; a direct window's end
// follows from its start) and no trigger state. An entry restored with
// trigger state (its job had another trigger) keeps only its contents.
type sweptSerializer[ACC any] struct{ acc state.Serializer[ACC] }

func (s sweptSerializer[ACC]) Append(dst []byte, acc ACC) []byte {
	return winEntrySerializer[ACC]{s.acc}.Append(dst, winEntry[ACC]{acc: acc, has: true})
}

func (s sweptSerializer[ACC]) Decode(src []byte) (ACC, []byte, error) {
	e, rest, err := winEntrySerializer[ACC]{s.acc}.Decode(src)
	return e.acc, rest, err
}

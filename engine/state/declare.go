package state

// A state is declared through one of the functions below, the one place
// where a state's types meet the backend it lives in. Go methods cannot
// have type parameters, so a backend cannot offer a generic "get a value
// state of V" method; instead each function here closes over V in one
// constructor per representation of state, and the backend picks its own
// through its declare method:
//
//   - onHeap: Go maps of typed values (the hashmap backend). Accesses do
//     not serialize: a word count's state access costs what a plain map's
//     does, as in Flink's heap backend.
//   - onBytes: canonical bytes in an ordered byte store (KVStore), the LSM
//     backend's layout. Every byte-level store — Pebble, or a fourth
//     backend's — goes through these same typed wrappers: it implements
//     KVStore and needs no state code of its own.
//   - logged: a wrapper that logs every change before it reaches a backend
//     of either kind (the changelog backend).
//
// A new backend implements Backend, whose unexported declare method it
// answers with one of these constructors; no accessor changes.

// declaration is one state's declaration with its types closed over.
type declaration[K comparable] struct {
	onHeap  func(*KeyedBackend[K]) (any, error)
	onBytes func(*LSMBackend[K]) (any, error)
	logged  func(*ChangelogBackend[K]) (any, error)
}

func (b *KeyedBackend[K]) declare(d declaration[K]) (any, error)     { return d.onHeap(b) }
func (b *LSMBackend[K]) declare(d declaration[K]) (any, error)       { return d.onBytes(b) }
func (b *ChangelogBackend[K]) declare(d declaration[K]) (any, error) { return d.logged(b) }

// declared declares a state of type S in be.
func declared[S any, K comparable](be Backend[K], d declaration[K]) (S, error) {
	s, err := be.declare(d)
	if err != nil {
		var zero S
		return zero, err
	}
	return s.(S), nil
}

// erase makes a typed constructor one of a declaration's.
func erase[B any, S any](f func(B) (S, error)) func(B) (any, error) {
	return func(b B) (any, error) { return f(b) }
}

// GetValueState registers (or returns) the value state called name.
func GetValueState[V any, K comparable](be Backend[K], name string, ser Serializer[V]) (ValueState[V], error) {
	return declared[ValueState[V]](be, declaration[K]{
		onHeap:  erase(func(b *KeyedBackend[K]) (ValueState[V], error) { return heapValueState(b, name, ser) }),
		onBytes: erase(func(b *LSMBackend[K]) (ValueState[V], error) { return getLSMValueState(b, name, ser) }),
		logged:  erase(func(b *ChangelogBackend[K]) (ValueState[V], error) { return getChangelogValueState(b, name, ser) }),
	})
}

// GetListState registers (or returns) the list state called name.
func GetListState[V any, K comparable](be Backend[K], name string, ser Serializer[V]) (ListState[V], error) {
	return declared[ListState[V]](be, declaration[K]{
		onHeap:  erase(func(b *KeyedBackend[K]) (ListState[V], error) { return heapListState(b, name, ser) }),
		onBytes: erase(func(b *LSMBackend[K]) (ListState[V], error) { return getLSMListState(b, name, ser) }),
		logged:  erase(func(b *ChangelogBackend[K]) (ListState[V], error) { return getChangelogListState(b, name, ser) }),
	})
}

// GetMapState registers (or returns) the map state called name.
func GetMapState[UK comparable, UV any, K comparable](be Backend[K], name string, ukSer Serializer[UK], uvSer Serializer[UV]) (MapState[UK, UV], error) {
	return declared[MapState[UK, UV]](be, declaration[K]{
		onHeap: erase(func(b *KeyedBackend[K]) (MapState[UK, UV], error) { return heapMapState(b, name, ukSer, uvSer) }),
		onBytes: erase(func(b *LSMBackend[K]) (MapState[UK, UV], error) {
			return getLSMMapState(b, name, ukSer, uvSer)
		}),
		logged: erase(func(b *ChangelogBackend[K]) (MapState[UK, UV], error) {
			return getChangelogMapState(b, name, ukSer, uvSer)
		}),
	})
}

// TimersFor registers (or returns) the timer service of the given kind.
func TimersFor[K comparable](be Backend[K], kind Kind) (TimerQueue, error) {
	return declared[TimerQueue](be, declaration[K]{
		onHeap:  erase(func(b *KeyedBackend[K]) (TimerQueue, error) { return GetTimers(b, kind) }),
		onBytes: erase(func(b *LSMBackend[K]) (TimerQueue, error) { return getLSMTimers(b, kind) }),
		logged:  erase(func(b *ChangelogBackend[K]) (TimerQueue, error) { return getChangelogTimers(b, kind) }),
	})
}

package stream

import "cmp"

// Rolling aggregations on a keyed stream (Flink's KeyedStream.reduce, sum,
// min, max, minBy, maxBy): each record updates its key's aggregate, kept in
// keyed state, and the updated aggregate is emitted. Name the result's uid
// as for any stateful operator.

// Number is a type Sum can add.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Reduce combines each record with its key's aggregate so far (the first
// record is the first aggregate) and emits the result.
func Reduce[T any, K comparable](ks KeyedStream[T, K], f func(acc, in T) T) DataStream[T] {
	return Process(ks, &rolling[K, T]{f: f}).Name("Keyed Reduce")
}

// Sum adds field of each record to the aggregate's; the aggregate's other
// fields are the key's first record's. field points into a record:
// func(o *Order) *float64 { return &o.Amount }.
func Sum[T any, K comparable, N Number](ks KeyedStream[T, K], field func(*T) *N) DataStream[T] {
	return Process(ks, &rolling[K, T]{f: func(acc, in T) T {
		*field(&acc) += *field(&in)
		return acc
	}}).Name("Keyed Aggregation")
}

// Min keeps the smallest value of field in the aggregate, whose other
// fields are the key's first record's (Flink's min; MinBy keeps the whole
// record).
func Min[T any, K comparable, N cmp.Ordered](ks KeyedStream[T, K], field func(*T) *N) DataStream[T] {
	return Process(ks, &rolling[K, T]{f: func(acc, in T) T {
		*field(&acc) = min(*field(&acc), *field(&in))
		return acc
	}}).Name("Keyed Aggregation")
}

// Max keeps the largest value of field; see Min.
func Max[T any, K comparable, N cmp.Ordered](ks KeyedStream[T, K], field func(*T) *N) DataStream[T] {
	return Process(ks, &rolling[K, T]{f: func(acc, in T) T {
		*field(&acc) = max(*field(&acc), *field(&in))
		return acc
	}}).Name("Keyed Aggregation")
}

// MinBy keeps the record with the smallest value of by (the earlier one
// of equals).
func MinBy[T any, K comparable, N cmp.Ordered](ks KeyedStream[T, K], by func(T) N) DataStream[T] {
	return Process(ks, &rolling[K, T]{f: func(acc, in T) T {
		if by(in) < by(acc) {
			return in
		}
		return acc
	}}).Name("Keyed Aggregation")
}

// MaxBy keeps the record with the largest value of by (the earlier one of
// equals).
func MaxBy[T any, K comparable, N cmp.Ordered](ks KeyedStream[T, K], by func(T) N) DataStream[T] {
	return Process(ks, &rolling[K, T]{f: func(acc, in T) T {
		if by(in) > by(acc) {
			return in
		}
		return acc
	}}).Name("Keyed Aggregation")
}

// rolling is a rolling aggregation: the key's aggregate in value state.
type rolling[K comparable, T any] struct {
	f   func(acc, in T) T
	acc ValueState[T]
}

func (r *rolling[K, T]) Open(ctx *Context[K]) (err error) {
	r.acc, err = GetValueState[T](ctx, "aggregate")
	return err
}

func (r *rolling[K, T]) ProcessElement(_ *Context[K], in T, out Collector[T]) error {
	if acc, ok := r.acc.Value(); ok {
		in = r.f(acc, in)
	}
	r.acc.Update(in)
	out.Collect(in)
	return nil
}

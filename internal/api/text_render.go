package api

import (
	"fmt"
)

// RecordText appends records of type T as text, the way fmt's %v renders
// them, without fmt where the type allows: AppendTo when T has it (with a
// value or a pointer receiver), String when T is a fmt.Stringer (and not
// an error or a fmt.Formatter, which fmt would prefer), the string itself
// for strings, and fmt's %v for everything else.
//
// The choice is made once, by NewRecordText, from the type alone: a
// record costs one call through an interface that was built once, with no
// type assertion and no allocation. Only when T is itself an interface
// type (any, say) does each record's dynamic type decide.
type RecordText[T any] struct {
	// cur holds the record being rendered; app and str are bound to it, so
	// that calling them renders cur without boxing every record.
	cur  T
	app  Appender
	str  fmt.Stringer
	s    *string
	kind textKind
}

type textKind uint8

const (
	textFmt      textKind = iota // fmt's %v
	textAppender                 // app, bound to &cur
	textStringer                 // str, bound to &cur
	textString                   // *s, the record itself
	textPointer                  // T is a pointer whose values are Appenders
	textDynamic                  // T is an interface type: decide per record
)

// NewRecordText returns the renderer of T's records.
func NewRecordText[T any]() *RecordText[T] {
	r := &RecordText[T]{}
	var zero T
	switch p := any(&r.cur).(type) {
	case Appender:
		r.app, r.kind = p, textAppender
		return r
	case *string:
		r.s, r.kind = p, textString
		return r
	}
	if any(zero) == nil {
		r.kind = textDynamic
		return r
	}
	switch any(zero).(type) {
	case Appender:
		// Only an unnamed pointer type *X gets here (&cur is **X, which has
		// no methods): boxing a pointer does not allocate.
		r.kind = textPointer
		return r
	case fmt.Formatter, error:
		return r // fmt prefers these to String
	case fmt.Stringer:
		// fmt sees the value's methods; a value method is one of the
		// pointer's too, so it can be bound to &cur (unless T is a pointer).
		if s, ok := any(&r.cur).(fmt.Stringer); ok {
			r.str, r.kind = s, textStringer
		}
	}
	return r
}

// Append appends v's text to dst.
func (r *RecordText[T]) Append(dst []byte, v T) []byte {
	switch r.kind {
	case textAppender:
		r.cur = v
		return r.app.AppendTo(dst)
	case textString:
		r.cur = v
		return append(dst, *r.s...)
	case textStringer:
		r.cur = v
		return append(dst, r.str.String()...)
	case textPointer:
		a := any(v)
		if a == any(*new(T)) {
			return append(dst, "<nil>"...) // as fmt prints a nil pointer
		}
		return a.(Appender).AppendTo(dst)
	case textDynamic:
		if a, ok := any(v).(Appender); ok {
			return a.AppendTo(dst)
		}
	}
	return fmt.Append(dst, v)
}

package api

import "fmt"

// OutputTag names a side output of records of type T (Flink's OutputTag):
// a function emits to it with Output, and GetSideOutput on the function's
// stream reads it. Two tags with the same id must have the same type.
type OutputTag[T any] struct{ id string }

// NewOutputTag makes the tag of the side output called id.
func NewOutputTag[T any](id string) OutputTag[T] {
	if id == "" {
		panic("NewOutputTag: the id of a side output must not be empty")
	}
	return OutputTag[T]{id: id}
}

// ID is the tag's id.
func (t OutputTag[T]) ID() string { return t.id }

// String renders the tag as Flink does: OutputTag(type, id).
func (t OutputTag[T]) String() string {
	var zero T
	return fmt.Sprintf("OutputTag(%T, %s)", zero, t.id)
}

// sideOutputs are the side outputs a keyed function's context emits to.
type sideOutputs struct {
	outs map[string]any // api.Collector of each tag's type
	ok   func() bool    // false once the function's output must be dropped
}

// SetSideOutputs is how the runtime gives a Context the collectors of the
// side outputs something reads, by tag id; ok reports whether what the
// function emits may still leave it (see the runtime's failGuard).
func SetSideOutputs[K comparable](c *Context[K], outs map[string]any, ok func() bool) {
	c.side = sideOutputs{outs: outs, ok: ok}
}

// Output emits v to the side output tag, with the current record's
// timestamp; a side output nothing reads drops it (as in Flink).
func Output[T any, K comparable](ctx *Context[K], tag OutputTag[T], v T) {
	o, found := ctx.side.outs[tag.id]
	if !found || (ctx.side.ok != nil && !ctx.side.ok()) {
		return
	}
	o.(Collector[T]).Collect(v)
}

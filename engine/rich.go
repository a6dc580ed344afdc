package engine

import (
	"github.com/gflink/gflink/engine/internal/graph"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/internal/api"
)

// MapFunc applies a map function object to every record. Each subtask
// gets its own copy of fn when it is a pointer to a struct.
func MapFunc[IN, OUT any](s DataStream[IN], fn api.MapFunction[IN, OUT]) DataStream[OUT] {
	n := s.env.newNode(graph.KindOperator, "Map", graph.NewTypeOps[OUT]())
	n.Stateful = true // it may declare operator state in Open
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		f := task.CloneFunction(fn)
		op := &task.RichMapOperator[IN, OUT]{RichCore: task.RichCore{Fn: f, Name: rt.Name}, F: f, Out: out.(api.Collector[OUT])}
		return api.Collector[IN](op), op
	}
	return DataStream[OUT]{env: s.env, n: n}
}

// FlatMapFunc applies a flat-map function object to every record.
func FlatMapFunc[IN, OUT any](s DataStream[IN], fn api.FlatMapFunction[IN, OUT]) DataStream[OUT] {
	n := s.env.newNode(graph.KindOperator, "Flat Map", graph.NewTypeOps[OUT]())
	n.Stateful = true
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		f := task.CloneFunction(fn)
		op := &task.RichFlatMapOperator[IN, OUT]{RichCore: task.RichCore{Fn: f, Name: rt.Name}, F: f, Out: out.(api.Collector[OUT])}
		return api.Collector[IN](op), op
	}
	return DataStream[OUT]{env: s.env, n: n}
}

// FilterFunc keeps the records a filter function object accepts.
func FilterFunc[T any](s DataStream[T], fn api.FilterFunction[T]) DataStream[T] {
	n := s.env.newNode(graph.KindOperator, "Filter", s.n.Out)
	n.Stateful = true
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		f := task.CloneFunction(fn)
		op := &task.RichFilterOperator[T]{RichCore: task.RichCore{Fn: f, Name: rt.Name}, F: f, Out: out.(api.Collector[T])}
		return api.Collector[T](op), op
	}
	return DataStream[T]{env: s.env, n: n}
}

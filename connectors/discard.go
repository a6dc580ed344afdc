package connectors

import "github.com/gflink/gflink/stream"

// DiscardingSink drops every record (Flink's DiscardingSink): a job runs
// without the cost of output, for benchmarks and for jobs whose effect is
// their state.
type DiscardingSink[T any] struct{}

// CreateWriter implements stream.Sink.
func (DiscardingSink[T]) CreateWriter(stream.SinkContext) (stream.SinkWriter[T], error) {
	return discardingWriter[T]{}, nil
}

type discardingWriter[T any] struct{}

func (discardingWriter[T]) Write(T) error    { return nil }
func (discardingWriter[T]) Flush(bool) error { return nil }
func (discardingWriter[T]) Close() error     { return nil }

// Package stream is gflink's API for writing jobs: what Flink's DataStream
// API is to a Flink job.
//
// A job adds sources, transformations and sinks to an Environment:
//
//	func build(env *stream.Environment, args []string) error {
//		lines := stream.FromSource[string](env, &connectors.TextFileSource{Paths: args}, "lines").UID("source")
//		words := stream.FlatMap(lines, splitWords).Name("split")
//		counts := stream.Process(stream.KeyBy(words, func(w string) string { return w }), &Counter{}).UID("count")
//		counts.Print()
//		return nil
//	}
//
// and runs either under gflink's command line, compiled into a gflink
// binary of your own with every verb, flag and REST endpoint of gflink
// (see package gflink/cli: cli.Main(job)), or straight from a Go program
// with Environment.Execute.
//
// Records are Go values: a stream of T carries T between operators
// unserialized when they are chained and in batches of T between tasks.
// Keyed state and the records of unaligned checkpoints' channel state are
// serialized with state.SerializerFor, which handles strings, integers,
// floats, booleans, byte slices and, as JSON (exported fields), other types;
// implement Serializer for anything faster.
//
// Every stateful operator should get a UID: snapshots store state by uid,
// and state whose uid no operator has any more cannot be restored.
//
// Functions that fail return an error (KeyedProcessFunction, MapErr,
// FlatMapErr, FilterErr): the task fails and the restart strategy
// (restart-strategy.type) decides whether the job restarts from its last
// checkpoint. A panic in a function is a failure too.
package stream

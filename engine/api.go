// Package engine is gflink's in-process stream processor: a DataStream-style
// API to build jobs, and the runtime that runs them with Flink's
// fault-tolerance model — tasks as goroutines with mailboxes, operator
// chaining, batched bounded channels, key groups, checkpoint barriers with
// alignment, asynchronous snapshots, restart strategies and restore.
package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/internal/graph"
	"github.com/gflink/gflink/engine/internal/jobmaster"
	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/internal/api"
)

// JobGraph is a job ready to run: its operators with their parallelism,
// max parallelism and uids resolved, chained into vertices (Environment.
// Build makes it; Submit runs it).
type JobGraph = graph.JobGraph

// OperatorInfo describes an operator of a job graph (JobGraph.Operators).
type OperatorInfo = graph.OperatorInfo

// Environment is where a job is assembled, like Flink's
// StreamExecutionEnvironment. A job function adds sources, transformations
// and sinks to it.
type Environment struct {
	nodes          []*graph.Node
	parallelism    int
	maxParallelism int // 0: derived per operator
	maxParExplicit bool
	name           string
	stdout         io.Writer
	errs           []error
}

// EnvironmentOptions configure a new Environment.
type EnvironmentOptions struct {
	// Parallelism is the default parallelism of operators (parallelism.default).
	Parallelism int
	// MaxParallelism is pipeline.max-parallelism; <= 0 derives it per
	// operator from its parallelism, as Flink does.
	MaxParallelism int
	// JobName is pipeline.name.
	JobName string
	// Stdout receives the output of Print sinks.
	Stdout io.Writer
}

// NewEnvironment returns an empty environment.
func NewEnvironment(o EnvironmentOptions) *Environment {
	env := &Environment{parallelism: o.Parallelism, name: o.JobName, stdout: o.Stdout}
	if env.parallelism <= 0 {
		env.parallelism = 1
	}
	if o.MaxParallelism > 0 {
		env.maxParallelism, env.maxParExplicit = o.MaxParallelism, true
	}
	if env.stdout == nil {
		env.stdout = os.Stdout
	}
	return env
}

// Parallelism returns the environment's default parallelism.
func (env *Environment) Parallelism() int { return env.parallelism }

// SetJobName sets the job's name unless pipeline.name already did.
func (env *Environment) SetJobName(name string) {
	if env.name == "" {
		env.name = name
	}
}

// JobName returns the job's name: pipeline.name, else the name the job set,
// else Flink's default.
func (env *Environment) JobName() string {
	if env.name == "" {
		return "Flink Streaming Job"
	}
	return env.name
}

// Stdout is where Print sinks write.
func (env *Environment) Stdout() io.Writer { return env.stdout }

func (env *Environment) addError(err error) { env.errs = append(env.errs, err) }

// DataStream is a stream of records of type T.
type DataStream[T any] struct {
	env *Environment
	n   *graph.Node
	// part is how records go to the next operator connected to this
	// stream: forward (chained when it can be) unless Rebalance or Shuffle
	// said otherwise. Flink keeps it in a virtual partition node.
	part network.ShipStrategy
}

// UID sets the operator's uid, the name its state has in snapshots. Set it
// on every stateful operator: a derived uid changes when the job's structure
// does, and state that cannot be matched to an operator cannot be restored.
func (s DataStream[T]) UID(uid string) DataStream[T] {
	if uid == "" {
		s.env.addError(fmt.Errorf("operator %q: the uid must not be empty", s.n.Name))
	}
	s.n.UID, s.n.UIDExplicit = uid, true
	return s
}

// Name sets the operator's name, shown in task names and logs.
func (s DataStream[T]) Name(name string) DataStream[T] {
	s.n.Name = name
	return s
}

// Parallelism sets the operator's parallelism.
func (s DataStream[T]) Parallelism(p int) DataStream[T] {
	if p <= 0 {
		s.env.addError(fmt.Errorf("operator %q: The parallelism must be a positive number: %d", s.n.Name, p))
	}
	s.n.Parallelism = p
	return s
}

// MaxParallelism sets the operator's max parallelism: the number of key
// groups of a keyed operator, which bounds how far it can be rescaled.
func (s DataStream[T]) MaxParallelism(p int) DataStream[T] {
	if p <= 0 || p > state.UpperBoundMaxParallelism {
		s.env.addError(fmt.Errorf("operator %q: max parallelism must be between 1 and %d, got %d", s.n.Name, state.UpperBoundMaxParallelism, p))
	}
	s.n.MaxParallelism = p
	return s
}

// FromSource adds a source.
func FromSource[T any](env *Environment, src api.Source[T], name string) DataStream[T] {
	n := env.newNode(graph.KindSource, name, graph.NewTypeOps[T]())
	n.Source = src
	n.Enumerate = src.Splits
	n.Stateful = true // sources keep their splits and positions
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.SourceOperator[T]{Src: src, Out: out.(api.Collector[T])}
		return nil, op
	}
	return DataStream[T]{env: env, n: n}
}

// FromSourceWithWatermarks adds a source whose records get their
// timestamps and watermarks from strategy, per split (Flink's fromSource
// with a WatermarkStrategy): a reader that collects through
// api.SplitCollector.ForSplit gives each split its own generator.
func FromSourceWithWatermarks[T any](env *Environment, src api.Source[T], strategy api.WatermarkStrategy[T], name string) DataStream[T] {
	s := FromSource(env, src, name)
	s.n.Stamped = true
	s.n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.SourceOperator[T]{Src: src, Out: out.(api.Collector[T]), Watermarks: &strategy}
		return nil, op
	}
	return s
}

// Map applies f to every record.
func Map[IN, OUT any](s DataStream[IN], f func(IN) OUT) DataStream[OUT] {
	n := s.env.newNode(graph.KindOperator, "Map", graph.NewTypeOps[OUT]())
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.MapOperator[IN, OUT]{F: f, Out: out.(api.Collector[OUT])}
		return api.Collector[IN](op), op
	}
	return DataStream[OUT]{env: s.env, n: n}
}

// FlatMap calls f for every record; f emits any number of records.
func FlatMap[IN, OUT any](s DataStream[IN], f func(IN, api.Collector[OUT])) DataStream[OUT] {
	n := s.env.newNode(graph.KindOperator, "Flat Map", graph.NewTypeOps[OUT]())
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.FlatMapOperator[IN, OUT]{F: f, Out: out.(api.Collector[OUT])}
		return api.Collector[IN](op), op
	}
	return DataStream[OUT]{env: s.env, n: n}
}

// Filter keeps the records for which f returns true.
func (s DataStream[T]) Filter(f func(T) bool) DataStream[T] {
	n := s.env.newNode(graph.KindOperator, "Filter", s.n.Out)
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.FilterOperator[T]{F: f, Out: out.(api.Collector[T])}
		return api.Collector[T](op), op
	}
	return DataStream[T]{env: s.env, n: n}
}

// AssignTimestampsAndWatermarks gives the stream's records their event
// time and generates the watermarks of the operators after it with
// strategy (chained to the operator before, at its parallelism): the
// watermarks from upstream are held back, but the one that ends event
// time.
func (s DataStream[T]) AssignTimestampsAndWatermarks(strategy api.WatermarkStrategy[T]) DataStream[T] {
	n := s.env.newNode(graph.KindOperator, "Timestamps/Watermarks", s.n.Out)
	n.Stamped = true
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.TimestampsAndWatermarksOperator[T]{Strategy: strategy, Out: out.(api.Collector[T])}
		return api.Collector[T](op), op
	}
	return DataStream[T]{env: s.env, n: n}
}

// Rebalance distributes records round-robin over the next operator's
// subtasks.
func (s DataStream[T]) Rebalance() DataStream[T] {
	s.part = network.ShipRebalance
	return s
}

// Shuffle distributes records over the next operator's subtasks at random
// (uniformly).
func (s DataStream[T]) Shuffle() DataStream[T] {
	s.part = network.ShipShuffle
	return s
}

// Broadcast sends every record to every subtask of the next operator.
// The subtasks receive the same values: a record that holds a pointer,
// slice or map must not be modified by the functions that receive it.
// Restored at another parallelism, new subtask j replays the records in
// flight (unaligned checkpoints) that old subtask j mod the old
// parallelism had not processed.
func (s DataStream[T]) Broadcast() DataStream[T] {
	s.part = network.ShipBroadcast
	return s
}

// MapErr is Map for a function that can fail: an error fails the task,
// and the restart strategy decides what follows.
func MapErr[IN, OUT any](s DataStream[IN], f func(IN) (OUT, error)) DataStream[OUT] {
	n := s.env.newNode(graph.KindOperator, "Map", graph.NewTypeOps[OUT]())
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.MapErrOperator[IN, OUT]{F: f, Out: out.(api.Collector[OUT]), Name: rt.Name}
		return api.Collector[IN](op), op
	}
	return DataStream[OUT]{env: s.env, n: n}
}

// FlatMapErr is FlatMap for a function that can fail.
func FlatMapErr[IN, OUT any](s DataStream[IN], f func(IN, api.Collector[OUT]) error) DataStream[OUT] {
	n := s.env.newNode(graph.KindOperator, "Flat Map", graph.NewTypeOps[OUT]())
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.FlatMapErrOperator[IN, OUT]{F: f, Out: out.(api.Collector[OUT]), Name: rt.Name}
		return api.Collector[IN](op), op
	}
	return DataStream[OUT]{env: s.env, n: n}
}

// FilterErr is Filter for a predicate that can fail.
func (s DataStream[T]) FilterErr(f func(T) (bool, error)) DataStream[T] {
	n := s.env.newNode(graph.KindOperator, "Filter", s.n.Out)
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.FilterErrOperator[T]{F: f, Out: out.(api.Collector[T]), Name: rt.Name}
		return api.Collector[T](op), op
	}
	return DataStream[T]{env: s.env, n: n}
}

// Union merges streams of the same type into one; records keep no order
// between the inputs. Like Flink's union it has no state; unlike Flink's
// it is an operator of its own (named "Union"), which the operator after
// it chains to.
func Union[T any](first DataStream[T], more ...DataStream[T]) DataStream[T] {
	env := first.env
	n := env.newNode(graph.KindOperator, "Union", first.n.Out)
	for _, s := range append([]DataStream[T]{first}, more...) {
		if s.env != env {
			env.addError(fmt.Errorf("union: operator %q belongs to another environment", s.n.Name))
			continue
		}
		env.connect(s.n, n, s.part, nil)
	}
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.UnionOperator[T]{Out: out.(api.Collector[T])}
		return api.Collector[T](op), op
	}
	return DataStream[T]{env: env, n: n}
}

// KeyedStream is a stream partitioned by key: all records with the same
// key go to the same subtask, which keeps the key's state.
type KeyedStream[T any, K comparable] struct {
	s    DataStream[T]
	more []DataStream[T] // further inputs (KeyByUnion)
	// broadcast are inputs whose every record goes to every subtask, with
	// no key (WithBroadcastInput).
	broadcast []DataStream[T]
	key       func(T) K
	keySer    state.KeySerializer[K]
}

// KeyBy partitions a stream by the key f extracts. Keys are hashed into
// key groups (pipeline.max-parallelism of them) with a stable hash, which
// makes it possible to restore keyed state at another parallelism.
func KeyBy[T any, K comparable](s DataStream[T], key func(T) K) KeyedStream[T, K] {
	return KeyedStream[T, K]{s: s, key: key, keySer: state.SerializerFor[K]()}
}

// KeyByUnion partitions several streams of one type by key, into one
// keyed operator: the inputs of a two-input operator (Connect, joins),
// whose records are tagged with their side. Unlike KeyBy over a Union, no
// operator stands between the inputs and the keyed one.
func KeyByUnion[T any, K comparable](key func(T) K, first DataStream[T], more ...DataStream[T]) KeyedStream[T, K] {
	ks := KeyBy(first, key)
	for _, m := range more {
		if m.env != first.env {
			first.env.addError(fmt.Errorf("connect: operator %q belongs to another environment", m.n.Name))
			continue
		}
		ks.more = append(ks.more, m)
	}
	return ks
}

// WithBroadcastInput adds an input whose records reach every subtask of
// the keyed operator, not by key (Flink's keyed stream connected to a
// broadcast stream): the operator's function must implement
// api.BroadcastInput, which takes them with no current key.
func (ks KeyedStream[T, K]) WithBroadcastInput(b DataStream[T]) KeyedStream[T, K] {
	if b.env != ks.s.env {
		ks.s.env.addError(fmt.Errorf("connect: operator %q belongs to another environment", b.n.Name))
		return ks
	}
	ks.broadcast = append(slices.Clip(ks.broadcast), b)
	return ks
}

// KeySerializer is the serializer of the stream's keys.
func (ks KeyedStream[T, K]) KeySerializer() state.KeySerializer[K] { return ks.keySer }

// Key is the stream's key selector.
func (ks KeyedStream[T, K]) Key() func(T) K { return ks.key }

// Stream is the stream before it was keyed (its first input, after
// KeyByUnion).
func (ks KeyedStream[T, K]) Stream() DataStream[T] { return ks.s }

// WithKeySerializer replaces the built-in serializer of the key type.
func (ks KeyedStream[T, K]) WithKeySerializer(ser state.KeySerializer[K]) KeyedStream[T, K] {
	ks.keySer = ser
	return ks
}

// Process applies a keyed process function, which may keep keyed state and
// set timers.
func Process[T any, K comparable, OUT any](ks KeyedStream[T, K], fn api.KeyedProcessFunction[K, T, OUT]) DataStream[OUT] {
	env := ks.s.env
	n := env.newNode(graph.KindOperator, "KeyedProcess", graph.NewTypeOps[OUT]())
	n.Keyed, n.Stateful, n.SideOutputs = true, true, true
	keySer := ks.keySer
	keyFn := ks.key
	hash := func(v T) uint64 { return keySer.Hash(keyFn(v)) }
	env.connect(ks.s.n, n, network.ShipHash, hash)
	for _, m := range ks.more {
		env.connect(m.n, n, network.ShipHash, hash)
	}
	for _, b := range ks.broadcast {
		env.connect(b.n, n, network.ShipBroadcast, nil)
	}
	if _, ok := fn.(api.BroadcastInput[K, T, OUT]); len(ks.broadcast) > 0 && !ok {
		env.addError(fmt.Errorf("%s: a keyed stream with a broadcast input needs a function that takes broadcast records (api.BroadcastInput)", n.Name))
	}
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := task.NewKeyedProcessOperator(rt, fn, keyFn, keySer, out.(api.Collector[OUT]))
		return api.Collector[T](op), op
	}
	return DataStream[OUT]{env: env, n: n}
}

// SideOutput is the stream of what s's function emits to the side output
// tag (Flink's getSideOutput): s must be a keyed process function's
// stream.
func SideOutput[X, T any](s DataStream[T], tag api.OutputTag[X]) DataStream[X] {
	env := s.env
	n := env.newNode(graph.KindOperator, "SideOutput("+tag.ID()+")", graph.NewTypeOps[X]())
	if !s.n.SideOutputs {
		env.addError(fmt.Errorf("side output %s of %q: only keyed process functions (Process, windows, joins) emit side outputs", tag, s.n.Name))
	}
	for _, e := range s.n.Outs {
		if e.Side == tag.ID() && e.To.Out.Type() != n.Out.Type() {
			env.addError(fmt.Errorf("side output %q of %q is read as %s and as %s: one tag id, one type", tag.ID(), s.n.Name, e.To.Out.Type(), n.Out.Type()))
		}
	}
	n.Parallelism = s.n.Parallelism
	env.connect(s.n, n, network.ShipForward, nil)
	n.In[0].Side = tag.ID()
	n.Build = func(rt *task.BuildContext, out any) (any, task.Operator) {
		op := &task.UnionOperator[X]{Out: out.(api.Collector[X])}
		return api.Collector[X](op), op
	}
	return DataStream[X]{env: env, n: n}
}

// DataStreamSink is the end of a stream.
type DataStreamSink struct {
	env *Environment
	n   *graph.Node
}

// UID sets the sink's uid.
func (s DataStreamSink) UID(uid string) DataStreamSink {
	DataStream[struct{}]{env: s.env, n: s.n}.UID(uid)
	return s
}

// Name sets the sink's name.
func (s DataStreamSink) Name(name string) DataStreamSink { s.n.Name = name; return s }

// Parallelism sets the sink's parallelism.
func (s DataStreamSink) Parallelism(p int) DataStreamSink {
	DataStream[struct{}]{env: s.env, n: s.n}.Parallelism(p)
	return s
}

// SinkTo writes the stream to a sink.
func (s DataStream[T]) SinkTo(sink api.Sink[T]) DataStreamSink {
	n := s.env.newNode(graph.KindSink, "Sink", nil)
	n.Stateful = task.IsStatefulSink(sink)
	n.Sink = sink
	s.env.connect(s.n, n, s.part, nil)
	n.Build = func(rt *task.BuildContext, _ any) (any, task.Operator) {
		op := task.NewSinkOperator(rt, sink)
		return api.Collector[T](op), op
	}
	return DataStreamSink{env: s.env, n: n}
}

// Print writes every record to the environment's stdout, one line each. As
// in Flink, lines are prefixed with "<subtask>> " when the sink runs with a
// parallelism above 1. Printing is not transactional: after a recovery,
// lines may appear again.
func (s DataStream[T]) Print() DataStreamSink {
	return s.SinkTo(&api.PrintSink[T]{W: s.env.stdout}).Name("Print to Std. Out")
}
func (env *Environment) newNode(kind graph.NodeKind, name string, out graph.TypeOps) *graph.Node {
	n := &graph.Node{ID: len(env.nodes), Kind: kind, Name: name, Out: out}
	env.nodes = append(env.nodes, n)
	return n
}

func (env *Environment) connect(from, to *graph.Node, part network.ShipStrategy, hash any) {
	if from.Kind == graph.KindSink {
		env.addError(fmt.Errorf("a sink has no output to connect to %q", to.Name))
	}
	e := &graph.Edge{From: from, To: to, Ship: part, Hash: hash}
	// Operators pass their input's timestamps on with what they emit.
	to.Stamped = to.Stamped || from.Stamped
	from.Outs = append(from.Outs, e)
	to.In = append(to.In, e)
}

// Build validates the environment's job and turns it into a JobGraph.
func (env *Environment) Build() (*graph.JobGraph, error) {
	if len(env.errs) > 0 {
		return nil, errors.Join(env.errs...)
	}
	return graph.New(env.nodes, graph.Options{Name: env.JobName(), Parallelism: env.parallelism,
		MaxParallelism: env.maxParallelism, MaxParallelismExplicit: env.maxParExplicit})
}

// NewEnvironmentFromConfig makes an environment with the configured
// parallelism, max parallelism and job name.
func NewEnvironmentFromConfig(c *config.Configuration, o EnvironmentOptions) (*Environment, error) {
	p, err := jobmaster.Parallelism.Get(c)
	if err != nil {
		return nil, err
	}
	maxP, err := jobmaster.MaxParallelism.Get(c)
	if err != nil {
		return nil, err
	}
	name, err := jobmaster.PipelineName.Get(c)
	if err != nil {
		return nil, err
	}
	o.Parallelism, o.MaxParallelism, o.JobName = p, maxP, name
	return NewEnvironment(o), nil
}

// TotalSourceRecords is the number of records the graph's sources emit in
// all, when every one of them is a CountedSource that knows (a bounded
// input); ok is false otherwise.
func TotalSourceRecords(g *JobGraph) (n int64, ok bool) {
	found := false
	for _, node := range g.Nodes {
		if node.Kind != graph.KindSource {
			continue
		}
		c, isCounted := node.Source.(api.CountedSource)
		if !isCounted {
			return 0, false
		}
		k, known := c.TotalRecords()
		if !known {
			return 0, false
		}
		n, found = n+k, true
	}
	return n, found
}

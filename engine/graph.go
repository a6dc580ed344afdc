package engine

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/engine/state"
	"github.com/spaolacci/murmur3"
)

type nodeKind int

const (
	kindSource nodeKind = iota
	kindOperator
	kindSink
)

// node is one transformation of the job: a source, an operator or a sink.
type node struct {
	id             int
	kind           nodeKind
	name           string
	uid            string
	uidExplicit    bool
	parallelism    int // 0: the environment's default
	maxParallelism int // 0: the environment's, else derived
	keyed          bool
	stateful       bool
	in, outs       []*edge
	out            task.TypeOps // the output type; nil for sinks
	source         any
	sink           any
	enumerate      func(parallelism int) ([][]byte, error) // sources: fresh splits
	maxParExplicit bool
	// build makes the operator, given the collector of its output, and
	// returns the collector of its input (nil for sources).
	build func(rt *task.BuildContext, out any) (in any, op task.Operator)
}

type edge struct {
	from, to *node
	part     network.ShipStrategy
	hash     any // func(T) uint64 for hash partitioning
}

func (env *Environment) newNode(kind nodeKind, name string, out task.TypeOps) *node {
	n := &node{id: len(env.nodes), kind: kind, name: name, out: out}
	env.nodes = append(env.nodes, n)
	return n
}

func (env *Environment) connect(from, to *node, part network.ShipStrategy, hash any) {
	if from.kind == kindSink {
		env.addError(fmt.Errorf("a sink has no output to connect to %q", to.name))
	}
	e := &edge{from: from, to: to, part: part, hash: hash}
	from.outs = append(from.outs, e)
	to.in = append(to.in, e)
}

// JobGraph is a job ready to run: operators with resolved parallelism, max
// parallelism and uids, chained into vertices.
type JobGraph struct {
	Name     string
	nodes    []*node
	vertices []*vertex
	stdout   any
	// MaxParallelismExplicit is true when pipeline.max-parallelism was set.
	MaxParallelismExplicit bool
}

// vertex is a chain of operators that runs as one task per subtask.
type vertex struct {
	id          int
	nodes       []*node // head first
	parallelism int
	inputs      []*edge // edges into the head
	outputs     []*edge // edges out of the tail
	name        string
}

func (v *vertex) head() *node { return v.nodes[0] }
func (v *vertex) tail() *node { return v.nodes[len(v.nodes)-1] }

// OperatorInfo describes an operator of a job graph.
type OperatorInfo struct {
	UID            string
	OperatorID     string
	Name           string
	Parallelism    int
	MaxParallelism int
	UIDExplicit    bool
	Stateful       bool
	Keyed          bool
}

// Operators lists the job's operators in topological order.
func (g *JobGraph) Operators() []OperatorInfo {
	out := make([]OperatorInfo, 0, len(g.nodes))
	for _, n := range g.nodes {
		out = append(out, OperatorInfo{UID: n.uid, OperatorID: operatorID(n), Name: displayName(n),
			Parallelism: n.parallelism, MaxParallelism: n.maxParallelism, UIDExplicit: n.uidExplicit,
			Stateful: n.stateful, Keyed: n.keyed})
	}
	return out
}

// Build validates the environment's job and turns it into a JobGraph.
func (env *Environment) Build() (*JobGraph, error) {
	if len(env.errs) > 0 {
		return nil, errors.Join(env.errs...)
	}
	if len(env.nodes) == 0 {
		return nil, errors.New("The program didn't contain a Flink job. Perhaps you forgot to call execute() on the execution environment.")
	}
	hasSink := false
	for _, n := range env.nodes {
		if n.kind == kindSink {
			hasSink = true
		}
		if n.parallelism == 0 {
			n.parallelism = env.parallelism
		}
		n.maxParExplicit = n.maxParallelism != 0 || env.maxParExplicit
		if n.maxParallelism == 0 {
			if env.maxParExplicit {
				n.maxParallelism = env.maxParallelism
			} else {
				n.maxParallelism = state.DefaultMaxParallelism(n.parallelism)
			}
		}
		if n.parallelism > n.maxParallelism {
			return nil, fmt.Errorf("The parallelism %d of operator %q is higher than its max parallelism %d (pipeline.max-parallelism).", n.parallelism, displayName(n), n.maxParallelism)
		}
		for _, e := range n.in {
			if e.part == network.ShipForward && e.from.parallelism != n.parallelism {
				e.part = network.ShipRebalance
			}
		}
	}
	if !hasSink {
		return nil, errors.New("The job has no sink: add one with SinkTo or Print.")
	}
	if err := assignUIDs(env.nodes); err != nil {
		return nil, err
	}
	g := &JobGraph{Name: env.JobName(), nodes: env.nodes, MaxParallelismExplicit: env.maxParExplicit}
	g.vertices = chain(env.nodes)
	return g, nil
}

// assignUIDs derives a uid for every operator without one, from its
// position in the job's structure (its kind, its inputs' uids and its
// place among their outputs), so that the same job always gets the same
// uids — and a changed structure gets different ones, as in Flink.
func assignUIDs(nodes []*node) error {
	seen := map[string]bool{}
	for _, n := range nodes {
		if n.uidExplicit {
			if seen[n.uid] {
				return fmt.Errorf("Hash collision on user-specified ID %q. Most likely cause is a non-unique ID. Please check that all IDs specified via `uid(String)` are unique.", n.uid)
			}
			seen[n.uid] = true
		}
	}
	for _, n := range nodes {
		if n.uidExplicit {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "kind=%d", n.kind)
		for _, e := range n.in {
			pos := 0
			for i, o := range e.from.outs {
				if o == e {
					pos = i
				}
			}
			fmt.Fprintf(&b, "|in=%s/%d/%s", e.from.uid, pos, e.part)
		}
		if len(n.in) == 0 {
			// Sources: their order among the sources.
			idx := 0
			for _, m := range nodes {
				if m == n {
					break
				}
				if len(m.in) == 0 {
					idx++
				}
			}
			fmt.Fprintf(&b, "|source=%d", idx)
		}
		n.uid = hashHex(b.String())
		for seen[n.uid] {
			n.uid = hashHex(n.uid + "'")
		}
		seen[n.uid] = true
	}
	return nil
}

// hashHex is Flink's operator-id hash: murmur3_128 with seed 0 over UTF-8
// bytes, rendered as 32 hex digits.
func hashHex(s string) string {
	h1, h2 := murmur3.Sum128([]byte(s))
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(h1 >> (8 * i))
		b[8+i] = byte(h2 >> (8 * i))
	}
	return hex.EncodeToString(b[:])
}

// operatorID is the operator's 32-hex id: murmur3 of an explicit uid, as in
// Flink; a derived uid already is such a hash.
func operatorID(n *node) string {
	if n.uidExplicit {
		return hashHex(n.uid)
	}
	return n.uid
}

func displayName(n *node) string {
	switch n.kind {
	case kindSource:
		return "Source: " + n.name
	case kindSink:
		if strings.HasPrefix(n.name, "Sink") || strings.HasPrefix(n.name, "Print") {
			return n.name
		}
		return "Sink: " + n.name
	}
	return n.name
}

// chain groups nodes into vertices: a node is chained to the next when it
// has exactly one, forward output to an operator with the same parallelism
// and exactly one input.
func chain(nodes []*node) []*vertex {
	var vertices []*vertex
	vertexOf := map[*node]*vertex{}
	for _, n := range nodes {
		if len(n.in) == 1 {
			up := n.in[0].from
			if v := vertexOf[up]; v != nil && v.tail() == up && chainable(n.in[0]) {
				v.nodes = append(v.nodes, n)
				vertexOf[n] = v
				continue
			}
		}
		v := &vertex{id: len(vertices), nodes: []*node{n}, parallelism: n.parallelism}
		vertices = append(vertices, v)
		vertexOf[n] = v
	}
	for _, v := range vertices {
		v.inputs = v.head().in
		v.outputs = v.tail().outs
		names := make([]string, len(v.nodes))
		for i, n := range v.nodes {
			names[i] = displayName(n)
		}
		v.name = strings.Join(names, " -> ")
	}
	return vertices
}

func chainable(e *edge) bool {
	return e.part == network.ShipForward && len(e.from.outs) == 1 && len(e.to.in) == 1 &&
		e.from.parallelism == e.to.parallelism
}

package graph

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/engine/internal/task"
	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/restore"
	"github.com/spaolacci/murmur3"
)

// NodeKind says whether a node is a source, an operator or a sink.
type NodeKind int

const (
	KindSource NodeKind = iota
	KindOperator
	KindSink
)

// Node is one transformation of the job: a source, an operator or a sink.
type Node struct {
	ID             int
	Kind           NodeKind
	Name           string
	UID            string
	UIDExplicit    bool
	Parallelism    int // 0: the environment's default
	MaxParallelism int // 0: the environment's, else derived
	Keyed          bool
	Stateful       bool
	// Stamped: the node's output records carry their timestamps (an
	// AssignTimestampsAndWatermarks upstream, or the node itself).
	Stamped bool
	// SideOutputs: the node's function can emit to side outputs.
	SideOutputs            bool
	In, Outs               []*Edge
	Out                    TypeOps // the output type; nil for sinks
	Source                 any
	Sink                   any
	Enumerate              func(parallelism int) ([][]byte, error) // sources: fresh splits
	MaxParallelismExplicit bool
	// Build makes the operator, given the collector of its output, and
	// returns the collector of its input (nil for sources).
	Build func(rt *task.BuildContext, out any) (in any, op task.Operator)
}

// Edge connects two nodes, with the ship strategy of the records between
// them and, for ShipHash, the key's hash.
type Edge struct {
	From, To *Node
	Ship     network.ShipStrategy
	Hash     any // func(T) uint64 for hash partitioning
	// Side is the id of the side output (OutputTag) the edge carries, ""
	// for the main output. A side edge's records have To's input type,
	// not From's output type, and are emitted by the function through its
	// context rather than its collector.
	Side string
}

// Type is the TypeOps of the records the edge carries.
func (e *Edge) Type() TypeOps {
	if e.Side != "" {
		return e.To.Out
	}
	return e.From.Out
}

// JobGraph is a job ready to run: operators with resolved parallelism, max
// parallelism and uids, chained into vertices.
type JobGraph struct {
	Name     string
	Nodes    []*Node
	Vertices []*Vertex
	stdout   any
	// MaxParallelismExplicit is true when pipeline.max-parallelism was set.
	MaxParallelismExplicit bool
}

// Vertex is a chain of operators that runs as one task per subtask.
type Vertex struct {
	ID          int
	Nodes       []*Node // head first
	Parallelism int
	Inputs      []*Edge // edges into the head
	Outputs     []*Edge // edges out of the tail
	Name        string
}

// Head is the vertex's first operator.
func (v *Vertex) Head() *Node { return v.Nodes[0] }

// Tail is the vertex's last operator.
func (v *Vertex) Tail() *Node { return v.Nodes[len(v.Nodes)-1] }

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
	out := make([]OperatorInfo, 0, len(g.Nodes))
	for _, n := range g.Nodes {
		out = append(out, OperatorInfo{UID: n.UID, OperatorID: OperatorID(n), Name: DisplayName(n),
			Parallelism: n.Parallelism, MaxParallelism: n.MaxParallelism, UIDExplicit: n.UIDExplicit,
			Stateful: n.Stateful, Keyed: n.Keyed})
	}
	return out
}

// assignUIDs derives a uid for every operator without one, from its
// position in the job's structure (its kind, its inputs' uids and its
// place among their outputs), so that the same job always gets the same
// uids — and a changed structure gets different ones, as in Flink.
func assignUIDs(nodes []*Node) error {
	seen := map[string]bool{}
	for _, n := range nodes {
		if n.UIDExplicit {
			if seen[n.UID] {
				return fmt.Errorf("Hash collision on user-specified ID %q. Most likely cause is a non-unique ID. Please check that all IDs specified via `uid(String)` are unique.", n.UID)
			}
			seen[n.UID] = true
		}
	}
	for _, n := range nodes {
		if n.UIDExplicit {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "kind=%d", n.Kind)
		for _, e := range n.In {
			pos := 0
			for i, o := range e.From.Outs {
				if o == e {
					pos = i
				}
			}
			fmt.Fprintf(&b, "|in=%s/%d/%s", e.From.UID, pos, e.Ship)
		}
		if len(n.In) == 0 {
			// Sources: their order among the sources.
			idx := 0
			for _, m := range nodes {
				if m == n {
					break
				}
				if len(m.In) == 0 {
					idx++
				}
			}
			fmt.Fprintf(&b, "|source=%d", idx)
		}
		n.UID = hashHex(b.String())
		for seen[n.UID] {
			n.UID = hashHex(n.UID + "'")
		}
		seen[n.UID] = true
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

// OperatorID is the operator's 32-hex id: murmur3 of an explicit uid, as in
// Flink; a derived uid already is such a hash.
func OperatorID(n *Node) string {
	if n.UIDExplicit {
		return hashHex(n.UID)
	}
	return n.UID
}

// DisplayName is how Flink names an operator in plans and logs.
func DisplayName(n *Node) string {
	switch n.Kind {
	case KindSource:
		return "Source: " + n.Name
	case KindSink:
		if strings.HasPrefix(n.Name, "Sink") || strings.HasPrefix(n.Name, "Print") {
			return n.Name
		}
		return "Sink: " + n.Name
	}
	return n.Name
}

// chain groups nodes into vertices: a node is chained to the next when it
// has exactly one, forward output to an operator with the same parallelism
// and exactly one input.
func chain(nodes []*Node) []*Vertex {
	var vertices []*Vertex
	vertexOf := map[*Node]*Vertex{}
	for _, n := range nodes {
		if len(n.In) == 1 {
			up := n.In[0].From
			if v := vertexOf[up]; v != nil && v.Tail() == up && chainable(n.In[0]) {
				v.Nodes = append(v.Nodes, n)
				vertexOf[n] = v
				continue
			}
		}
		v := &Vertex{ID: len(vertices), Nodes: []*Node{n}, Parallelism: n.Parallelism}
		vertices = append(vertices, v)
		vertexOf[n] = v
	}
	for _, v := range vertices {
		v.Inputs = v.Head().In
		v.Outputs = v.Tail().Outs
		names := make([]string, len(v.Nodes))
		for i, n := range v.Nodes {
			names[i] = DisplayName(n)
		}
		v.Name = strings.Join(names, " -> ")
	}
	return vertices
}

func chainable(e *Edge) bool {
	return e.Side == "" && e.Ship == network.ShipForward && len(e.From.Outs) == 1 && len(e.To.In) == 1 &&
		e.From.Parallelism == e.To.Parallelism
}

// Options are the environment's defaults for newJobGraph.
type Options struct {
	Name                   string
	Parallelism            int
	MaxParallelism         int
	MaxParallelismExplicit bool
}

// New validates a job's operators, resolves their parallelism,
// max parallelism and uids, and chains them into vertices.
func New(nodes []*Node, o Options) (*JobGraph, error) {
	if len(nodes) == 0 {
		return nil, errors.New("The program didn't contain a Flink job. Perhaps you forgot to call execute() on the execution environment.")
	}
	hasSink := false
	for _, n := range nodes {
		if n.Kind == KindSink {
			hasSink = true
		}
		if n.Parallelism == 0 {
			n.Parallelism = o.Parallelism
		}
		n.MaxParallelismExplicit = n.MaxParallelism != 0 || o.MaxParallelismExplicit
		if n.MaxParallelism == 0 {
			if o.MaxParallelismExplicit {
				n.MaxParallelism = o.MaxParallelism
			} else {
				n.MaxParallelism = state.DefaultMaxParallelism(n.Parallelism)
			}
		}
		if n.Parallelism > n.MaxParallelism {
			return nil, fmt.Errorf("The parallelism %d of operator %q is higher than its max parallelism %d (pipeline.max-parallelism).", n.Parallelism, DisplayName(n), n.MaxParallelism)
		}
		for _, e := range n.In {
			if e.Ship == network.ShipForward && e.From.Parallelism != n.Parallelism {
				e.Ship = network.ShipRebalance
			}
		}
	}
	if !hasSink {
		return nil, errors.New("The job has no sink: add one with SinkTo or Print.")
	}
	if err := assignUIDs(nodes); err != nil {
		return nil, err
	}
	g := &JobGraph{Name: o.Name, Nodes: nodes, MaxParallelismExplicit: o.MaxParallelismExplicit}
	g.Vertices = chain(nodes)
	return g, nil
}

// Description is the job as the restore planner sees it.
func (g *JobGraph) Description() restore.Job {
	var j restore.Job
	for _, n := range g.Nodes {
		j.Operators = append(j.Operators, restore.Operator{UID: n.UID, Name: DisplayName(n), Parallelism: n.Parallelism,
			MaxParallelism: n.MaxParallelism, MaxParallelismExplicit: n.MaxParallelismExplicit})
	}
	return j
}

// Exchanges lists the job's data exchanges between chains, for the records
// in flight of unaligned checkpoints.
func (g *JobGraph) Exchanges() []restore.Exchange {
	var out []restore.Exchange
	for _, v := range g.Vertices {
		for _, in := range v.Inputs {
			out = append(out, ExchangeOf(v, in, in.To.MaxParallelism))
		}
	}
	return out
}

// ExchangeOf describes an input edge of v to restore, which redistributes
// its in-flight records.
func ExchangeOf(v *Vertex, in *Edge, maxPar int) restore.Exchange {
	return restore.Exchange{From: in.From.UID, To: in.To.UID, Keyed: in.Ship == network.ShipHash, Broadcast: in.Ship == network.ShipBroadcast,
		Parallelism: v.Parallelism, MaxParallelism: maxPar}
}

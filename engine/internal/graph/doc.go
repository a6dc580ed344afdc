// Package graph is a job's graph: the operators a job's environment
// collected (Node, with the constructor of its runtime operator), the edges
// between them with their ship strategy, and the JobGraph that New makes of
// them — parallelism and max parallelism resolved, uids derived where the
// job set none, operators chained into vertices that run as one task per
// subtask. It also describes the graph to restore (Description, Exchanges)
// and checks what its exchanges would cost (CheckExchangeMemory).
package graph

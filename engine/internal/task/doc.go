// Package task is the task runtime: a Task runs one subtask of a job
// vertex — a chain of operators fed by a source or by an input gate — in
// one goroutine, with its mailbox (checkpoint triggers, completions,
// aborts, unaligned barriers), barrier alignment (aligned and unaligned,
// with the aligned-checkpoint timeout), the synchronous and asynchronous
// parts of its snapshots, and the runtime operators that call users'
// functions, sources and sinks (map, flat map, filter, union, keyed
// process with state and timers, source readers, two-phase-commit sink
// writers).
//
// A task gets what it may use of the job as a Services value — the file
// system, the checkpoint storage's task-side writer, the state backend
// factory, the log, the clock — and reports to the job master through
// the JobMasterGateway in it; it never holds the job master. The job
// master (package jobmaster) creates tasks with New, connects them with
// the network package's channels and starts them with Run.
//
// Records are Go values of a type parameter, and the task's typed pieces
// (ConnectInput, the input loop, writers) are generic; the job graph's
// TypeOps (package graph) is where their types are erased for deployment.
package task

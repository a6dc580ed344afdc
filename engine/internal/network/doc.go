// Package network carries records between the tasks of a job: channels
// with credit-based flow control, input gates, record writers that
// partition a stream (forward, hash by key group, rebalance, shuffle,
// broadcast), the in-band events that travel with the records (checkpoint
// barriers, end of partition, watermarks), and the mailbox through which a
// task gets its control messages (checkpoint triggers, unaligned barriers
// that overtake the records in the channels).
//
// It knows records only as values of a type parameter; the task runtime
// (package engine) decides what they mean.
package network

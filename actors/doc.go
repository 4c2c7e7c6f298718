// Package actors holds the per-topic-partition, per-subscription and
// compaction workers. Each is a thin shell (a protoactor-go actor behind a
// small runtime interface) driving a pure state machine that is unit-tested
// without goroutines. Slow I/O runs off the actor and reports back by
// message; every mailbox and batch is bounded.
package actors

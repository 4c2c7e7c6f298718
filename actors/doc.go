// Package actors holds the per-topic-partition, per-subscription and
// compaction workers. Each is a thin shell (a protoactor-go actor behind a
// small runtime interface) driving a pure state machine that is unit-tested
// without goroutines. Slow I/O runs off the actor and reports back by
// message, with these exceptions, all rare and bounded by a timeout: the
// subscription actor persists its cursor when a consumer leaves, recreates
// it on a seek, and looks up the entries of acknowledgements still waiting
// (see below) before a consumer leaves or the subscription closes. Every
// mailbox and batch is bounded.
//
// Files:
//
//	runtime.go             Runtime/Ref/Handler: the only code that imports
//	                       protoactor-go (its actor package; bounded mailboxes)
//	subscription.go        the subscription state machine: consumers, permits,
//	                       dispatch position, pending entries, replay/redelivery,
//	                       acknowledgements against an AckState (a LogCursor);
//	                       an ack of an entry it does not hold waits, with the
//	                       acks after it, for the entry's record count from
//	                       the log (ResolveEntries), so it covers the whole entry
//	keyshared.go           Key_Shared: sticky-key hash (Murmur3_32 mod 65536)
//	                       and the hash → consumer selector (AUTO_SPLIT by
//	                       consistent hashing, STICKY by the client's ranges)
//	subscription_actor.go  the actor driving it: runs log reads, tail waits
//	                       (Log.WaitForEntries) and entry lookups
//	                       (Log.IndexRange) on goroutines, feeds results back
//	                       by message, calls each consumer's ConsumerSink and
//	                       answers acks (AckDone) once applied
//
// It sees storage only through lakestream; it never imports engine.
package actors

// Package actors holds the per-topic-partition, per-subscription and
// compaction workers. Each is a thin shell (a protoactor-go actor behind a
// small runtime interface) driving a pure state machine that is unit-tested
// without goroutines. Slow I/O runs off the actor and reports back by
// message; every mailbox and batch is bounded.
//
// Files:
//
//	runtime.go             Runtime/Ref/Handler: the only code that imports
//	                       protoactor-go (its actor package; bounded mailboxes)
//	subscription.go        the subscription state machine: consumers, permits,
//	                       dispatch position, pending entries, replay/redelivery,
//	                       acknowledgements against an AckState (a LogCursor)
//	keyshared.go           Key_Shared: sticky-key hash (Murmur3_32 mod 65536)
//	                       and the hash → consumer selector (AUTO_SPLIT by
//	                       consistent hashing, STICKY by the client's ranges)
//	subscription_actor.go  the actor driving it: runs log reads and tail waits
//	                       (Log.WaitForEntries) on goroutines, feeds results back
//	                       by message, calls each consumer's ConsumerSink
//
// It sees storage only through lakestream; it never imports engine.
package actors

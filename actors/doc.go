// Package actors holds the per-topic-partition, per-subscription and
// compaction workers. The partition actor is the unit a cluster node owns
// (docs/cluster.md): the gateway runs one for each topic-partition it
// serves, with that partition's subscription actors beside it. Each is a thin shell (a protoactor-go actor behind a
// small runtime interface) driving a pure state machine that is unit-tested
// without goroutines. Slow I/O runs off the actor and reports back by
// message, with these exceptions, all rare and bounded by a timeout: the
// subscription actor persists its cursor when a consumer leaves, recreates
// it on a seek, and looks up the entries of acknowledgements still waiting
// (see below) before a consumer leaves or the subscription closes. Every
// mailbox and batch is bounded. No actor waits for a client's connection:
// a ProducerSink or ConsumerSink never blocks, and a consumer whose
// connection cannot take an entry is skipped until it has room again
// (Subscription.Undelivered, SinkReady).
//
// Files:
//
//	runtime.go             Runtime/Ref/Handler: the only code that imports
//	                       protoactor-go (its actor package); bounded mailboxes
//	                       with blocking Send, and Notify (never blocks) for
//	                       results handed over by code that must not block
//	partition.go           the partition state machine: a topic-partition's
//	                       producers — names, access modes, topic epoch,
//	                       deduplication, SEND order (kept across failures
//	                       with append chains), receipts in order
//	                       (docs/dedup.md)
//	partition_load.go      loading a partition's persisted state (epoch, dedup
//	                       snapshot + replay, termination) before it serves
//	partition_actor.go     the actor driving it: appends through
//	                       Log.AppendAsync on the machine's append chain (no
//	                       goroutine per SEND; outcomes come
//	                       back through Notify), persists epochs and snapshots
//	                       off the actor, answers each producer's ProducerSink;
//	                       stops at once when a guarded write finds the
//	                       partition is no longer this node's (docs/cluster.md)
//	subscription.go        the subscription state machine: consumers, permits,
//	                       dispatch position, pending entries, replay/redelivery,
//	                       acknowledgements against an AckState (a LogCursor);
//	                       an ack of an entry it does not hold waits, with the
//	                       acks after it, for the entry's record count from
//	                       the log (ResolveEntries), so it covers the whole entry
//	delayed.go             the bounded delay index of Shared and Key_Shared
//	                       subscriptions (deliver_at_time; docs/delayed-delivery.md)
//	keyshared.go           Key_Shared: sticky-key hash (Murmur3_32 mod 65536)
//	                       and the hash → consumer selector (AUTO_SPLIT by
//	                       consistent hashing, STICKY by the client's ranges)
//	subscription_actor.go  the actor driving it: runs log reads, tail waits
//	                       (Log.WaitForEntries) and entry lookups
//	                       (Log.IndexRange) on goroutines, feeds results back
//	                       by message, calls each consumer's ConsumerSink and
//	                       answers acks (AckDone) once applied, and sets the
//	                       timer of delayed delivery (WakeAt → Tick)
//
// It sees storage only through lakestream; it never imports engine.
package actors

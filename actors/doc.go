// Package actors holds the per-topic-partition, per-subscription and
// compaction workers. The partition actor is the unit a cluster node owns
// (docs/cluster.md): the gateway runs one for each topic-partition it
// serves, with that partition's subscription actors beside it. Each actor
// is a thin shell (a protoactor-go actor behind the small Runtime
// interface) driving a pure state machine — Partition, Subscription,
// MaterializationSchedule — that is unit-tested without goroutines: an input is
// a method call, the output a list of Actions the shell carries out.
//
// It sees storage only through lakestream; it never imports engine.
//
// # Driving an actor
//
// This is the contract between the actors and the code around them (the
// gateway's sessions and topics, the admin handlers, the engine's
// completions), in the manner of etcd-io/raft's Node: who calls what, from
// which goroutine, what is bounded, and what happens when a bound is
// reached.
//
// Start. StartPartition (after LoadPartition), StartSubscription and
// StartMaterializationWorker spawn an actor on a Runtime and return its handle
// (PartitionActor, SubscriptionActor, MaterializationWorker). The handle's
// methods are the only way in, and are safe from any goroutine.
//
// One goroutine at a time. Everything reaches the actor as a message in
// one mailbox, and its handler receives them one at a time, never
// concurrently (Handler). The handler alone touches the machine, the sinks
// and the actor's cursors; there are no locks around them.
//
// Requests. A handle's method queues a request with Ref.Send. Send waits
// while the mailbox holds MailboxMsgs requests (default
// DefaultMailboxMsgs, 1024): that is backpressure on the caller — a
// session's reader goroutine, which then stops reading its connection, or
// an admin request — and never on an actor. Methods with an answer
// (AddProducer, AddConsumer, RemoveConsumer, Unload, Info, Close, …) wait
// for it; the others (PartitionActor.Send, Flow, Ack, Redeliver, …) return
// once the request is queued and answer through the sink or the reply.
// Requests from one goroutine are received in the order it made them, so a
// caller that needs "after everything I sent" makes a round trip (Info).
//
// Results of the actor's own work. Slow work runs off the actor and comes
// back as a message. Work completed by code that must not block — an
// append's done callback on an engine goroutine, a persist — reports on a
// Reservation the actor took (Ref.Reserve) when it began the work:
// Reservation.Send never waits and is never refused for room, because the
// place was kept for it. Reads, entry lookups and timers of the
// subscription actor, and the compaction worker's scans and calls, run on
// goroutines the actor started, which may wait: they report with Send.
//
// A connection that has room again. A consumer whose connection refused an
// entry is skipped until SubscriptionActor.SinkReady, which a connection's
// writer calls without blocking: it is queued on the reservation the
// consumer holds while it is attached, and calls made while one is queued
// coalesce into it.
//
// Calls out. The actor calls ProducerSink, ConsumerSink and acknowledgement
// replies on its own goroutine. They must never wait for the client's
// connection nor call back into the actor synchronously: no actor waits for
// a client's socket. A producer that does not read its receipts is bounded
// by the gateway's window of SENDs per producer; a ConsumerSink refuses an
// entry (Deliver returns false) rather than wait, and the entry goes to
// another consumer or waits for redelivery (Subscription.Undelivered).
// Storage is reached through lakestream. Log.AppendAsync returns once the
// entry is queued in the engine and may wait only on the engine's bound of
// bytes in flight (storage backpressure, not a client). The actors do
// other storage I/O off the actor, with these exceptions, all rare and
// bounded by a timeout: the subscription actor persists its cursor when a
// consumer leaves, recreates it on a seek, deletes it on unsubscribe,
// closes it when the subscription closes, persists it when a transaction's
// acknowledgements commit (EndTxn, once per transaction), and looks up the
// entries of acknowledgements still waiting before a consumer leaves or
// the subscription closes; a stopping partition closes its internal
// cursors.
//
// Bounds, and what happens at each:
//
//	requests queued         MailboxMsgs per actor (1024; the compaction
//	                        worker 64): Send waits until the actor takes one
//	appends in flight       PartitionOptions.AppendsInflightMax per partition
//	                        (65536), one reservation each: a SEND beyond it
//	                        fails with ErrPartitionBusy (SendFailed, in SEND
//	                        order; the client resends on a new connection)
//	persists in flight      one epoch persist and one deduplication snapshot
//	                        per partition (the machine's rule), one
//	                        reservation each, kept aside for them
//	staging-set reads       PartitionConfig.StagedLoadsMax per partition
//	                        (16), one reservation each, kept aside: more
//	                        sets wait for a place (their SENDs wait, in
//	                        order); StagedSetsMax sets learned (10000), the
//	                        least recently used forgotten (read again)
//	consumers attached      SubscriptionOptions.ConsumersMax per subscription
//	                        (65536), one reservation each: one more is
//	                        refused with ErrSubscriptionBusy
//	acks waiting lookups    SubscriptionConfig.AckQueueMaxIDs (10000): an ack
//	                        beyond it is refused with ErrAckQueueFull and its
//	                        messages are redelivered later
//	pending txn acks        SubscriptionConfig.TxnAckRangesMax record ranges
//	                        per transaction (10000) and TxnPendingMax
//	                        transactions (10000) per subscription: an ack in
//	                        a transaction beyond either is refused with
//	                        ErrTxnAckLimit
//	reads                   one read in flight per subscription, of at most
//	                        ReadMaxRecords records and ReadMaxBytes bytes
//	delayed entries         the delay index's bound (delayed.go): the entry
//	                        due last is evicted and read from the log again
//	                        once the index has room
//	compactions running     MaterializationPolicy.MaxInflight (2)
//
// So an actor's mailbox never holds more than MailboxMsgs requests plus one
// message per reservation held, and nothing is dropped for room: a request
// waits or is refused with an error its caller sees.
//
// Stop. PartitionActor.Unload (graceful: appends in flight are answered
// and a final deduplication snapshot is written; or at once) and
// SubscriptionActor.Close or Unsubscribe stop an actor; so does a guarded
// write that finds the partition is no longer this node's
// (PartitionOptions.OnLost). Stopping answers every request still waiting
// and tells every producer Closed. From then on, every handle method
// returns at once: ErrPartitionClosed or ErrSubscriptionClosed (an Ack's
// reply is called with it on the caller's goroutine), a zero Info. Results
// of work still in flight are discarded: whoever waited for them was
// answered when the actor stopped.
//
// Files:
//
//	runtime.go             Runtime/Ref/Handler: the only code that imports
//	                       protoactor-go (its actor package); one mailbox
//	                       per actor with the bounds above: Send (waits
//	                       while full) and reservations (Reserve,
//	                       Reservation.Send: never waits) for code that
//	                       must not block; ErrStopped, ErrMailboxFull
//	partition.go           the partition state machine: a topic-partition's
//	                       producers — names, access modes, topic epoch,
//	                       deduplication (transactional SENDs too, a
//	                       staging set learned before it is judged), SEND
//	                       order (kept across failures with append
//	                       chains), receipts in order (docs/dedup.md)
//	partition_load.go      loading a partition's persisted state (epoch, dedup
//	                       snapshot + replay, termination) before it serves,
//	                       and a staging set's sequences (Log.ReadStaged)
//	partition_actor.go     the actor driving it: appends through
//	                       Log.AppendAsync on the machine's append chain (no
//	                       goroutine per SEND; outcomes come back on
//	                       reservations), persists epochs and snapshots and
//	                       reads staging sets off the actor, answers each
//	                       producer's ProducerSink;
//	                       stops at once when a guarded write finds the
//	                       partition is no longer this node's (docs/cluster.md)
//	subscription.go        the subscription state machine: consumers, permits,
//	                       dispatch position, pending entries, replay/redelivery,
//	                       acknowledgements against an AckState (a LogCursor);
//	                       an ack of an entry it does not hold waits, with the
//	                       acks after it, for the entry's record count from
//	                       the log (ResolveEntries), so it covers the whole entry
//	subscription_txn.go    acknowledgements in transactions (docs/transactions.md):
//	                       pending record ranges per transaction, hidden from
//	                       dispatch; commit applies them to the cursor, abort
//	                       redelivers; conflicts as Pulsar's pending-ack
//	                       handle; export and restore for a new owner
//	delayed.go             the bounded delay index of Shared and Key_Shared
//	                       subscriptions (deliver_at_time; docs/delayed-delivery.md)
//	keyshared.go           Key_Shared: sticky-key hash (Murmur3_32 mod 65536,
//	                       package murmur3) and the hash → consumer selector
//	                       (AUTO_SPLIT by consistent hashing, STICKY by the
//	                       client's ranges)
//	subscription_actor.go  the actor driving it: runs log reads, tail waits
//	                       (Log.WaitForEntries) and entry lookups
//	                       (Log.IndexRange) on goroutines, feeds results back
//	                       by message, calls each consumer's ConsumerSink and
//	                       answers acks (AckDone) once applied, and sets the
//	                       timer of delayed delivery (WakeAt → Tick)
//	compacted.go           topic compaction's pure parts (docs/compacted-topics.md):
//	                       the latest record per key (KeyCompactor, bounded),
//	                       the compacted log's entry format, and the
//	                       CompactedView a readCompacted subscription reads
//	compacted_record.go    the compaction record a partition keeps in its
//	                       CompactionCursor (view, last outcome)
//	materialization.go     MaterializationSchedule: the pure schedule of the
//	                       materialization worker (which logs are due, backoff,
//	                       MaxInflight) that turns WAL chunks into table files
//	materialization_worker.go
//	                       the materialization worker: an actor driving the
//	                       schedule, scanning the catalog and calling a
//	                       lakestream.Materializer (the table layer, wired by
//	                       node/assembly) on goroutines
//	materialization_cluster.go
//	                       materialization once across the cluster: one owner
//	                       per table through lakestream.Membership (rendezvous
//	                       placement; docs/cluster.md)
package actors

// Package kafka is the Kafka protocol's front door (docs/kafka.md; issue
// #29): a listener serving unmodified Kafka clients the topics of one
// Pulsar namespace, over the broker layer as the Pulsar gateway is — the
// same served partitions (one registry per node), partition actors,
// ownership, policies and grants — and never the gateway itself. Storage
// keeps one entry format, the Pulsar entry: Kafka record batches are
// converted on produce and fetch.
//
//	server.go   Config, Serve, Server: the listener, a connection's request
//	            framing (reader and in-order writer goroutines), the
//	            requests served and their versions, error codes
//	sasl.go     SASL/PLAIN and SASL/OAUTHBEARER with lakegate tokens, the
//	            grants each request needs
//	topics.go   Kafka topics as Pulsar topics: names, the partitions served
//	            here (a cache of the registry's), Metadata, CreateTopics,
//	            DeleteTopics, CreatePartitions, FindCoordinator,
//	            DescribeCluster
//	produce.go  Produce (through the partition actors, a FIFO of receipts
//	            per producer), idempotent producers (InitProducerId, Kafka's
//	            sequence rules on Pulsar deduplication's state)
//	fetch.go    Fetch (long poll), ListOffsets, OffsetForLeaderEpoch
//	offsets.go  the group coordinator's ownership, the group requests,
//	            committed offsets as lakestream cursors
//	group.go    the classic consumer-group coordinator: join, sync,
//	            heartbeat, leave, static membership
//	txn.go      transactions on the shared coordinator (txn.Coordinator):
//	            a transactional.id's record, InitProducerId with one,
//	            AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, the check of a
//	            transactional Produce (its staging set)
//	txn_expiry.go  the expiry of unused transactional.ids (Kafka's
//	            transactional.id.expiration.ms): the sweep of the records
//	            of the coordinators this node serves
//	txn_offsets.go  TxnOffsetCommit: offsets pending in a transaction,
//	            applied when it commits, settled before OffsetFetch
//	configs.go  DescribeConfigs
//	records.go  EntryFromBatch (a RecordBatch v2 → one Pulsar batch entry),
//	            AppendBatch (a stored entry → a RecordBatch v2), SplitBatches
//	codec.go    Kafka's batch compression (gzip, snappy raw and xerial,
//	            lz4 frames, zstd), bounded before it allocates
//
// Concurrency: a connection's reader goroutine decodes requests and runs
// their handlers; a handler that waits (Fetch) runs on its own goroutine,
// one that is answered later (Produce, JoinGroup, SyncGroup) sets its
// answer from a partition actor's or the coordinator's callback, which
// never blocks. The writer goroutine writes the answers in request order.
// producers.mu, a kproducer's mu, servedCache.mu, ownedGroups.mu,
// txnProducers.mu, txnAwaits.mu and conn.auth are leaves; a txnProducer's
// mu (one transactional.id) is held across the coordinator's and the
// store's calls of one request (or of the expiry sweep's compare-and-
// delete) and taken before those leaves; a kproducer's sendMu is held while a send is
// handed to its partition actor (which may wait while the actor's mailbox
// is full) and is never taken by the actor. The group coordinator's locking
// is its own (group.go).
package kafka

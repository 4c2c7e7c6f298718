// Package gateway is lakegate's front door: the TCP listener speaking the
// Pulsar binary protocol (one session per connection), topic lookup and
// ownership in a cluster; the admin REST (package admin) reaches it
// through admin.Node (admin_port.go). It sees storage only
// through the lakestream interfaces and the actors package; it never
// imports engine. Topic behaviour belongs to the broker layer (broker/),
// which the Server calls: topic names, the schema registry, policy
// resolution and enforcement (retention, TTL, backlog quotas), producer
// and consumer admission, topic compaction, the end of topic, the limit
// types and rate meters, taking and loading a topic to serve it,
// placement and rebalancing, non-persistent topics' fan-out, and the
// topics served here (broker.Topics: loaded, their subscription actors
// started, their unloading), to which this front door attaches its
// sessions' producers and consumers. The node is always a cluster member
// (Config.Membership is required; standalone: the only one).
// Authentication and authorization: auth*.go, docs/security.md.
//
// Files:
//
//	server.go    Listen/Serve/Close, Config (every knob with its default), accept loop
//	session.go   one connection: reader goroutine (decode, dispatch commands in
//	             order; before CONNECT: 64 KiB frames, one handshake deadline),
//	             writer goroutine (drains the outbound queue, pings, idle
//	             timeout), CONNECT (relayed to another member in proxy mode),
//	             LOOKUP, PARTITIONED_METADATA
//	outqueue.go  a connection's bounded outbound queue: offer (MESSAGEs,
//	             refused when full), post (never waits; a hard bound closes
//	             the connection), waitRoom (the reader)
//	framewriter.go the writer's output: on TCP, frames gathered into one
//	             vectored write per queue drain, a MESSAGE's stored entry
//	             referenced rather than copied (small ones copied into a
//	             pooled buffer held only while writing); on TLS, a buffered
//	             writer
//	cluster.go   ownership (docs/cluster.md): LOOKUP answers, proxy relay,
//	             unloading topics for a hand-over (here or at their owner:
//	             unloadUnit; Drain on SIGTERM); placement and rebalancing:
//	             broker/cluster.go
//	topic.go     the topics this node serves: broker.Topic with this
//	             front door's producers and consumers (the registry, the
//	             loading and unloading: broker/registry.go), the policies'
//	             hooks, GET_TOPICS_OF_NAMESPACE
//	producer.go  PRODUCER, SEND, CLOSE_PRODUCER: the producer is its partition
//	             actor's ProducerSink (the actor decides; docs/dedup.md)
//	consumer.go  SUBSCRIBE, FLOW, ACK, REDELIVER, CLOSE_CONSUMER, UNSUBSCRIBE,
//	             GET_LAST_MESSAGE_ID, SEEK; the consumer is the subscription
//	             actor's sink
//	schema.go    GET_SCHEMA, GET_OR_CREATE_SCHEMA (the registry and its
//	             compatibility rules: broker/schema.go)
//	end_of_topic.go  a consumer's side of the end of a terminated topic
//	             (REACHED_END_OF_TOPIC; the topic's: broker/end_of_topic.go)
//	nonpersistent.go non-persistent:// topics, the sessions' side: the
//	             topics served, PRODUCER/SEND/SUBSCRIBE, the MESSAGE offered,
//	             stats (the topic: broker/nonpersistent.go; their admin
//	             routes: admin/nonpersistent.go)
//	txn.go       transactions unsupported: every transaction request answered
//	             with NotAllowedError
//	limits.go    the limits (docs/security.md, "Limits"): connections per node
//	             and per IP, producers/consumers/subscriptions per topic
//	             (admitted by broker/admission.go),
//	             unacknowledged messages, pending publishes and the publish
//	             buffer pausing a connection's reads, publish and dispatch
//	             rates (broker/rate.go: token buckets); their policies at
//	             Pulsar's admin paths: admin/limits.go (resolved by
//	             broker/policies.go)
//	errors.go    THE mapping of errors (the broker's sentinels, the actors',
//	             lakestream's) to Pulsar ServerError codes
//	stats.go     the producers' and consumers' entries in their topics'
//	             stats (broker.AttachedProducer, AttachedConsumer);
//	             CONSUMER_STATS
//	admin_port.go what the admin REST (package admin) asks of this server:
//	             its admin.Node port (topics served, unloading, peers,
//	             authorization checks)
//	metrics.go   the gateway's Prometheus collector
//
// Concurrency: a session's reader goroutine owns its producer and consumer
// maps. No actor waits for a socket: partition and subscription actors (and
// every other shared goroutine) queue encoded frames without waiting. A
// MESSAGE is offered and refused when the connection's queue is full: the
// subscription gives the entry to another consumer or keeps it, and skips
// that consumer until the writer has written what it held
// (actors.SubscriptionActor.SinkReady). Other frames (receipts, answers,
// notices) are queued past the bound; the reader stops reading a
// connection whose queue is full, so what a client can make the node owe is
// its requests in flight, and a queue reaching its hard bound closes the
// connection.
//
// Bounds (Config, defaults): OutboundFramesMax 1024 frames per connection
// (counting those being written); OutboundOwedMax 65536 frames past it;
// ProducerPendingMax 1000 SENDs in flight per producer; frames before
// CONNECT 64 KiB, after it MaxMessageSize + 10 KiB, their buffers grown as
// bytes arrive; HandshakeTimeout 30 s from accept; IdleTimeout 60 s per
// read and per write; actor mailboxes actors.DefaultMailboxMsgs (1024)
// messages, which only a session's reader waits on. docs/protocol.md,
// "Connections: the handshake and slow peers".
//
// Lock order: Server.mu, then broker.Topics' and broker.Topic's (or the
// broker.NPTopic's); a session's
// outQueue.mu is a leaf (its waiters are called without it).
// Input never panics the process: a session recovers, closes its connection
// and leaves every other session alone.
//
// Message ids and offsets: docs/message-ids.md.
package gateway

// Package gateway is lakegate's front door: the TCP listener speaking the
// Pulsar binary protocol (one session per connection), topic lookup, auth,
// and the admin REST + /metrics HTTP server. It sees storage only through the
// lakestream interfaces and the actors package; it never imports engine.
//
// Files:
//
//	server.go    Listen/Close, Config (every knob with its default), accept loop
//	session.go   one connection: reader goroutine (decode, dispatch commands in
//	             order), writer goroutine (bounded outbound queue, pings, idle
//	             timeout), CONNECT, LOOKUP, PARTITIONED_METADATA
//	topic.go     topic names ↔ streams and partitions, auto-creation, the
//	             per-log registry of producers and subscriptions,
//	             GET_TOPICS_OF_NAMESPACE
//	producer.go  PRODUCER, SEND (pipelined appends, FIFO receipts), CLOSE_PRODUCER
//	consumer.go  SUBSCRIBE, FLOW, ACK, REDELIVER, CLOSE_CONSUMER, UNSUBSCRIBE,
//	             GET_LAST_MESSAGE_ID, SEEK; the consumer is the subscription
//	             actor's sink
//	schema.go    GET_SCHEMA, GET_OR_CREATE_SCHEMA, producer/consumer schemas:
//	             versioned registry in stream properties, compatibility rules
//	dedup.go     producer deduplication (stream property lakegate.dedup)
//	admin_dedup.go  topic and namespace deduplication policies over the admin
//	             REST API (stream / namespace property lakegate.dedup)
//	admin_schemas.go  GET of the schema registry's versions over the admin
//	             REST API (/admin/v2/schemas/...)
//	end_of_topic.go  REACHED_END_OF_TOPIC for consumers of a terminated topic
//	txn.go       transactions unsupported: every transaction request answered
//	             with NotAllowedError
//	errors.go    sentinel errors and THE mapping to Pulsar ServerError codes
//
// Concurrency: a session's reader goroutine owns its producer and consumer
// maps; other goroutines (receipt loops, subscription actors) only enqueue
// encoded frames, blocking while the queue is full (backpressure) and
// giving up once the session is closed. Lock order: Server.mu, then topic.mu.
// Input never panics the process: a session recovers, closes its connection
// and leaves every other session alone.
//
// Message ids and offsets: docs/message-ids.md.
package gateway

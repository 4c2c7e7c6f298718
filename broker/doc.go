// Package broker is the layer between the front doors (the Pulsar
// sessions of gateway/, the admin REST) and the actors: the owner of
// Pulsar topic behaviour. It sees storage only through the lakestream
// interfaces and the actors package; nothing below it (actors, engine,
// tables, lakestream, …) imports it, and only the gateway and the admin
// REST do (node/layers_test.go).
//
// What it owns so far (the move out of gateway/ is under way; issue #26):
//
//	names.go   topic names: persistent:// and non-persistent://, the
//	           "-partition-N" suffix, the checks of their parts, the
//	           stream a name denotes
//	errors.go  the sentinel errors of topic behaviour (names, producers,
//	           schemas, per-topic limits, backlog quotas); the gateway maps
//	           them to Pulsar ServerError codes, the admin REST to HTTP
//	           statuses. Their texts keep their "gateway:" prefix: clients
//	           and tools read them.
//	rate.go    the per-topic limits (TopicLimits, RateLimit: Pulsar's
//	           names and defaults, docs/policies.md, "Limits"), the rate
//	           meters of stats and the token buckets of publish and
//	           dispatch rates
//
// Still in gateway/, to move here behind a Broker type a test can call
// without a socket: the topics served (topic.go), ownership and hand-over
// (cluster.go), producer and consumer admission, policies (policies.go,
// limits.go), schemas (schema.go), topic compaction (compaction.go),
// non-persistent topics (nonpersistent.go) and the end of topic
// (end_of_topic.go).
//
// Concurrency: RateMeter and TokenBucket are safe for concurrent use
// (RateMeter.Add is lock-free; TokenBucket.mu is a leaf lock).
package broker

// Package broker is the layer between the front doors (the Pulsar
// sessions of gateway/, the admin REST) and the actors: the owner of
// Pulsar topic behaviour. It sees storage only through the lakestream
// interfaces and the actors package; nothing below it (actors, engine,
// tables, lakestream, …) imports it, and only the gateway and the admin
// REST do (node/layers_test.go).
//
// What it owns so far (the move out of gateway/ is under way; issue #26):
//
//	broker.go    Config, New, Broker: the API the front doors and tests call
//	names.go     topic names: persistent:// and non-persistent://, the
//	             "-partition-N" suffix, the checks of their parts, the
//	             stream a name denotes
//	topics.go    topics and partitions in the catalog: Resolve (a name to
//	             its stream and log, auto-creating a missing topic when
//	             allowed), Partitions, TopicsOfNamespace
//	ownership.go Own: a topic's ownership taken before it is served
//	             (every node is a cluster member; docs/cluster.md)
//	topic_load.go LoadTopic: a topic-partition taken and loaded for
//	             serving (ownership, log, deduplication and limits as they
//	             apply, the partition state), its partition actor started
//	             (StartPartition), its ownership watched (WatchOwnership)
//	             and released on a graceful unload (ReleaseTopic)
//	registry.go  the topics this node serves: Topics (Serve: loaded once,
//	             registered; Unload: graceful or not), Topic (its state:
//	             log, ownership, partition actor, subscription actors,
//	             limits, end, compaction) over a front door's attached
//	             producers and consumers (AttachedProducer, AttachedConsumer)
//	topic.go     a served topic's operations: stats, subscriptions (start,
//	             create, delete, reset), limits, terminate, SEEK targets,
//	             the policies' view (PolicyTopic)
//	served.go    ServedTopic, the admin REST's view of a served topic, and
//	             the stats types (Pulsar's TopicStats and its parts)
//	tenants.go   tenants: explicit records and namespace prefixes
//	grants.go    the grant vocabulary (actions, property prefixes) and the
//	             forwarded-request header
//	nonpersistent.go non-persistent topics: NPTopic, in-memory fan-out
//	             on the owner, at most once, per subscription type, over
//	             the session side's producers and consumers (NPProducer,
//	             NPConsumer); their limits and ownership
//	cluster.go   the cluster side of serving topics: the member list
//	             (cached), Placement (rendezvous hashing), units taken and
//	             released, StreamUnits, a drain's Successors, RunRebalance
//	             (the hand-over itself is the caller's HandOver)
//	schema.go    the schema registry: versions kept as stream properties,
//	             deletion markers, Pulsar's compatibility strategies
//	policies.go  policy resolution — topic, else namespace, else the node's
//	             default: retention, message TTL, backlog quotas, the
//	             per-topic limits, deduplication, the compaction threshold
//	             (docs/policies.md)
//	enforcement.go the enforcement of retention, message TTL, backlog
//	             quotas and the compaction threshold on the topics served
//	             (PolicyTopic: what it needs of one), every policy check
//	             interval (RunPolicies) and when a producer attaches
//	             (CheckBacklogQuota); BytesFrom
//	compaction.go topic compaction (Pulsar's; docs/compacted-topics.md):
//	             TopicCompaction, one per topic-partition served, builds
//	             compacted logs and keeps the compaction record; the
//	             compacted view of readCompacted subscriptions
//	end_of_topic.go the end of a terminated topic: TopicEnd, one per
//	             topic-partition served, and its consumers (EndWatcher)
//	             told REACHED_END_OF_TOPIC once
//	admission.go producer and consumer admission on a topic-partition
//	             served: TopicAdmission (the limits as they apply now, the
//	             consumers counted per subscription, the publish and
//	             dispatch rate buckets)
//	rate.go      the per-topic limits (TopicLimits, RateLimit: Pulsar's
//	             names and defaults, docs/policies.md, "Limits"), the rate
//	             meters of stats and the token buckets of publish and
//	             dispatch rates
//	errors.go    the sentinel errors of topic behaviour (names, producers,
//	             schemas, per-topic limits, backlog quotas); the gateway maps
//	             them to Pulsar ServerError codes, the admin REST to HTTP
//	             statuses. Their texts keep their "gateway:" prefix: clients
//	             and tools read them.
//
// Still in gateway/, to move here: the registry of the topics served and
// their subscription actors (topic.go: the admin REST reads the topic
// struct's fields and defines methods on it), unloading them for a hand-over
// (cluster.go: unloadUnit, Drain), the registry of the non-persistent
// topics served (nonpersistent.go), and the limits' effects on sessions and
// subscriptions (limits.go: paused reads, the dispatch limiters).
//
// Concurrency: a Broker's only state is its cached member list (under
// membersCache's lock, a leaf); its other methods read and write the
// catalog, with optimistic concurrency on stream properties (schema
// registrations retry). RunRebalance and RunPolicies run in the caller's
// goroutine until its context ends. WatchOwnership starts one goroutine
// per topic served, ended by its unload or the loss of its ownership. An
// NPTopic's lock comes after its registry's, and its consumers' DeliverNP
// is called under it (they must not wait). A TopicCompaction runs at most
// one compaction at a time, in its own goroutine, ended by its topic's
// unload or the node's shutdown (TopicCompactionOptions). TopicEnd's
// watchers lock and TopicAdmission.mu are leaves; RateMeter and
// TokenBucket are safe for concurrent use (RateMeter.Add is lock-free;
// TokenBucket.mu is a leaf lock).
package broker

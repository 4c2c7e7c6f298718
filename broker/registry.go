package broker

// The topics this node serves: a registry of the topic-partitions loaded
// here (Topics), each a Topic from its first use after this node took its
// ownership until it is unloaded — handed over, released by an admin
// unload, or lost.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
)

// AttachedProducer is a producer attached to a topic through this node (a
// front door's): the topic reads its stats and may tell it to reconnect.
type AttachedProducer interface {
	comparable
	// PublisherStats is its entry in the topic's stats.
	PublisherStats(now time.Time) PublisherStats
	// Disconnect tells the client to reconnect (Pulsar's CLOSE_PRODUCER);
	// false when it is gone already.
	Disconnect() bool
}

// AttachedConsumer is a consumer attached to a topic through this node (a
// front door's).
type AttachedConsumer interface {
	EndWatcher
	// ConsumerStats is its entry in its subscription's stats; info is the
	// subscription's state.
	ConsumerStats(now time.Time, info actors.SubscriptionInfo) ConsumerStats
	// TopicUnloaded tells the client its topic is no longer served here:
	// it reconnects, to assignedURL when set (Pulsar's CLOSE_CONSUMER).
	TopicUnloaded(assignedURL string)
}

// TopicsOptions are what a registry of served topics needs beyond the
// broker.
type TopicsOptions struct {
	// Runtime runs the partition and subscription actors.
	Runtime actors.Runtime
	// Context ends when the node stops (topic compactions stop with it).
	Context context.Context
	// Refused counts a producer or consumer refused by a limit (label:
	// the limit).
	Refused func(label string)
	// Unloaded counts an unload (reason: "handover" or "lost").
	Unloaded func(reason string)
}

// Topics is the registry of the topic-partitions this node serves, of a
// front door's producers P and consumers C.
type Topics[P AttachedProducer, C AttachedConsumer] struct {
	brk  *Broker
	opts TopicsOptions

	mu struct {
		sync.Mutex
		topics map[string]*Topic[P, C]
		closed bool
	}
}

// NewTopics returns an empty registry.
func NewTopics[P AttachedProducer, C AttachedConsumer](b *Broker, opts TopicsOptions) *Topics[P, C] {
	ts := &Topics[P, C]{brk: b, opts: opts}
	ts.mu.topics = map[string]*Topic[P, C]{}
	return ts
}

// Serve returns the topic for a name, loading it — taking its ownership
// first (LoadTopic) — if it is not loaded, and registering it. A topic
// owned by another member fails with ErrServiceNotReady (the client looks
// it up again and is sent to the owner).
func (ts *Topics[P, C]) Serve(ctx context.Context, name string, create bool) (*Topic[P, C], error) {
	if ts.closed() {
		return nil, ErrServiceNotReady
	}
	b := ts.brk
	ref, err := b.Resolve(ctx, name, create)
	if err != nil {
		return nil, err
	}
	if t, err := ts.Loaded(ref.Unit()); t != nil || err != nil {
		return t, err
	}
	l, err := b.LoadTopic(ctx, ref) // topic_load.go: ownership, log, policies, state
	if err != nil {
		return nil, err
	}
	t := &Topic[P, C]{brk: b, rt: ts.opts.Runtime, name: ref.Name, stream: ref.Stream, log: l.Log, partition: ref.Partition,
		owner: l.Owner, unloaded: make(chan struct{})}
	t.lim.TopicAdmission = b.NewTopicAdmission(ref.Unit(), ts.opts.Refused)
	t.compaction = b.NewTopicCompaction(TopicCompactionOptions{
		Name: ref.Unit(), Log: l.Log, Guard: t.guardOpts(),
		Context: ts.opts.Context, Unloaded: t.unloaded, Closing: t.closing.Load,
	})
	t.mu.producers = map[uint64]P{}
	t.mu.subs = map[string]*actors.SubscriptionActor{}
	t.applyLimits(l.Limits)
	ts.mu.Lock()
	if old := ts.mu.topics[ref.Unit()]; old != nil || ts.mu.closed {
		ts.mu.Unlock()
		l.Close(ctx) // lost a race to load the topic
		if old == nil {
			return nil, ErrServiceNotReady
		}
		return ts.Loaded(ref.Unit())
	}
	t.part = b.StartPartition(ts.opts.Runtime, l, func(err error) { ts.Unload(t, false, "") })
	ts.mu.topics[ref.Unit()] = t
	ts.mu.Unlock()
	if l.Terminated {
		t.end.MarkTerminated(l.End)
	}
	b.WatchOwnership(l, t.unloaded, t.closing.Load, func() { ts.Unload(t, false, "") })
	return t, nil
}

// Loaded returns the loaded topic of a unit, nil if none, or
// ErrServiceNotReady while it is being unloaded.
func (ts *Topics[P, C]) Loaded(unit string) (*Topic[P, C], error) {
	ts.mu.Lock()
	t := ts.mu.topics[unit]
	ts.mu.Unlock()
	if t == nil {
		return nil, nil
	}
	if t.closing.Load() {
		return nil, fmt.Errorf("%w: %s is being unloaded", ErrServiceNotReady, unit)
	}
	return t, nil
}

// Get returns the registered topic of a unit (being unloaded or not), or
// nil.
func (ts *Topics[P, C]) Get(unit string) *Topic[P, C] {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.mu.topics[unit]
}

// All returns the loaded topics (any order).
func (ts *Topics[P, C]) All() []*Topic[P, C] {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Collect(maps.Values(ts.mu.topics))
}

// Close refuses every later Serve and returns the topics loaded now (the
// caller unloads them).
func (ts *Topics[P, C]) Close() []*Topic[P, C] {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.mu.closed = true
	return slices.Collect(maps.Values(ts.mu.topics))
}

func (ts *Topics[P, C]) closed() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.mu.closed
}

// Unload stops serving t. Graceful (a hand-over or an admin unload):
// appends in flight complete and are answered, cursors and the
// deduplication state are persisted, the ownership is released, and the
// producers and consumers are told to reconnect — to assignedURL when it
// is set. Not graceful (the ownership was lost): clients are told at once;
// nothing more is written. Returns once t is unloaded; concurrent calls
// wait for the first.
func (ts *Topics[P, C]) Unload(t *Topic[P, C], graceful bool, assignedURL string) {
	if !t.closing.CompareAndSwap(false, true) {
		<-t.unloaded
		return
	}
	defer close(t.unloaded)
	reason := "lost"
	if graceful {
		reason = "handover"
	}
	if ts.opts.Unloaded != nil {
		ts.opts.Unloaded(reason)
	}
	t.part.Unload(graceful, assignedURL)
	t.mu.Lock()
	subs := slices.Collect(maps.Values(t.mu.subs))
	clear(t.mu.subs)
	t.mu.Unlock()
	for _, sub := range subs {
		// Persists the cursor (refused, harmlessly, once the ownership is
		// lost) and stops dispatching.
		if err := sub.Close(); err != nil && graceful && !errors.Is(err, actors.ErrSubscriptionClosed) {
			ts.brk.cfg.Logger.Warn("unloading a topic: persisting a cursor failed", "topic", t.name.String(), "err", err)
		}
	}
	for _, c := range t.end.Watchers("") {
		c.TopicUnloaded(assignedURL)
	}
	if graceful {
		ts.brk.ReleaseTopic(t.owner, t.name.String())
	}
	ts.mu.Lock()
	if ts.mu.topics[t.name.String()] == t {
		delete(ts.mu.topics, t.name.String())
	}
	ts.mu.Unlock()
}

// Topic is one topic-partition (or non-partitioned topic) this node owns
// and serves: the partition actor (producers, deduplication, access modes,
// epochs, appends), the subscription actors, the end of a terminated
// topic, its limits and its topic compaction; and the front door's
// producers (P) and consumers (C) attached to it through this node.
//
// Lock order: Topics.mu before Topic.mu. Topic.mu may be held while
// waiting for a subscription actor (Info, ResetCursor, Close):
// subscription actors and the sinks they call never take it. Every change
// to a subscription either goes through the running actor or, when none
// runs, edits the cursor with Topic.mu held: Subscription starts actors
// under the same lock, so no actor can load a cursor half-changed.
type Topic[P AttachedProducer, C AttachedConsumer] struct {
	brk       *Broker
	rt        actors.Runtime
	name      TopicName // canonical full name (with partition suffix if any)
	stream    lakestream.StreamIdentifier
	log       lakestream.Log
	partition int32 // -1 for a non-partitioned topic
	// owner is this node's ownership of the topic.
	owner lakestream.Ownership
	part  *actors.PartitionActor
	// end: the end offset of a terminated topic and the consumers told
	// when they reach it (end_of_topic.go).
	end TopicEnd[C]
	// closing is set when the unload begins: new requests for the topic
	// are refused (the client looks it up again); unloaded is closed when
	// it is done.
	closing  atomic.Bool
	unloaded chan struct{}
	// compaction: the compacted view and the compactions run here
	// (compaction.go).
	compaction *TopicCompaction
	// lim: the topic's limits, rate buckets and consumer counts
	// (admission.go).
	lim topicLimitState
	// txnAcks: the pending acks of transactions on the subscriptions
	// running here (txn_acks.go).
	txnAcks struct {
		sync.Mutex
		m map[txnAckKey]*txnAckState
	}
	// writeLatency: the latency of the appends of the producers attached
	// here, from reading a SEND to its receipt (pulsar_storage_write_latency_*).
	writeLatency WriteLatency

	mu struct {
		sync.Mutex
		// producers are the producers attached through this node, by
		// their partition actor id (stats and metrics; the rules are the
		// partition actor's).
		producers map[uint64]P
		subs      map[string]*actors.SubscriptionActor
	}
}

// topicLimitState is what a topic keeps of its limits: its admission
// state (the limits, the rate buckets, the consumers counted).
type topicLimitState struct {
	// applying serializes applyLimits: the subscriptions end with the
	// limits last stored.
	applying sync.Mutex
	*TopicAdmission
}

// TopicName is the topic-partition's parsed name.
func (t *Topic[P, C]) TopicName() TopicName { return t.name }

// Owner is this node's ownership of the topic.
func (t *Topic[P, C]) Owner() lakestream.Ownership { return t.owner }

// Actor is the topic's partition actor.
func (t *Topic[P, C]) Actor() *actors.PartitionActor { return t.part }

// End is the end-of-topic state and the consumers attached through this
// node.
func (t *Topic[P, C]) End() *TopicEnd[C] { return &t.end }

// Admission is the topic's admission state (limits, rate buckets).
func (t *Topic[P, C]) Admission() *TopicAdmission { return t.lim.TopicAdmission }

// Counts are the producers attached through this node and the running
// subscriptions.
func (t *Topic[P, C]) Counts() (producers, subscriptions int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.producers), len(t.mu.subs)
}

// ForgetSubscription removes sub, the actor of subscription name, once it
// stopped (its last consumer left): a later use starts a new one.
func (t *Topic[P, C]) ForgetSubscription(name string, sub *actors.SubscriptionActor) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.subs[name] == sub {
		delete(t.mu.subs, name)
	}
}

// ServedPartition is a served topic-partition as a front door other than
// the one whose producers and consumers the registry holds sees it (the
// Kafka listener: it appends through the partition actor and reads the
// log).
type ServedPartition interface {
	Name() string
	TopicName() TopicName
	Stream() lakestream.StreamIdentifier
	// Partition is the Pulsar partition (-1: non-partitioned).
	Partition() int32
	Log() lakestream.Log
	Actor() *actors.PartitionActor
	// Owner is this node's ownership of it (the guard of owner-only writes).
	Owner() lakestream.Ownership
	Limits() TopicLimits
	Closing() bool
	// ResetSubscription moves a subscription (through its actor when one
	// runs): target is the next offset delivered.
	ResetSubscription(ctx context.Context, name string, target int64) (bool, error)
	// LiveSubscription is the running actor of a subscription, or nil.
	LiveSubscription(name string) *actors.SubscriptionActor
	// WriteLatency is the topic's append latency (metrics).
	WriteLatency() *WriteLatency
}

// AsServed is t as a ServedPartition.
func AsServed[P AttachedProducer, C AttachedConsumer](t *Topic[P, C]) ServedPartition { return t }

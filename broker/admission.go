package broker

// Producer and consumer admission on a topic-partition served here: the
// per-topic limits as they apply now (LimitsOf, reread by the gateway at
// load, at every PRODUCER and SUBSCRIBE, at every policy check and when
// they are changed through this node's admin API), the consumers attached
// through this node, and the rate buckets of publish and dispatch
// (docs/security.md, "Limits"; docs/policies.md, "Limits").
//
// Lock order: TopicAdmission.mu and TokenBucket.mu are leaves.

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// TopicAdmission is a topic-partition's admission state. Safe for
// concurrent use.
type TopicAdmission struct {
	name     string
	defaults TopicLimits
	// refused is called with the metric label of each refusal.
	refused func(label string)
	cur     atomic.Pointer[TopicLimits]
	// publish and dispatch are the topic partition's rate buckets;
	// subDispatch is the subscriptions' rate (each has its bucket).
	publish, dispatch TokenBucket
	subDispatch       atomic.Pointer[RateLimit]

	mu struct {
		sync.Mutex
		// consumers counts the consumers attached (or being attached)
		// through this node, per subscription, and total.
		consumers map[string]int
		total     int
	}
}

// NewTopicAdmission returns the admission state of topic-partition name,
// under the node's default limits until Apply; refused (may be nil) is
// told the metric label of every refusal.
func (b *Broker) NewTopicAdmission(name string, refused func(label string)) *TopicAdmission {
	if refused == nil {
		refused = func(string) {}
	}
	return &TopicAdmission{name: name, defaults: b.cfg.TopicLimits, refused: refused}
}

// Limits returns the topic's current limits.
func (a *TopicAdmission) Limits() TopicLimits {
	if l := a.cur.Load(); l != nil {
		return *l
	}
	return a.defaults
}

// Apply makes l the topic's limits, the rates at once; it returns the
// limits before (nil: none applied yet), so that the caller tells the
// running subscriptions a change of the unacknowledged limits. Callers
// serialize their Apply calls.
func (a *TopicAdmission) Apply(l TopicLimits) (old *TopicLimits) {
	old = a.cur.Swap(&l)
	a.publish.Set(l.PublishRate)
	a.dispatch.Set(l.DispatchRate)
	sr := l.SubscriptionDispatchRate
	a.subDispatch.Store(&sr)
	return old
}

// Publish is the topic partition's publish rate bucket.
func (a *TopicAdmission) Publish() *TokenBucket { return &a.publish }

// Dispatch is the topic partition's dispatch rate bucket, shared by its
// subscriptions.
func (a *TopicAdmission) Dispatch() *TokenBucket { return &a.dispatch }

// SubscriptionDispatch is the rate each subscription's own bucket follows.
func (a *TopicAdmission) SubscriptionDispatch() *atomic.Pointer[RateLimit] { return &a.subDispatch }

// AdmitProducer refuses a producer beyond MaxProducers, have being the
// producers attached through this node (the owner's).
func (a *TopicAdmission) AdmitProducer(have int) error {
	if n := a.Limits().MaxProducers; n > 0 && have >= n {
		a.refused("max_producers_per_topic")
		return fmt.Errorf("%w: topic %s has %d producers (maxProducers %d)", ErrTooManyProducers, a.name, have, n)
	}
	return nil
}

// AdmitSubscription refuses a new subscription when the topic has
// MaxSubscriptions already (have: its durable cursors and running
// subscriptions).
func (a *TopicAdmission) AdmitSubscription(have int) error {
	if n := a.Limits().MaxSubscriptions; n > 0 && have >= n {
		a.refused("max_subscriptions_per_topic")
		return fmt.Errorf("%w: topic %s has %d subscriptions (maxSubscriptionsPerTopic %d)", ErrTooManySubscriptions, a.name, have, n)
	}
	return nil
}

// ReserveConsumer takes a consumer's place on subscription sub, or refuses
// it beyond MaxConsumers or MaxConsumersPerSubscription; the caller gives
// the place back with ReleaseConsumer when the consumer leaves or is not
// attached after all.
func (a *TopicAdmission) ReserveConsumer(sub string) error {
	l := a.Limits()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.consumers == nil {
		a.mu.consumers = map[string]int{}
	}
	switch {
	case l.MaxConsumers > 0 && a.mu.total >= l.MaxConsumers:
		a.refused("max_consumers_per_topic")
		return fmt.Errorf("%w: topic %s has %d consumers (maxConsumers %d)", ErrTooManyConsumers, a.name, a.mu.total, l.MaxConsumers)
	case l.MaxConsumersPerSubscription > 0 && a.mu.consumers[sub] >= l.MaxConsumersPerSubscription:
		a.refused("max_consumers_per_subscription")
		return fmt.Errorf("%w: subscription %q of %s has %d consumers (maxConsumersPerSubscription %d)", ErrTooManyConsumers, sub, a.name, a.mu.consumers[sub], l.MaxConsumersPerSubscription)
	}
	a.mu.consumers[sub]++
	a.mu.total++
	return nil
}

// ReleaseConsumer gives back a place ReserveConsumer took.
func (a *TopicAdmission) ReleaseConsumer(sub string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.consumers[sub] <= 1 {
		delete(a.mu.consumers, sub)
	} else {
		a.mu.consumers[sub]--
	}
	a.mu.total--
}

package broker

// Non-persistent topics (non-persistent://tenant/ns/topic), as Pulsar has
// them: messages are fanned out in memory to the consumers connected to
// the topic's owner and never stored — no WAL, no table, no cursor. At
// most once: a message goes to the subscriptions that exist when it is
// published, and is dropped for a subscription whose consumer (the one the
// subscription type picks) has no permits, or whose connection refuses it
// (NPConsumer.DeliverNP: its outbound queue is full). The producer's
// receipt does not wait for any consumer.
//
// Ownership is the persistent topics' (docs/cluster.md): the topic's
// canonical name is the unit, LOOKUP answers its owner, a node serves the
// topic only while it owns it, and on losing it (or an unload, a hand-over,
// SIGTERM) closes its producers and consumers, which look it up again. A
// topic lives from its first producer or consumer until its last one leaves
// (then its ownership is released); a subscription until its last consumer
// leaves. Nothing is persisted, so nothing survives a move: messages in
// flight at that moment are lost, as on a Pulsar broker.
//
// Dispatch per subscription type: Exclusive (one consumer) and Failover
// (the first consumer by priority level, then name) send to one consumer;
// Shared round-robins over the consumers with permits; Key_Shared sends a
// key's messages to one consumer, picked by the key's hash over the
// consumers ordered by attachment (a consumer joining or leaving remaps
// keys; no draining: at most once has no order to keep across that).
// Non-partitioned only.
//
// Message ids: ledger NPLedger, entry = a per-topic counter started from
// the load time in microseconds, so ids grow across reloads (the clients'
// acknowledgement trackers drop repeated ids as duplicates).
//
// The sessions' side (the registry of the topics served, PRODUCER, SEND,
// SUBSCRIBE, FLOW, the MESSAGE frames, the admin stats) is the gateway's
// (gateway/nonpersistent.go): the topic holds its producers and consumers
// as NPProducer and NPConsumer.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// NPLedger is the ledger id of non-persistent message ids.
const NPLedger = 0

// NPProducer is a producer attached to a non-persistent topic.
type NPProducer interface {
	comparable
	// ProducerName is the producer's name, unique on the topic.
	ProducerName() string
	// Closed tells the producer the topic closed (CLOSE_PRODUCER, to
	// assignedURL when set).
	Closed(assignedURL string)
}

// NPConsumer is a consumer attached to a non-persistent topic.
type NPConsumer interface {
	comparable
	// ConsumerName is the consumer's name (Failover's order, after the
	// priority level).
	ConsumerName() string
	// Subscription is the consumer's subscription.
	Subscription() string
	// PriorityLevel orders Failover's consumers (lowest first).
	PriorityLevel() int32
	// Permits is how many messages the consumer may be sent now.
	Permits() int64
	// DeliverNP offers one entry to the consumer without waiting (called
	// under the topic's lock); false when it refuses it (dropped).
	DeliverNP(id protocol.MessageID, records int32, entry []byte) bool
	// CloseNP disconnects the consumer (CLOSE_CONSUMER, to assignedURL
	// when set): the topic closed.
	CloseNP(assignedURL string)
}

// NPTopicOptions configure a non-persistent topic.
type NPTopicOptions struct {
	// Name is the topic's canonical name.
	Name TopicName
	// Owner is this node's ownership of the topic (Own); released when
	// the topic closes or goes idle.
	Owner lakestream.Ownership
	// Limits are the node's default limits (no policies apply to a
	// non-persistent topic).
	Limits TopicLimits
	// Refused, when set, counts a producer or consumer refused by a
	// limit, by the limit's metric label.
	Refused func(label string)
	// Forget is called once the topic is closed or idle, before its
	// ownership is released: the registry of the topics served drops it.
	Forget func()
}

// NPTopic is a non-persistent topic this node owns and serves, with the
// session side's producers P and consumers C. Safe for concurrent use;
// its lock comes after the registry's.
type NPTopic[P NPProducer, C NPConsumer] struct {
	o NPTopicOptions
	// in counts published messages, dropped the ones a subscription
	// dropped (stats).
	in      RateMeter
	dropped atomic.Int64

	mu struct {
		sync.Mutex
		closed    bool
		producers map[P]struct{}
		subs      map[string]*npSub[C]
		nextEntry int64
	}
}

// npSub is one subscription of a non-persistent topic.
type npSub[C NPConsumer] struct {
	typ       actors.SubType
	consumers []C   // attach order
	rr        int   // Shared: next consumer to try
	dropped   int64 // messages dropped for this subscription
}

// NewNPTopic returns a non-persistent topic, served from now on.
func NewNPTopic[P NPProducer, C NPConsumer](o NPTopicOptions) *NPTopic[P, C] {
	t := &NPTopic[P, C]{o: o}
	t.mu.producers = map[P]struct{}{}
	t.mu.subs = map[string]*npSub[C]{}
	t.mu.nextEntry = time.Now().UnixMicro()
	return t
}

// Close drops every producer and consumer (they look the topic up again,
// at assignedURL when set), forgets the topic and releases its ownership.
func (t *NPTopic[P, C]) Close(assignedURL string) {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return
	}
	t.mu.closed = true
	producers := t.mu.producers
	var consumers []C
	for _, sub := range t.mu.subs {
		consumers = append(consumers, sub.consumers...)
	}
	t.mu.producers, t.mu.subs = map[P]struct{}{}, map[string]*npSub[C]{}
	t.mu.Unlock()
	for p := range producers {
		p.Closed(assignedURL)
	}
	for _, c := range consumers {
		c.CloseNP(assignedURL)
	}
	t.forget()
}

// forget removes the topic from the registry and releases its ownership.
func (t *NPTopic[P, C]) forget() {
	if t.o.Forget != nil {
		t.o.Forget()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.o.Owner.Release(ctx)
	cancel()
}

// releaseIfIdleLocked marks the topic closed when nobody uses it; the
// caller then calls forget (outside t.mu).
func (t *NPTopic[P, C]) releaseIfIdleLocked() bool {
	if t.mu.closed || len(t.mu.producers) > 0 || len(t.mu.subs) > 0 {
		return false
	}
	t.mu.closed = true
	return true
}

// limit refuses a producer or consumer beyond the node's default limits
// (have: what the topic or subscription has).
func (t *NPTopic[P, C]) limit(limit, have int, err error, what, label string) error {
	if limit > 0 && have >= limit {
		if t.o.Refused != nil {
			t.o.Refused(label)
		}
		return fmt.Errorf("%w: %s has %d (limit %d)", err, what, have, limit)
	}
	return nil
}

// AddProducer attaches p; ErrProducerBusy when its name is taken.
func (t *NPTopic[P, C]) AddProducer(p P) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	name := t.o.Name
	if t.mu.closed {
		return fmt.Errorf("%w: %s is being closed", ErrServiceNotReady, name)
	}
	for q := range t.mu.producers {
		if q.ProducerName() == p.ProducerName() {
			return fmt.Errorf("%w: producer name %q is in use on %s", ErrProducerBusy, p.ProducerName(), name)
		}
	}
	if err := t.limit(t.o.Limits.MaxProducers, len(t.mu.producers), ErrTooManyProducers, "topic "+name.String(), "max_producers_per_topic"); err != nil {
		return err
	}
	t.mu.producers[p] = struct{}{}
	return nil
}

// RemoveProducer detaches p; the topic goes when nobody uses it.
func (t *NPTopic[P, C]) RemoveProducer(p P) {
	t.mu.Lock()
	delete(t.mu.producers, p)
	idle := t.releaseIfIdleLocked()
	t.mu.Unlock()
	if idle {
		t.forget()
	}
}

// AddConsumer attaches c to subscription name with type typ.
func (t *NPTopic[P, C]) AddConsumer(c C, name string, typ actors.SubType) error {
	if typ < actors.SubExclusive || typ > actors.SubKeyShared {
		return fmt.Errorf("%w: subscription type %d", actors.ErrUnsupportedSubType, typ)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	topic := "topic " + t.o.Name.String()
	if t.mu.closed {
		return fmt.Errorf("%w: %s is being closed", ErrServiceNotReady, t.o.Name)
	}
	lim := t.o.Limits
	total := 0
	for _, s := range t.mu.subs {
		total += len(s.consumers)
	}
	sub := t.mu.subs[name]
	if err := t.limit(lim.MaxConsumers, total, ErrTooManyConsumers, topic, "max_consumers_per_topic"); err != nil {
		return err
	}
	if sub == nil {
		if err := t.limit(lim.MaxSubscriptions, len(t.mu.subs), ErrTooManySubscriptions, topic, "max_subscriptions_per_topic"); err != nil {
			return err
		}
	} else if err := t.limit(lim.MaxConsumersPerSubscription, len(sub.consumers), ErrTooManyConsumers, "subscription "+name, "max_consumers_per_subscription"); err != nil {
		return err
	}
	if sub == nil {
		sub = &npSub[C]{typ: typ}
		t.mu.subs[name] = sub
	}
	switch {
	case sub.typ != typ:
		return fmt.Errorf("%w: subscription is %s, consumer asked for %s", actors.ErrConsumerBusy, sub.typ, typ)
	case typ == actors.SubExclusive && len(sub.consumers) > 0:
		return fmt.Errorf("%w: exclusive subscription has a consumer", actors.ErrConsumerBusy)
	}
	sub.consumers = append(sub.consumers, c)
	return nil
}

// RemoveConsumer detaches c; its subscription goes with its last
// consumer, the topic when nobody uses it.
func (t *NPTopic[P, C]) RemoveConsumer(c C) {
	t.mu.Lock()
	if sub := t.mu.subs[c.Subscription()]; sub != nil {
		sub.consumers = slices.DeleteFunc(sub.consumers, func(x C) bool { return x == c })
		if len(sub.consumers) == 0 {
			delete(t.mu.subs, c.Subscription())
		}
	}
	idle := t.releaseIfIdleLocked()
	t.mu.Unlock()
	if idle {
		t.forget()
	}
}

// pickLocked returns the consumer of sub an entry goes to (ok false: drop
// it).
func (sub *npSub[C]) pickLocked(payload []byte) (c C, ok bool) {
	cs := sub.consumers
	if len(cs) == 0 {
		return c, false
	}
	switch sub.typ {
	case actors.SubExclusive:
		c = cs[0]
	case actors.SubFailover:
		c = slices.MinFunc(cs, func(a, b C) int {
			if a.PriorityLevel() != b.PriorityLevel() {
				return cmp.Compare(a.PriorityLevel(), b.PriorityLevel())
			}
			return cmp.Compare(a.ConsumerName(), b.ConsumerName())
		})
	case actors.SubKeyShared:
		c = cs[int(actors.EntryKeyHash(payload))%len(cs)]
	default: // Shared
		for k := range cs {
			x := cs[(sub.rr+k)%len(cs)]
			if x.Permits() > 0 {
				sub.rr = (sub.rr + k + 1) % len(cs)
				return x, true
			}
		}
		return c, false
	}
	return c, c.Permits() > 0
}

// Publish fans one entry (a SEND's metadata and payload) out to the
// subscriptions and returns its message id.
func (t *NPTopic[P, C]) Publish(records int32, entry []byte) (protocol.MessageID, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return protocol.MessageID{}, fmt.Errorf("%w: %s is being closed", ErrServiceNotReady, t.o.Name)
	}
	t.mu.nextEntry++
	id := protocol.NewMessageID(NPLedger, t.mu.nextEntry, -1, -1)
	t.in.Add(int(records), len(entry))
	for _, sub := range t.mu.subs {
		c, ok := sub.pickLocked(entry)
		if !ok || !c.DeliverNP(id, records, entry) {
			sub.dropped += int64(records)
			t.dropped.Add(int64(records))
		}
	}
	return id, nil
}

// NPSubscriptionState is one subscription of a non-persistent topic as
// its stats show it.
type NPSubscriptionState[C NPConsumer] struct {
	Name      string
	Type      actors.SubType
	Dropped   int64 // messages dropped for this subscription
	Consumers []C   // attach order
}

// NPTopicState is a non-persistent topic as its stats show it.
type NPTopicState[P NPProducer, C NPConsumer] struct {
	// In: the published messages' rates and counts.
	MsgRateIn, ByteRateIn float64
	MsgsIn, BytesIn       int64
	// Dropped counts the messages a subscription dropped.
	Dropped       int64
	Producers     []P
	Subscriptions []NPSubscriptionState[C]
}

// State is the topic's producers, subscriptions and counters now.
func (t *NPTopic[P, C]) State(now time.Time) NPTopicState[P, C] {
	var st NPTopicState[P, C]
	st.MsgRateIn, st.ByteRateIn, st.MsgsIn, st.BytesIn = t.in.Rates(now)
	st.Dropped = t.dropped.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.mu.producers {
		st.Producers = append(st.Producers, p)
	}
	for name, sub := range t.mu.subs {
		st.Subscriptions = append(st.Subscriptions, NPSubscriptionState[C]{Name: name, Type: sub.typ, Dropped: sub.dropped,
			Consumers: slices.Clone(sub.consumers)})
	}
	return st
}

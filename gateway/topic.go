package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// clientTopicName parses a topic name a client sent: broker.ParseTopicName, and
// the tenant must not be the reserved one (broker.ReservedTenant: the tenant
// records and compacted logs), which no client may look up, create,
// produce to or subscribe to (broker.ErrNotAllowed).
func clientTopicName(name string) (broker.TopicName, error) {
	tn, err := broker.ParseTopicName(name)
	if err != nil {
		return tn, err
	}
	if tn.Tenant == broker.ReservedTenant {
		return tn, fmt.Errorf("%w: %s: tenant %s is reserved for lakegate's own bookkeeping", broker.ErrNotAllowed, name, broker.ReservedTenant)
	}
	return tn, nil
}

// topic is one topic-partition (or non-partitioned topic) this node owns
// and serves: the partition actor (producers, deduplication, access modes,
// epochs, appends), the subscription actors and the end of a terminated
// topic. It lives from the first use after this node took ownership until
// it is unloaded: handed over, released by an admin unload, or lost.
//
// Lock order: Server.mu before topic.mu.
type topic struct {
	srv       *Server
	name      broker.TopicName // canonical full name (with partition suffix if any)
	stream    lakestream.StreamIdentifier
	log       lakestream.Log
	partition int32 // -1 for a non-partitioned topic
	// owner is this node's ownership of the topic.
	owner lakestream.Ownership
	part  *actors.PartitionActor
	// end: the end offset of a terminated topic and the consumers told
	// when they reach it (broker/end_of_topic.go).
	end broker.TopicEnd[*consumer]
	// closing is set when the unload begins: new requests for the topic
	// are refused (the client looks it up again); unloaded is closed when
	// it is done.
	closing  atomic.Bool
	unloaded chan struct{}
	// compaction: the compacted view and the compactions run here
	// (broker/compaction.go).
	compaction *broker.TopicCompaction
	// lim: the topic's limits, rate buckets and consumer counts (limits.go).
	lim topicLimitState

	mu struct {
		sync.Mutex
		// producers are the producers attached through this node, by
		// their partition actor id (stats and metrics; the rules are the
		// partition actor's).
		producers map[uint64]*producer
		subs      map[string]*actors.SubscriptionActor
	}
}

// guardOpts are the cursor options of writes only the owner may make.
func (t *topic) guardOpts() []lakestream.CursorOption { return broker.GuardOpts(t.owner) }

// serveTopic returns the topic for a name, loading it — taking its
// ownership first (broker.LoadTopic) — if it is not loaded, and
// registering it here. A topic owned by another member fails with
// broker.ErrServiceNotReady (the client looks it up again and is sent to
// the owner).
func (s *Server) serveTopic(ctx context.Context, name string, create bool) (*topic, error) {
	if s.closed() {
		return nil, broker.ErrServiceNotReady
	}
	ref, err := s.brk.Resolve(ctx, name, create)
	if err != nil {
		return nil, err
	}
	if t, err := s.loadedTopic(ref.Unit()); t != nil || err != nil {
		return t, err
	}
	l, err := s.brk.LoadTopic(ctx, ref) // broker/topic_load.go: ownership, log, policies, state
	if err != nil {
		return nil, err
	}
	t := &topic{srv: s, name: ref.Name, stream: ref.Stream, log: l.Log, partition: ref.Partition, owner: l.Owner, unloaded: make(chan struct{})}
	t.lim.TopicAdmission = s.brk.NewTopicAdmission(ref.Unit(), func(label string) {
		s.lim.metrics.refusals.WithLabelValues(label).Inc()
	})
	t.compaction = s.brk.NewTopicCompaction(broker.TopicCompactionOptions{
		Name: ref.Unit(), Log: l.Log, Guard: t.guardOpts(),
		Context: s.ctx, Unloaded: t.unloaded, Closing: t.closing.Load,
	})
	t.mu.producers = map[uint64]*producer{}
	t.mu.subs = map[string]*actors.SubscriptionActor{}
	t.applyLimits(l.Limits)
	s.mu.Lock()
	if old := s.mu.topics[ref.Unit()]; old != nil || s.mu.closed {
		s.mu.Unlock()
		l.Close(ctx) // lost a race to load the topic
		if old == nil {
			return nil, broker.ErrServiceNotReady
		}
		return s.loadedTopic(ref.Unit())
	}
	t.part = s.brk.StartPartition(s.rt, l, func(err error) { s.unloadTopic(t, false, "") })
	s.mu.topics[ref.Unit()] = t
	s.mu.Unlock()
	if l.Terminated {
		t.end.MarkTerminated(l.End)
	}
	s.brk.WatchOwnership(l, t.unloaded, t.closing.Load, func() { s.unloadTopic(t, false, "") })
	return t, nil
}

// loadedTopic returns the loaded topic of a unit, nil if none, or
// broker.ErrServiceNotReady while it is being unloaded.
func (s *Server) loadedTopic(unit string) (*topic, error) {
	s.mu.Lock()
	t := s.mu.topics[unit]
	s.mu.Unlock()
	if t == nil {
		return nil, nil
	}
	if t.closing.Load() {
		return nil, fmt.Errorf("%w: %s is being unloaded", broker.ErrServiceNotReady, unit)
	}
	return t, nil
}

// unloadTopic stops serving t. Graceful (a hand-over or an admin unload):
// appends in flight complete and are answered, cursors and the
// deduplication state are persisted, the ownership is released, and the
// producers and consumers are told to reconnect — to assignedURL when it
// is set. Not graceful (the ownership was lost): clients are told at once;
// nothing more is written. Returns once t is unloaded; concurrent calls
// wait for the first.
func (s *Server) unloadTopic(t *topic, graceful bool, assignedURL string) {
	if !t.closing.CompareAndSwap(false, true) {
		<-t.unloaded
		return
	}
	defer close(t.unloaded)
	reason := "lost"
	if graceful {
		reason = "handover"
	}
	s.metrics.unloads.WithLabelValues(reason).Inc()
	t.part.Unload(graceful, assignedURL)
	t.mu.Lock()
	subs := slices.Collect(maps.Values(t.mu.subs))
	clear(t.mu.subs)
	t.mu.Unlock()
	for _, sub := range subs {
		// Persists the cursor (refused, harmlessly, once the ownership is
		// lost) and stops dispatching.
		if err := sub.Close(); err != nil && graceful && !errors.Is(err, actors.ErrSubscriptionClosed) {
			s.cfg.Logger.Warn("unloading a topic: persisting a cursor failed", "topic", t.name.String(), "err", err)
		}
	}
	for _, c := range t.end.Watchers("") {
		c.disconnect(assignedURL)
	}
	if graceful {
		s.brk.ReleaseTopic(t.owner, t.name.String())
	}
	s.mu.Lock()
	if s.mu.topics[t.name.String()] == t {
		delete(s.mu.topics, t.name.String())
	}
	s.mu.Unlock()
}

// loadedTopics returns the loaded topics (any order).
func (s *Server) loadedTopics() []*topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.mu.topics))
}

// The topic as the broker's enforcement of policies sees it
// (broker/enforcement.go).
var _ broker.PolicyTopic = (*topic)(nil)

// Name implements broker.PolicyTopic.
func (t *topic) Name() string { return t.name.String() }

// Stream implements broker.PolicyTopic.
func (t *topic) Stream() lakestream.StreamIdentifier { return t.stream }

// Log implements broker.PolicyTopic.
func (t *topic) Log() lakestream.Log { return t.log }

// Compaction implements broker.PolicyTopic.
func (t *topic) Compaction() *broker.TopicCompaction { return t.compaction }

// Closing implements broker.PolicyTopic.
func (t *topic) Closing() bool { return t.closing.Load() }

// ApplyLimits implements broker.PolicyTopic (limits.go).
func (t *topic) ApplyLimits(l TopicLimits) { t.applyLimits(l) }

// SubscriptionNames implements broker.PolicyTopic
// (topic_subscriptions.go).
func (t *topic) SubscriptionNames(ctx context.Context) ([]string, error) {
	return t.subscriptionNames(ctx)
}

// LiveSubscription implements broker.PolicyTopic (topic_stats.go).
func (t *topic) LiveSubscription(name string) *actors.SubscriptionActor { return t.liveSub(name) }

// ExpireBelow implements broker.PolicyTopic: it acknowledges every record of subscription name below
// offset before: through its actor when it runs, else in its stored
// cursor (written under the topic's ownership).
func (t *topic) ExpireBelow(ctx context.Context, name string, before int64) error {
	t.mu.Lock()
	if sub := t.liveSubLocked(name); sub != nil {
		t.mu.Unlock()
		return sub.Expire(before)
	}
	defer t.mu.Unlock() // no actor can open the cursor meanwhile
	c, err := t.log.LoadCursor(ctx, name, t.guardOpts()...)
	if errors.Is(err, lakestream.ErrNoSuchCursor) {
		return nil
	}
	if err != nil {
		return err
	}
	if before-1 > c.MarkDeleteOffset() {
		err = c.MarkDelete(ctx, before-1, c.Properties())
	}
	return errors.Join(err, c.Close(ctx))
}

// DisconnectProducers implements broker.PolicyTopic: it closes the topic's producers (CLOSE_PRODUCER: they
// reconnect, and meet the backlog quota). Their SENDs in flight are still
// answered. It returns how many it closed.
func (t *topic) DisconnectProducers() int {
	t.mu.Lock()
	ps := make([]*producer, 0, len(t.mu.producers))
	for _, p := range t.mu.producers {
		ps = append(ps, p)
	}
	t.mu.Unlock()
	n := 0
	for _, p := range ps {
		if !p.gone.CompareAndSwap(false, true) {
			continue
		}
		t.part.CloseProducer(p.actorID)
		p.sess.send(protocol.CloseProducer(p.id, 0))
		n++
	}
	return n
}

// policyTopics are the loaded topics as the broker's enforcement of
// policies sees them.
func (s *Server) policyTopics() []broker.PolicyTopic {
	ts := s.loadedTopics()
	out := make([]broker.PolicyTopic, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}

// policyHooks count the enforcement's actions and rounds.
func (s *Server) policyHooks() broker.PolicyHooks {
	return broker.PolicyHooks{
		Action:  func(label string) { s.metrics.policyActions.WithLabelValues(label).Inc() },
		Checked: s.metrics.policyChecks.Inc,
	}
}

// handleGetTopicsOfNamespace lists the persistent topics of a namespace as
// Pulsar does: a partitioned topic as its partitions ("t-partition-i"), a
// non-partitioned one by its name. An unknown (or invalid) namespace and
// mode NON_PERSISTENT give an empty list. A topics_pattern (matched
// against names without the "persistent://" scheme and partition suffix,
// the whole name, as Pulsar's TopicList.filterTopics) filters the list;
// pulsar-client-go v0.19.0 sends none and filters itself.
func (s *session) handleGetTopicsOfNamespace(c *pb.CommandGetTopicsOfNamespace) {
	ctx, cancel := s.ctx()
	defer cancel()
	if s.srv.authzOn() {
		if err := s.authorize(func(role string) error { return s.srv.checkNamespaceLookup(ctx, role, c.GetNamespace()) }); err != nil {
			s.srv.metrics.authFailures.WithLabelValues("unauthorized").Inc()
			s.sendError(c.GetRequestId(), err)
			return
		}
	}
	var topics []string
	if c.GetMode() != pb.CommandGetTopicsOfNamespace_NON_PERSISTENT {
		var err error
		if topics, err = s.srv.brk.TopicsOfNamespace(ctx, c.GetNamespace(), false); err != nil {
			s.sendError(c.GetRequestId(), err)
			return
		}
	}
	if c.GetMode() != pb.CommandGetTopicsOfNamespace_PERSISTENT {
		// The non-persistent topics served by this node.
		topics = append(topics, s.srv.npTopicsOf(c.GetNamespace())...)
	}
	filtered := false
	if p := c.GetTopicsPattern(); p != "" {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "non-persistent://"), "persistent://")
		if re, err := regexp.Compile("^(?:" + p + ")$"); err == nil {
			filtered = true
			topics = slices.DeleteFunc(topics, func(name string) bool {
				tn, err := broker.ParseTopicName(name)
				return err != nil || !re.MatchString(tn.Tenant+"/"+tn.Namespace+"/"+tn.Base().Local)
			})
		}
	}
	if topics == nil {
		topics = []string{}
	}
	s.send(protocol.GetTopicsOfNamespaceResponse(c.GetRequestId(), topics, filtered, ""))
}

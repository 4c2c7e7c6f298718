package gateway

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/lakegate/lakegate/broker"
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

// topic is one topic-partition this node serves: the broker's Topic
// (broker/registry.go), with this front door's producers and consumers
// attached to it.
type topic = broker.Topic[*producer, *consumer]

// The topics as the admin REST and the enforcement of policies see them.
var (
	_ broker.ServedTopic = (*topic)(nil)
	_ broker.PolicyTopic = (*topic)(nil)
)

// serveTopic returns the topic for a name, loading it (taking its
// ownership) if it is not loaded: broker.Topics.Serve.
func (s *Server) serveTopic(ctx context.Context, name string, create bool) (*topic, error) {
	if s.closed() {
		return nil, broker.ErrServiceNotReady
	}
	return s.topics.Serve(ctx, name, create)
}

// loadedTopic returns the loaded topic of a unit, nil if none, or
// broker.ErrServiceNotReady while it is being unloaded.
func (s *Server) loadedTopic(unit string) (*topic, error) { return s.topics.Loaded(unit) }

// unloadTopic stops serving t: broker.Topics.Unload.
func (s *Server) unloadTopic(t *topic, graceful bool, assignedURL string) {
	s.topics.Unload(t, graceful, assignedURL)
}

// loadedTopics returns the loaded topics (any order).
func (s *Server) loadedTopics() []*topic { return s.topics.All() }

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

// ServePartition returns the topic-partition of a name as another front
// door (the Kafka listener) sees it: the same registry, so both protocols
// append through one partition actor (serveTopic).
func (s *Server) ServePartition(ctx context.Context, name string, create bool) (broker.ServedPartition, error) {
	t, err := s.serveTopic(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return broker.AsServed(t), nil
}

// ReloadPartition unloads a served topic-partition gracefully (its
// clients reconnect) so that its next use loads it again — with the
// deduplication state a front door just created (the Kafka listener's
// idempotent producers).
func (s *Server) ReloadPartition(ctx context.Context, name string) error {
	tn, err := broker.ParseTopicName(name)
	if err != nil {
		return err
	}
	t, err := s.loadedTopic(tn.String())
	if err != nil || t == nil {
		return err
	}
	s.unloadTopic(t, true, "")
	return nil
}

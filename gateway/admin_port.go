package gateway

// What the admin REST (package admin, through its admin.Node port) asks of
// the node's Pulsar front door: the topics this node serves and their
// unloading, the non-persistent topics, the peers, the authorization
// checks and the counters the admin REST adds to.

import (
	"context"
	"net/http"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// Broker is the node's broker layer.
func (s *Server) Broker() *broker.Broker { return s.brk }

// ServedTopic returns the topic-partition name served here, loading it
// (taking its ownership) when this node may serve it; one owned by another
// member fails with broker.ErrServiceNotReady. Nothing is created.
func (s *Server) ServedTopic(ctx context.Context, name string) (broker.ServedTopic, error) {
	if s.closed() {
		return nil, broker.ErrServiceNotReady
	}
	t, err := s.serveTopic(ctx, name, false)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// LoadedTopics returns the topics loaded here now.
func (s *Server) LoadedTopics() []broker.ServedTopic {
	ts := s.loadedTopics()
	out := make([]broker.ServedTopic, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}

// LookupUnit resolves a topic name to its unit (a partition, or the topic).
func (s *Server) LookupUnit(ctx context.Context, name string) (string, error) {
	return s.lookupUnit(ctx, name)
}

// ReloadStreams re-reads the policies of the streams' topics served here.
func (s *Server) ReloadStreams(ctx context.Context, ids []lakestream.StreamIdentifier) error {
	return s.reloadStreams(ctx, ids)
}

// RefreshLimitsOf re-applies the limits of the topics of stream (or
// namespace) id served here.
func (s *Server) RefreshLimitsOf(ctx context.Context, id lakestream.StreamIdentifier) {
	s.refreshLimitsOf(ctx, id)
}

// UnloadLocal unloads unit if it is served here (hand-over to dest, a
// member id, when given).
func (s *Server) UnloadLocal(ctx context.Context, unit, dest string) error {
	return s.unloadLocal(ctx, unit, dest)
}

// UnloadUnit unloads unit wherever it is served.
func (s *Server) UnloadUnit(ctx context.Context, unit, dest string) error {
	return s.unloadUnit(ctx, unit, dest)
}

// NPTopicsOf lists the non-persistent topics of namespace served here.
func (s *Server) NPTopicsOf(namespace string) []string { return s.npTopicsOf(namespace) }

// NPTopicStats returns the stats of the non-persistent topic name if it is
// served here.
func (s *Server) NPTopicStats(name string) (any, bool) {
	s.mu.Lock()
	t := s.mu.npTopics[name]
	s.mu.Unlock()
	if t == nil {
		return nil, false
	}
	return t.stats(), true
}

// PeerBase is the base URL requests to member go to (peers.go).
func (s *Server) PeerBase(member lakestream.Member) (string, error) { return s.peerBase(member) }

// PeerClient is the HTTP client of requests to peers (TLS as configured).
func (s *Server) PeerClient() *http.Client { return s.httpClient }

// CountRefusal counts a request refused by a limit (label: the limit).
func (s *Server) CountRefusal(label string) { s.lim.metrics.refusals.WithLabelValues(label).Inc() }

// CountAuthFailure counts a failed authentication or authorization.
func (s *Server) CountAuthFailure(reason string) {
	s.metrics.authFailures.WithLabelValues(reason).Inc()
}

// AuthzOn reports whether requests are checked against grants.
func (s *Server) AuthzOn() bool { return s.authzOn() }

// CheckSuperUser allows superusers only.
func (s *Server) CheckSuperUser(role string) error { return s.checkSuperUser(role) }

// CheckSuperOrTenantAdmin allows superusers and tenant's admins.
func (s *Server) CheckSuperOrTenantAdmin(ctx context.Context, role, tenant string) error {
	return s.checkSuperOrTenantAdmin(ctx, role, tenant)
}

// CheckNamespaceLookup allows a role with any grant in namespace.
func (s *Server) CheckNamespaceLookup(ctx context.Context, role, namespace string) error {
	return s.checkNamespaceLookup(ctx, role, namespace)
}

// CheckSubscription allows role to use subscription sub of tn.
func (s *Server) CheckSubscription(ctx context.Context, role string, tn broker.TopicName, sub string) error {
	return s.checkSubscription(ctx, role, tn, sub)
}

// CheckTopic allows role to do action (broker.ActionProduce, …) on tn.
func (s *Server) CheckTopic(ctx context.Context, role string, tn broker.TopicName, action string) error {
	return s.checkTopic(ctx, role, tn, action)
}

// Settings is the server's configuration as it runs (defaults filled in,
// the catalog as given).
func (s *Server) Settings() Config { return s.cfg }

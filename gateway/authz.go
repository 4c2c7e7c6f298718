package gateway

// Authorization (docs/security.md): Pulsar's model, the broker's
// (broker/authz.go); the gateway asks it.

import (
	"context"

	"github.com/lakegate/lakegate/broker"
)

// The grant vocabulary is the broker's (broker/grants.go).
const (
	actionProduce = broker.ActionProduce
	actionConsume = broker.ActionConsume
	actionLookup  = broker.ActionLookup
	permPrefix    = broker.PermPrefix
	subPermPrefix = broker.SubPermPrefix
)

// authzOn reports whether requests are checked against grants.
func (s *Server) authzOn() bool { return s.brk.AuthzOn() }

func (s *Server) isSuperUser(role string) bool { return s.brk.IsSuperUser(role) }

// isTenantAdmin reports whether role administers tenant.
func (s *Server) isTenantAdmin(ctx context.Context, role, tenant string) (bool, error) {
	return s.brk.IsTenantAdmin(ctx, role, tenant)
}

// checkSuperOrTenantAdmin allows superusers and tenant's admins.
func (s *Server) checkSuperOrTenantAdmin(ctx context.Context, role, tenant string) error {
	return s.brk.CheckSuperOrTenantAdmin(ctx, role, tenant)
}

// checkSuperUser allows superusers only.
func (s *Server) checkSuperUser(role string) error { return s.brk.CheckSuperUser(role) }

// checkTopic allows role to do action (produce, consume, lookup) on topic.
func (s *Server) checkTopic(ctx context.Context, role string, tn broker.TopicName, action string) error {
	return s.brk.CheckTopic(ctx, role, tn, action)
}

// checkSubscription allows role to consume subscription sub of topic.
func (s *Server) checkSubscription(ctx context.Context, role string, tn broker.TopicName, sub string) error {
	return s.brk.CheckSubscription(ctx, role, tn, sub)
}

// checkNamespaceLookup allows role to list a namespace's topics.
func (s *Server) checkNamespaceLookup(ctx context.Context, role, namespace string) error {
	return s.brk.CheckNamespaceLookup(ctx, role, namespace)
}

package gateway

// Authorization (docs/security.md): Pulsar's model.
//
//   - Superuser roles (Config.SuperUserRoles) may do everything.
//   - A tenant's admin roles (TenantInfo.adminRoles) may do everything in
//     the tenant: administer its namespaces and topics, produce, consume.
//   - Grants: per namespace and per topic, a role gets actions among
//     "produce" and "consume" (a topic grant adds to its namespace's; a
//     partitioned topic's covers its partitions, not other topics whose
//     names merely end in "-partition-N": topicGrants).
//     Looking a topic up needs either.
//   - Subscription restrictions: a namespace may name, per subscription,
//     the roles allowed to consume it; a subscription with no such entry is
//     open to every role that may consume.
//
// Storage: namespace grants are namespace properties "lakegate.perm.<role>"
// = "produce,consume"; topic grants the same keys as stream properties of
// the (base) topic; subscription restrictions namespace properties
// "lakegate.subperm.<subscription>" = "role1,role2". They live in the
// catalog (etcd), so every node enforces the same grants.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
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
func (s *Server) authzOn() bool { return s.cfg.Auth != nil && s.cfg.Authorization }

func (s *Server) isSuperUser(role string) bool { return auth.IsSuperUser(role, s.cfg.SuperUserRoles) }

// isTenantAdmin reports whether role administers tenant.
func (s *Server) isTenantAdmin(ctx context.Context, role, tenant string) (bool, error) {
	if role == "" {
		return false, nil
	}
	info, err := s.brk.Tenant(ctx, tenant)
	if errors.Is(err, broker.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.Contains(info.AdminRoles, role), nil
}

// checkSuperOrTenantAdmin allows superusers and tenant's admins.
func (s *Server) checkSuperOrTenantAdmin(ctx context.Context, role, tenant string) error {
	if !s.authzOn() || s.isSuperUser(role) {
		return nil
	}
	ok, err := s.isTenantAdmin(ctx, role, tenant)
	if err != nil || ok {
		return err
	}
	return fmt.Errorf("%w: role %q is not an admin of tenant %q", ErrAuthorization, role, tenant)
}

// checkSuperUser allows superusers only.
func (s *Server) checkSuperUser(role string) error {
	if !s.authzOn() || s.isSuperUser(role) {
		return nil
	}
	return fmt.Errorf("%w: role %q is not a superuser", ErrAuthorization, role)
}

// grantedActions reads the actions granted to role in a property map.
func grantedActions(props map[string]string, role string) []string {
	v, ok := props[permPrefix+role]
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// checkTopic allows role to do action (produce, consume, lookup) on topic.
func (s *Server) checkTopic(ctx context.Context, role string, tn broker.TopicName, action string) error {
	if !s.authzOn() || s.isSuperUser(role) {
		return nil
	}
	if ok, err := s.isTenantAdmin(ctx, role, tn.Tenant); err != nil || ok {
		return err
	}
	var actions []string
	ns, err := s.cfg.Catalog.LoadNamespace(ctx, tn.Tenant+"/"+tn.Namespace)
	switch {
	case err == nil:
		actions = append(actions, grantedActions(ns.Properties, role)...)
	case !errors.Is(err, lakestream.ErrNoSuchNamespace):
		return err
	}
	if !tn.NonPersistent { // a non-persistent topic has no stream: the namespace's grants only
		props, err := s.topicGrants(ctx, tn)
		if err != nil {
			return err
		}
		actions = append(actions, grantedActions(props, role)...)
	}
	allowed := slices.Contains(actions, action) ||
		(action == actionLookup && (slices.Contains(actions, actionProduce) || slices.Contains(actions, actionConsume)))
	if !allowed {
		return fmt.Errorf("%w: role %q may not %s %s", ErrAuthorization, role, action, tn.Base())
	}
	return nil
}

// topicGrants returns the properties holding the topic grants that apply
// to tn (nil when its stream does not exist): those of the partitioned
// stream for one of its partitions, else those of the stream the whole name
// denotes. A "-partition-N" name that is no partition of a partitioned
// stream is a topic of its own, as broker.Resolve reads it: a grant on x does
// not cover a non-partitioned x-partition-0 (nor creating one), nor
// x-partition-7 of an x with fewer partitions.
func (s *Server) topicGrants(ctx context.Context, tn broker.TopicName) (map[string]string, error) {
	if tn.Partition >= 0 {
		md, err := s.cfg.Catalog.LoadStream(ctx, tn.StreamID())
		switch {
		case err == nil && tn.Partition < md.Partitioning.NumPartitions:
			return md.Properties, nil
		case err != nil && !errors.Is(err, lakestream.ErrNoSuchStream):
			return nil, err
		}
	}
	md, err := s.cfg.Catalog.LoadStream(ctx, broker.FullStreamID(tn))
	switch {
	case err == nil:
		return md.Properties, nil
	case errors.Is(err, lakestream.ErrNoSuchStream):
		return nil, nil
	}
	return nil, err
}

// checkSubscription allows role to consume subscription sub of topic: it
// may consume the topic, and the namespace's restriction for sub (if any)
// names it.
func (s *Server) checkSubscription(ctx context.Context, role string, tn broker.TopicName, sub string) error {
	if err := s.checkTopic(ctx, role, tn, actionConsume); err != nil {
		return err
	}
	if !s.authzOn() || s.isSuperUser(role) {
		return nil
	}
	if ok, err := s.isTenantAdmin(ctx, role, tn.Tenant); err != nil || ok {
		return err
	}
	ns, err := s.cfg.Catalog.LoadNamespace(ctx, tn.Tenant+"/"+tn.Namespace)
	if err != nil {
		return nil // no namespace, no restriction (the topic check already passed)
	}
	v, restricted := ns.Properties[subPermPrefix+sub]
	if !restricted || slices.Contains(strings.Split(v, ","), role) {
		return nil
	}
	return fmt.Errorf("%w: role %q may not consume subscription %q of %s", ErrAuthorization, role, sub, tn.Base())
}

// checkNamespaceLookup allows role to list a namespace's topics: a tenant
// admin, or a role with any grant in the namespace.
func (s *Server) checkNamespaceLookup(ctx context.Context, role, namespace string) error {
	if !s.authzOn() || s.isSuperUser(role) {
		return nil
	}
	tenant, _, _ := strings.Cut(namespace, "/")
	if ok, err := s.isTenantAdmin(ctx, role, tenant); err != nil || ok {
		return err
	}
	ns, err := s.cfg.Catalog.LoadNamespace(ctx, namespace)
	if err == nil && len(grantedActions(ns.Properties, role)) > 0 {
		return nil
	}
	return fmt.Errorf("%w: role %q has no permission in namespace %s", ErrAuthorization, role, namespace)
}

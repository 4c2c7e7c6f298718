package broker

// Authorization (docs/security.md): Pulsar's model, for every front door
// (the Pulsar sessions, the admin REST, the Kafka listener).
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
	"github.com/lakegate/lakegate/lakestream"
)

// AuthzOn reports whether requests are checked against grants.
func (b *Broker) AuthzOn() bool { return b.cfg.Authorization }

// IsSuperUser reports whether role is a superuser.
func (b *Broker) IsSuperUser(role string) bool { return auth.IsSuperUser(role, b.cfg.SuperUserRoles) }

// IsTenantAdmin reports whether role administers tenant.
func (b *Broker) IsTenantAdmin(ctx context.Context, role, tenant string) (bool, error) {
	if role == "" {
		return false, nil
	}
	info, err := b.Tenant(ctx, tenant)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.Contains(info.AdminRoles, role), nil
}

// CheckSuperOrTenantAdmin allows superusers and tenant's admins.
func (b *Broker) CheckSuperOrTenantAdmin(ctx context.Context, role, tenant string) error {
	if !b.AuthzOn() || b.IsSuperUser(role) {
		return nil
	}
	ok, err := b.IsTenantAdmin(ctx, role, tenant)
	if err != nil || ok {
		return err
	}
	return fmt.Errorf("%w: role %q is not an admin of tenant %q", ErrAuthorization, role, tenant)
}

// CheckSuperUser allows superusers only.
func (b *Broker) CheckSuperUser(role string) error {
	if !b.AuthzOn() || b.IsSuperUser(role) {
		return nil
	}
	return fmt.Errorf("%w: role %q is not a superuser", ErrAuthorization, role)
}

// grantedActions reads the actions granted to role in a property map.
func grantedActions(props map[string]string, role string) []string {
	v, ok := props[PermPrefix+role]
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// CheckTopic allows role to do action (produce, consume, lookup) on topic.
func (b *Broker) CheckTopic(ctx context.Context, role string, tn TopicName, action string) error {
	if !b.AuthzOn() || b.IsSuperUser(role) {
		return nil
	}
	if ok, err := b.IsTenantAdmin(ctx, role, tn.Tenant); err != nil || ok {
		return err
	}
	var actions []string
	ns, err := b.cfg.Catalog.LoadNamespace(ctx, tn.Tenant+"/"+tn.Namespace)
	switch {
	case err == nil:
		actions = append(actions, grantedActions(ns.Properties, role)...)
	case !errors.Is(err, lakestream.ErrNoSuchNamespace):
		return err
	}
	if !tn.NonPersistent { // a non-persistent topic has no stream: the namespace's grants only
		props, err := b.topicGrants(ctx, tn)
		if err != nil {
			return err
		}
		actions = append(actions, grantedActions(props, role)...)
	}
	allowed := slices.Contains(actions, action) ||
		(action == ActionLookup && (slices.Contains(actions, ActionProduce) || slices.Contains(actions, ActionConsume)))
	if !allowed {
		return fmt.Errorf("%w: role %q may not %s %s", ErrAuthorization, role, action, tn.Base())
	}
	return nil
}

// topicGrants returns the properties holding the topic grants that apply
// to tn (nil when its stream does not exist): those of the partitioned
// stream for one of its partitions, else those of the stream the whole name
// denotes. A "-partition-N" name that is no partition of a partitioned
// stream is a topic of its own, as Resolve reads it: a grant on x does
// not cover a non-partitioned x-partition-0 (nor creating one), nor
// x-partition-7 of an x with fewer partitions.
func (b *Broker) topicGrants(ctx context.Context, tn TopicName) (map[string]string, error) {
	if tn.Partition >= 0 {
		md, err := b.cfg.Catalog.LoadStream(ctx, tn.StreamID())
		switch {
		case err == nil && tn.Partition < md.Partitioning.NumPartitions:
			return md.Properties, nil
		case err != nil && !errors.Is(err, lakestream.ErrNoSuchStream):
			return nil, err
		}
	}
	md, err := b.cfg.Catalog.LoadStream(ctx, FullStreamID(tn))
	switch {
	case err == nil:
		return md.Properties, nil
	case errors.Is(err, lakestream.ErrNoSuchStream):
		return nil, nil
	}
	return nil, err
}

// CheckSubscription allows role to consume subscription sub of topic: it
// may consume the topic, and the namespace's restriction for sub (if any)
// names it.
func (b *Broker) CheckSubscription(ctx context.Context, role string, tn TopicName, sub string) error {
	if err := b.CheckTopic(ctx, role, tn, ActionConsume); err != nil {
		return err
	}
	if !b.AuthzOn() || b.IsSuperUser(role) {
		return nil
	}
	if ok, err := b.IsTenantAdmin(ctx, role, tn.Tenant); err != nil || ok {
		return err
	}
	ns, err := b.cfg.Catalog.LoadNamespace(ctx, tn.Tenant+"/"+tn.Namespace)
	if err != nil {
		return nil // no namespace, no restriction (the topic check already passed)
	}
	v, restricted := ns.Properties[SubPermPrefix+sub]
	if !restricted || slices.Contains(strings.Split(v, ","), role) {
		return nil
	}
	return fmt.Errorf("%w: role %q may not consume subscription %q of %s", ErrAuthorization, role, sub, tn.Base())
}

// CheckNamespaceLookup allows role to list a namespace's topics: a tenant
// admin, or a role with any grant in the namespace.
func (b *Broker) CheckNamespaceLookup(ctx context.Context, role, namespace string) error {
	if !b.AuthzOn() || b.IsSuperUser(role) {
		return nil
	}
	tenant, _, _ := strings.Cut(namespace, "/")
	if ok, err := b.IsTenantAdmin(ctx, role, tenant); err != nil || ok {
		return err
	}
	ns, err := b.cfg.Catalog.LoadNamespace(ctx, namespace)
	if err == nil && len(grantedActions(ns.Properties, role)) > 0 {
		return nil
	}
	return fmt.Errorf("%w: role %q has no permission in namespace %s", ErrAuthorization, role, namespace)
}

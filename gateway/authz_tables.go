package gateway

// Authorization of the streams' tables outside the Pulsar protocol and the
// admin REST: the Iceberg REST catalog (icebergrest) asks TableAccess, so
// a role sees and changes there exactly what the grants give it here
// (docs/iceberg-catalog.md, "Who may do what"). The decisions are the
// ones of authz.go (superusers, tenant admins, namespace and topic
// grants); this file only maps an Iceberg namespace to them.
//
// Iceberg namespaces follow the streams' tables (tables.IcebergIdent):
// level 0 is the tenant, level 1 the Pulsar namespace, and a table of a
// two-level namespace is that namespace's topic of the same name.

import (
	"context"
	"fmt"
	"strings"

	"github.com/lakegate/lakegate/broker"
)

// TableAccess answers what a role may do with the tables of an Iceberg
// namespace. It is safe for concurrent use; every method reads the grants
// from the catalog (etcd) as the Pulsar protocol's checks do. Refusals
// wrap ErrAuthorization; any other error is the catalog's (unavailable).
// With authorization off (no authentication, or auth.authorization off)
// every method allows.
type TableAccess struct{ s *Server }

// TableAccess returns the server's table authorization.
func (s *Server) TableAccess() TableAccess { return TableAccess{s: s} }

// Enabled reports whether requests are checked against grants.
func (a TableAccess) Enabled() bool { return a.s.authzOn() }

// IsSuperUser reports whether role is a superuser (auth.superUserRoles).
func (a TableAccess) IsSuperUser(role string) bool { return a.s.isSuperUser(role) }

// CanRead allows role to see namespace ns (name "") or to read its table
// name:
//
//   - superusers and the admins of tenant ns[0]: everything in the tenant;
//   - a stream's table (ns = [tenant, namespace], name = topic): whoever
//     may look the topic up (a produce or consume grant on the topic or
//     its namespace);
//   - a two-or-more-level namespace, and the tables below the first two
//     levels: whoever has a grant in the Pulsar namespace ns[0]/ns[1];
//   - a one-level namespace's tables: the tenant's admins only.
func (a TableAccess) CanRead(ctx context.Context, role string, ns []string, name string) error {
	if !a.s.authzOn() || a.s.isSuperUser(role) {
		return nil
	}
	if err := tableNamespace(ns); err != nil {
		return fmt.Errorf("%w: role %q: %w", ErrAuthorization, role, err)
	}
	if ok, err := a.s.isTenantAdmin(ctx, role, ns[0]); err != nil || ok {
		return err
	}
	switch {
	case len(ns) == 1:
		return fmt.Errorf("%w: role %q is not an admin of tenant %q", ErrAuthorization, role, ns[0])
	case len(ns) == 2 && name != "":
		tn, err := broker.ParseTopicName("persistent://" + ns[0] + "/" + ns[1] + "/" + name)
		if err != nil {
			return fmt.Errorf("%w: role %q: %w", ErrAuthorization, role, err)
		}
		return a.s.checkTopic(ctx, role, tn, actionLookup)
	}
	return a.s.checkNamespaceLookup(ctx, role, ns[0]+"/"+ns[1])
}

// CanWrite allows role to change namespace ns and its tables (create,
// commit, drop, rename, namespace properties): superusers and the admins
// of tenant ns[0]. An empty ns (the catalog's root) is superusers only.
func (a TableAccess) CanWrite(ctx context.Context, role string, ns []string) error {
	if !a.s.authzOn() || a.s.isSuperUser(role) {
		return nil
	}
	if len(ns) == 0 {
		return fmt.Errorf("%w: role %q is not a superuser", ErrAuthorization, role)
	}
	if err := tableNamespace(ns); err != nil {
		return fmt.Errorf("%w: role %q: %w", ErrAuthorization, role, err)
	}
	return a.s.checkSuperOrTenantAdmin(ctx, role, ns[0])
}

// tableNamespace checks that the levels a decision reads name a tenant
// and a namespace: not empty, no '/'.
func tableNamespace(ns []string) error {
	if len(ns) == 0 {
		return fmt.Errorf("no namespace")
	}
	for _, l := range ns[:min(len(ns), 2)] {
		if l == "" || strings.Contains(l, "/") {
			return fmt.Errorf("namespace level %q is not a tenant or namespace name", l)
		}
	}
	return nil
}

package broker

// Tenants. lakestream has no tenant object: a Pulsar namespace "t/ns" is the
// lakestream namespace "t/ns". A tenant exists when it has an explicit record
// (the admin REST's PUT /admin/v2/tenants/{t}) or when at least one namespace
// "t/…" exists (so "public" exists as soon as "public/default" does).
// Explicit records are properties of the reserved namespace TenantsNamespace:
// key = tenant name, value = the TenantInfo JSON. That namespace and its
// tenant are hidden from every listing.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lakegate/lakegate/lakestream"
)

const (
	// TenantsNamespace holds the explicit tenant records.
	TenantsNamespace = ReservedTenant + "/tenants"
	// ClusterName is the one Pulsar cluster a lakegate cluster shows.
	ClusterName = "standalone"
)

// TenantInfo is Pulsar's TenantInfo.
type TenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`
}

// DefaultTenantInfo is the TenantInfo of a tenant without a record.
func DefaultTenantInfo() TenantInfo {
	return TenantInfo{AdminRoles: []string{}, AllowedClusters: []string{ClusterName}}
}

// TenantRecords returns the explicit tenant records (tenant → TenantInfo JSON).
func (b *Broker) TenantRecords(ctx context.Context) (map[string]string, error) {
	ns, err := b.cfg.Catalog.LoadNamespace(ctx, TenantsNamespace)
	if errors.Is(err, lakestream.ErrNoSuchNamespace) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	return ns.Properties, nil
}

// NamespacesOf lists the namespaces of tenant ("t/ns"), sorted; every
// namespace when tenant is "" (the reserved tenant's never).
func (b *Broker) NamespacesOf(ctx context.Context, tenant string) ([]string, error) {
	all, err := b.cfg.Catalog.ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range all {
		t, _, ok := strings.Cut(ns, "/")
		if !ok || t == ReservedTenant || (tenant != "" && t != tenant) {
			continue
		}
		out = append(out, ns)
	}
	slices.Sort(out)
	return out, nil
}

// Tenants returns every tenant: explicit records and namespace prefixes.
func (b *Broker) Tenants(ctx context.Context) (map[string]TenantInfo, error) {
	recs, err := b.TenantRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]TenantInfo{}
	for name, raw := range recs {
		info := DefaultTenantInfo()
		json.Unmarshal([]byte(raw), &info) // a record we wrote; defaults on damage
		out[name] = info
	}
	nss, err := b.NamespacesOf(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, ns := range nss {
		t, _, _ := strings.Cut(ns, "/")
		if _, ok := out[t]; !ok {
			out[t] = DefaultTenantInfo()
		}
	}
	return out, nil
}

// Tenant returns one tenant (ErrNotFound when it does not exist).
func (b *Broker) Tenant(ctx context.Context, name string) (TenantInfo, error) {
	all, err := b.Tenants(ctx)
	if err != nil {
		return TenantInfo{}, err
	}
	info, ok := all[name]
	if !ok || name == ReservedTenant {
		return TenantInfo{}, fmt.Errorf("%w: tenant %q does not exist", ErrNotFound, name)
	}
	return info, nil
}

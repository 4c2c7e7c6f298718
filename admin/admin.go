package admin

// Clusters, tenants and namespaces, and the request helpers.
//
// Tenants are the broker's (broker/tenants.go). Tenant create is
// check-then-set, not one transaction: two concurrent PUTs of the same
// tenant may both succeed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// adminTenantsNamespace holds the explicit tenant records (see the file
// comment); adminHiddenTenant is its tenant, hidden from listings.
const (
	adminHiddenTenant     = broker.ReservedTenant
	adminTenantsNamespace = broker.TenantsNamespace
	adminClusterName      = broker.ClusterName
	// adminRequestTimeout bounds one admin request's storage calls.
	adminRequestTimeout = 30 * time.Second
)

// admin serves the REST API of one node.
type admin struct {
	cfg  Config
	node Node
	brk  *broker.Broker
	cat  lakestream.StreamCatalog
	mux  *http.ServeMux // fanned-out partition requests re-enter here
}

// readBody reads the (bounded) body; empty bodies return nil. It puts the
// body back (r.Body reads it again from the start), so a handler that reads
// it and then fans the request out to partitions (fanOut) or forwards it to
// the owner sends the body whole, not an empty one.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return nil, fmt.Errorf("%w: over the limit of %d bytes (http.maxRequestSize)", errAdminTooLarge, mbe.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", errAdminBadRequest, err)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	if len(strings.TrimSpace(string(b))) == 0 || strings.TrimSpace(string(b)) == "null" {
		return nil, nil
	}
	return b, nil
}

func queryBool(r *http.Request, name string) bool {
	v := r.URL.Query().Get(name)
	return v == "true" || v == "1"
}

// --- clusters ---

func (a *admin) listClusters(r *http.Request) (any, error) {
	return []string{adminClusterName}, nil
}

func (a *admin) getCluster(r *http.Request) (any, error) {
	if r.PathValue("cluster") != adminClusterName {
		return nil, fmt.Errorf("%w: cluster %q does not exist", errAdminNotFound, r.PathValue("cluster"))
	}
	return map[string]string{
		"serviceUrl":       "http://" + r.Host,
		"brokerServiceUrl": a.node.ServiceURL(),
	}, nil
}

// --- tenants ---

// tenantInfo is Pulsar's TenantInfo.
type tenantInfo = broker.TenantInfo

func defaultTenantInfo() tenantInfo { return broker.DefaultTenantInfo() }

func (a *admin) tenantRecords(ctx context.Context) (map[string]string, error) {
	return a.brk.TenantRecords(ctx)
}

func (a *admin) namespacesOf(ctx context.Context, tenant string) ([]string, error) {
	return a.brk.NamespacesOf(ctx, tenant)
}

func (a *admin) tenants(ctx context.Context) (map[string]tenantInfo, error) {
	return a.brk.Tenants(ctx)
}

func (a *admin) tenant(ctx context.Context, name string) (tenantInfo, error) {
	return a.brk.Tenant(ctx, name)
}

func validName(kind, s string) error {
	if s == "" || strings.ContainsAny(s, "/\x00") || s == "." || s == ".." {
		return fmt.Errorf("%w: invalid %s name %q", errAdminPrecondition, kind, s)
	}
	return nil
}

func (a *admin) listTenants(r *http.Request) (any, error) {
	all, err := a.tenants(r.Context())
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(all))
	for t := range all {
		names = append(names, t)
	}
	slices.Sort(names)
	return names, nil
}

func (a *admin) getTenant(r *http.Request) (any, error) {
	info, err := a.tenant(r.Context(), r.PathValue("tenant"))
	if err != nil {
		return nil, err
	}
	return info, nil
}

// parseTenantInfo reads a TenantInfo body (empty: defaults).
func parseTenantInfo(r *http.Request) (tenantInfo, error) {
	info := defaultTenantInfo()
	b, err := readBody(r)
	if err != nil || b == nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("%w: tenant info: %v", errAdminBadRequest, err)
	}
	if info.AdminRoles == nil {
		info.AdminRoles = []string{}
	}
	if len(info.AllowedClusters) == 0 {
		info.AllowedClusters = []string{adminClusterName}
	}
	for _, c := range info.AllowedClusters {
		if c != adminClusterName {
			return info, fmt.Errorf("%w: cluster %q does not exist (the only cluster is %q)", errAdminPrecondition, c, adminClusterName)
		}
	}
	return info, nil
}

func (a *admin) storeTenant(ctx context.Context, name string, info tenantInfo) error {
	raw, _ := json.Marshal(info)
	if _, err := a.cat.CreateNamespace(ctx, adminTenantsNamespace, nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		return err
	}
	return a.cat.SetNamespaceProperties(ctx, adminTenantsNamespace, map[string]string{name: string(raw)})
}

func (a *admin) putTenant(r *http.Request) (any, error) {
	ctx, name := r.Context(), r.PathValue("tenant")
	err := validName("tenant", name)
	if err == nil && name == adminHiddenTenant {
		err = fmt.Errorf("%w: tenant name %q is reserved", errAdminPrecondition, name)
	}
	if err != nil {
		return nil, err
	}
	info, err := parseTenantInfo(r)
	if err != nil {
		return nil, err
	}
	if _, err := a.tenant(ctx, name); err == nil {
		return nil, fmt.Errorf("%w: tenant %q already exists", errAdminConflict, name)
	} else if !errors.Is(err, errAdminNotFound) {
		return nil, err
	}
	if err := a.storeTenant(ctx, name, info); err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) updateTenant(r *http.Request) (any, error) {
	ctx, name := r.Context(), r.PathValue("tenant")
	if _, err := a.tenant(ctx, name); err != nil {
		return nil, err
	}
	info, err := parseTenantInfo(r)
	if err == nil {
		err = a.storeTenant(ctx, name, info)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) deleteTenant(r *http.Request) (any, error) {
	ctx, name := r.Context(), r.PathValue("tenant")
	if _, err := a.tenant(ctx, name); err != nil {
		return nil, err
	}
	nss, err := a.namespacesOf(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(nss) > 0 {
		return nil, fmt.Errorf("%w: the tenant still has namespaces %v", errAdminConflict, nss)
	}
	recs, err := a.tenantRecords(ctx)
	if err == nil && recs[name] != "" {
		err = a.cat.RemoveNamespaceProperties(ctx, adminTenantsNamespace, []string{name})
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// --- namespaces ---

// checkNamespace returns a 404 error unless tenant/ns exists.
func (a *admin) checkNamespace(ctx context.Context, tenant, ns string) error {
	if tenant == adminHiddenTenant {
		return fmt.Errorf("%w: namespace %s/%s does not exist", errAdminNotFound, tenant, ns)
	}
	ok, err := a.cat.NamespaceExists(ctx, tenant+"/"+ns)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: namespace %s/%s does not exist", errAdminNotFound, tenant, ns)
	}
	return nil
}

func (a *admin) listNamespaces(r *http.Request) (any, error) {
	ctx, tenant := r.Context(), r.PathValue("tenant")
	if _, err := a.tenant(ctx, tenant); err != nil {
		return nil, err
	}
	nss, err := a.namespacesOf(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if nss == nil {
		nss = []string{}
	}
	return nss, nil
}

func (a *admin) getNamespace(r *http.Request) (any, error) {
	ctx, tenant, ns := r.Context(), r.PathValue("tenant"), r.PathValue("ns")
	if err := a.checkNamespace(ctx, tenant, ns); err != nil {
		return nil, err
	}
	rec, err := a.cat.LoadNamespace(ctx, tenant+"/"+ns)
	if err != nil {
		return nil, err
	}
	props := rec.Properties
	if props == nil {
		props = map[string]string{}
	}
	// Pulsar's Policies object: the policies lakegate keeps (as namespace
	// properties, docs/policies.md) and its fixed bundles and cluster.
	pol := map[string]any{
		"replication_clusters": []string{adminClusterName},
		"bundles":              map[string]any{"boundaries": []string{"0x00000000", "0xffffffff"}, "numBundles": 1},
		"properties":           userProperties(props),
		"backlog_quota_map":    map[string]broker.BacklogQuota{},
	}
	if v, ok := props[broker.RetentionProperty]; ok {
		if r, err := broker.ParseRetention(v); err == nil {
			pol["retention_policies"] = r
		}
	}
	if v, ok := props[broker.MessageTTLProperty]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			pol["message_ttl_in_seconds"] = n
		}
	}
	if v, ok := props[broker.BacklogQuotaProperty]; ok {
		if q, err := broker.ParseQuotas(v); err == nil {
			pol["backlog_quota_map"] = q
		}
	}
	if v, ok := props[broker.SchemaStrategyProperty]; ok {
		pol["schema_compatibility_strategy"] = v
	}
	if v, ok := props[broker.CompactionThresholdProperty]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			pol["compaction_threshold"] = n
		}
	}
	if v, ok := props[broker.DedupProperty]; ok {
		pol["deduplicationEnabled"] = v == "true"
	}
	for key, field := range map[string]string{broker.MaxProducersProperty: "max_producers_per_topic", broker.MaxConsumersProperty: "max_consumers_per_topic",
		broker.MaxConsumersPerSubProperty: "max_consumers_per_subscription", broker.MaxSubscriptionsProperty: "max_subscriptions_per_topic",
		broker.MaxUnackedPerConsumerProperty: "max_unacked_messages_per_consumer", broker.MaxUnackedPerSubProperty: "max_unacked_messages_per_subscription"} {
		if n, err := strconv.ParseInt(props[key], 10, 64); err == nil {
			pol[field] = n // limits.go
		}
	}
	policyFields(props, pol) // policycode.go
	return pol, nil
}

func (a *admin) putNamespace(r *http.Request) (any, error) {
	ctx, tenant, ns := r.Context(), r.PathValue("tenant"), r.PathValue("ns")
	if err := errors.Join(validName("tenant", tenant), validName("namespace", ns)); err != nil {
		return nil, err
	}
	if _, err := a.tenant(ctx, tenant); err != nil {
		return nil, err
	}
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	props, err := createPolicies(b)
	if err != nil {
		return nil, err
	}
	_, err = a.cat.CreateNamespace(ctx, tenant+"/"+ns, props)
	if errors.Is(err, lakestream.ErrAlreadyExists) {
		err = fmt.Errorf("%w: namespace %s/%s already exists", errAdminConflict, tenant, ns)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) deleteNamespace(r *http.Request) (any, error) {
	ctx, tenant, ns := r.Context(), r.PathValue("tenant"), r.PathValue("ns")
	if err := a.checkNamespace(ctx, tenant, ns); err != nil {
		return nil, err
	}
	name := tenant + "/" + ns
	if queryBool(r, "force") {
		ids, err := a.cat.ListStreams(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if err := a.dropStream(ctx, id, true); err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
				return nil, err
			}
		}
	}
	err := a.cat.DropNamespace(ctx, name)
	if errors.Is(err, lakestream.ErrNamespaceNotEmpty) {
		err = fmt.Errorf("%w: cannot delete non empty namespace %s (delete its topics, or use ?force=true)", errAdminConflict, name)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// userProperties are a namespace's properties without lakegate's own
// (policies and grants are answered as the fields Pulsar names them).
func userProperties(props map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range props {
		if !strings.HasPrefix(k, "lakegate.") {
			out[k] = v
		}
	}
	return out
}

func (a *admin) listNamespaceTopics(r *http.Request) (any, error) {
	return a.listTopics(r)
}

// createPolicies maps the Policies body of a namespace creation (what the
// Java admin client's createNamespace(ns, policies) sends) onto the
// namespace's properties: its retention and message TTL, as the
// retention and messageTTL paths would set them. The Java client sends
// every other field at its default; those are not policies lakegate
// stores at creation (set them through their own paths).
func createPolicies(body []byte) (map[string]string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	var p struct {
		Retention *broker.RetentionPolicy `json:"retention_policies"`
		TTL       *int64                  `json:"message_ttl_in_seconds"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("%w: namespace policies: %v", errAdminBadRequest, err)
	}
	props := map[string]string{}
	if r := p.Retention; r != nil {
		if r.TimeMinutes < -1 || r.SizeMB < -1 {
			return nil, fmt.Errorf("%w: retention limits are ≥ 0, or -1 for no limit (got %d min, %d MB)", errAdminPrecondition, r.TimeMinutes, r.SizeMB)
		}
		v, _ := json.Marshal(r)
		props[broker.RetentionProperty] = string(v)
	}
	if p.TTL != nil {
		if *p.TTL < 0 || *p.TTL > math.MaxInt32 {
			return nil, fmt.Errorf("%w: message TTL %d: want a number of seconds ≥ 0", errAdminPrecondition, *p.TTL)
		}
		props[broker.MessageTTLProperty] = strconv.FormatInt(*p.TTL, 10)
	}
	return props, nil
}

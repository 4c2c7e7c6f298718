package gateway

// Pulsar admin REST v2 (the subset pulsar-admin and the Go pulsaradmin
// package call), served by the same Server that speaks the binary protocol so
// that stats, subscription changes and cursor resets see the live producers
// and subscription actors.
//
// Files:
//
//	admin.go               routing, JSON/error helpers, THE error→status mapping,
//	                       clusters, tenants, namespaces
//	admin_topics.go        topic create/grow/list/delete, lastMessageId,
//	                       terminate, unload, raw entry
//	admin_subscriptions.go subscriptions list/create/delete/reset cursor
//	admin_stats.go         stats and partitioned-stats
//
// Tenants. lakestream has no tenant object: a Pulsar namespace "t/ns" is the
// lakestream namespace "t/ns". A tenant exists when it has an explicit record
// (PUT /admin/v2/tenants/{t}) or when at least one namespace "t/…" exists (so
// "public" exists as soon as "public/default" does). Explicit records are
// properties of the reserved namespace adminTenantsNamespace ("__lakegate/tenants"):
// key = tenant name, value = the TenantInfo JSON. That namespace and its
// tenant are hidden from every listing. Tenant create is check-then-set, not
// one transaction: two concurrent PUTs of the same tenant may both succeed.
//
// Deleted topics. lakestream tombstones a dropped stream's name: a topic name
// that was deleted cannot be created again (409 with a reason).
//
// Non-persistent topics (admin_nonpersistent.go): listed (the ones served
// by every member), stats and unload through their owner; other calls
// answer 501.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// Errors raised by the admin REST layer. Each maps to the HTTP status named in
// its comment (see adminStatus).
var (
	// errAdminNotFound: an unknown tenant, namespace, topic or subscription (404).
	errAdminNotFound = errors.New("gateway: admin: not found")
	// errAdminConflict: the object exists already, or its state forbids the
	// change (409).
	errAdminConflict = errors.New("gateway: admin: conflict")
	// errAdminPrecondition: a request the current state does not allow (412).
	errAdminPrecondition = errors.New("gateway: admin: precondition failed")
	// errAdminBadRequest: a malformed body or parameter (400).
	errAdminBadRequest = errors.New("gateway: admin: bad request")
	// errAdminNotImplemented: an operation lakegate does not support (501).
	errAdminNotImplemented = errors.New("gateway: admin: not implemented")
	// errAdminMethodNotAllowed: an operation not allowed on this kind of
	// topic, e.g. terminating a partitioned topic (405).
	errAdminMethodNotAllowed = errors.New("gateway: admin: not allowed on this topic")
	// errAdminUnprocessable: a value out of range, e.g. shrinking partitions (422).
	errAdminUnprocessable = errors.New("gateway: admin: unprocessable")
	// errAdminTooLarge: a request body over Config.AdminMaxRequestBytes (413).
	errAdminTooLarge = errors.New("gateway: request body too large")
)

// adminStatus is THE mapping from Go errors (admin, gateway, actors,
// lakestream) to HTTP status codes. Every error answered by the admin REST
// goes through it.
func adminStatus(err error) int {
	switch {
	case errors.As(err, new(*statusError)):
		var se *statusError
		errors.As(err, &se)
		return se.status
	case errors.Is(err, ErrAuthentication):
		return http.StatusUnauthorized
	case errors.Is(err, ErrAuthorization):
		return http.StatusForbidden
	case errors.Is(err, errAdminNotFound):
		return http.StatusNotFound
	case errors.Is(err, errAdminConflict):
		return http.StatusConflict
	case errors.Is(err, errAdminPrecondition):
		return http.StatusPreconditionFailed
	case errors.Is(err, errAdminBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, errAdminNotImplemented):
		return http.StatusNotImplemented
	case errors.Is(err, errAdminMethodNotAllowed):
		return http.StatusMethodNotAllowed
	case errors.Is(err, errAdminUnprocessable):
		return http.StatusUnprocessableEntity

	case errors.Is(err, broker.ErrInvalidTopicName):
		return http.StatusPreconditionFailed
	case errors.Is(err, errAdminTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, broker.ErrTooManySubscriptions):
		return http.StatusPreconditionFailed
	case errors.Is(err, broker.ErrNotAllowed):
		return http.StatusPreconditionFailed
	case errors.Is(err, broker.ErrServiceNotReady),
		errors.Is(err, actors.ErrPartitionClosed),
		errors.Is(err, lakestream.ErrGuardLost):
		return http.StatusServiceUnavailable
	case errors.Is(err, actors.ErrConsumerBusy):
		return http.StatusPreconditionFailed
	case errors.Is(err, actors.ErrSubscriptionClosed):
		return http.StatusServiceUnavailable

	case errors.Is(err, lakestream.ErrNoSuchStream),
		errors.Is(err, lakestream.ErrNoSuchNamespace),
		errors.Is(err, lakestream.ErrNoSuchLog),
		errors.Is(err, lakestream.ErrNoSuchCursor),
		errors.Is(err, lakestream.ErrNotMaterialized),
		errors.Is(err, broker.ErrNoSchema):
		return http.StatusNotFound
	case errors.Is(err, lakestream.ErrAlreadyExists),
		errors.Is(err, lakestream.ErrNamespaceNotEmpty),
		errors.Is(err, lakestream.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, lakestream.ErrInvalidArgument):
		return http.StatusPreconditionFailed
	case errors.Is(err, lakestream.ErrOffsetOutOfRange),
		errors.Is(err, lakestream.ErrOffsetTrimmed):
		return http.StatusNotFound
	case errors.Is(err, lakestream.ErrUnavailable),
		errors.Is(err, lakestream.ErrIndeterminate),
		errors.Is(err, lakestream.ErrChainBroken),
		errors.Is(err, lakestream.ErrClosed),
		errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// adminTenantsNamespace holds the explicit tenant records (see the file
// comment); adminHiddenTenant is its tenant, hidden from listings.
const (
	adminHiddenTenant     = broker.ReservedTenant
	adminTenantsNamespace = adminHiddenTenant + "/tenants"
	adminClusterName      = "standalone"
	// adminRequestTimeout bounds one admin request's storage calls.
	adminRequestTimeout = 30 * time.Second
)

// admin serves the REST API of one Server.
type admin struct {
	srv *Server
	cat lakestream.StreamCatalog
	mux *http.ServeMux // fanned-out partition requests re-enter here
}

// AdminHandler returns the Pulsar admin REST v2 handler (paths under
// /admin/v2/ and /lookup/v2/). Mount it on the node's HTTP server.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	a := &admin{srv: s, cat: s.cfg.Catalog, mux: mux}
	// Every route names who may call it (admin_auth.go).
	handle := func(pattern string, rule authRule, h http.HandlerFunc) {
		mux.HandleFunc(pattern, a.guarded(rule, h))
	}

	handle("GET /admin/v2/clusters", ruleAny, a.listClusters)
	handle("GET /admin/v2/clusters/{cluster}", ruleAny, a.getCluster)
	handle("GET /admin/v2/brokers/{cluster}", ruleAny, a.listBrokers) // admin_cluster.go
	handle("GET /admin/v2/brokers/configuration/runtime", ruleAny, a.runtimeConfiguration)
	handle("GET /admin/v2/brokers/configuration", ruleAny, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, []string{}) })
	handle("GET /lookup/v2/topic/persistent/{tenant}/{ns}/{topic}", ruleLookup, a.lookupTopic)
	handle("PUT /admin/v2/namespaces/{tenant}/{ns}/unload", ruleTenant, a.unloadNamespace)
	// Grants (admin_auth.go).
	const nsp = "/admin/v2/namespaces/{tenant}/{ns}/permissions"
	handle("GET "+nsp, ruleTenant, a.getNamespacePermissions)
	handle("POST "+nsp+"/{role}", ruleTenant, a.grantNamespacePermission)
	handle("DELETE "+nsp+"/{role}", ruleTenant, a.revokeNamespacePermission)
	handle("GET "+nsp+"/subscription", ruleTenant, a.getSubscriptionPermissions)
	handle("POST "+nsp+"/subscription/{sub}", ruleTenant, a.grantSubscriptionPermission)
	handle("DELETE "+nsp+"/{sub}/{role}", ruleTenant, a.revokeSubscriptionPermission)
	const tp = "/admin/v2/persistent/{tenant}/{ns}/{topic}/permissions"
	handle("GET "+tp, ruleTenant, a.getTopicPermissions)
	handle("POST "+tp+"/{role}", ruleTenant, a.grantTopicPermission)
	handle("DELETE "+tp+"/{role}", ruleTenant, a.revokeTopicPermission)

	handle("GET /admin/v2/tenants", ruleSuper, a.listTenants)
	handle("GET /admin/v2/tenants/{tenant}", ruleTenant, a.getTenant)
	handle("PUT /admin/v2/tenants/{tenant}", ruleSuper, a.putTenant)
	handle("POST /admin/v2/tenants/{tenant}", ruleSuper, a.updateTenant)
	handle("DELETE /admin/v2/tenants/{tenant}", ruleSuper, a.deleteTenant)

	handle("GET /admin/v2/namespaces/{tenant}", ruleTenant, a.listNamespaces)
	handle("GET /admin/v2/namespaces/{tenant}/{ns}", ruleTenant, a.getNamespace)
	handle("PUT /admin/v2/namespaces/{tenant}/{ns}", ruleTenant, a.putNamespace)
	handle("DELETE /admin/v2/namespaces/{tenant}/{ns}", ruleTenant, a.deleteNamespace)
	handle("GET /admin/v2/namespaces/{tenant}/{ns}/topics", ruleNamespaceLookup, a.listNamespaceTopics)

	const p = "/admin/v2/persistent/{tenant}/{ns}"
	handle("GET "+p, ruleNamespaceLookup, a.listTopics)
	handle("GET "+p+"/partitioned", ruleNamespaceLookup, a.listPartitionedTopics)
	handle("PUT "+p+"/{topic}", ruleTenant, a.createTopic)
	handle("DELETE "+p+"/{topic}", ruleTenant, a.deleteTopic)
	handle("PUT "+p+"/{topic}/partitions", ruleTenant, a.createPartitionedTopic)
	handle("POST "+p+"/{topic}/partitions", ruleTenant, a.growPartitionedTopic)
	handle("GET "+p+"/{topic}/partitions", ruleLookup, a.getPartitions)
	handle("DELETE "+p+"/{topic}/partitions", ruleTenant, a.deletePartitionedTopic)
	handle("GET "+p+"/{topic}/stats", ruleLookup, a.owned(a.topicStats))
	handle("GET "+p+"/{topic}/partitioned-stats", ruleLookup, a.partitionedStats)
	handle("GET "+p+"/{topic}/subscriptions", ruleLookup, a.owned(a.listSubscriptions))
	handle("PUT "+p+"/{topic}/subscription/{sub}", ruleSubscription, a.owned(a.createSubscription))
	handle("DELETE "+p+"/{topic}/subscription/{sub}", ruleSubscription, a.owned(a.deleteSubscription))
	handle("POST "+p+"/{topic}/subscription/{sub}/resetcursor/{timestamp}", ruleSubscription, a.owned(a.resetCursorByTime))
	handle("POST "+p+"/{topic}/subscription/{sub}/resetcursor", ruleSubscription, a.owned(a.resetCursorByID))
	handle("GET "+p+"/{topic}/subscription/{sub}/position/{pos}", ruleConsume, a.owned(a.peekMessage))
	handle("GET "+p+"/{topic}/lastMessageId", ruleLookup, a.owned(a.lastMessageID))
	handle("POST "+p+"/{topic}/terminate", ruleTenant, a.owned(a.terminate))
	handle("PUT "+p+"/{topic}/unload", ruleTenant, a.unload)
	handle("GET "+p+"/{topic}/ledger/{ledger}/entry/{entry}", ruleConsume, a.getEntry)
	handle("GET "+p+"/{topic}/deduplicationEnabled", ruleLookup, a.getDeduplication)
	handle("POST "+p+"/{topic}/deduplicationEnabled", ruleTenant, a.setDeduplication)
	handle("DELETE "+p+"/{topic}/deduplicationEnabled", ruleTenant, a.removeDeduplication)
	handle("GET /admin/v2/namespaces/{tenant}/{ns}/deduplication", ruleTenant, a.getNamespaceDeduplication)
	handle("POST /admin/v2/namespaces/{tenant}/{ns}/deduplication", ruleTenant, a.setNamespaceDeduplication)
	handle("DELETE /admin/v2/namespaces/{tenant}/{ns}/deduplication", ruleTenant, a.removeNamespaceDeduplication)
	// Retention, message TTL, backlog quotas (admin_policies.go).
	handle("GET "+p+"/{topic}/retention", ruleLookup, a.getTopicRetention)
	handle("POST "+p+"/{topic}/retention", ruleTenant, a.setTopicRetention)
	handle("DELETE "+p+"/{topic}/retention", ruleTenant, a.removeTopicRetention)
	handle("GET "+p+"/{topic}/messageTTL", ruleLookup, a.getTopicTTL)
	handle("POST "+p+"/{topic}/messageTTL", ruleTenant, a.setTopicTTL)
	handle("DELETE "+p+"/{topic}/messageTTL", ruleTenant, a.removeTopicTTL)
	handle("GET "+p+"/{topic}/backlogQuotaMap", ruleLookup, a.getTopicQuotas)
	handle("POST "+p+"/{topic}/backlogQuota", ruleTenant, a.setTopicQuota)
	handle("DELETE "+p+"/{topic}/backlogQuota", ruleTenant, a.removeTopicQuota)
	const nsPol = "/admin/v2/namespaces/{tenant}/{ns}"
	handle("GET "+nsPol+"/retention", ruleTenant, a.getNamespaceProperty(broker.RetentionProperty))
	handle("POST "+nsPol+"/retention", ruleTenant, a.setNamespacePolicy(broker.RetentionProperty, retentionOfBody))
	handle("DELETE "+nsPol+"/retention", ruleTenant, a.setNamespacePolicy(broker.RetentionProperty, nil))
	handle("GET "+nsPol+"/messageTTL", ruleTenant, a.getNamespaceProperty(broker.MessageTTLProperty))
	handle("POST "+nsPol+"/messageTTL", ruleTenant, a.setNamespacePolicy(broker.MessageTTLProperty, ttlOf))
	handle("DELETE "+nsPol+"/messageTTL", ruleTenant, a.setNamespacePolicy(broker.MessageTTLProperty, nil))
	handle("GET "+nsPol+"/backlogQuotaMap", ruleTenant, a.getNamespaceQuotas)
	handle("POST "+nsPol+"/backlogQuota", ruleTenant, func(w http.ResponseWriter, r *http.Request) { a.changeNamespaceQuota(w, r, false) })
	handle("DELETE "+nsPol+"/backlogQuota", ruleTenant, func(w http.ResponseWriter, r *http.Request) { a.changeNamespaceQuota(w, r, true) })
	a.routeLimitPolicies(handle) // admin_limits.go
	// Topic compaction (admin_compaction.go).
	handle("PUT "+p+"/{topic}/compaction", ruleTenant, a.owned(a.triggerCompaction))
	handle("GET "+p+"/{topic}/compaction", ruleLookup, a.owned(a.compactionStatus))
	handle("GET "+p+"/{topic}/compactionThreshold", ruleLookup, a.getTopicCompactionThreshold)
	handle("POST "+p+"/{topic}/compactionThreshold", ruleTenant, a.setTopicCompactionThreshold)
	handle("DELETE "+p+"/{topic}/compactionThreshold", ruleTenant, a.removeTopicCompactionThreshold)
	handle("GET "+nsPol+"/compactionThreshold", ruleTenant, a.getNamespaceProperty(broker.CompactionThresholdProperty))
	handle("PUT "+nsPol+"/compactionThreshold", ruleTenant, a.setNamespacePolicy(broker.CompactionThresholdProperty, thresholdOf))
	handle("DELETE "+nsPol+"/compactionThreshold", ruleTenant, a.setNamespacePolicy(broker.CompactionThresholdProperty, nil))
	handle("GET "+p+"/{topic}/table", ruleLookup, a.tableInfo) // lakegate extensions: tables (admin_tables.go)
	handle("GET "+p+"/{topic}/tablePolicy", ruleLookup, a.getTopicTablePolicy)
	handle("POST "+p+"/{topic}/tablePolicy", ruleTenant, a.setTopicTablePolicy)
	handle("DELETE "+p+"/{topic}/tablePolicy", ruleTenant, a.removeTopicTablePolicy)
	handle("GET /admin/v2/namespaces/{tenant}/{ns}/tablePolicy", ruleTenant, a.getNamespaceTablePolicy)
	handle("POST /admin/v2/namespaces/{tenant}/{ns}/tablePolicy", ruleTenant, a.setNamespaceTablePolicy)
	handle("DELETE /admin/v2/namespaces/{tenant}/{ns}/tablePolicy", ruleTenant, a.removeNamespaceTablePolicy)
	// Schemas (admin_schemas.go).
	const sp = "/admin/v2/schemas/{tenant}/{ns}/{topic}"
	handle("GET "+sp+"/schema", ruleLookup, a.schemaOf)
	handle("GET "+sp+"/schema/{version}", ruleLookup, a.schemaOf)
	handle("GET "+sp+"/schemas", ruleLookup, a.allSchemas)
	handle("POST "+sp+"/schema", ruleTenant, a.postSchema)
	handle("DELETE "+sp+"/schema", ruleTenant, a.deleteSchema)
	handle("POST "+sp+"/compatibility", ruleLookup, a.testSchemaCompatibility)
	handle("POST "+sp+"/version", ruleLookup, a.schemaVersionOfPayload)
	handle("GET "+p+"/{topic}/schemaCompatibilityStrategy", ruleLookup, a.getTopicSchemaStrategy)
	handle("PUT "+p+"/{topic}/schemaCompatibilityStrategy", ruleTenant, a.setTopicSchemaStrategy)
	handle("DELETE "+p+"/{topic}/schemaCompatibilityStrategy", ruleTenant, a.removeTopicSchemaStrategy)
	handle("GET /admin/v2/namespaces/{tenant}/{ns}/schemaCompatibilityStrategy", ruleTenant, a.getNamespaceSchemaStrategy)
	handle("PUT /admin/v2/namespaces/{tenant}/{ns}/schemaCompatibilityStrategy", ruleTenant, a.setNamespaceSchemaStrategy)

	// Non-persistent topics (admin_nonpersistent.go).
	const np = "/admin/v2/non-persistent/{tenant}/{ns}"
	handle("GET "+np, ruleNamespaceLookup, a.listNPTopics)
	handle("GET "+np+"/partitioned", ruleNamespaceLookup, a.listNPPartitioned)
	handle("GET "+np+"/{topic}/partitions", ruleLookup, a.npPartitions)
	handle("GET "+np+"/{topic}/stats", ruleLookup, a.npOwned(a.npStats))
	handle("PUT "+np+"/{topic}/unload", ruleTenant, a.npOwned(a.npUnload))
	handle("/admin/v2/non-persistent/", ruleAny, func(w http.ResponseWriter, r *http.Request) {
		writeAdminError(w, fmt.Errorf("%w: %s %s: lakegate serves only list, stats, partitions and unload of non-persistent topics", errAdminNotImplemented, r.Method, r.URL.Path))
	})
	handle("/admin/", ruleAny, func(w http.ResponseWriter, r *http.Request) {
		writeAdminError(w, fmt.Errorf("%w: %s %s is not an admin endpoint lakegate serves", errAdminNotFound, r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), adminRequestTimeout)
		defer cancel()
		// Pulsar's httpMaxRequestSize: a body announced larger is refused
		// before it is read; one that turns out larger fails its read
		// (readBody: 413 too).
		if limit := s.cfg.AdminMaxRequestBytes; r.ContentLength > limit {
			s.lim.metrics.refusals.WithLabelValues("http_max_request_size").Inc()
			w.Header().Set("Connection", "close")
			writeAdminError(w, fmt.Errorf("%w: %d bytes, over the limit of %d (http.maxRequestSize)", errAdminTooLarge, r.ContentLength, limit))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.AdminMaxRequestBytes)
		mux.ServeHTTP(w, r.WithContext(ctx))
	})
}

// adminError is the body Pulsar tools read the reason from.
type adminError struct {
	Reason string `json:"reason"`
}

// writeJSON answers v as JSON, without a trailing newline (as Pulsar's
// Jackson: pulsaradmin reads some bodies as raw strings).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"reason":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeAdminError(w http.ResponseWriter, err error) {
	writeJSON(w, adminStatus(err), adminError{Reason: adminReason(err)})
}

// adminReason strips the package prefixes of the sentinel errors: what stays
// is the part a human wrote for this request.
func adminReason(err error) string {
	msg := err.Error()
	for _, e := range []error{errAdminNotFound, errAdminConflict, errAdminPrecondition, errAdminBadRequest,
		errAdminNotImplemented, errAdminMethodNotAllowed, errAdminUnprocessable} {
		msg = strings.ReplaceAll(msg, e.Error()+": ", "")
	}
	for _, p := range []string{"gateway: ", "lakestream: ", "auth: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

func noContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

// readBody reads the (bounded) body; empty bodies return nil.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return nil, fmt.Errorf("%w: over the limit of %d bytes (http.maxRequestSize)", errAdminTooLarge, mbe.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", errAdminBadRequest, err)
	}
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

func (a *admin) listClusters(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, []string{adminClusterName})
}

func (a *admin) getCluster(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("cluster") != adminClusterName {
		writeAdminError(w, fmt.Errorf("%w: cluster %q does not exist", errAdminNotFound, r.PathValue("cluster")))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"serviceUrl":       "http://" + r.Host,
		"brokerServiceUrl": a.srv.ServiceURL(),
	})
}

// --- tenants ---

// tenantInfo is Pulsar's TenantInfo.
type tenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`
}

func defaultTenantInfo() tenantInfo {
	return tenantInfo{AdminRoles: []string{}, AllowedClusters: []string{adminClusterName}}
}

// tenantRecords returns the explicit tenant records (tenant → TenantInfo JSON).
func (a *admin) tenantRecords(ctx context.Context) (map[string]string, error) {
	ns, err := a.cat.LoadNamespace(ctx, adminTenantsNamespace)
	if errors.Is(err, lakestream.ErrNoSuchNamespace) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	return ns.Properties, nil
}

// namespacesOf lists the namespaces of tenant ("t/ns"), sorted; every
// namespace when tenant is "".
func (a *admin) namespacesOf(ctx context.Context, tenant string) ([]string, error) {
	all, err := a.cat.ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range all {
		t, _, ok := strings.Cut(ns, "/")
		if !ok || t == adminHiddenTenant || (tenant != "" && t != tenant) {
			continue
		}
		out = append(out, ns)
	}
	slices.Sort(out)
	return out, nil
}

// tenants returns every tenant: explicit records and namespace prefixes.
func (a *admin) tenants(ctx context.Context) (map[string]tenantInfo, error) {
	recs, err := a.tenantRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]tenantInfo{}
	for name, raw := range recs {
		info := defaultTenantInfo()
		json.Unmarshal([]byte(raw), &info) // a record we wrote; defaults on damage
		out[name] = info
	}
	nss, err := a.namespacesOf(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, ns := range nss {
		t, _, _ := strings.Cut(ns, "/")
		if _, ok := out[t]; !ok {
			out[t] = defaultTenantInfo()
		}
	}
	return out, nil
}

func (a *admin) tenant(ctx context.Context, name string) (tenantInfo, error) {
	all, err := a.tenants(ctx)
	if err != nil {
		return tenantInfo{}, err
	}
	info, ok := all[name]
	if !ok || name == adminHiddenTenant {
		return tenantInfo{}, fmt.Errorf("%w: tenant %q does not exist", errAdminNotFound, name)
	}
	return info, nil
}

func validName(kind, s string) error {
	if s == "" || strings.ContainsAny(s, "/\x00") || s == "." || s == ".." {
		return fmt.Errorf("%w: invalid %s name %q", errAdminPrecondition, kind, s)
	}
	return nil
}

func (a *admin) listTenants(w http.ResponseWriter, r *http.Request) {
	all, err := a.tenants(r.Context())
	if err != nil {
		writeAdminError(w, err)
		return
	}
	names := make([]string, 0, len(all))
	for t := range all {
		names = append(names, t)
	}
	slices.Sort(names)
	writeJSON(w, http.StatusOK, names)
}

func (a *admin) getTenant(w http.ResponseWriter, r *http.Request) {
	info, err := a.tenant(r.Context(), r.PathValue("tenant"))
	if err != nil {
		writeAdminError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
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

func (a *admin) putTenant(w http.ResponseWriter, r *http.Request) {
	ctx, name := r.Context(), r.PathValue("tenant")
	err := validName("tenant", name)
	if err == nil && name == adminHiddenTenant {
		err = fmt.Errorf("%w: tenant name %q is reserved", errAdminPrecondition, name)
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	info, err := parseTenantInfo(r)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	if _, err := a.tenant(ctx, name); err == nil {
		writeAdminError(w, fmt.Errorf("%w: tenant %q already exists", errAdminConflict, name))
		return
	} else if !errors.Is(err, errAdminNotFound) {
		writeAdminError(w, err)
		return
	}
	if err := a.storeTenant(ctx, name, info); err != nil {
		writeAdminError(w, err)
		return
	}
	noContent(w)
}

func (a *admin) updateTenant(w http.ResponseWriter, r *http.Request) {
	ctx, name := r.Context(), r.PathValue("tenant")
	if _, err := a.tenant(ctx, name); err != nil {
		writeAdminError(w, err)
		return
	}
	info, err := parseTenantInfo(r)
	if err == nil {
		err = a.storeTenant(ctx, name, info)
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	noContent(w)
}

func (a *admin) deleteTenant(w http.ResponseWriter, r *http.Request) {
	ctx, name := r.Context(), r.PathValue("tenant")
	if _, err := a.tenant(ctx, name); err != nil {
		writeAdminError(w, err)
		return
	}
	nss, err := a.namespacesOf(ctx, name)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	if len(nss) > 0 {
		writeAdminError(w, fmt.Errorf("%w: the tenant still has namespaces %v", errAdminConflict, nss))
		return
	}
	recs, err := a.tenantRecords(ctx)
	if err == nil && recs[name] != "" {
		err = a.cat.RemoveNamespaceProperties(ctx, adminTenantsNamespace, []string{name})
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	noContent(w)
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

func (a *admin) listNamespaces(w http.ResponseWriter, r *http.Request) {
	ctx, tenant := r.Context(), r.PathValue("tenant")
	if _, err := a.tenant(ctx, tenant); err != nil {
		writeAdminError(w, err)
		return
	}
	nss, err := a.namespacesOf(ctx, tenant)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	if nss == nil {
		nss = []string{}
	}
	writeJSON(w, http.StatusOK, nss)
}

func (a *admin) getNamespace(w http.ResponseWriter, r *http.Request) {
	ctx, tenant, ns := r.Context(), r.PathValue("tenant"), r.PathValue("ns")
	if err := a.checkNamespace(ctx, tenant, ns); err != nil {
		writeAdminError(w, err)
		return
	}
	rec, err := a.cat.LoadNamespace(ctx, tenant+"/"+ns)
	if err != nil {
		writeAdminError(w, err)
		return
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
			pol[field] = n // admin_limits.go
		}
	}
	writeJSON(w, http.StatusOK, pol)
}

func (a *admin) putNamespace(w http.ResponseWriter, r *http.Request) {
	ctx, tenant, ns := r.Context(), r.PathValue("tenant"), r.PathValue("ns")
	if err := errors.Join(validName("tenant", tenant), validName("namespace", ns)); err != nil {
		writeAdminError(w, err)
		return
	}
	if _, err := a.tenant(ctx, tenant); err != nil {
		writeAdminError(w, err)
		return
	}
	if _, err := readBody(r); err != nil { // policies: accepted, not applied
		writeAdminError(w, err)
		return
	}
	_, err := a.cat.CreateNamespace(ctx, tenant+"/"+ns, nil)
	if errors.Is(err, lakestream.ErrAlreadyExists) {
		err = fmt.Errorf("%w: namespace %s/%s already exists", errAdminConflict, tenant, ns)
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	noContent(w)
}

func (a *admin) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	ctx, tenant, ns := r.Context(), r.PathValue("tenant"), r.PathValue("ns")
	if err := a.checkNamespace(ctx, tenant, ns); err != nil {
		writeAdminError(w, err)
		return
	}
	name := tenant + "/" + ns
	if queryBool(r, "force") {
		ids, err := a.cat.ListStreams(ctx, name)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		for _, id := range ids {
			if err := a.dropStream(ctx, id, true); err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
				writeAdminError(w, err)
				return
			}
		}
	}
	err := a.cat.DropNamespace(ctx, name)
	if errors.Is(err, lakestream.ErrNamespaceNotEmpty) {
		err = fmt.Errorf("%w: cannot delete non empty namespace %s (delete its topics, or use ?force=true)", errAdminConflict, name)
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	noContent(w)
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

func (a *admin) listNamespaceTopics(w http.ResponseWriter, r *http.Request) {
	a.listTopics(w, r)
}

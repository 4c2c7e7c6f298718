package admin

// Admin REST: the route table. Every route is one row — method and path
// pattern (http.ServeMux's syntax), who may call it (authRule,
// auth.go) and what answers it — and Handler builds the mux
// from the rows.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/lakegate/lakegate/broker"
)

// DefaultMaxRequestBytes bounds a request body when Config.MaxRequestBytes
// is not set.
const DefaultMaxRequestBytes = 1 << 20

// route is one row of the route table.
type route struct {
	pattern string       // "METHOD /path/{wildcard}", as http.ServeMux reads it
	rule    authRule     // who may call it (checked with authorization on)
	serve   http.Handler // a handler, or a writer (answer.go)
}

// Handler returns the Pulsar admin REST v2 handler (paths under
// /admin/v2/ and /lookup/v2/). Mount it on the node's HTTP server.
func Handler(cfg Config) http.Handler {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	mux := http.NewServeMux()
	a := &admin{cfg: cfg, node: cfg.Node, brk: cfg.Broker, cat: cfg.Catalog, mux: mux}
	for _, rt := range a.routes() {
		mux.Handle(rt.pattern, a.guarded(rt.rule, rt.serve))
	}
	return writer(func(w http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), adminRequestTimeout)
		defer cancel()
		// Pulsar's httpMaxRequestSize: a body announced larger is refused
		// before it is read; one that turns out larger fails its read
		// (readBody: 413 too).
		if limit := cfg.MaxRequestBytes; r.ContentLength > limit {
			a.node.CountRefusal("http_max_request_size")
			w.Header().Set("Connection", "close")
			return fmt.Errorf("%w: %d bytes, over the limit of %d (http.maxRequestSize)", errAdminTooLarge, r.ContentLength, limit)
		}
		r.Body = http.MaxBytesReader(w, r.Body, cfg.MaxRequestBytes)
		mux.ServeHTTP(w, r.WithContext(ctx))
		return nil
	})
}

// routes is the route table: every path of the admin REST, the files
// that answer them named in the comments. A table, so one function however
// long.
func (a *admin) routes() []route {
	const (
		nsp   = "/admin/v2/namespaces/{tenant}/{ns}/permissions"
		tp    = "/admin/v2/persistent/{tenant}/{ns}/{topic}/permissions"
		p     = "/admin/v2/persistent/{tenant}/{ns}"
		nsPol = "/admin/v2/namespaces/{tenant}/{ns}"
		sp    = "/admin/v2/schemas/{tenant}/{ns}/{topic}"
		np    = "/admin/v2/non-persistent/{tenant}/{ns}"
	)
	rs := []route{
		{"GET /admin/v2/clusters", ruleAny, handler(a.listClusters)},
		{"GET /admin/v2/clusters/{cluster}", ruleAny, handler(a.getCluster)},
		{"GET /admin/v2/brokers", ruleAny, handler(a.listBrokers)}, // this cluster's (cluster.go)
		{"GET /admin/v2/brokers/{cluster}", ruleAny, handler(a.listBrokers)},
		{"GET /admin/v2/brokers/configuration/runtime", ruleAny, handler(a.runtimeConfiguration)},
		{"GET /admin/v2/brokers/configuration", ruleAny, handler(noDynamicConfiguration)},
		{"GET /admin/v2/brokers/ready", ruleAny, handler(a.ready)},
		// Pulsar's other fixed names under /brokers/: without these rows
		// /brokers/{cluster} answered them "cluster … does not exist".
		{"GET /admin/v2/brokers/version", ruleAny, handler(notAnEndpoint)},
		{"GET /admin/v2/brokers/backlog-quota-check", ruleAny, handler(notAnEndpoint)},
		{"GET /admin/v2/brokers/internal-configuration", ruleAny, handler(notAnEndpoint)},
		{"GET /lookup/v2/topic/persistent/{tenant}/{ns}/{topic}", ruleLookup, handler(a.lookupTopic)},
		{"PUT /admin/v2/namespaces/{tenant}/{ns}/unload", ruleTenant, handler(a.unloadNamespace)},
		{"GET /admin/v2/lakegate/doctor", ruleSuper, handler(a.doctor)}, // lakegate extension (cluster.go)
		// Grants (auth.go).
		{"GET " + nsp, ruleTenant, handler(a.getNamespacePermissions)},
		{"POST " + nsp + "/{role}", ruleTenant, handler(a.grantNamespacePermission)},
		{"DELETE " + nsp + "/{role}", ruleTenant, handler(a.revokeNamespacePermission)},
		{"GET " + nsp + "/subscription", ruleTenant, handler(a.getSubscriptionPermissions)},
		{"POST " + nsp + "/subscription/{sub}", ruleTenant, handler(a.grantSubscriptionPermission)},
		{"DELETE " + nsp + "/{sub}/{role}", ruleTenant, handler(a.revokeSubscriptionPermission)},
		{"GET " + tp, ruleTenant, handler(a.getTopicPermissions)},
		{"POST " + tp + "/{role}", ruleTenant, handler(a.grantTopicPermission)},
		{"DELETE " + tp + "/{role}", ruleTenant, handler(a.revokeTopicPermission)},

		{"GET /admin/v2/tenants", ruleSuper, handler(a.listTenants)},
		{"GET /admin/v2/tenants/{tenant}", ruleTenant, handler(a.getTenant)},
		{"PUT /admin/v2/tenants/{tenant}", ruleSuper, handler(a.putTenant)},
		{"POST /admin/v2/tenants/{tenant}", ruleSuper, handler(a.updateTenant)},
		{"DELETE /admin/v2/tenants/{tenant}", ruleSuper, handler(a.deleteTenant)},

		{"GET /admin/v2/namespaces/{tenant}", ruleTenant, handler(a.listNamespaces)},
		{"GET /admin/v2/namespaces/{tenant}/{ns}", ruleTenant, handler(a.getNamespace)},
		{"PUT /admin/v2/namespaces/{tenant}/{ns}", ruleTenant, handler(a.putNamespace)},
		{"DELETE /admin/v2/namespaces/{tenant}/{ns}", ruleTenant, handler(a.deleteNamespace)},
		{"GET /admin/v2/namespaces/{tenant}/{ns}/topics", ruleNamespaceLookup, handler(a.listNamespaceTopics)},

		{"GET " + p, ruleNamespaceLookup, handler(a.listTopics)},
		{"GET " + p + "/partitioned", ruleNamespaceLookup, handler(a.listPartitionedTopics)},
		{"PUT " + p + "/{topic}", ruleTenant, handler(a.createTopic)},
		{"DELETE " + p + "/{topic}", ruleTenant, handler(a.deleteTopic)},
		{"PUT " + p + "/{topic}/partitions", ruleTenant, handler(a.createPartitionedTopic)},
		{"POST " + p + "/{topic}/partitions", ruleTenant, handler(a.growPartitionedTopic)},
		{"GET " + p + "/{topic}/partitions", ruleLookup, handler(a.getPartitions)},
		{"DELETE " + p + "/{topic}/partitions", ruleTenant, handler(a.deletePartitionedTopic)},
		{"GET " + p + "/{topic}/stats", ruleLookup, a.owned(handler(a.topicStats))},
		{"GET " + p + "/{topic}/partitioned-stats", ruleLookup, handler(a.partitionedStats)},
		{"GET " + p + "/{topic}/subscriptions", ruleLookup, a.owned(handler(a.listSubscriptions))},
		{"PUT " + p + "/{topic}/subscription/{sub}", ruleSubscription, a.owned(handler(a.createSubscription))},
		{"DELETE " + p + "/{topic}/subscription/{sub}", ruleSubscription, a.owned(handler(a.deleteSubscription))},
		{"POST " + p + "/{topic}/subscription/{sub}/resetcursor/{timestamp}", ruleSubscription, a.owned(handler(a.resetCursorByTime))},
		{"POST " + p + "/{topic}/subscription/{sub}/resetcursor", ruleSubscription, a.owned(handler(a.resetCursorByID))},
		{"GET " + p + "/{topic}/subscription/{sub}/position/{pos}", ruleConsume, a.owned(handler(a.peekMessage))},
		// The backlog runbook (backlog.go).
		{"POST " + p + "/{topic}/subscription/{sub}/skip_all", ruleSubscription, a.owned(handler(a.clearBacklog))},
		{"POST " + p + "/{topic}/subscription/{sub}/skip/{n}", ruleSubscription, a.owned(handler(a.skipMessages))},
		{"POST " + p + "/{topic}/subscription/{sub}/expireMessages/{seconds}", ruleSubscription, a.owned(handler(a.expireByTime))},
		{"POST " + p + "/{topic}/subscription/{sub}/expireMessages", ruleSubscription, a.owned(handler(a.expireByID))},
		{"POST " + p + "/{topic}/all_subscription/expireMessages/{seconds}", ruleConsume, a.owned(handler(a.expireAllByTime))},
		{"GET " + p + "/{topic}/lastMessageId", ruleLookup, a.owned(handler(a.lastMessageID))},
		{"POST " + p + "/{topic}/terminate", ruleTenant, a.owned(handler(a.terminate))},
		{"PUT " + p + "/{topic}/unload", ruleTenant, handler(a.unload)},
		{"GET " + p + "/{topic}/ledger/{ledger}/entry/{entry}", ruleConsume, handler(a.getEntry)},
		{"GET " + p + "/{topic}/deduplicationEnabled", ruleLookup, handler(a.getDeduplication)},
		{"POST " + p + "/{topic}/deduplicationEnabled", ruleTenant, handler(a.setDeduplication)},
		{"DELETE " + p + "/{topic}/deduplicationEnabled", ruleTenant, handler(a.removeDeduplication)},
		{"GET /admin/v2/namespaces/{tenant}/{ns}/deduplication", ruleTenant, handler(a.getNamespaceDeduplication)},
		{"POST /admin/v2/namespaces/{tenant}/{ns}/deduplication", ruleTenant, handler(a.setNamespaceDeduplication)},
		{"DELETE /admin/v2/namespaces/{tenant}/{ns}/deduplication", ruleTenant, handler(a.removeNamespaceDeduplication)},
		// Retention, message TTL, backlog quotas (policies.go).
		{"GET " + p + "/{topic}/retention", ruleLookup, handler(a.getTopicRetention)},
		{"POST " + p + "/{topic}/retention", ruleTenant, handler(a.setTopicRetention)},
		{"DELETE " + p + "/{topic}/retention", ruleTenant, handler(a.removeTopicRetention)},
		{"GET " + p + "/{topic}/messageTTL", ruleLookup, handler(a.getTopicTTL)},
		{"POST " + p + "/{topic}/messageTTL", ruleTenant, handler(a.setTopicTTL)},
		{"DELETE " + p + "/{topic}/messageTTL", ruleTenant, handler(a.removeTopicTTL)},
		{"GET " + p + "/{topic}/backlogQuotaMap", ruleLookup, handler(a.getTopicQuotas)},
		{"POST " + p + "/{topic}/backlogQuota", ruleTenant, handler(a.setTopicQuota)},
		{"DELETE " + p + "/{topic}/backlogQuota", ruleTenant, handler(a.removeTopicQuota)},
		{"GET " + nsPol + "/retention", ruleTenant, handler(a.getNamespaceProperty(broker.RetentionProperty))},
		{"POST " + nsPol + "/retention", ruleTenant, handler(a.setNamespacePolicy(broker.RetentionProperty, retentionOfBody))},
		{"DELETE " + nsPol + "/retention", ruleTenant, handler(a.setNamespacePolicy(broker.RetentionProperty, nil))},
		{"GET " + nsPol + "/messageTTL", ruleTenant, handler(a.getNamespaceProperty(broker.MessageTTLProperty))},
		{"POST " + nsPol + "/messageTTL", ruleTenant, handler(a.setNamespacePolicy(broker.MessageTTLProperty, ttlOf))},
		{"DELETE " + nsPol + "/messageTTL", ruleTenant, handler(a.setNamespacePolicy(broker.MessageTTLProperty, nil))},
		{"GET " + nsPol + "/backlogQuotaMap", ruleTenant, handler(a.getNamespaceQuotas)},
		{"POST " + nsPol + "/backlogQuota", ruleTenant, handler(a.setNamespaceQuota)},
		{"DELETE " + nsPol + "/backlogQuota", ruleTenant, handler(a.removeNamespaceQuota)},
		// Limit policies: limitRoutes (limits.go), below.
		// Topic compaction (compaction.go).
		{"PUT " + p + "/{topic}/compaction", ruleTenant, a.owned(handler(a.triggerCompaction))},
		{"GET " + p + "/{topic}/compaction", ruleLookup, a.owned(handler(a.compactionStatus))},
		{"GET " + p + "/{topic}/compactionThreshold", ruleLookup, handler(a.getTopicCompactionThreshold)},
		{"POST " + p + "/{topic}/compactionThreshold", ruleTenant, handler(a.setTopicCompactionThreshold)},
		{"DELETE " + p + "/{topic}/compactionThreshold", ruleTenant, handler(a.removeTopicCompactionThreshold)},
		{"GET " + nsPol + "/compactionThreshold", ruleTenant, handler(a.getNamespaceProperty(broker.CompactionThresholdProperty))},
		{"PUT " + nsPol + "/compactionThreshold", ruleTenant, handler(a.setNamespacePolicy(broker.CompactionThresholdProperty, thresholdOf))},
		{"DELETE " + nsPol + "/compactionThreshold", ruleTenant, handler(a.setNamespacePolicy(broker.CompactionThresholdProperty, nil))},
		{"GET " + p + "/{topic}/table", ruleLookup, handler(a.tableInfo)}, // lakegate extensions: tables (tables.go)
		{"GET " + p + "/{topic}/tablePolicy", ruleLookup, handler(a.getTopicTablePolicy)},
		{"POST " + p + "/{topic}/tablePolicy", ruleTenant, handler(a.setTopicTablePolicy)},
		{"DELETE " + p + "/{topic}/tablePolicy", ruleTenant, handler(a.removeTopicTablePolicy)},
		{"GET /admin/v2/namespaces/{tenant}/{ns}/tablePolicy", ruleTenant, handler(a.getNamespaceTablePolicy)},
		{"POST /admin/v2/namespaces/{tenant}/{ns}/tablePolicy", ruleTenant, handler(a.setNamespaceTablePolicy)},
		{"DELETE /admin/v2/namespaces/{tenant}/{ns}/tablePolicy", ruleTenant, handler(a.removeNamespaceTablePolicy)},
		// Schemas (schemas.go).
		{"GET " + sp + "/schema", ruleLookup, handler(a.schemaOf)},
		{"GET " + sp + "/schema/{version}", ruleLookup, handler(a.schemaOf)},
		{"GET " + sp + "/schemas", ruleLookup, handler(a.allSchemas)},
		{"POST " + sp + "/schema", ruleTenant, handler(a.postSchema)},
		{"DELETE " + sp + "/schema", ruleTenant, handler(a.deleteSchema)},
		{"POST " + sp + "/compatibility", ruleLookup, handler(a.testSchemaCompatibility)},
		{"POST " + sp + "/version", ruleLookup, handler(a.schemaVersionOfPayload)},
		{"GET " + p + "/{topic}/schemaCompatibilityStrategy", ruleLookup, handler(a.getTopicSchemaStrategy)},
		{"PUT " + p + "/{topic}/schemaCompatibilityStrategy", ruleTenant, handler(a.setTopicSchemaStrategy)},
		{"DELETE " + p + "/{topic}/schemaCompatibilityStrategy", ruleTenant, handler(a.removeTopicSchemaStrategy)},
		{"GET /admin/v2/namespaces/{tenant}/{ns}/schemaCompatibilityStrategy", ruleTenant, handler(a.getNamespaceSchemaStrategy)},
		{"PUT /admin/v2/namespaces/{tenant}/{ns}/schemaCompatibilityStrategy", ruleTenant, handler(a.setNamespaceSchemaStrategy)},

		// Non-persistent topics (nonpersistent.go).
		{"GET " + np, ruleNamespaceLookup, handler(a.listNPTopics)},
		{"GET " + np + "/partitioned", ruleNamespaceLookup, handler(a.listNPPartitioned)},
		{"GET " + np + "/{topic}/partitions", ruleLookup, handler(a.npPartitions)},
		{"GET " + np + "/{topic}/stats", ruleLookup, a.npOwned(handler(a.npStats))},
		{"PUT " + np + "/{topic}/unload", ruleTenant, a.npOwned(handler(a.npUnload))},
		// What lakegate does not serve.
		{"/admin/v2/non-persistent/", ruleAny, handler(npNotImplemented)},
		{"/admin/", ruleAny, handler(notAnEndpoint)},
	}
	rs = append(rs, a.limitRoutes()...)
	rs = append(rs, a.codeRoutes()...) // policycode.go
	rs = append(rs, a.txnRoutes()...)  // transactions.go
	return append(rs, a.runbookRoutes()...)
}

// noDynamicConfiguration answers GET /admin/v2/brokers/configuration: no
// setting is dynamic (cluster.go, runtimeConfiguration).
func noDynamicConfiguration(*http.Request) (any, error) { return []string{}, nil }

// ready answers GET /admin/v2/brokers/ready (Pulsar's isReady, a
// Kubernetes readiness probe): "ok" while the node serves, 503 once it
// shuts down. Unlike brokers/health it writes and reads nothing.
func (a *admin) ready(*http.Request) (any, error) {
	if a.node.Closing() {
		return nil, fmt.Errorf("%w: the node is shutting down", broker.ErrServiceNotReady)
	}
	h := http.Header{}
	h.Set("Content-Type", "text/plain")
	return octets{header: h, body: []byte("ok")}, nil
}

func npNotImplemented(r *http.Request) (any, error) {
	return nil, fmt.Errorf("%w: %s %s: lakegate serves only list, stats, partitions and unload of non-persistent topics", errAdminNotImplemented, r.Method, r.URL.Path)
}

func notAnEndpoint(r *http.Request) (any, error) {
	return nil, fmt.Errorf("%w: %s %s is not an admin endpoint lakegate serves", errAdminNotFound, r.Method, r.URL.Path)
}

// limitRoutes are the limit policies' rows (limits.go): one set of
// six per limitPolicy.
func (a *admin) limitRoutes() []route {
	const p = "/admin/v2/persistent/{tenant}/{ns}/{topic}/"
	const nsp = "/admin/v2/namespaces/{tenant}/{ns}/"
	var rs []route
	for _, lp := range limitPolicies {
		rs = append(rs,
			route{"GET " + p + lp.topicPath, ruleLookup, handler(a.getTopicLimit(lp))},
			route{"POST " + p + lp.topicPath, ruleTenant, handler(a.setTopicLimit(lp))},
			route{"DELETE " + p + lp.topicPath, ruleTenant, handler(a.removeTopicLimit(lp))},
			route{"GET " + nsp + lp.nsPath, ruleTenant, handler(a.getNamespaceProperty(lp.prop))},
			route{"POST " + nsp + lp.nsPath, ruleTenant, handler(a.setNamespaceLimit(lp.prop, lp.valueOf))},
			route{"DELETE " + nsp + lp.nsPath, ruleTenant, handler(a.setNamespaceLimit(lp.prop, nil))},
		)
	}
	return rs
}

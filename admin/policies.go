package admin

// Topic and namespace policies kept as stream and namespace properties
// (docs/policies.md): the shared read-modify-write of a topic's property.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// policyRetries bounds the compare-and-set loop on stream properties.
const policyRetries = 8

// changeTopicProperty sets (value != nil) or removes the stream property
// key of the request's topic — a policy of the whole topic, refused (405)
// on one partition — and answers 204. With reload the topic's loaded
// partitions are unloaded gracefully, wherever they are served, so that
// their next load reads the policy.
func (a *admin) changeTopicProperty(r *http.Request, key string, value *string, reload bool) (any, error) {
	return a.updateTopicProperty(r, key, func(string, bool) (*string, error) { return value, nil }, reload)
}

// updateTopicProperty is changeTopicProperty with the new value computed
// from the current one (old, present) by update, on each attempt.
func (a *admin) updateTopicProperty(r *http.Request, key string, update func(old string, present bool) (*string, error), reload bool) (any, error) {
	ctx := r.Context()
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	if ref.partition >= 0 {
		return nil, fmt.Errorf("%w: this is a policy of the whole topic %s, not of one partition", errAdminMethodNotAllowed, ref.name.Base())
	}
	id := broker.FullStreamID(ref.name)
	md := ref.md
	for range policyRetries {
		old, present := md.Properties[key]
		value, err := update(old, present)
		if err != nil {
			return nil, err
		}
		props := maps.Clone(md.Properties)
		if props == nil {
			props = map[string]string{}
		}
		if value != nil {
			props[key] = *value
		} else {
			delete(props, key)
		}
		var ok bool
		md, ok, err = a.cat.ReplaceStreamProperties(ctx, id, props, md.MetadataVersion)
		if err != nil {
			return nil, err
		}
		if ok {
			if reload {
				if err := a.node.ReloadStreams(ctx, []lakestream.StreamIdentifier{id}); err != nil {
					return nil, err
				}
			}
			if isLimitProperty(key) { // limits.go: applied here before the answer
				a.node.RefreshLimitsOf(ctx, id)
			}
			return nil, nil
		}
	}
	return nil, fmt.Errorf("%w: topic %s properties changed concurrently, retry", errAdminConflict, ref.name)
}

// Retention, message TTL and backlog quota policies (enforced by
// broker/enforcement.go), as Pulsar's admin API and pulsar-admin
// (`topicPolicies`, `namespaces`) set them:
//
//	GET|POST|DELETE /admin/v2/persistent/{t}/{ns}/{topic}/retention          RetentionPolicies
//	GET|POST|DELETE /admin/v2/persistent/{t}/{ns}/{topic}/messageTTL         POST ?messageTTL=<s> (or a body)
//	GET             /admin/v2/persistent/{t}/{ns}/{topic}/backlogQuotaMap
//	POST|DELETE     /admin/v2/persistent/{t}/{ns}/{topic}/backlogQuota       ?backlogQuotaType=destination_storage|message_age
//	the same under /admin/v2/namespaces/{t}/{ns}/…                           (messageTTL: the body)
//
// GET answers the topic's (or namespace's) own policy, null when it has
// none; a topic GET with ?applied=true answers the one that applies (the
// topic's, else the namespace's, else the node's default: retention
// policies.defaultRetentionTimeInMinutes/SizeInMB, Pulsar's 0/0 unless
// configured; no TTL, no quota). Changes take effect at the next policy check
// (Config.PolicyCheckInterval) and, for backlog quotas, at the next
// producer.

// retentionOfBody reads and checks a RetentionPolicies body.
func retentionOfBody(r *http.Request) (string, error) {
	b, err := readBody(r)
	if err != nil {
		return "", err
	}
	if b == nil {
		return "", fmt.Errorf("%w: the body must be {\"retentionTimeInMinutes\": N, \"retentionSizeInMB\": M}", errAdminBadRequest)
	}
	var rp broker.RetentionPolicy
	if err := json.Unmarshal(b, &rp); err != nil {
		return "", fmt.Errorf("%w: retention policies: %v", errAdminBadRequest, err)
	}
	if rp.TimeMinutes < -1 || rp.SizeMB < -1 {
		return "", fmt.Errorf("%w: retention limits are ≥ 0, or -1 for no limit (got %d min, %d MB)", errAdminPrecondition, rp.TimeMinutes, rp.SizeMB)
	}
	out, _ := json.Marshal(rp)
	return string(out), nil
}

// ttlOf reads a message TTL (seconds ≥ 0) from the messageTTL query
// parameter or, without it, the body.
func ttlOf(r *http.Request) (string, error) {
	v := r.URL.Query().Get("messageTTL")
	if v == "" {
		b, err := readBody(r)
		if err != nil {
			return "", err
		}
		v = strings.TrimSpace(string(b))
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return "", fmt.Errorf("%w: message TTL %q: want a number of seconds ≥ 0", errAdminPrecondition, v)
	}
	return strconv.FormatInt(n, 10), nil
}

// quotaTypeOf reads the backlogQuotaType query parameter (default
// destination_storage).
func quotaTypeOf(r *http.Request) (string, error) {
	t := r.URL.Query().Get("backlogQuotaType")
	switch t {
	case "":
		return broker.QuotaDestinationStorage, nil
	case broker.QuotaDestinationStorage, broker.QuotaMessageAge:
		return t, nil
	}
	return "", fmt.Errorf("%w: backlogQuotaType %q: want destination_storage or message_age", errAdminBadRequest, t)
}

// quotaOfBody reads and checks a BacklogQuota body for type typ.
func quotaOfBody(r *http.Request, typ string) (broker.BacklogQuota, error) {
	b, err := readBody(r)
	if err != nil {
		return broker.BacklogQuota{}, err
	}
	var q broker.BacklogQuota
	if b == nil {
		return q, fmt.Errorf("%w: the body must be a backlog quota {\"limitSize\", \"limitTime\", \"policy\"}", errAdminBadRequest)
	}
	if err := json.Unmarshal(b, &q); err != nil {
		return q, fmt.Errorf("%w: backlog quota: %v", errAdminBadRequest, err)
	}
	q.LimitSize, q.Limit = max(q.LimitSize, q.Limit), 0
	switch q.Policy {
	case broker.QuotaHold, broker.QuotaException, broker.QuotaEviction:
	default:
		return q, fmt.Errorf("%w: backlog quota policy %q: want producer_request_hold, producer_exception or consumer_backlog_eviction", errAdminBadRequest, q.Policy)
	}
	if typ == broker.QuotaDestinationStorage && q.LimitSize <= 0 {
		return q, fmt.Errorf("%w: a destination_storage quota needs limitSize > 0 (bytes)", errAdminPrecondition)
	}
	if typ == broker.QuotaMessageAge && q.LimitTime <= 0 {
		return q, fmt.Errorf("%w: a message_age quota needs limitTime > 0 (seconds)", errAdminPrecondition)
	}
	return q, nil
}

// withQuota returns the quota map value v with type typ set to q (nil q:
// removed); nil when the map is left empty.
func withQuota(v string, present bool, typ string, q *broker.BacklogQuota) (*string, error) {
	m := map[string]broker.BacklogQuota{}
	if present {
		var err error
		if m, err = broker.ParseQuotas(v); err != nil {
			m = map[string]broker.BacklogQuota{} // a damaged value is replaced
		}
	}
	if q != nil {
		m[typ] = *q
	} else {
		delete(m, typ)
	}
	if len(m) == 0 {
		return nil, nil
	}
	b, _ := json.Marshal(m)
	s := string(b)
	return &s, nil
}

// policyValue answers a stored policy value: its JSON as stored, or null.
func policyValue(v string, present bool) rawJSON {
	if !present {
		return jsonNull
	}
	return rawJSON(v)
}

// appliedPolicies are the policies that apply to the request's topic.
func (a *admin) appliedPolicies(r *http.Request) (broker.TopicPolicies, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return broker.TopicPolicies{}, err
	}
	return a.brk.PoliciesOf(r.Context(), ref.md)
}

func (a *admin) getTopicRetention(r *http.Request) (any, error) {
	if queryBool(r, "applied") {
		p, err := a.appliedPolicies(r)
		if err != nil {
			return nil, err
		}
		rp := broker.RetentionPolicy{TimeMinutes: -1, SizeMB: -1}
		if p.Retention != nil {
			rp = *p.Retention
		}
		return rp, nil
	}
	return a.getTopicProperty(r, broker.RetentionProperty)
}

// getTopicProperty answers the topic's own policy value (null: none).
func (a *admin) getTopicProperty(r *http.Request, key string) (any, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	v, ok := ref.md.Properties[key]
	return policyValue(v, ok), nil
}

func (a *admin) setTopicRetention(r *http.Request) (any, error) {
	v, err := retentionOfBody(r)
	if err != nil {
		return nil, err
	}
	return a.changeTopicProperty(r, broker.RetentionProperty, &v, false)
}

func (a *admin) removeTopicRetention(r *http.Request) (any, error) {
	return a.changeTopicProperty(r, broker.RetentionProperty, nil, false)
}

func (a *admin) getTopicTTL(r *http.Request) (any, error) {
	if queryBool(r, "applied") {
		p, err := a.appliedPolicies(r)
		if err != nil {
			return nil, err
		}
		return p.TTLSeconds, nil
	}
	return a.getTopicProperty(r, broker.MessageTTLProperty)
}

func (a *admin) setTopicTTL(r *http.Request) (any, error) {
	v, err := ttlOf(r)
	if err != nil {
		return nil, err
	}
	return a.changeTopicProperty(r, broker.MessageTTLProperty, &v, false)
}

func (a *admin) removeTopicTTL(r *http.Request) (any, error) {
	return a.changeTopicProperty(r, broker.MessageTTLProperty, nil, false)
}

func (a *admin) getTopicQuotas(r *http.Request) (any, error) {
	if queryBool(r, "applied") {
		p, err := a.appliedPolicies(r)
		if err != nil {
			return nil, err
		}
		if p.Quotas == nil {
			p.Quotas = map[string]broker.BacklogQuota{}
		}
		return p.Quotas, nil
	}
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	v, ok := ref.md.Properties[broker.BacklogQuotaProperty]
	if !ok {
		v = "{}"
	}
	return policyValue(v, true), nil
}

func (a *admin) setTopicQuota(r *http.Request) (any, error) {
	typ, err := quotaTypeOf(r)
	var q broker.BacklogQuota
	if err == nil {
		q, err = quotaOfBody(r, typ)
	}
	if err != nil {
		return nil, err
	}
	return a.updateTopicProperty(r, broker.BacklogQuotaProperty, func(old string, present bool) (*string, error) {
		return withQuota(old, present, typ, &q)
	}, false)
}

func (a *admin) removeTopicQuota(r *http.Request) (any, error) {
	typ, err := quotaTypeOf(r)
	if err != nil {
		return nil, err
	}
	return a.updateTopicProperty(r, broker.BacklogQuotaProperty, func(old string, present bool) (*string, error) {
		return withQuota(old, present, typ, nil)
	}, false)
}

// --- namespace policies ---

// namespaceProps returns the request's namespace name and properties.
func (a *admin) namespaceProps(r *http.Request) (string, map[string]string, error) {
	name, err := a.namespaceOf(r)
	if err != nil {
		return "", nil, err
	}
	ns, err := a.cat.LoadNamespace(r.Context(), name)
	if err != nil {
		return "", nil, err
	}
	return name, ns.Properties, nil
}

func (a *admin) getNamespaceProperty(key string) handler {
	return func(r *http.Request) (any, error) {
		_, props, err := a.namespaceProps(r)
		if err != nil {
			return nil, err
		}
		v, ok := props[key]
		return policyValue(v, ok), nil
	}
}

// setNamespacePolicy stores the value read from the request by valueOf
// ("": removes the policy).
func (a *admin) setNamespacePolicy(key string, valueOf func(*http.Request) (string, error)) handler {
	return func(r *http.Request) (any, error) {
		name, err := a.namespaceOf(r)
		var v string
		if err == nil && valueOf != nil {
			v, err = valueOf(r)
		}
		if err == nil {
			err = a.setNamespaceProperty(r.Context(), name, key, v)
		}
		if err != nil {
			return nil, err
		}
		return nil, nil
	}
}

func (a *admin) getNamespaceQuotas(r *http.Request) (any, error) {
	_, props, err := a.namespaceProps(r)
	if err != nil {
		return nil, err
	}
	v, ok := props[broker.BacklogQuotaProperty]
	if !ok {
		v = "{}"
	}
	return policyValue(v, true), nil
}

func (a *admin) setNamespaceQuota(r *http.Request) (any, error) {
	return a.changeNamespaceQuota(r, false)
}

func (a *admin) removeNamespaceQuota(r *http.Request) (any, error) {
	return a.changeNamespaceQuota(r, true)
}

// changeNamespaceQuota sets (q != nil) or removes one type of the
// namespace's backlog quota. Namespace properties have no compare-and-set:
// two concurrent changes of different types may lose one (as two admins
// racing on a Pulsar namespace's policies may).
func (a *admin) changeNamespaceQuota(r *http.Request, remove bool) (any, error) {
	typ, err := quotaTypeOf(r)
	var q *broker.BacklogQuota
	if err == nil && !remove {
		var qq broker.BacklogQuota
		qq, err = quotaOfBody(r, typ)
		q = &qq
	}
	var name string
	var props map[string]string
	if err == nil {
		name, props, err = a.namespaceProps(r)
	}
	var v *string
	if err == nil {
		old, present := props[broker.BacklogQuotaProperty]
		v, err = withQuota(old, present, typ, q)
	}
	if err == nil {
		value := ""
		if v != nil {
			value = *v
		}
		err = a.setNamespaceProperty(r.Context(), name, broker.BacklogQuotaProperty, value)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

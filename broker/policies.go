package broker

// Topic policies, kept as stream properties (the topic's policy) and
// namespace properties (its namespace's), resolved here: each one the
// topic's, else its namespace's, else the node's default
// (docs/policies.md). Their enforcement on the topics served is in
// gateway/policies.go and gateway/limits.go (moving here).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// Properties of the deduplication and topic compaction policies.
const (
	// DedupProperty is the stream (and namespace) property holding the
	// deduplication policy: "true" or "false".
	DedupProperty = "lakegate.dedup"
	// CompactionThresholdProperty is the stream and namespace property of
	// the compaction threshold policy (bytes; docs/policies.md).
	CompactionThresholdProperty = "lakegate.compactionThreshold"
)

// Properties holding the policies (stream and namespace; docs/policies.md).
const (
	RetentionProperty    = "lakegate.retention"
	MessageTTLProperty   = "lakegate.messageTTL"
	BacklogQuotaProperty = "lakegate.backlogQuota"
)

// Backlog quota types and policies (Pulsar's BacklogQuotaType and
// RetentionPolicy).
const (
	QuotaDestinationStorage = "destination_storage"
	QuotaMessageAge         = "message_age"
	QuotaHold               = "producer_request_hold"
	QuotaException          = "producer_exception"
	QuotaEviction           = "consumer_backlog_eviction"
)

// RetentionPolicy is Pulsar's RetentionPolicies (-1: no limit).
type RetentionPolicy struct {
	TimeMinutes int64 `json:"retentionTimeInMinutes"`
	SizeMB      int64 `json:"retentionSizeInMB"`
}

// BacklogQuota is Pulsar's BacklogQuota: limitSize in bytes, limitTime in
// seconds (0 or less: none); limit is the old name of limitSize.
type BacklogQuota struct {
	Limit     int64  `json:"limit,omitempty"`
	LimitSize int64  `json:"limitSize"`
	LimitTime int64  `json:"limitTime"`
	Policy    string `json:"policy"`
}

// TopicPolicies are the policies that apply to one topic.
type TopicPolicies struct {
	// Retention is the topic's, else its namespace's, else the node's
	// default (RetentionDefault; never nil from PoliciesOf).
	Retention        *RetentionPolicy
	RetentionDefault bool
	TTLSeconds       int64 // 0: no TTL
	Quotas           map[string]BacklogQuota
}

// None reports whether no policy applies (a retention without limits
// applies none).
func (p TopicPolicies) None() bool {
	return (p.Retention == nil || (p.Retention.TimeMinutes < 0 && p.Retention.SizeMB < 0)) && p.TTLSeconds <= 0 && len(p.Quotas) == 0
}

// ParseRetention reads a retention property value.
func ParseRetention(v string) (*RetentionPolicy, error) {
	var r RetentionPolicy
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ParseQuotas reads a backlog quota property value.
func ParseQuotas(v string) (map[string]BacklogQuota, error) {
	m := map[string]BacklogQuota{}
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// PoliciesOf resolves the policies of stream md: each one the topic's,
// else its namespace's. A damaged value is reported, not applied.
func (b *Broker) PoliciesOf(ctx context.Context, md lakestream.StreamMetadata) (TopicPolicies, error) {
	ns, err := b.loadNamespace(ctx, md.ID.Namespace)
	if err != nil && !errors.Is(err, lakestream.ErrNoSuchNamespace) {
		return TopicPolicies{}, err
	}
	get := func(key string) (string, bool) {
		if v, ok := md.Properties[key]; ok {
			return v, true
		}
		v, ok := ns.Properties[key]
		return v, ok
	}
	var p TopicPolicies
	var errs []error
	if v, ok := get(RetentionProperty); ok {
		r, err := ParseRetention(v)
		p.Retention = r
		errs = append(errs, err)
	}
	if v, ok := get(MessageTTLProperty); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		p.TTLSeconds = n
		errs = append(errs, err)
	}
	if v, ok := get(BacklogQuotaProperty); ok {
		q, err := ParseQuotas(v)
		p.Quotas = q
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return TopicPolicies{}, fmt.Errorf("gateway: policies of %s: %w", md.ID, err)
	}
	if p.Retention == nil {
		r := b.cfg.DefaultRetention // the node's (Config)
		p.Retention, p.RetentionDefault = &r, true
	}
	return p, nil
}

// Properties holding the limit policies; the same key on a stream (the
// topic's policy) and on a namespace.
const (
	MaxProducersProperty             = "lakegate.maxProducers"
	MaxConsumersProperty             = "lakegate.maxConsumers"
	MaxConsumersPerSubProperty       = "lakegate.maxConsumersPerSubscription"
	MaxSubscriptionsProperty         = "lakegate.maxSubscriptions"
	MaxUnackedPerConsumerProperty    = "lakegate.maxUnackedPerConsumer"
	MaxUnackedPerSubProperty         = "lakegate.maxUnackedPerSubscription"
	PublishRateProperty              = "lakegate.publishRate"
	DispatchRateProperty             = "lakegate.dispatchRate"
	SubscriptionDispatchRateProperty = "lakegate.subscriptionDispatchRate"
)

// PublishRateJSON is Pulsar's PublishRate.
type PublishRateJSON struct {
	Msgs  int64 `json:"publishThrottlingRateInMsg"`
	Bytes int64 `json:"publishThrottlingRateInByte"`
}

// DispatchRateJSON is Pulsar's DispatchRate (DispatchRateImpl).
type DispatchRateJSON struct {
	Msgs          int64 `json:"dispatchThrottlingRateInMsg"`
	Bytes         int64 `json:"dispatchThrottlingRateInByte"`
	PeriodSeconds int64 `json:"ratePeriodInSecond"`
	Relative      bool  `json:"relativeToPublishRate"`
}

// Limit is the rate the policy sets.
func (r PublishRateJSON) Limit() RateLimit { return RateLimit{Msgs: r.Msgs, Bytes: r.Bytes} }

// Limit is the rate the policy sets (a period of at least 1 s).
func (r DispatchRateJSON) Limit() RateLimit {
	return RateLimit{Msgs: r.Msgs, Bytes: r.Bytes, Period: time.Duration(max(r.PeriodSeconds, 1)) * time.Second}
}

// LimitsOf resolves the limits of stream md's partitions: each one the
// topic's policy, else its namespace's, else the node's default. A
// damaged value is reported, not applied.
func (b *Broker) LimitsOf(ctx context.Context, md lakestream.StreamMetadata) (TopicLimits, error) {
	ns, err := b.loadNamespace(ctx, md.ID.Namespace)
	if err != nil && !errors.Is(err, lakestream.ErrNoSuchNamespace) {
		return TopicLimits{}, err
	}
	get := func(key string) (string, bool) {
		if v, ok := md.Properties[key]; ok {
			return v, true
		}
		v, ok := ns.Properties[key]
		return v, ok
	}
	l := b.cfg.TopicLimits
	var errs []error
	count := func(key string, to *int) {
		if v, ok := get(key); ok {
			n, err := strconv.Atoi(v)
			errs = append(errs, err)
			*to = max(n, 0)
		}
	}
	count64 := func(key string, to *int64) {
		if v, ok := get(key); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			errs = append(errs, err)
			*to = max(n, 0)
		}
	}
	count(MaxProducersProperty, &l.MaxProducers)
	count(MaxConsumersProperty, &l.MaxConsumers)
	count(MaxConsumersPerSubProperty, &l.MaxConsumersPerSubscription)
	count(MaxSubscriptionsProperty, &l.MaxSubscriptions)
	count64(MaxUnackedPerConsumerProperty, &l.MaxUnackedPerConsumer)
	count64(MaxUnackedPerSubProperty, &l.MaxUnackedPerSubscription)
	if v, ok := md.Properties[MaxMessageSizeProperty]; ok { // a topic policy only
		n, err := strconv.Atoi(v)
		errs = append(errs, err)
		l.MaxMessageSize = max(n, 0)
	}
	if v, ok := get(PublishRateProperty); ok {
		var r PublishRateJSON
		errs = append(errs, json.Unmarshal([]byte(v), &r))
		l.PublishRate = r.Limit()
	}
	for key, to := range map[string]*RateLimit{DispatchRateProperty: &l.DispatchRate, SubscriptionDispatchRateProperty: &l.SubscriptionDispatchRate} {
		if v, ok := get(key); ok {
			var r DispatchRateJSON
			errs = append(errs, json.Unmarshal([]byte(v), &r))
			*to = r.Limit()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return TopicLimits{}, fmt.Errorf("gateway: limits of %s: %w", md.ID, err)
	}
	return l, nil
}

// DedupEnabled reports whether a topic of stream md deduplicates: the
// topic-level policy (stream property) if set, else the namespace's.
func (b *Broker) DedupEnabled(ctx context.Context, md lakestream.StreamMetadata) (bool, error) {
	if v, ok := md.Properties[DedupProperty]; ok {
		return v == "true", nil
	}
	ns, err := b.loadNamespace(ctx, md.ID.Namespace)
	if errors.Is(err, lakestream.ErrNoSuchNamespace) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ns.Properties[DedupProperty] == "true", nil
}

// CompactionThreshold is the compaction threshold policy that applies to
// md's stream (bytes; 0: none).
func (b *Broker) CompactionThreshold(ctx context.Context, md lakestream.StreamMetadata) (int64, error) {
	v, ok := md.Properties[CompactionThresholdProperty]
	if !ok {
		ns, err := b.loadNamespace(ctx, md.ID.Namespace)
		if err != nil && !errors.Is(err, lakestream.ErrNoSuchNamespace) {
			return 0, err
		}
		if v, ok = ns.Properties[CompactionThresholdProperty]; !ok {
			return 0, nil
		}
	}
	return strconv.ParseInt(v, 10, 64)
}

// namespaceMemoKey is the context key of a namespaceMemo.
type namespaceMemoKey struct{}

// namespaceMemo keeps the namespaces read during one policy round
// (RunPolicies): every topic of a namespace shares one read.
type namespaceMemo struct {
	mu sync.Mutex
	m  map[string]namespaceRead
}

type namespaceRead struct {
	ns  lakestream.Namespace
	err error
}

// withNamespaceMemo returns ctx carrying a new, empty namespaceMemo.
func withNamespaceMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, namespaceMemoKey{}, &namespaceMemo{m: map[string]namespaceRead{}})
}

// loadNamespace is Catalog.LoadNamespace, answered from ctx's
// namespaceMemo when it has one (a policy round) and the namespace was
// read in it already.
func (b *Broker) loadNamespace(ctx context.Context, name string) (lakestream.Namespace, error) {
	memo, _ := ctx.Value(namespaceMemoKey{}).(*namespaceMemo)
	if memo == nil {
		return b.cfg.Catalog.LoadNamespace(ctx, name)
	}
	memo.mu.Lock()
	r, ok := memo.m[name]
	memo.mu.Unlock()
	if ok {
		return r.ns, r.err
	}
	ns, err := b.cfg.Catalog.LoadNamespace(ctx, name)
	if err != nil && !errors.Is(err, lakestream.ErrNoSuchNamespace) {
		return ns, err // a failed read is not kept: the next topic tries again
	}
	memo.mu.Lock()
	memo.m[name] = namespaceRead{ns, err}
	memo.mu.Unlock()
	return ns, err
}

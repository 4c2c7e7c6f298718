package admin

// Limit policies (limits.go, docs/policies.md "Limits"), at Pulsar's admin
// paths (pulsar-admin topicPolicies / namespaces set-max-producers …, the
// admin clients' setMaxProducers, setPublishRate …):
//
//	GET|POST|DELETE /admin/v2/persistent/{t}/{ns}/{topic}/maxProducers                     an integer ≥ 0 (0: no limit)
//	                …/maxConsumers, …/maxConsumersPerSubscription, …/maxSubscriptionsPerTopic
//	                …/maxUnackedMessagesOnConsumer, …/maxUnackedMessagesOnSubscription
//	                …/publishRate                                                           PublishRate
//	                …/dispatchRate, …/subscriptionDispatchRate                             DispatchRate
//	GET|POST|DELETE /admin/v2/namespaces/{t}/{ns}/maxProducersPerTopic, …/maxConsumersPerTopic,
//	                …/maxConsumersPerSubscription, …/maxSubscriptionsPerTopic,
//	                …/maxUnackedMessagesPerConsumer, …/maxUnackedMessagesPerSubscription,
//	                …/publishRate, …/dispatchRate, …/subscriptionDispatchRate
//
// GET answers the topic's (namespace's) own policy, null when it has none;
// a topic GET with ?applied=true answers the one that applies (topic,
// namespace, the node's default). A change applies at once to the topics
// this node serves, on other members at their next policy check or
// PRODUCER/SUBSCRIBE of the topic.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// limitPolicy is one limit policy: its property, paths and value.
type limitPolicy struct {
	prop string
	// topicPath and nsPath are the last path segments of its topic and
	// namespace routes.
	topicPath, nsPath string
	// valueOf reads and checks a request's value, returning the
	// property's value.
	valueOf func(*http.Request) (string, error)
	// applied is the value that applies, from the resolved limits.
	applied func(broker.TopicLimits) any
}

var limitPolicies = []limitPolicy{
	{broker.MaxProducersProperty, "maxProducers", "maxProducersPerTopic", countOf("maxProducers"), func(l broker.TopicLimits) any { return l.MaxProducers }},
	{broker.MaxConsumersProperty, "maxConsumers", "maxConsumersPerTopic", countOf("maxConsumers"), func(l broker.TopicLimits) any { return l.MaxConsumers }},
	{broker.MaxConsumersPerSubProperty, "maxConsumersPerSubscription", "maxConsumersPerSubscription", countOf("maxConsumersPerSubscription"), func(l broker.TopicLimits) any { return l.MaxConsumersPerSubscription }},
	{broker.MaxSubscriptionsProperty, "maxSubscriptionsPerTopic", "maxSubscriptionsPerTopic", countOf("maxSubscriptionsPerTopic"), func(l broker.TopicLimits) any { return l.MaxSubscriptions }},
	{broker.MaxUnackedPerConsumerProperty, "maxUnackedMessagesOnConsumer", "maxUnackedMessagesPerConsumer", countOf("maxUnackedMessagesPerConsumer"), func(l broker.TopicLimits) any { return l.MaxUnackedPerConsumer }},
	{broker.MaxUnackedPerSubProperty, "maxUnackedMessagesOnSubscription", "maxUnackedMessagesPerSubscription", countOf("maxUnackedMessagesPerSubscription"), func(l broker.TopicLimits) any { return l.MaxUnackedPerSubscription }},
	{broker.PublishRateProperty, "publishRate", "publishRate", publishRateOf, func(l broker.TopicLimits) any {
		return broker.PublishRateJSON{Msgs: l.PublishRate.Msgs, Bytes: l.PublishRate.Bytes}
	}},
	{broker.DispatchRateProperty, "dispatchRate", "dispatchRate", dispatchRateOf, func(l broker.TopicLimits) any { return dispatchRateJSONOf(l.DispatchRate) }},
	{broker.SubscriptionDispatchRateProperty, "subscriptionDispatchRate", "subscriptionDispatchRate", dispatchRateOf, func(l broker.TopicLimits) any {
		return dispatchRateJSONOf(l.SubscriptionDispatchRate)
	}},
}

func isLimitProperty(key string) bool {
	if key == broker.MaxMessageSizeProperty { // policycode.go
		return true
	}
	for _, p := range limitPolicies {
		if p.prop == key {
			return true
		}
	}
	return false
}

func dispatchRateJSONOf(r broker.RateLimit) broker.DispatchRateJSON {
	return broker.DispatchRateJSON{Msgs: r.Msgs, Bytes: r.Bytes, PeriodSeconds: int64(r.Per().Seconds())}
}

// countOf reads a limit count: an integer ≥ 0 (0: no limit), the body
// (or, as some tools send it, the query parameter name).
func countOf(name string) func(*http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		v := r.URL.Query().Get(name)
		if v == "" {
			b, err := readBody(r)
			if err != nil {
				return "", err
			}
			v = strings.TrimSpace(string(b))
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return "", fmt.Errorf("%w: %s %q: want an integer, 0 or more (0: no limit)", errAdminPrecondition, name, v)
		}
		return strconv.FormatInt(n, 10), nil
	}
}

// publishRateOf reads a PublishRate body.
func publishRateOf(r *http.Request) (string, error) {
	b, err := readBody(r)
	if err != nil {
		return "", err
	}
	if b == nil {
		return "", fmt.Errorf("%w: the body must be a PublishRate {\"publishThrottlingRateInMsg\": N, \"publishThrottlingRateInByte\": M}", errAdminBadRequest)
	}
	var p broker.PublishRateJSON
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("%w: publish rate: %v", errAdminBadRequest, err)
	}
	p.Msgs, p.Bytes = max(p.Msgs, -1), max(p.Bytes, -1) // ≤ 0: not limited
	out, _ := json.Marshal(p)
	return string(out), nil
}

// dispatchRateOf reads a DispatchRate body.
func dispatchRateOf(r *http.Request) (string, error) {
	b, err := readBody(r)
	if err != nil {
		return "", err
	}
	if b == nil {
		return "", fmt.Errorf("%w: the body must be a DispatchRate {\"dispatchThrottlingRateInMsg\": N, \"dispatchThrottlingRateInByte\": M, \"ratePeriodInSecond\": S}", errAdminBadRequest)
	}
	var d broker.DispatchRateJSON
	if err := json.Unmarshal(b, &d); err != nil {
		return "", fmt.Errorf("%w: dispatch rate: %v", errAdminBadRequest, err)
	}
	if d.Relative {
		return "", fmt.Errorf("%w: relativeToPublishRate is not supported", errAdminPrecondition)
	}
	d.Msgs, d.Bytes, d.PeriodSeconds = max(d.Msgs, -1), max(d.Bytes, -1), max(d.PeriodSeconds, 1)
	out, _ := json.Marshal(d)
	return string(out), nil
}

// setTopicLimit and removeTopicLimit change a topic's limit (the routes:
// limitRoutes, routes.go).
func (a *admin) setTopicLimit(lp limitPolicy) handler {
	return func(r *http.Request) (any, error) {
		v, err := lp.valueOf(r)
		if err != nil {
			return nil, err
		}
		return a.changeTopicProperty(r, lp.prop, &v, false)
	}
}

func (a *admin) removeTopicLimit(lp limitPolicy) handler {
	return func(r *http.Request) (any, error) {
		return a.changeTopicProperty(r, lp.prop, nil, false)
	}
}

func (a *admin) getTopicLimit(lp limitPolicy) handler {
	return func(r *http.Request) (any, error) {
		if !queryBool(r, "applied") {
			return a.getTopicProperty(r, lp.prop)
		}
		ref, err := a.refOf(r)
		if err != nil {
			return nil, err
		}
		l, err := a.brk.LimitsOf(r.Context(), ref.md)
		if err != nil {
			return nil, err
		}
		return lp.applied(l), nil
	}
}

// setNamespaceLimit is setNamespacePolicy for a limit: the topics of the
// namespace served here apply it before the answer.
func (a *admin) setNamespaceLimit(key string, valueOf func(*http.Request) (string, error)) handler {
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
		a.node.RefreshLimitsOf(r.Context(), lakestream.StreamIdentifier{Namespace: name})
		return nil, nil
	}
}

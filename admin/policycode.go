package admin

// Policies as code (docs/policies.md, "Policies as code"): the namespace
// and topic policies Pulsar's Terraform provider and resources operator
// set, at Pulsar's admin paths and with its JSON bodies:
//
//	GET|POST|DELETE /admin/v2/namespaces/{t}/{ns}/autoTopicCreation          AutoTopicCreationOverride   honoured (broker/autocreate.go)
//	GET|POST|DELETE …/persistence (namespace and topic)                      PersistencePolicies         stored; no bookkeeper: not applicable
//	GET|POST|DELETE …/inactiveTopicPolicies (namespace and topic)            InactiveTopicPolicies       accepted with deleteWhileInactive false
//	GET|POST|DELETE …/subscriptionExpirationTime (namespace and topic)       minutes                     accepted when 0
//	GET|POST|DELETE …/delayedDelivery (namespace and topic)                  DelayedDeliveryPolicies     accepted when active, no maximum
//	GET|POST|DELETE …/subscribeRate (namespace and topic)                    SubscribeRate               accepted when not limited
//	GET|POST|DELETE /admin/v2/persistent/{t}/{ns}/{topic}/maxMessageSize     bytes                       honoured at SEND (broker/policycode.go)
//	GET|POST|DELETE …/schemaValidationEnforced (namespace and topic)         boolean                     honoured at PRODUCER (broker/policycode.go)
//	…/offloadPolicies, …/offloadThreshold, …/offloadThresholdInSeconds, …/offloadDeletionLagMs, …/offload   refused (405): not applicable
//
// A policy lakegate does not enforce yet is accepted only with the value
// that asks for what lakegate does anyway; any other value is refused
// (405) with the reason — never stored silently. GET answers the level's
// own value (null: none); the namespace's GET shows them under Pulsar's
// Policies field names (policyFields).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/broker"
)

// Properties of the policies kept as code (stream and namespace).
const (
	persistenceProperty        = "lakegate.persistence"
	inactiveTopicProperty      = "lakegate.inactiveTopicPolicies"
	subExpirationProperty      = "lakegate.subscriptionExpirationMinutes"
	delayedDeliveryProperty    = "lakegate.delayedDelivery"
	subscribeRateProperty      = "lakegate.subscribeRate"
	errOffloadNotApplicableMsg = "lakegate stores in the object store already; offload does not apply"
)

// errPolicyNotEnforced: a policy value lakegate would not enforce (405,
// with the reason). Surfaces from the set paths of codePolicies.
var errPolicyNotEnforced = fmt.Errorf("%w: policy not enforced by lakegate", errAdminMethodNotAllowed)

// codePolicy is one policy of codePolicies: its property, paths (""
// when a level has none), its field in the namespace's Policies, and its
// value read and checked from a request.
type codePolicy struct {
	prop              string
	topicPath, nsPath string
	nsField           string
	valueOf           func(*admin, *http.Request) (string, error)
}

var codePolicies = []codePolicy{
	{broker.AutoTopicCreationProperty, "", "autoTopicCreation", "autoTopicCreationOverride", noAdmin(autoTopicCreationOf)},
	{persistenceProperty, "persistence", "persistence", "persistence", noAdmin(persistenceOf)},
	{inactiveTopicProperty, "inactiveTopicPolicies", "inactiveTopicPolicies", "inactive_topic_policies", noAdmin(inactiveTopicOf)},
	{subExpirationProperty, "subscriptionExpirationTime", "subscriptionExpirationTime", "subscription_expiration_time_minutes", noAdmin(subExpirationOf)},
	{delayedDeliveryProperty, "delayedDelivery", "delayedDelivery", "delayed_delivery_policies", noAdmin(delayedDeliveryOf)},
	{subscribeRateProperty, "subscribeRate", "subscribeRate", "", noAdmin(subscribeRateOf)},
	{broker.MaxMessageSizeProperty, "maxMessageSize", "", "", (*admin).maxMessageSizeOf},
	{broker.SchemaValidationProperty, "schemaValidationEnforced", "schemaValidationEnforced", "schema_validation_enforced", noAdmin(schemaValidationOf)},
}

// codeRoutes are the rows of codePolicies and of the refused offload
// paths (appended in routes, routes.go).
func (a *admin) codeRoutes() []route {
	const p = "/admin/v2/persistent/{tenant}/{ns}/{topic}/"
	const nsp = "/admin/v2/namespaces/{tenant}/{ns}/"
	var rs []route
	for _, cp := range codePolicies {
		if cp.topicPath != "" {
			rs = append(rs,
				route{"GET " + p + cp.topicPath, ruleLookup, handler(func(r *http.Request) (any, error) { return a.getTopicProperty(r, cp.prop) })},
				route{"POST " + p + cp.topicPath, ruleTenant, handler(a.setTopicCode(cp))},
				route{"DELETE " + p + cp.topicPath, ruleTenant, handler(func(r *http.Request) (any, error) { return a.changeTopicProperty(r, cp.prop, nil, false) })},
			)
		}
		if cp.nsPath != "" {
			rs = append(rs,
				route{"GET " + nsp + cp.nsPath, ruleTenant, handler(a.getNamespaceProperty(cp.prop))},
				route{"POST " + nsp + cp.nsPath, ruleTenant, handler(a.setNamespacePolicy(cp.prop, func(r *http.Request) (string, error) { return cp.valueOf(a, r) }))},
				route{"DELETE " + nsp + cp.nsPath, ruleTenant, handler(a.setNamespacePolicy(cp.prop, nil))},
			)
		}
	}
	// Offload: refused; reading it answers "none", removing it is done.
	for _, path := range []string{nsp + "offloadPolicies", nsp + "offloadThreshold", nsp + "offloadThresholdInSeconds", nsp + "offloadDeletionLagMs",
		p + "offloadPolicies", p + "offload"} {
		rs = append(rs,
			route{"POST " + path, ruleTenant, handler(offloadRefused)},
			route{"PUT " + path, ruleTenant, handler(offloadRefused)},
			route{"GET " + path, ruleTenant, handler(offloadNone)},
			route{"DELETE " + path, ruleTenant, handler(func(*http.Request) (any, error) { return nil, nil })},
		)
	}
	rs = append(rs, route{"DELETE " + nsp + "removeOffloadPolicies", ruleTenant, handler(func(*http.Request) (any, error) { return nil, nil })})
	return rs
}

func (a *admin) setTopicCode(cp codePolicy) handler {
	return func(r *http.Request) (any, error) {
		if cp.valueOf == nil {
			return nil, fmt.Errorf("%w: no topic-level policy", errAdminMethodNotAllowed)
		}
		v, err := cp.valueOf(a, r)
		if err != nil {
			return nil, err
		}
		return a.changeTopicProperty(r, cp.prop, &v, false)
	}
}

func offloadRefused(r *http.Request) (any, error) {
	return nil, fmt.Errorf("%w: %s: %s", errAdminMethodNotAllowed, r.URL.Path, errOffloadNotApplicableMsg)
}

// offloadNone answers Pulsar's "not set" of each offload path.
func offloadNone(r *http.Request) (any, error) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/offloadThreshold"), strings.HasSuffix(r.URL.Path, "/offloadThresholdInSeconds"):
		return -1, nil
	case strings.HasSuffix(r.URL.Path, "/offload"):
		return map[string]any{"status": "NOT_RUN", "lastError": errOffloadNotApplicableMsg}, nil
	}
	return jsonNull, nil
}

// policyFields adds the policies of codePolicies that props hold to a
// namespace's Policies (getNamespace, admin.go).
func policyFields(props map[string]string, pol map[string]any) {
	for _, cp := range codePolicies {
		if v, ok := props[cp.prop]; ok && cp.nsField != "" {
			pol[cp.nsField] = json.RawMessage(v)
		}
	}
	if _, ok := pol["schema_validation_enforced"]; !ok {
		pol["schema_validation_enforced"] = false
	}
	pol["offload_threshold"] = -1
}

// bodyJSON decodes the request's JSON body into a new T; what names
// its shape in errors.
func bodyJSON[T any](r *http.Request, what string) (T, error) {
	var v T
	b, err := readBody(r)
	if err != nil {
		return v, err
	}
	if b == nil {
		return v, fmt.Errorf("%w: the body must be a %s", errAdminBadRequest, what)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("%w: %s: %v", errAdminBadRequest, what, err)
	}
	return v, nil
}

// numberOf reads an integer from the body (or query parameter name).
func numberOf(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		b, err := readBody(r)
		if err != nil {
			return 0, err
		}
		v = strings.TrimSpace(string(b))
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q: want an integer", errAdminBadRequest, name, v)
	}
	return n, nil
}

func marshalled(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func autoTopicCreationOf(r *http.Request) (string, error) {
	ac, err := bodyJSON[broker.AutoTopicCreation](r, `AutoTopicCreationOverride {"allowAutoTopicCreation": true, "topicType": "non-partitioned"|"partitioned", "defaultNumPartitions": N}`)
	if err != nil {
		return "", err
	}
	if err := broker.CheckAutoTopicCreation(ac); err != nil {
		return "", fmt.Errorf("%w: %v", errAdminPrecondition, err)
	}
	return marshalled(ac)
}

// persistencePolicies is Pulsar's PersistencePolicies.
type persistencePolicies struct {
	Ensemble       int     `json:"bookkeeperEnsemble"`
	WriteQuorum    int     `json:"bookkeeperWriteQuorum"`
	AckQuorum      int     `json:"bookkeeperAckQuorum"`
	MarkDeleteRate float64 `json:"managedLedgerMaxMarkDeleteRate"`
	StorageClass   string  `json:"managedLedgerStorageClassName,omitempty"`
}

// persistenceOf accepts what Pulsar accepts (ensemble ≥ write quorum ≥
// ack quorum ≥ 0): stored and answered, with no effect — the object
// store replicates, not bookies.
func persistenceOf(r *http.Request) (string, error) {
	p, err := bodyJSON[persistencePolicies](r, `PersistencePolicies {"bookkeeperEnsemble": E, "bookkeeperWriteQuorum": W, "bookkeeperAckQuorum": A, "managedLedgerMaxMarkDeleteRate": R}`)
	if err != nil {
		return "", err
	}
	if p.AckQuorum < 0 || p.WriteQuorum < p.AckQuorum || p.Ensemble < p.WriteQuorum || p.MarkDeleteRate < 0 {
		return "", fmt.Errorf("%w: persistence: want bookkeeperEnsemble >= bookkeeperWriteQuorum >= bookkeeperAckQuorum >= 0 and a mark-delete rate >= 0", errAdminPrecondition)
	}
	return marshalled(p)
}

// inactiveTopicPolicies is Pulsar's InactiveTopicPolicies.
type inactiveTopicPolicies struct {
	Mode                string `json:"inactiveTopicDeleteMode"`
	MaxInactiveSeconds  int    `json:"maxInactiveDurationSeconds"`
	DeleteWhileInactive bool   `json:"deleteWhileInactive"`
}

func inactiveTopicOf(r *http.Request) (string, error) {
	p, err := bodyJSON[inactiveTopicPolicies](r, `InactiveTopicPolicies {"inactiveTopicDeleteMode": "delete_when_no_subscriptions"|"delete_when_subscriptions_caught_up", "maxInactiveDurationSeconds": S, "deleteWhileInactive": B}`)
	if err != nil {
		return "", err
	}
	if p.Mode != "" && p.Mode != "delete_when_no_subscriptions" && p.Mode != "delete_when_subscriptions_caught_up" {
		return "", fmt.Errorf("%w: inactiveTopicDeleteMode %q: want delete_when_no_subscriptions or delete_when_subscriptions_caught_up", errAdminBadRequest, p.Mode)
	}
	if p.DeleteWhileInactive {
		return "", fmt.Errorf("%w: deleteWhileInactive: lakegate does not delete inactive topics (yet); only deleteWhileInactive false is accepted", errPolicyNotEnforced)
	}
	return marshalled(p)
}

func subExpirationOf(r *http.Request) (string, error) {
	n, err := numberOf(r, "subscriptionExpirationTimeInMinutes")
	if err != nil {
		return "", err
	}
	if n < 0 {
		return "", fmt.Errorf("%w: subscriptionExpirationTime %d: want minutes, 0 or more", errAdminPrecondition, n)
	}
	if n > 0 {
		return "", fmt.Errorf("%w: subscriptionExpirationTime: lakegate does not expire subscriptions (yet); only 0 (never) is accepted", errPolicyNotEnforced)
	}
	return strconv.FormatInt(n, 10), nil
}

// delayedDeliveryPolicies is Pulsar's DelayedDeliveryPolicies.
type delayedDeliveryPolicies struct {
	TickTime   int64 `json:"tickTime"`
	Active     bool  `json:"active"`
	MaxDelayMs int64 `json:"maxDeliveryDelayInMillis"`
}

func delayedDeliveryOf(r *http.Request) (string, error) {
	p, err := bodyJSON[delayedDeliveryPolicies](r, `DelayedDeliveryPolicies {"active": true, "tickTime": MS, "maxDeliveryDelayInMillis": MS}`)
	if err != nil {
		return "", err
	}
	if p.TickTime < 0 || p.MaxDelayMs < 0 {
		return "", fmt.Errorf("%w: delayedDelivery: tickTime and maxDeliveryDelayInMillis must be 0 or more", errAdminPrecondition)
	}
	if !p.Active || p.MaxDelayMs > 0 {
		return "", fmt.Errorf("%w: delayedDelivery: lakegate always delivers delayed messages at their time (docs/delayed-delivery.md); only active true without maxDeliveryDelayInMillis is accepted", errPolicyNotEnforced)
	}
	return marshalled(p)
}

// subscribeRate is Pulsar's SubscribeRate.
type subscribeRate struct {
	PerConsumer   int `json:"subscribeThrottlingRatePerConsumer"`
	PeriodSeconds int `json:"ratePeriodInSecond"`
}

func subscribeRateOf(r *http.Request) (string, error) {
	p, err := bodyJSON[subscribeRate](r, `SubscribeRate {"subscribeThrottlingRatePerConsumer": N, "ratePeriodInSecond": S}`)
	if err != nil {
		return "", err
	}
	if p.PerConsumer > 0 {
		return "", fmt.Errorf("%w: subscribeRate: lakegate does not throttle subscribes (yet); only a rate of 0 or less (not limited) is accepted", errPolicyNotEnforced)
	}
	return marshalled(p)
}

// maxMessageSizeOf accepts what Pulsar does: 0 (the node's) up to the
// node's maxMessageSize.
func (a *admin) maxMessageSizeOf(r *http.Request) (string, error) {
	n, err := numberOf(r, "maxMessageSize")
	if err != nil {
		return "", err
	}
	if node := int64(a.brk.NodeMaxMessageSize()); n < 0 || n > node {
		return "", fmt.Errorf("%w: maxMessageSize %d: want bytes from 0 (the node's) to the node's maxMessageSize, %d", errAdminPrecondition, n, node)
	}
	return strconv.FormatInt(n, 10), nil
}

// noAdmin makes a value reader of codePolicy.valueOf.
func noAdmin(f func(*http.Request) (string, error)) func(*admin, *http.Request) (string, error) {
	return func(_ *admin, r *http.Request) (string, error) { return f(r) }
}

func schemaValidationOf(r *http.Request) (string, error) {
	b, err := readBody(r)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if q := r.URL.Query().Get("schemaValidationEnforced"); v == "" {
		v = q
	}
	if v == "true" || v == "false" {
		return v, nil
	}
	return "", fmt.Errorf("%w: schemaValidationEnforced %q: want true or false", errAdminBadRequest, v)
}

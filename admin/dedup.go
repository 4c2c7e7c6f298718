package admin

// Topic deduplication policy through the admin REST API, the way Pulsar's
// `pulsar-admin topics set-deduplication` and the client admin libraries
// call it:
//
//	GET    /admin/v2/persistent/{tenant}/{ns}/{topic}/deduplicationEnabled  → true | false | null (no policy;
//	                                                                       false with ?applied=true)
//	POST   /admin/v2/persistent/{tenant}/{ns}/{topic}/deduplicationEnabled  body true | false
//	DELETE /admin/v2/persistent/{tenant}/{ns}/{topic}/deduplicationEnabled  (back to the default: off)
//
// The policy is the stream property broker.DedupProperty, so it holds for every
// partition of a partitioned topic. A partition reads it when it is loaded;
// so that a change takes effect at once, POST and DELETE unload the topic's
// loaded partitions gracefully, wherever they are served (appends in flight
// are answered first); their producers and consumers reconnect and find the
// new policy, as with Pulsar's live policy change.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

const (
	// dedupPolicyRetries bounds the compare-and-set loop on stream properties.
	dedupPolicyRetries = 8
)

func (a *admin) getDeduplication(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	switch v := ref.md.Properties[broker.DedupProperty]; {
	case v == "true" || v == "false":
		return v == "true", nil
	case queryBool(r, "applied"): // the effective value: the namespace's, else off
		on, err := a.brk.DedupEnabled(r.Context(), ref.md)
		if err != nil {
			return nil, err
		}
		return on, nil
	default:
		return jsonNull, nil // no topic-level policy, as in Pulsar
	}
}

func (a *admin) setDeduplication(r *http.Request) (any, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	var on bool
	if b == nil {
		err = fmt.Errorf("%w: the body must be true or false", errAdminBadRequest)
	} else if jerr := json.Unmarshal(b, &on); jerr != nil {
		err = fmt.Errorf("%w: the body must be true or false: %v", errAdminBadRequest, jerr)
	}
	if err != nil {
		return nil, err
	}
	value := "false"
	if on {
		value = "true"
	}
	return a.changeDeduplication(r, &value)
}

func (a *admin) removeDeduplication(r *http.Request) (any, error) {
	return a.changeDeduplication(r, nil)
}

// changeDeduplication sets (value != nil) or removes the policy, then
// unloads the loaded partitions so the next use reads it.
func (a *admin) changeDeduplication(r *http.Request, value *string) (any, error) {
	return a.changeTopicProperty(r, broker.DedupProperty, value, true)
}

// Namespace deduplication policy (`pulsar-admin namespaces
// set-deduplication`), the default for the namespace's topics that have no
// topic-level policy:
//
//	GET    /admin/v2/namespaces/{tenant}/{ns}/deduplication  → true | false | null
//	POST   /admin/v2/namespaces/{tenant}/{ns}/deduplication  body true | false
//	DELETE /admin/v2/namespaces/{tenant}/{ns}/deduplication
//
// Stored as the namespace property broker.DedupProperty; Broker.DedupEnabled reads it
// when a topic loads. A change unloads the namespace's loaded topics
// gracefully so that their next load reads it.

func (a *admin) namespaceOf(r *http.Request) (string, error) {
	tenant, ns := r.PathValue("tenant"), r.PathValue("ns")
	if err := errors.Join(validName("tenant", tenant), validName("namespace", ns)); err != nil {
		return "", err
	}
	if err := a.checkNamespace(r.Context(), tenant, ns); err != nil {
		return "", err
	}
	return tenant + "/" + ns, nil
}

func (a *admin) getNamespaceDeduplication(r *http.Request) (any, error) {
	name, err := a.namespaceOf(r)
	var nsmd lakestream.Namespace
	if err == nil {
		nsmd, err = a.cat.LoadNamespace(r.Context(), name)
	}
	if err != nil {
		return nil, err
	}
	switch v := nsmd.Properties[broker.DedupProperty]; v {
	case "true", "false":
		return v == "true", nil
	default:
		return nil, nil
	}
}

func (a *admin) setNamespaceDeduplication(r *http.Request) (any, error) {
	b, err := readBody(r)
	var on bool
	if err == nil && b == nil {
		err = fmt.Errorf("%w: the body must be true or false", errAdminBadRequest)
	} else if err == nil {
		if jerr := json.Unmarshal(b, &on); jerr != nil {
			err = fmt.Errorf("%w: the body must be true or false: %v", errAdminBadRequest, jerr)
		}
	}
	if err != nil {
		return nil, err
	}
	return a.changeNamespaceDeduplication(r, map[bool]string{true: "true", false: "false"}[on])
}

func (a *admin) removeNamespaceDeduplication(r *http.Request) (any, error) {
	return a.changeNamespaceDeduplication(r, "")
}

// changeNamespaceDeduplication sets value ("" removes the policy).
func (a *admin) changeNamespaceDeduplication(r *http.Request, value string) (any, error) {
	ctx := r.Context()
	name, err := a.namespaceOf(r)
	if err != nil {
		return nil, err
	}
	if value == "" {
		err = a.cat.RemoveNamespaceProperties(ctx, name, []string{broker.DedupProperty})
	} else {
		err = a.cat.SetNamespaceProperties(ctx, name, map[string]string{broker.DedupProperty: value})
	}
	if err == nil {
		var ids []lakestream.StreamIdentifier
		if ids, err = a.cat.ListStreams(ctx, name); err == nil {
			err = a.node.ReloadStreams(ctx, ids)
		}
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

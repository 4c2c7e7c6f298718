package admin

// Admin REST: authentication, authorization and grants (docs/security.md).
//
// With authentication on, every admin request authenticates (a bearer
// token, or a client certificate over HTTPS): 401 with a reason otherwise.
// Every route names who may call it (authRule); with authorization on, a
// role that may not gets 403 with a reason. Grants through Pulsar's paths:
//
//	GET    /admin/v2/namespaces/{t}/{ns}/permissions                    role → actions
//	POST   /admin/v2/namespaces/{t}/{ns}/permissions/{role}             body ["produce","consume"]
//	DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{role}
//	GET    /admin/v2/namespaces/{t}/{ns}/permissions/subscription       subscription → roles
//	POST   /admin/v2/namespaces/{t}/{ns}/permissions/subscription/{sub} body ["role", …]
//	DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{sub}/{role}
//	GET    /admin/v2/persistent/{t}/{ns}/{topic}/permissions            role → actions (namespace's and topic's)
//	POST   /admin/v2/persistent/{t}/{ns}/{topic}/permissions/{role}     body ["produce","consume"]
//	DELETE /admin/v2/persistent/{t}/{ns}/{topic}/permissions/{role}

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// authRule decides whether role may make request r (authorization on).
type authRule func(a *admin, r *http.Request, role string) error

var (
	// ruleAny: any authenticated role.
	ruleAny authRule = func(*admin, *http.Request, string) error { return nil }
	// ruleSuper: superusers.
	ruleSuper authRule = func(a *admin, r *http.Request, role string) error { return a.node.CheckSuperUser(role) }
	// ruleTenant: superusers and the admins of the path's tenant.
	ruleTenant authRule = func(a *admin, r *http.Request, role string) error {
		return a.node.CheckSuperOrTenantAdmin(r.Context(), role, r.PathValue("tenant"))
	}
	// ruleNamespaceLookup: listing a namespace's topics.
	ruleNamespaceLookup authRule = func(a *admin, r *http.Request, role string) error {
		return a.node.CheckNamespaceLookup(r.Context(), role, r.PathValue("tenant")+"/"+r.PathValue("ns"))
	}
	// ruleLookup: reading a topic's state (produce or consume).
	ruleLookup authRule = func(a *admin, r *http.Request, role string) error {
		return a.checkPathTopic(r, role, broker.ActionLookup)
	}
	// ruleConsume: reading a topic's messages.
	ruleConsume authRule = func(a *admin, r *http.Request, role string) error {
		return a.checkPathTopic(r, role, broker.ActionConsume)
	}
	// ruleSubscription: changing the path's subscription (consume, and the
	// namespace's restriction of that subscription).
	ruleSubscription authRule = func(a *admin, r *http.Request, role string) error {
		tn, err := pathTopic(r)
		if err != nil {
			return nil // the handler answers the bad path
		}
		return a.node.CheckSubscription(r.Context(), role, tn, r.PathValue("sub"))
	}
)

func (a *admin) checkPathTopic(r *http.Request, role, action string) error {
	tn, err := pathTopic(r)
	if err != nil {
		return nil // the handler answers the bad path
	}
	return a.node.CheckTopic(r.Context(), role, tn, action)
}

// roleKey carries the authenticated role in a request's context.
type roleKey struct{}

// requestRole is the role authenticated for r ("" without authentication).
func requestRole(r *http.Request) string {
	role, _ := r.Context().Value(roleKey{}).(string)
	return role
}

// guarded authenticates a request and checks rule before h.
func (a *admin) guarded(rule authRule, h http.Handler) writer {
	return func(w http.ResponseWriter, r *http.Request) error {
		au := a.cfg.Auth
		if au == nil {
			h.ServeHTTP(w, r)
			return nil
		}
		id, err := au.AuthenticateHTTP(r)
		if err != nil {
			a.node.CountAuthFailure(auth.Reason(err))
			return fmt.Errorf("%w: %w", broker.ErrAuthentication, err)
		}
		roles, err := a.httpRoles(r, id.Role)
		if err == nil && a.node.AuthzOn() {
			for _, role := range roles {
				if err = rule(a, r, role); err != nil {
					break
				}
			}
		}
		if err != nil {
			if errors.Is(err, broker.ErrAuthorization) {
				a.node.CountAuthFailure("unauthorized")
			}
			return err
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), roleKey{}, roles[len(roles)-1])))
		return nil
	}
}

// originalPrincipalHeader names the client a proxy's admin request is made
// for (Pulsar's X-Original-Principal: Apache Pulsar's proxy sets it, and so
// does a member forwarding a request).
const originalPrincipalHeader = "X-Original-Principal"

// httpRoles are the roles an admin request is authorized for: the
// authenticated one and, when it is a proxy role (Config.ProxyRoles)
// naming a client in X-Original-Principal, that client too — both must be
// allowed, as on the binary protocol. Only a proxy role may name one, and
// never another proxy role. The last role is the request's client.
func (a *admin) httpRoles(r *http.Request, role string) ([]string, error) {
	orig := r.Header.Get(originalPrincipalHeader)
	if orig == "" || orig == role {
		return []string{role}, nil
	}
	proxyRoles := a.cfg.ProxyRoles
	switch {
	case !auth.IsProxyRole(role, proxyRoles):
		return nil, fmt.Errorf("%w: role %q is not a proxy role (auth.proxyRoles) and may not name %s", broker.ErrAuthorization, role, originalPrincipalHeader)
	case auth.IsProxyRole(orig, proxyRoles):
		return nil, fmt.Errorf("%w: the original principal %q is a proxy role", broker.ErrAuthorization, orig)
	}
	return []string{role, orig}, nil
}

// --- grants ---

// permissionsJSON is role → actions.
type permissionsJSON map[string][]string

func grantsOf(props map[string]string) permissionsJSON {
	out := permissionsJSON{}
	for k, v := range props {
		if role, ok := strings.CutPrefix(k, broker.PermPrefix); ok && v != "" {
			out[role] = strings.Split(v, ",")
		}
	}
	return out
}

// readActions reads a grant body: a JSON list of actions.
func readActions(r *http.Request) (string, error) {
	b, err := readBody(r)
	if err != nil {
		return "", err
	}
	var actions []string
	if b == nil || json.Unmarshal(b, &actions) != nil {
		return "", fmt.Errorf("%w: the body must be a JSON list of actions (%s)", errAdminBadRequest, strings.Join(broker.GrantableActions, ", "))
	}
	for _, act := range actions {
		if !slices.Contains(broker.GrantableActions, act) {
			return "", fmt.Errorf("%w: unknown action %q (want %s)", errAdminBadRequest, act, strings.Join(broker.GrantableActions, ", "))
		}
	}
	slices.Sort(actions)
	return strings.Join(slices.Compact(actions), ","), nil
}

// roleOf is the path's role, validated.
func roleOf(r *http.Request) (string, error) {
	role := r.PathValue("role")
	if role == "" || strings.ContainsAny(role, ",\x00") || len(role) > 256 {
		return "", fmt.Errorf("%w: role %q", errAdminBadRequest, role)
	}
	return role, nil
}

func (a *admin) getNamespacePermissions(r *http.Request) (any, error) {
	name, err := a.namespaceOf(r)
	var ns lakestream.Namespace
	if err == nil {
		ns, err = a.cat.LoadNamespace(r.Context(), name)
	}
	if err != nil {
		return nil, err
	}
	return grantsOf(ns.Properties), nil
}

func (a *admin) grantNamespacePermission(r *http.Request) (any, error) {
	name, err := a.namespaceOf(r)
	role, rerr := roleOf(r)
	var actions string
	if err == nil && rerr == nil {
		actions, err = readActions(r)
	}
	if err = errors.Join(err, rerr); err == nil {
		err = a.cat.SetNamespaceProperties(r.Context(), name, map[string]string{broker.PermPrefix + role: actions})
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) revokeNamespacePermission(r *http.Request) (any, error) {
	name, err := a.namespaceOf(r)
	role, rerr := roleOf(r)
	if err = errors.Join(err, rerr); err == nil {
		err = a.cat.RemoveNamespaceProperties(r.Context(), name, []string{broker.PermPrefix + role})
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) getSubscriptionPermissions(r *http.Request) (any, error) {
	name, err := a.namespaceOf(r)
	var ns lakestream.Namespace
	if err == nil {
		ns, err = a.cat.LoadNamespace(r.Context(), name)
	}
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for k, v := range ns.Properties {
		if sub, ok := strings.CutPrefix(k, broker.SubPermPrefix); ok && v != "" {
			out[sub] = strings.Split(v, ",")
		}
	}
	return out, nil
}

func (a *admin) grantSubscriptionPermission(r *http.Request) (any, error) {
	name, err := a.namespaceOf(r)
	sub := r.PathValue("sub")
	var roles []string
	if err == nil {
		if err = validName("subscription", sub); err == nil {
			var b []byte
			if b, err = readBody(r); err == nil && (b == nil || json.Unmarshal(b, &roles) != nil || len(roles) == 0) {
				err = fmt.Errorf("%w: the body must be a JSON list of roles", errAdminBadRequest)
			}
		}
	}
	for _, role := range roles {
		if role == "" || strings.ContainsAny(role, ",\x00") {
			err = errors.Join(err, fmt.Errorf("%w: role %q", errAdminBadRequest, role))
		}
	}
	if err == nil {
		var ns lakestream.Namespace
		if ns, err = a.cat.LoadNamespace(r.Context(), name); err == nil {
			have := strings.Split(ns.Properties[broker.SubPermPrefix+sub], ",")
			all := slices.Compact(slices.Sorted(func(yield func(string) bool) {
				for _, x := range append(have, roles...) {
					if x != "" && !yield(x) {
						return
					}
				}
			}))
			err = a.cat.SetNamespaceProperties(r.Context(), name, map[string]string{broker.SubPermPrefix + sub: strings.Join(all, ",")})
		}
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) revokeSubscriptionPermission(r *http.Request) (any, error) {
	name, err := a.namespaceOf(r)
	sub, role := r.PathValue("sub"), r.PathValue("role")
	if err == nil {
		var ns lakestream.Namespace
		if ns, err = a.cat.LoadNamespace(r.Context(), name); err == nil {
			roles := slices.DeleteFunc(strings.Split(ns.Properties[broker.SubPermPrefix+sub], ","), func(x string) bool { return x == role || x == "" })
			if len(roles) == 0 {
				err = a.cat.RemoveNamespaceProperties(r.Context(), name, []string{broker.SubPermPrefix + sub})
			} else {
				err = a.cat.SetNamespaceProperties(r.Context(), name, map[string]string{broker.SubPermPrefix + sub: strings.Join(roles, ",")})
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// topicGrantStream is the stream holding a topic's grants: the base topic
// (a grant on a partitioned topic covers its partitions).
func (a *admin) topicGrantStream(r *http.Request) (lakestream.StreamMetadata, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return lakestream.StreamMetadata{}, err
	}
	return ref.md, nil
}

func (a *admin) getTopicPermissions(r *http.Request) (any, error) {
	md, err := a.topicGrantStream(r)
	var ns lakestream.Namespace
	if err == nil {
		ns, err = a.cat.LoadNamespace(r.Context(), md.ID.Namespace)
	}
	if err != nil {
		return nil, err
	}
	out := grantsOf(ns.Properties)
	for role, acts := range grantsOf(md.Properties) {
		out[role] = slices.Compact(slices.Sorted(slices.Values(append(out[role], acts...))))
	}
	return out, nil
}

func (a *admin) changeTopicPermission(r *http.Request, grant bool) (any, error) {
	md, err := a.topicGrantStream(r)
	role, rerr := roleOf(r)
	var actions string
	if err == nil && rerr == nil && grant {
		actions, err = readActions(r)
	}
	if err = errors.Join(err, rerr); err != nil {
		return nil, err
	}
	for range dedupPolicyRetries {
		props := maps.Clone(md.Properties)
		if props == nil {
			props = map[string]string{}
		}
		if grant {
			props[broker.PermPrefix+role] = actions
		} else {
			delete(props, broker.PermPrefix+role)
		}
		var ok bool
		if md, ok, err = a.cat.ReplaceStreamProperties(r.Context(), md.ID, props, md.MetadataVersion); err != nil {
			return nil, err
		}
		if ok {
			return nil, nil
		}
	}
	return nil, fmt.Errorf("%w: topic %s properties changed concurrently, retry", errAdminConflict, md.ID.Name)
}

func (a *admin) grantTopicPermission(r *http.Request) (any, error) {
	return a.changeTopicPermission(r, true)
}

func (a *admin) revokeTopicPermission(r *http.Request) (any, error) {
	return a.changeTopicPermission(r, false)
}

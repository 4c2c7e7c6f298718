package gateway

// Admin REST: the cluster (cluster.go, docs/cluster.md).
//
//	GET /lookup/v2/topic/persistent/{tenant}/{ns}/{topic}   the owner's URLs (`pulsar-admin topics lookup`)
//	GET /admin/v2/brokers/{cluster}                         the live members' admin addresses
//	PUT /admin/v2/namespaces/{tenant}/{ns}/unload           unload every topic of a namespace
//
// Topic unload is in admin_topics.go.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/lakegate/lakegate/lakestream"
)

// lookupDataJSON is Pulsar's LookupData.
type lookupDataJSON struct {
	BrokerURL    string `json:"brokerUrl"`
	BrokerURLTLS string `json:"brokerUrlTls,omitempty"`
	HTTPURL      string `json:"httpUrl"`
	HTTPURLTLS   string `json:"httpUrlTls,omitempty"`
	NativeURL    string `json:"nativeUrl"`
}

func lookupData(m lakestream.Member) lookupDataJSON {
	return lookupDataJSON{
		BrokerURL: m.Endpoints["pulsar"], BrokerURLTLS: m.Endpoints["pulsar+ssl"],
		HTTPURL: m.Endpoints["http"], HTTPURLTLS: m.Endpoints["https"],
		NativeURL: m.Endpoints["pulsar"],
	}
}

// lookupTopic answers where a topic is served: its owner, or (nobody owns
// it) the member placement picks, which takes it on first use — this node
// takes it now when placement picks it.
func (a *admin) lookupTopic(w http.ResponseWriter, r *http.Request) {
	tn, err := pathTopic(r)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	ctx := r.Context()
	unit, err := a.srv.lookupUnit(ctx, tn.String())
	if err != nil {
		writeAdminError(w, err)
		return
	}
	owner, err := a.srv.ownerOrPlacement(ctx, unit)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, lookupData(owner))
}

// ownerOrPlacement is the member serving unit: its owner; else the member
// placement picks (this node acquires the unit when that is itself).
func (s *Server) ownerOrPlacement(ctx context.Context, unit string) (lakestream.Member, error) {
	m := s.cfg.Membership
	if m == nil {
		return s.self(), nil
	}
	if owner, ok, err := m.Owner(ctx, unit); err != nil || ok {
		return owner, err
	}
	ms, err := s.members(ctx)
	if err != nil {
		return lakestream.Member{}, err
	}
	if target, ok := placement(unit, ms); ok && target.ID != m.Self().ID {
		return target, nil
	}
	if _, err := m.Acquire(ctx, unit); err != nil {
		if owner, ok, oerr := m.Owner(ctx, unit); oerr == nil && ok {
			return owner, nil // lost a race: the winner serves it
		}
		return lakestream.Member{}, err
	}
	return m.Self(), nil
}

// listBrokers lists the live members by their admin address (host:port),
// as Pulsar lists its brokers' web service addresses.
func (a *admin) listBrokers(w http.ResponseWriter, r *http.Request) {
	if c := r.PathValue("cluster"); c != adminClusterName {
		writeAdminError(w, fmt.Errorf("%w: cluster %q does not exist", errAdminNotFound, c))
		return
	}
	var members []lakestream.Member
	if a.srv.cfg.Membership == nil {
		members = []lakestream.Member{a.srv.self()}
	} else {
		var err error
		if members, err = a.srv.cfg.Membership.Members(r.Context()); err != nil {
			writeAdminError(w, err)
			return
		}
	}
	out := []string{}
	for _, m := range members {
		if u, err := url.Parse(m.Endpoints["http"]); err == nil && u.Host != "" {
			out = append(out, u.Host)
		}
	}
	slices.Sort(out)
	writeJSON(w, http.StatusOK, out)
}

// unloadNamespace unloads every topic of a namespace wherever it is served.
func (a *admin) unloadNamespace(w http.ResponseWriter, r *http.Request) {
	name, err := a.namespaceOf(r)
	var ids []lakestream.StreamIdentifier
	if err == nil {
		ids, err = a.cat.ListStreams(r.Context(), name)
	}
	if err == nil {
		err = a.srv.reloadStreams(r.Context(), ids)
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	noContent(w)
}

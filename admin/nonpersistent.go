package admin

// Admin REST of non-persistent topics (nonpersistent.go):
//
//	GET /admin/v2/non-persistent/{tenant}/{ns}                     the topics served now, by any member
//	GET /admin/v2/non-persistent/{tenant}/{ns}/partitioned         [] (never partitioned)
//	GET /admin/v2/non-persistent/{tenant}/{ns}/{topic}/partitions  {"partitions":0}
//	GET /admin/v2/non-persistent/{tenant}/{ns}/{topic}/stats       its owner's stats (404 when nobody serves it)
//	PUT /admin/v2/non-persistent/{tenant}/{ns}/{topic}/unload      its clients reconnect (to the next owner)
//
// A non-persistent topic exists while a node serves it. The list asks
// every live member for the ones it serves (members' admin APIs, marked as
// forwarded so they answer for themselves only).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// npPathTopic parses the {tenant}/{ns}/{topic} of a non-persistent route.
func npPathTopic(r *http.Request) (broker.TopicName, error) {
	tenant, ns, local := r.PathValue("tenant"), r.PathValue("ns"), r.PathValue("topic")
	if err := errors.Join(validName("tenant", tenant), validName("namespace", ns), validName("topic", local)); err != nil {
		return broker.TopicName{}, err
	}
	return broker.ParseTopicName("non-persistent://" + tenant + "/" + ns + "/" + local)
}

func (a *admin) listNPTopics(r *http.Request) (any, error) {
	tenant, ns := r.PathValue("tenant"), r.PathValue("ns")
	if err := a.checkNamespace(r.Context(), tenant, ns); err != nil {
		return nil, err
	}
	out := a.node.NPTopicsOf(tenant + "/" + ns)
	if m := a.cfg.Membership; r.Header.Get(broker.ForwardedHeader) == "" {
		members, err := m.Members(r.Context())
		if err != nil {
			return nil, err
		}
		for _, member := range members {
			if member.ID == m.Self().ID {
				continue
			}
			names, err := a.memberNPTopics(r, member)
			if err != nil {
				return nil, err
			}
			out = append(out, names...)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// memberNPTopics asks member for the non-persistent topics it serves.
func (a *admin) memberNPTopics(r *http.Request, member lakestream.Member) ([]string, error) {
	if broker.MemberHTTP(member) == "" {
		return nil, nil // a member without an admin API serves no clients' admin
	}
	base, err := a.node.PeerBase(member)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, base+r.URL.EscapedPath(), http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Header.Set(broker.ForwardedHeader, a.brk.Self().ID)
	if t := a.cfg.BrokerClientToken; t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := a.node.PeerClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: listing the non-persistent topics of %s: %w", broker.ErrServiceNotReady, member.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: listing the non-persistent topics of %s: HTTP %d", broker.ErrServiceNotReady, member.ID, resp.StatusCode)
	}
	var names []string
	if err := json.NewDecoder(io.LimitReader(resp.Body, adminForwardBytesMax)).Decode(&names); err != nil {
		return nil, fmt.Errorf("%w: listing the non-persistent topics of %s: %v", broker.ErrServiceNotReady, member.ID, err)
	}
	return names, nil
}

func (a *admin) listNPPartitioned(r *http.Request) (any, error) {
	if err := a.checkNamespace(r.Context(), r.PathValue("tenant"), r.PathValue("ns")); err != nil {
		return nil, err
	}
	return []string{}, nil
}

func (a *admin) npPartitions(r *http.Request) (any, error) {
	if _, err := npPathTopic(r); err != nil {
		return nil, err
	}
	return partitionedMetadata{Partitions: 0}, nil
}

// npOwned forwards a request about one non-persistent topic to the member
// serving it, when that is another member.
func (a *admin) npOwned(h http.Handler) writer {
	return func(w http.ResponseWriter, r *http.Request) error {
		m := a.cfg.Membership
		tn, err := npPathTopic(r)
		if err != nil {
			return err
		}
		if m == nil || r.Header.Get(broker.ForwardedHeader) != "" {
			h.ServeHTTP(w, r)
			return nil
		}
		owner, ok, err := m.Owner(r.Context(), tn.String())
		if err != nil {
			return err
		}
		if !ok || owner.ID == m.Self().ID {
			h.ServeHTTP(w, r)
			return nil
		}
		return a.forward(w, r, owner)
	}
}

// npStats answers the stats of the request's non-persistent topic if this
// node serves it.
func (a *admin) npStats(r *http.Request) (any, error) {
	tn, err := npPathTopic(r)
	if err != nil {
		return nil, err
	}
	st, ok := a.node.NPTopicStats(tn.String())
	if !ok {
		return nil, fmt.Errorf("%w: topic %s not found (a non-persistent topic exists while it has producers or consumers)", errAdminNotFound, tn)
	}
	return st, nil
}

func (a *admin) npUnload(r *http.Request) (any, error) {
	tn, err := npPathTopic(r)
	if err == nil {
		err = a.node.UnloadLocal(r.Context(), tn.String(), r.URL.Query().Get("destinationBroker"))
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

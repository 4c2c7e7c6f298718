package admin

// Admin REST: the cluster (cluster.go, docs/cluster.md).
//
//	GET /lookup/v2/topic/persistent/{tenant}/{ns}/{topic}   the owner's URLs (`pulsar-admin topics lookup`)
//	GET /admin/v2/brokers/{cluster}                         the live members' admin addresses
//	PUT /admin/v2/namespaces/{tenant}/{ns}/unload           unload every topic of a namespace
//
// Topic unload is in topics.go.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lakegate/lakegate/broker"
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
func (a *admin) lookupTopic(r *http.Request) (any, error) {
	tn, err := pathTopic(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	unit, err := a.node.LookupUnit(ctx, tn.String())
	if err != nil {
		return nil, err
	}
	owner, err := a.brk.OwnerOrPlacement(ctx, unit)
	if err != nil {
		return nil, err
	}
	return lookupData(owner), nil
}

// listBrokers lists the live members by their admin address (host:port),
// as Pulsar lists its brokers' web service addresses. GET /admin/v2/brokers
// (no cluster) lists this cluster's, as Pulsar's getActiveBrokers() does.
func (a *admin) listBrokers(r *http.Request) (any, error) {
	if c := r.PathValue("cluster"); c != "" && c != adminClusterName {
		return nil, fmt.Errorf("%w: cluster %q does not exist", errAdminNotFound, c)
	}
	members, err := a.cfg.Membership.Members(r.Context())
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, m := range members {
		if u, err := url.Parse(broker.MemberHTTP(m)); err == nil && u.Host != "" {
			out = append(out, u.Host)
		}
	}
	slices.Sort(out)
	return out, nil
}

// runtimeConfiguration answers GET /admin/v2/brokers/configuration/runtime
// (pulsar-admin brokers get-runtime-config; clusters list reads
// clusterName from it): the broker settings lakegate has an equivalent of,
// by Pulsar's names. No setting is dynamic (GET …/configuration is []).
func (a *admin) runtimeConfiguration(r *http.Request) (any, error) {
	cfg := a.cfg
	auto, ret := a.brk.DefaultAutoTopicCreation(), a.brk.DefaultRetention()
	return map[string]string{
		"clusterName":                   adminClusterName,
		"allowAutoTopicCreation":        strconv.FormatBool(auto.Allow),
		"allowAutoTopicCreationType":    auto.Type,
		"defaultNumPartitions":          strconv.Itoa(max(auto.DefaultNumPartitions, 1)),
		"defaultRetentionTimeInMinutes": strconv.FormatInt(ret.TimeMinutes, 10),
		"defaultRetentionSizeInMB":      strconv.FormatInt(ret.SizeMB, 10),
		"maxMessageSize":                strconv.Itoa(cfg.MaxMessageSize),
		"topicLevelPoliciesEnabled":     "true",
		"delayedDeliveryEnabled":        "true",
		"brokerDeduplicationEnabled":    "false",
		"authenticationEnabled":         strconv.FormatBool(cfg.Auth != nil),
		"authorizationEnabled":          strconv.FormatBool(cfg.Authorization),
	}, nil
}

// unloadNamespace unloads every topic of a namespace wherever it is served.
func (a *admin) unloadNamespace(r *http.Request) (any, error) {
	name, err := a.namespaceOf(r)
	var ids []lakestream.StreamIdentifier
	if err == nil {
		ids, err = a.cat.ListStreams(r.Context(), name)
	}
	if err == nil {
		err = a.node.ReloadStreams(r.Context(), ids)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// Routing admin requests to owners.
//
// Requests about one topic-partition's live state (stats, subscriptions,
// cursor resets, terminate) are served by the partition's owner: the node
// that receives one forwards it (owned wrapper) when another member owns
// the partition, and serves it otherwise (taking the partition when nobody
// owns it). Requests about a partitioned topic as a whole are fanned out to
// its partitions (fanOut), each routed the same way, and their answers
// combined. A forwarded request carries broker.ForwardedHeader and is never
// forwarded again.

// owned wraps a handler of a per-topic route: a request for one partition
// (or a non-partitioned topic) owned by another member is forwarded to it.
func (a *admin) owned(h http.Handler) writer {
	return func(w http.ResponseWriter, r *http.Request) error {
		m := a.cfg.Membership
		if m == nil || r.Header.Get(broker.ForwardedHeader) != "" {
			h.ServeHTTP(w, r)
			return nil
		}
		ref, err := a.refOf(r)
		if err != nil || ref.partitioned() {
			h.ServeHTTP(w, r) // errors and whole partitioned topics are answered here
			return nil
		}
		owner, ok, err := m.Owner(r.Context(), ref.name.String())
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

// forward relays r to member and copies the answer back; it writes
// nothing when it fails before the member answers.
func (a *admin) forward(w http.ResponseWriter, r *http.Request, member lakestream.Member) error {
	base, err := a.node.PeerBase(member)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = r.Header.Clone()
	req.Header.Set(broker.ForwardedHeader, a.brk.Self().ID)
	if t := a.cfg.BrokerClientToken; t != "" {
		req.Header.Set("Authorization", "Bearer "+t) // this node speaks for the client it authorized
		req.Header.Del(originalPrincipalHeader)      // (a proxy's client included)
	}
	resp, err := a.node.PeerClient().Do(req)
	if err != nil {
		return fmt.Errorf("%w: forwarding to %s, which serves the topic: %w", broker.ErrServiceNotReady, member.ID, err)
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(resp.Body, adminForwardBytesMax))
	return nil
}

// adminForwardBytesMax bounds a forwarded answer, in bytes.
const adminForwardBytesMax = 64 << 20

// partResult is the answer of one partition to a fanned-out request.
type partResult struct {
	partition int
	status    int
	header    http.Header
	body      bytes.Buffer
}

func (p *partResult) Header() http.Header         { return p.header }
func (p *partResult) Write(b []byte) (int, error) { return p.body.Write(b) }
func (p *partResult) WriteHeader(status int)      { p.status = status }

// ok reports a 2xx answer.
func (p *partResult) ok() bool { return p.status/100 == 2 }

// err is a non-2xx answer as an error with the partition's reason.
func (p *partResult) err() error {
	var e adminError
	json.Unmarshal(p.body.Bytes(), &e)
	return &statusError{status: p.status, reason: e.Reason}
}

// statusError carries a partition's HTTP status and reason to the combined
// answer (adminStatus keeps its status).
type statusError struct {
	status int
	reason string
}

func (e *statusError) Error() string { return e.reason }

// fanOut runs the request r, made for the partitioned topic ref as a whole,
// once per partition — the path's topic becomes "<topic>-partition-<i>" and
// suffix, when not empty, replaces the path after it — through this node's
// admin mux, so each goes to its partition's owner. only, when not nil,
// lists the partitions to run (default all). The partitions run
// concurrently (at most fanOutParallel at once); results are in the order
// run.
func (a *admin) fanOut(r *http.Request, ref topicRef, suffix string, only ...int) ([]*partResult, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	tn := ref.name
	prefix := "/admin/v2/persistent/" + url.PathEscape(tn.Tenant) + "/" + url.PathEscape(tn.Namespace) + "/" + url.PathEscape(tn.Local)
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok {
		return nil, fmt.Errorf("%w: cannot split %s per partition", errAdminBadRequest, r.URL.Path)
	}
	if suffix != "" {
		rest = suffix
	}
	parts := only
	if parts == nil {
		for i := range ref.md.Partitioning.NumPartitions {
			parts = append(parts, i)
		}
	}
	out := make([]*partResult, len(parts))
	sem := make(chan struct{}, fanOutParallel)
	var wg sync.WaitGroup
	for k, i := range parts {
		u := *r.URL
		u.RawPath = prefix + broker.PartitionSuffix + strconv.Itoa(i) + rest
		p, perr := url.PathUnescape(u.RawPath)
		if perr != nil {
			return nil, fmt.Errorf("%w: %v", errAdminBadRequest, perr)
		}
		u.Path = p
		req := r.Clone(r.Context())
		req.URL = &u
		req.RequestURI = u.RequestURI()
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.Header.Del(broker.ForwardedHeader)
		res := &partResult{partition: i, status: http.StatusOK, header: http.Header{}}
		out[k] = res
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			a.mux.ServeHTTP(res, req)
		}()
	}
	wg.Wait()
	return out, nil
}

// fanOutParallel bounds the partitions one fanned-out request runs at once.
const fanOutParallel = 16

// combineWrites answers a fanned-out write: 204 when every partition
// succeeded — or, with anyFound, when at least one did and the others
// answered 404 —, else the first failure.
func combineWrites(rs []*partResult, anyFound bool) (any, error) {
	var firstErr *partResult
	found := false
	for _, p := range rs {
		switch {
		case p.ok():
			found = true
		case anyFound && p.status == http.StatusNotFound:
		default:
			if firstErr == nil {
				firstErr = p
			}
		}
	}
	if firstErr == nil && !found && len(rs) > 0 {
		firstErr = rs[0]
	}
	if firstErr != nil {
		return reply{firstErr.status, adminError{Reason: firstErr.err().Error()}}, nil
	}
	return nil, nil
}

// doctor answers GET /admin/v2/lakegate/doctor: the node's diagnosis
// (package doctor; `lakegate admin doctor` prints it).
func (a *admin) doctor(r *http.Request) (any, error) {
	if a.cfg.Doctor == nil {
		return nil, fmt.Errorf("%w: this node was started without its diagnosis", errAdminNotImplemented)
	}
	return a.cfg.Doctor(r.Context()), nil
}

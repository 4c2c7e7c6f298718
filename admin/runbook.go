package admin

// Admin REST: the rest of an operator's runbook (issue #27) — examine a
// message by position, analyze a subscription's backlog, clear backlogs
// and unsubscribe across a namespace, the leader broker and the broker
// health check. Internal stats are in internalstats.go, subscription
// properties in subprops.go, the backlog commands of one topic in
// backlog.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// analyzeEntriesMax bounds the entries one analyze-backlog reads (Pulsar's
// subscriptionBacklogScanMaxEntries default: 10000); past it the answer
// says aborted.
const analyzeEntriesMax = 10000

// runbookRoutes are the rows of this file and internalstats.go.
func (a *admin) runbookRoutes() []route {
	const p = "/admin/v2/persistent/{tenant}/{ns}/{topic}"
	const nsp = "/admin/v2/namespaces/{tenant}/{ns}"
	return []route{
		{"GET " + p + "/internalStats", ruleLookup, a.owned(handler(a.internalStats))},
		{"GET " + p + "/partitioned-internalStats", ruleLookup, handler(a.partitionedInternalStats)},
		{"GET " + p + "/examinemessage", ruleConsume, a.owned(handler(a.examineMessage))},
		{"POST " + p + "/subscription/{sub}/analyzeBacklog", ruleSubscription, a.owned(handler(a.analyzeBacklog))},
		{"PUT " + p + "/subscription/{sub}/properties", ruleSubscription, handler(a.updateSubscriptionProperties)}, // subprops.go
		{"GET " + p + "/subscription/{sub}/properties", ruleSubscription, handler(a.getSubscriptionProperties)},
		{"POST " + nsp + "/clearBacklog", ruleTenant, handler(a.clearNamespaceBacklog)},
		{"POST " + nsp + "/clearBacklog/{sub}", ruleTenant, handler(a.clearNamespaceBacklog)},
		{"POST " + nsp + "/unsubscribe/{sub}", ruleTenant, handler(a.unsubscribeNamespace)},
		{"GET /admin/v2/brokers/leaderBroker", ruleAny, handler(a.leaderBroker)},
		{"GET /admin/v2/brokers/health", ruleSuper, handler(a.health)}, // it writes: superusers, as Pulsar
	}
}

// examineMessage serves GET …/{topic}/examinemessage?initialPosition=
// earliest|latest&messagePosition=N (pulsar-admin topics examine-message):
// the N-th entry (from 1) counted from the first entry of the log, or back
// from its last, answered as getEntry answers an entry. A partitioned topic
// answers 405, as Pulsar's broker does: examine one of its partitions.
func (a *admin) examineMessage(r *http.Request) (any, error) {
	ctx := r.Context()
	q := r.URL.Query()
	initial := strings.ToLower(q.Get("initialPosition"))
	if initial == "" {
		initial = "latest"
	}
	if initial != "earliest" && initial != "latest" {
		return nil, fmt.Errorf("%w: initialPosition %q: want earliest or latest", errAdminBadRequest, q.Get("initialPosition"))
	}
	n := int64(1)
	if s := q.Get("messagePosition"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 1 || v > peekScanEntriesMax {
			return nil, fmt.Errorf("%w: messagePosition %q: want 1 to %d", errAdminPrecondition, s, peekScanEntriesMax)
		}
		n = v
	}
	t, err := a.singleTopic(r, "examine-message")
	if err != nil {
		return nil, err
	}
	log := t.Log()
	first, err := log.FirstOffset(ctx)
	if err != nil {
		return nil, err
	}
	next, err := log.NextOffset(ctx)
	if err != nil {
		return nil, err
	}
	var off int64
	if initial == "earliest" {
		off, err = nthEntryFrom(ctx, log, first, next, n)
	} else {
		off, err = nthEntryBack(ctx, log, first, next, n)
	}
	if err != nil {
		return nil, err
	}
	e, err := log.ReadEntry(ctx, off)
	if err != nil {
		return nil, err
	}
	return entryPayload(int64(log.ID()), t.Partition(), e)
}

// errNoSuchPosition: the log holds fewer entries than asked for (404).
func errNoSuchPosition(n int64, first, next int64) error {
	return fmt.Errorf("%w: the topic holds fewer than %d entries (offsets [%d, %d))", errAdminNotFound, n, first, next)
}

// nthEntryFrom is the offset of the n-th entry (from 1) at or after from.
func nthEntryFrom(ctx context.Context, log lakestream.Log, from, next, n int64) (int64, error) {
	want := n
	for pos := from; pos < next; {
		hs, err := log.IndexRange(ctx, pos, min(pos+skipScanWindow, next))
		if err != nil {
			return 0, err
		}
		if len(hs) == 0 {
			break
		}
		for _, h := range hs {
			if h.End() <= pos {
				continue
			}
			if n--; n == 0 {
				return h.Offset, nil
			}
			pos = h.End()
		}
	}
	return 0, errNoSuchPosition(want, from, next)
}

// nthEntryBack is the offset of the n-th entry (from 1) counted back from
// the last entry before next, not before first.
func nthEntryBack(ctx context.Context, log lakestream.Log, first, next, n int64) (int64, error) {
	want := n
	for end := next; end > first; {
		start := max(first, end-skipScanWindow)
		hs, err := log.IndexRange(ctx, start, end)
		if err != nil {
			return 0, err
		}
		if len(hs) == 0 {
			break
		}
		for i := len(hs) - 1; i >= 0; i-- {
			if hs[i].Offset >= end {
				continue
			}
			if n--; n == 0 {
				return hs[i].Offset, nil
			}
		}
		end = hs[0].Offset
	}
	return 0, errNoSuchPosition(want, first, next)
}

// analyzeResultJSON is Pulsar's AnalyzeSubscriptionBacklogResult. lakegate
// has no entry filters: every entry is accepted.
type analyzeResultJSON struct {
	Entries                   int64  `json:"entries"`
	Messages                  int64  `json:"messages"`
	FilterRejectedEntries     int64  `json:"filterRejectedEntries"`
	FilterAcceptedEntries     int64  `json:"filterAcceptedEntries"`
	FilterRescheduledEntries  int64  `json:"filterRescheduledEntries"`
	FilterRejectedMessages    int64  `json:"filterRejectedMessages"`
	FilterAcceptedMessages    int64  `json:"filterAcceptedMessages"`
	FilterRescheduledMessages int64  `json:"filterRescheduledMessages"`
	Aborted                   bool   `json:"aborted"`
	FirstMessageID            string `json:"firstMessageId,omitempty"`
	LastMessageID             string `json:"lastMessageId,omitempty"`
}

// analyzeBacklog serves POST …/subscription/{sub}/analyzeBacklog
// (pulsar-admin topics analyze-backlog): the entries and messages of the
// subscription's backlog — from its first record not acknowledged, or
// from the position in the body — reading at most analyzeEntriesMax
// entries (aborted past it). A partitioned topic answers 405, as Pulsar's
// broker does.
func (a *admin) analyzeBacklog(r *http.Request) (any, error) {
	ctx := r.Context()
	name, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	var start *messageIDJSON // the body: where to start (Pulsar's ResetCursorData), if given
	if len(strings.TrimSpace(string(b))) > 0 && strings.TrimSpace(string(b)) != "null" {
		start = new(messageIDJSON)
		if err := json.Unmarshal(b, start); err != nil {
			return nil, fmt.Errorf("%w: start position body: %v", errAdminBadRequest, err)
		}
	}
	t, err := a.singleTopic(r, "analyze-backlog")
	if err != nil {
		return nil, err
	}
	info, err := t.SubscriptionInfo(ctx, name)
	if errors.Is(err, lakestream.ErrNoSuchCursor) {
		err = fmt.Errorf("%w: subscription %s of %s not found", errAdminNotFound, name, t.Name())
	}
	if err != nil {
		return nil, err
	}
	log := t.Log()
	first, err := log.FirstOffset(ctx)
	if err != nil {
		return nil, err
	}
	next, err := log.NextOffset(ctx)
	if err != nil {
		return nil, err
	}
	from := max(first, info.MarkDeleteOffset+1)
	if start != nil {
		if from, err = offsetOf(ctx, t, *start); err != nil {
			return nil, err
		}
	}
	out := analyzeResultJSON{}
	var firstID, lastID int64 = -1, -1
	for pos := from; pos < next && !out.Aborted; {
		hs, err := log.IndexRange(ctx, pos, min(pos+skipScanWindow, next))
		if err != nil {
			return nil, err
		}
		if len(hs) == 0 {
			break
		}
		for _, h := range hs {
			if h.End() <= pos {
				continue
			}
			pos = h.End()
			msgs := info.UnackedRecords(h.Offset, h.End())
			if msgs == 0 {
				continue
			}
			if out.Entries == analyzeEntriesMax {
				out.Aborted = true
				break
			}
			out.Entries++
			out.Messages += msgs
			if firstID < 0 {
				firstID = h.Offset
			}
			lastID = h.Offset
		}
	}
	out.FilterAcceptedEntries, out.FilterAcceptedMessages = out.Entries, out.Messages
	if firstID >= 0 {
		out.FirstMessageID, out.LastMessageID = position(log.ID(), firstID), position(log.ID(), lastID)
	}
	return out, nil
}

// clearNamespaceBacklog serves POST /admin/v2/namespaces/{t}/{ns}/clearBacklog
// and …/clearBacklog/{sub} (pulsar-admin namespaces clear-backlog): every
// topic of the namespace has the subscription's backlog — every
// subscription's without {sub} — cleared, each at its owner (the topics'
// skip_all, partitioned topics sent to every partition).
func (a *admin) clearNamespaceBacklog(r *http.Request) (any, error) {
	sub := r.PathValue("sub")
	if sub != "" {
		if _, err := subscriptionName(r); err != nil {
			return nil, err
		}
	}
	return a.eachTopicSubscription(r, sub, http.MethodPost, "/skip_all")
}

// unsubscribeNamespace serves POST /admin/v2/namespaces/{t}/{ns}/unsubscribe/{sub}
// (pulsar-admin namespaces unsubscribe): subscription {sub} is deleted on
// every topic of the namespace that has it (refused, 412, where consumers
// are connected, as the topics' unsubscribe without force).
func (a *admin) unsubscribeNamespace(r *http.Request) (any, error) {
	sub, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	return a.eachTopicSubscription(r, sub, http.MethodDelete, "")
}

// eachTopicSubscription runs method …/subscription/{sub}{suffix} on every
// topic of the request's namespace that has subscription sub (every
// subscription of every topic when sub is ""), through this node's admin
// routes (so each goes to its owner). The first failure answers.
func (a *admin) eachTopicSubscription(r *http.Request, sub, method, suffix string) (any, error) {
	ctx := r.Context()
	tenant, ns := r.PathValue("tenant"), r.PathValue("ns")
	names, err := a.topicNames(ctx, tenant, ns, true)
	if err != nil {
		return nil, err
	}
	plain, err := a.topicNames(ctx, tenant, ns, false)
	if err != nil {
		return nil, err
	}
	for _, n := range plain {
		tn, err := broker.ParseTopicName(n)
		if err != nil || tn.Partition >= 0 && slices.Contains(names, tn.Base().String()) {
			continue // a partition: its partitioned topic covers it
		}
		names = append(names, n)
	}
	for _, n := range names {
		tn, err := broker.ParseTopicName(n)
		if err != nil {
			continue
		}
		base := "/admin/v2/persistent/" + url.PathEscape(tn.Tenant) + "/" + url.PathEscape(tn.Namespace) + "/" + url.PathEscape(tn.Local)
		subs := []string{sub}
		res := a.internalRequest(r, http.MethodGet, base+"/subscriptions")
		if !res.ok() {
			return nil, fmt.Errorf("topic %s: listing its subscriptions: %w", tn, res.err())
		}
		var have []string
		if err := json.Unmarshal(res.body.Bytes(), &have); err != nil {
			return nil, fmt.Errorf("topic %s: subscriptions: %w", tn, err)
		}
		if sub == "" {
			subs = have
		} else if !slices.Contains(have, sub) {
			continue
		}
		for _, s := range subs {
			res := a.internalRequest(r, method, base+"/subscription/"+url.PathEscape(s)+suffix)
			if !res.ok() {
				return reply{res.status, adminError{Reason: fmt.Sprintf("topic %s, subscription %s: %s", tn, s, res.err())}}, nil
			}
		}
	}
	return nil, nil
}

// internalRequest runs one admin request for r's caller (same headers)
// through this node's admin routes and returns its answer.
func (a *admin) internalRequest(r *http.Request, method, path string) *partResult {
	req := r.Clone(r.Context())
	req.Method = method
	req.URL = &url.URL{Path: path}
	if p, err := url.PathUnescape(path); err == nil {
		req.URL.Path, req.URL.RawPath = p, path
	}
	req.RequestURI = req.URL.RequestURI()
	req.Body = io.NopCloser(strings.NewReader(""))
	req.ContentLength = 0
	req.Header.Del(broker.ForwardedHeader)
	res := &partResult{partition: -1, status: http.StatusOK, header: http.Header{}}
	a.mux.ServeHTTP(res, req)
	return res
}

// brokerInfoJSON is Pulsar's BrokerInfo.
type brokerInfoJSON struct {
	ServiceURL string `json:"serviceUrl"`
	BrokerID   string `json:"brokerId"`
}

// leaderBroker serves GET /admin/v2/brokers/leaderBroker (pulsar-admin
// brokers leader-broker). lakegate has no leader (appends are leaderless,
// ownership is per partition): it answers the live member with the lowest
// id, the same on every node (docs/cluster.md), its brokerId the admin
// address brokers list shows (the member id for a member without one).
func (a *admin) leaderBroker(r *http.Request) (any, error) {
	if a.cfg.Membership == nil {
		return nil, fmt.Errorf("%w: no membership", broker.ErrServiceNotReady)
	}
	members, err := a.cfg.Membership.Members(r.Context())
	if err != nil {
		return nil, err
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: no live member", broker.ErrServiceNotReady)
	}
	lead := slices.MinFunc(members, func(x, y lakestream.Member) int { return strings.Compare(x.ID, y.ID) })
	u := broker.MemberHTTP(lead)
	if pu, err := url.Parse(u); err == nil && pu.Host != "" {
		return brokerInfoJSON{ServiceURL: u, BrokerID: pu.Host}, nil
	}
	// A member without an admin address (an embedded node): its id.
	return brokerInfoJSON{ServiceURL: lead.Endpoints["pulsar"], BrokerID: lead.ID}, nil
}

// health serves GET /admin/v2/brokers/health (pulsar-admin brokers
// healthcheck): this node appends an entry to its heartbeat log and reads
// it back (broker.Heartbeat); "ok", or 503 with the reason.
func (a *admin) health(r *http.Request) (any, error) {
	if v := r.URL.Query().Get("topicVersion"); v != "" && v != "V1" && v != "V2" {
		return nil, fmt.Errorf("%w: topicVersion %q: want V1 or V2", errAdminBadRequest, v)
	}
	if a.node.Closing() {
		return nil, fmt.Errorf("%w: the node is shutting down", broker.ErrServiceNotReady)
	}
	if _, err := a.brk.Heartbeat(r.Context()); err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "text/plain")
	return octets{header: h, body: []byte("ok")}, nil
}

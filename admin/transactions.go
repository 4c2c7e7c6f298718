package admin

// Admin REST: transactions (docs/transactions.md), Pulsar 4.0's
// /admin/v3/transactions/… — what `pulsar-admin transactions …` calls —
// over the node's txn.Coordinator (Broker.Txn). Paths below are relative
// to /admin/v3/transactions; {t}/{ns}/{topic} is a persistent topic
// (one partition, or a non-partitioned topic).
//
//	GET  /coordinators                                   [{id, brokerServiceUrl}]: who serves each coordinator
//	GET  /coordinatorStats[?coordinatorId=N]             TransactionCoordinatorStats, all of them by id without N
//	GET  /transactionMetadata/{most}/{least}             TransactionMetadata
//	GET  /slowTransactions/{ms}[?coordinatorId=N]        txnId → TransactionMetadata, unended and open longer than ms
//	POST /abortTransaction/{most}/{least}                aborts it (204)
//	GET  /transactionInBufferStats/{t}/{ns}/{topic}/{most}/{least}
//	GET  /transactionBufferStats/{t}/{ns}/{topic}[?lowWaterMarks=true]
//	GET  /pendingAckStats/{t}/{ns}/{topic}/{sub}[?lowWaterMarks=true]
//	GET  /transactionInPendingAckStats/{t}/{ns}/{topic}/{sub}/{most}/{least}
//	GET  /positionStatsInPendingAck/{t}/{ns}/{topic}/{sub}/{ledgerId}/{entryId}[?batchIndex=i]
//	GET  /coordinatorInternalStats/{id}, /pendingAckInternalStats/{t}/{ns}/{topic}/{sub},
//	     /transactionBufferInternalStats/{t}/{ns}/{topic}          405: no managed ledger behind them
//	POST /transactionCoordinator/replicas                406 (not more) or 501: the count is configuration
//
// Every answer is computed from the metadata store, which any node reads
// (txn.Coordinator List, Status, LoadAcks; the catalog for a topic's log):
// coordinator-wide requests are answered by the node that receives them.
// The per-subscription ones and transactionBufferStats read a topic's live
// state (its subscription, its last entry) and go to the topic's owner
// (owned, cluster.go), as the other per-topic requests do.
//
// With transactions off (transactions.enabled false: Broker.Txn nil) every
// path answers 503, as Pulsar does without transactionCoordinatorEnabled.
// The coordinator-wide paths are for superusers; the per-topic ones for
// superusers and the topic's tenant admins. Pulsar checks only abort and
// scale (superuser) and lets any authenticated role read the rest; these
// expose every tenant's transactions, so lakegate asks more
// (docs/compatibility.md).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/txn"
)

// slowTransactionsMax bounds the transactions one slowTransactions answer
// lists (the longest open first).
const slowTransactionsMax = 1000

// txnRoutes are the rows of /admin/v3/transactions/ (routes.go).
func (a *admin) txnRoutes() []route {
	const (
		v3 = "/admin/v3/transactions/"
		tp = "{tenant}/{ns}/{topic}"
	)
	return []route{
		{"GET " + v3 + "coordinators", ruleSuper, handler(a.txnCoordinators)},
		{"GET " + v3 + "coordinatorStats", ruleSuper, handler(a.txnCoordinatorStats)},
		{"GET " + v3 + "transactionMetadata/{most}/{least}", ruleSuper, handler(a.txnMetadata)},
		{"GET " + v3 + "slowTransactions/{timeout}", ruleSuper, handler(a.slowTransactions)},
		{"POST " + v3 + "abortTransaction/{most}/{least}", ruleSuper, handler(a.abortTransaction)},
		{"GET " + v3 + "coordinatorInternalStats/{id}", ruleSuper, handler(a.txnCoordinatorInternalStats)},
		{"POST " + v3 + "transactionCoordinator/replicas", ruleSuper, handler(a.scaleTxnCoordinators)},
		{"GET " + v3 + "transactionInBufferStats/" + tp + "/{most}/{least}", ruleTenant, handler(a.txnInBufferStats)},
		{"GET " + v3 + "transactionBufferStats/" + tp, ruleTenant, a.owned(handler(a.txnBufferStats))},
		{"GET " + v3 + "transactionBufferInternalStats/" + tp, ruleTenant, handler(a.txnNoManagedLedger("the transaction buffer"))},
		{"GET " + v3 + "pendingAckStats/" + tp + "/{sub}", ruleTenant, a.owned(handler(a.pendingAckStats))},
		{"GET " + v3 + "transactionInPendingAckStats/" + tp + "/{sub}/{most}/{least}", ruleTenant, a.owned(handler(a.txnInPendingAckStats))},
		{"GET " + v3 + "positionStatsInPendingAck/" + tp + "/{sub}/{ledger}/{entry}", ruleTenant, a.owned(handler(a.positionInPendingAck))},
		{"GET " + v3 + "pendingAckInternalStats/" + tp + "/{sub}", ruleTenant, handler(a.txnNoManagedLedger("pending acknowledgements"))},
	}
}

// --- Pulsar's JSON shapes (org.apache.pulsar.common.policies.data) ---

// txnCoordinatorInfoJSON is Pulsar's TransactionCoordinatorInfo.
type txnCoordinatorInfoJSON struct {
	ID               uint64 `json:"id"`
	BrokerServiceURL string `json:"brokerServiceUrl"`
}

// txnCoordinatorStatsJSON is Pulsar's TransactionCoordinatorStats.
type txnCoordinatorStatsJSON struct {
	// State is "Ready" while a member serves the coordinator, "None" while
	// none does (the first client to look it up places it).
	State string `json:"state"`
	// LeastSigBits is the highest sequence of the transactions the store
	// keeps (ended ones are forgotten after transactions.endedRetention),
	// -1 when it keeps none.
	LeastSigBits int64 `json:"leastSigBits"`
	// LowWaterMark: every transaction at or below it has ended.
	LowWaterMark int64 `json:"lowWaterMark"`
	// OngoingTxnSize counts the transactions not ended (open, committing,
	// aborting).
	OngoingTxnSize int64 `json:"ongoingTxnSize"`
	// RecoverStartTime and RecoverEndTime are 0: a coordinator has no log
	// to replay when a member takes it over.
	RecoverStartTime int64 `json:"recoverStartTime"`
	RecoverEndTime   int64 `json:"recoverEndTime"`
}

// txnMetadataJSON is Pulsar's TransactionMetadata.
type txnMetadataJSON struct {
	TxnID              string                                    `json:"txnId"`
	Status             string                                    `json:"status"`
	OpenTimestamp      int64                                     `json:"openTimestamp"`
	TimeoutAt          int64                                     `json:"timeoutAt"`
	Owner              *string                                   `json:"owner"`
	ProducedPartitions map[string]txnInBufferJSON                `json:"producedPartitions"`
	AckedPartitions    map[string]map[string]txnInPendingAckJSON `json:"ackedPartitions"`
}

// txnInBufferJSON is Pulsar's TransactionInBufferStats. StartPosition is
// null: a transaction's messages are staged outside the log and take
// their positions when it commits (docs/transactions.md).
type txnInBufferJSON struct {
	StartPosition *string `json:"startPosition"`
	Aborted       bool    `json:"aborted"`
}

// txnInPendingAckJSON is Pulsar's TransactionInPendingAckStats: the
// position of the transaction's cumulative ack on the subscription, null
// when it holds none.
type txnInPendingAckJSON struct {
	CumulativeAckPosition *string `json:"cumulativeAckPosition"`
}

// txnBufferStatsJSON is Pulsar's TransactionBufferStats.
type txnBufferStatsJSON struct {
	State string `json:"state"`
	// MaxReadPosition is the last entry: nothing of an open transaction
	// is in the log, so nothing holds readers back.
	MaxReadPosition        string           `json:"maxReadPosition"`
	LastSnapshotTimestamps int64            `json:"lastSnapshotTimestamps"`
	LowWaterMarks          map[uint64]int64 `json:"lowWaterMarks,omitempty"`
	OngoingTxnSize         int64            `json:"ongoingTxnSize"`
	RecoverStartTime       int64            `json:"recoverStartTime"`
	RecoverEndTime         int64            `json:"recoverEndTime"`
	SnapshotStats          *struct{}        `json:"snapshotStats"`
}

// pendingAckStatsJSON is Pulsar's TransactionPendingAckStats.
type pendingAckStatsJSON struct {
	State          string           `json:"state"`
	LowWaterMarks  map[uint64]int64 `json:"lowWaterMarks,omitempty"`
	OngoingTxnSize int64            `json:"ongoingTxnSize"`
}

// positionInPendingAckJSON is Pulsar's PositionInPendingAckStats: state
// is PendingAck, MarkDelete, NotInPendingAck or InvalidPosition.
type positionInPendingAckJSON struct {
	State string `json:"state"`
}

// txnAcksValue is the value of a txn-acks key: a transaction's pending
// acknowledgements on one subscription (docs/transactions.md).
type txnAcksValue struct {
	Ranges     [][2]int64 `json:"ranges"`
	Cumulative bool       `json:"cumulative"`
}

// --- request helpers ---

// txnCoordinator is the node's coordinator, or 503 when transactions are
// off (Pulsar: "This Broker is not configured with
// transactionCoordinatorEnabled=true.").
func (a *admin) txnCoordinator() (txn.Coordinator, error) {
	if tc := a.brk.Txn(); tc != nil {
		return tc, nil
	}
	return nil, fmt.Errorf("%w: transactions are disabled on this cluster (transactions.enabled)", broker.ErrServiceNotReady)
}

// parseCoordinator parses a coordinator id: 400 when it is not a number,
// 404 when there is no such coordinator.
func parseCoordinator(tc txn.Coordinator, s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: coordinator id %q is not a number", errAdminBadRequest, s)
	}
	if n >= uint64(tc.Coordinators()) {
		return 0, fmt.Errorf("%w: transaction coordinator %d not found: there are %d (transactions.coordinators)", errAdminNotFound, n, tc.Coordinators())
	}
	return n, nil
}

// coordinatorsOf are the coordinators a request names: ?coordinatorId=N,
// else all of them.
func coordinatorsOf(r *http.Request, tc txn.Coordinator) ([]uint64, error) {
	if s := r.URL.Query().Get("coordinatorId"); s != "" {
		id, err := parseCoordinator(tc, s)
		return []uint64{id}, err
	}
	return allCoordinators(tc), nil
}

// parseTxnBits parses one half of a transaction id: a decimal unsigned
// number, or the negative long a Java client prints for one above 2^63.
func parseTxnBits(name, s string) (uint64, error) {
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return uint64(n), nil
	}
	return 0, fmt.Errorf("%w: %s %q is not a number", errAdminBadRequest, name, s)
}

// txnIDOf is the transaction a request names ({most}/{least}).
func txnIDOf(r *http.Request) (txn.ID, error) {
	most, err := parseTxnBits("mostSigBits", r.PathValue("most"))
	if err != nil {
		return txn.ID{}, err
	}
	least, err := parseTxnBits("leastSigBits", r.PathValue("least"))
	return txn.ID{Most: most, Least: least}, err
}

// pulsarTxnStatus is a state by Pulsar's TxnStatus names.
func pulsarTxnStatus(s txn.State) string { return strings.ToUpper(string(s)) }

// sameTopic reports whether a topic name as a client wrote it (a
// transaction's partition, a pending-ack key's topic) names tn.
func sameTopic(name string, tn broker.TopicName) bool {
	p, err := broker.ParseTopicName(name)
	return err == nil && p.String() == tn.String()
}

// coordinatorView is what the store says of one coordinator.
type coordinatorView struct {
	id   uint64
	txns map[txn.ID]txn.Record
}

// stats is the coordinator's TransactionCoordinatorStats (state aside).
func (v coordinatorView) stats() txnCoordinatorStatsJSON {
	st := txnCoordinatorStatsJSON{LeastSigBits: -1}
	lowest := int64(-1) // the lowest sequence not ended
	for id, rec := range v.txns {
		least := int64(id.Least)
		st.LeastSigBits = max(st.LeastSigBits, least)
		if !rec.State.Ended() {
			st.OngoingTxnSize++
			if lowest < 0 || least < lowest {
				lowest = least
			}
		}
	}
	st.LowWaterMark = st.LeastSigBits
	if lowest >= 0 {
		st.LowWaterMark = lowest - 1
	}
	return st
}

// coordinatorViews reads the transactions of coordinators ids.
func coordinatorViews(ctx context.Context, tc txn.Coordinator, ids []uint64) ([]coordinatorView, error) {
	out := make([]coordinatorView, 0, len(ids))
	for _, id := range ids {
		txns, err := tc.List(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, coordinatorView{id: id, txns: txns})
	}
	return out, nil
}

// lowWaterMarks is every coordinator's low water mark, by id.
func lowWaterMarks(views []coordinatorView) map[uint64]int64 {
	out := make(map[uint64]int64, len(views))
	for _, v := range views {
		out[v.id] = v.stats().LowWaterMark
	}
	return out
}

// coordinatorHost is the member serving coordinator id (owned true): its
// owner; or, when nobody owns it, the member placement picks, which takes
// it at the first client's lookup (nothing is taken here).
func (a *admin) coordinatorHost(ctx context.Context, tc txn.Coordinator, id uint64) (m lakestream.Member, owned bool, err error) {
	if slices.Contains(tc.Serving(), id) {
		return a.brk.Self(), true, nil
	}
	unit := txn.Unit(id)
	if ms := a.cfg.Membership; ms != nil {
		m, ok, err := ms.Owner(ctx, unit)
		if err != nil || ok {
			return m, ok, err
		}
	}
	members, err := a.brk.Members(ctx)
	if err != nil {
		return lakestream.Member{}, false, err
	}
	if m, ok := broker.Placement(unit, members); ok {
		return m, false, nil
	}
	return a.brk.Self(), false, nil
}

// --- coordinator-wide paths ---

// txnCoordinators answers GET …/coordinators: each coordinator and the
// pulsar:// URL of the member serving it (or that will).
func (a *admin) txnCoordinators(r *http.Request) (any, error) {
	tc, err := a.txnCoordinator()
	if err != nil {
		return nil, err
	}
	out := make([]txnCoordinatorInfoJSON, 0, tc.Coordinators())
	for i := range uint64(tc.Coordinators()) {
		m, _, err := a.coordinatorHost(r.Context(), tc, i)
		if err != nil {
			return nil, err
		}
		out = append(out, txnCoordinatorInfoJSON{ID: i, BrokerServiceURL: m.Endpoints["pulsar"]})
	}
	return out, nil
}

// txnCoordinatorStats answers GET …/coordinatorStats: one coordinator's
// stats with ?coordinatorId=N, else every coordinator's by id.
func (a *admin) txnCoordinatorStats(r *http.Request) (any, error) {
	tc, err := a.txnCoordinator()
	if err != nil {
		return nil, err
	}
	ids, err := coordinatorsOf(r, tc)
	if err != nil {
		return nil, err
	}
	views, err := coordinatorViews(r.Context(), tc, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]txnCoordinatorStatsJSON, len(views))
	for _, v := range views {
		st := v.stats()
		_, owned, err := a.coordinatorHost(r.Context(), tc, v.id)
		if err != nil {
			return nil, err
		}
		st.State = "None"
		if owned {
			st.State = "Ready"
		}
		out[v.id] = st
	}
	if r.URL.Query().Has("coordinatorId") {
		return out[ids[0]], nil
	}
	return out, nil
}

// txnMetadata answers GET …/transactionMetadata/{most}/{least}.
func (a *admin) txnMetadata(r *http.Request) (any, error) {
	tc, err := a.txnCoordinator()
	if err != nil {
		return nil, err
	}
	id, err := txnIDOf(r)
	if err == nil {
		_, err = parseCoordinator(tc, strconv.FormatUint(id.Most, 10))
	}
	var rec txn.Record
	if err == nil {
		rec, err = tc.Status(r.Context(), id)
	}
	if err != nil {
		return nil, err
	}
	return a.newPendingAcks(tc).metadata(r.Context(), id, rec)
}

// slowTransactions answers GET …/slowTransactions/{timeout}: the
// transactions not ended and open for longer than timeout milliseconds,
// at one coordinator (?coordinatorId=N) or all, by txnId — at most
// slowTransactionsMax, the longest open.
func (a *admin) slowTransactions(r *http.Request) (any, error) {
	tc, err := a.txnCoordinator()
	if err != nil {
		return nil, err
	}
	timeout, err := strconv.ParseInt(r.PathValue("timeout"), 10, 64)
	if err != nil || timeout < 0 {
		return nil, fmt.Errorf("%w: timeout %q: want milliseconds, 0 or more", errAdminBadRequest, r.PathValue("timeout"))
	}
	ids, err := coordinatorsOf(r, tc)
	if err != nil {
		return nil, err
	}
	views, err := coordinatorViews(r.Context(), tc, ids)
	if err != nil {
		return nil, err
	}
	type slow struct {
		id  txn.ID
		rec txn.Record
	}
	var found []slow
	now := time.Now().UnixMilli()
	for _, v := range views {
		for id, rec := range v.txns {
			if !rec.State.Ended() && rec.OpenMs+timeout < now {
				found = append(found, slow{id, rec})
			}
		}
	}
	slices.SortFunc(found, func(x, y slow) int {
		return cmp.Or(cmp.Compare(x.rec.OpenMs, y.rec.OpenMs), cmp.Compare(x.id.Most, y.id.Most), cmp.Compare(x.id.Least, y.id.Least))
	})
	found = found[:min(len(found), slowTransactionsMax)]
	acks := a.newPendingAcks(tc)
	out := make(map[string]txnMetadataJSON, len(found))
	for _, s := range found {
		md, err := acks.metadata(r.Context(), s.id, s.rec)
		if err != nil {
			return nil, err
		}
		out[md.TxnID] = md
	}
	return out, nil
}

// abortTransaction answers POST …/abortTransaction/{most}/{least}: the
// transaction is aborted, whoever serves its coordinator (204); aborting
// an aborted one again succeeds, a committed one is 409.
func (a *admin) abortTransaction(r *http.Request) (any, error) {
	tc, err := a.txnCoordinator()
	if err != nil {
		return nil, err
	}
	id, err := txnIDOf(r)
	if err == nil {
		_, err = parseCoordinator(tc, strconv.FormatUint(id.Most, 10))
	}
	if err != nil {
		return nil, err
	}
	reason := "aborted through the admin REST"
	if role := requestRole(r); role != "" {
		reason += " by " + role
	}
	if err := tc.Abort(r.Context(), id, reason); err != nil {
		return nil, err
	}
	return nil, nil
}

// txnCoordinatorInternalStats answers GET …/coordinatorInternalStats/{id}
// as Pulsar does for a coordinator whose store is not a managed ledger:
// 405 (after 404 for an unknown coordinator).
func (a *admin) txnCoordinatorInternalStats(r *http.Request) (any, error) {
	tc, err := a.txnCoordinator()
	if err != nil {
		return nil, err
	}
	if _, err := parseCoordinator(tc, r.PathValue("id")); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: lakegate's transaction coordinators keep their transactions in the metadata store (txn/<id>/t/…), not in a managed ledger: use coordinatorStats and transactionMetadata", errAdminMethodNotAllowed)
}

// scaleTxnCoordinators answers POST …/transactionCoordinator/replicas
// (body: the count): 406 for a count not above the current one, as
// Pulsar; a larger one is 501, since the count is the configuration's.
func (a *admin) scaleTxnCoordinators(r *http.Request) (any, error) {
	tc, err := a.txnCoordinator()
	if err != nil {
		return nil, err
	}
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	switch {
	case err != nil || n <= 0:
		return nil, fmt.Errorf("%w: the body must be the number of transaction coordinators, more than 0", errAdminBadRequest)
	case n <= tc.Coordinators():
		return nil, fmt.Errorf("%w: the number of transaction coordinators must be more than the current %d", errAdminNotAcceptable, tc.Coordinators())
	}
	return nil, fmt.Errorf("%w: the number of transaction coordinators is the setting transactions.coordinators (now %d): set it on every node and restart them (docs/configuration.md)", errAdminNotImplemented, tc.Coordinators())
}

// --- per-topic paths ---

// txnTopic is the request's topic: one partition or a non-partitioned
// topic (405 for a partitioned topic as a whole, as lakegate answers
// other single-partition requests).
func (a *admin) txnTopic(r *http.Request, what string) (topicRef, error) {
	ref, err := a.refOf(r)
	if err == nil && ref.partitioned() {
		err = fmt.Errorf("%w: %s is not allowed on partitioned topic %s: use its partitions", errAdminMethodNotAllowed, what, ref.name)
	}
	return ref, err
}

// txnInBufferStats answers GET …/transactionInBufferStats/{t}/{ns}/{topic}/{most}/{least}:
// aborted is true once the transaction, which produced to the topic, is
// aborted. 404 for a transaction the coordinator does not know (Pulsar's
// buffer, which does not ask it, answers aborted false).
func (a *admin) txnInBufferStats(r *http.Request) (any, error) {
	tc, err := a.txnCoordinator()
	if err != nil {
		return nil, err
	}
	ref, err := a.txnTopic(r, "transactionInBufferStats")
	if err != nil {
		return nil, err
	}
	id, err := txnIDOf(r)
	var rec txn.Record
	if err == nil {
		rec, err = tc.Status(r.Context(), id)
	}
	if err != nil {
		return nil, err
	}
	in := slices.ContainsFunc(rec.Partitions, func(p string) bool { return sameTopic(p, ref.name) })
	return txnInBufferJSON{Aborted: in && rec.State == txn.Aborted}, nil
}

// txnBufferStats answers GET …/transactionBufferStats/{t}/{ns}/{topic} on
// the topic's owner: the transactions not ended that produce to it.
func (a *admin) txnBufferStats(r *http.Request) (any, error) {
	tc, err := a.txnCoordinator()
	if err != nil {
		return nil, err
	}
	ref, err := a.txnTopic(r, "transactionBufferStats")
	var t broker.ServedTopic
	if err == nil {
		t, err = a.servedOne(r.Context(), ref)
	}
	if err != nil {
		return nil, err
	}
	last, err := t.LastMessageID(r.Context())
	if err != nil {
		return nil, err
	}
	views, err := coordinatorViews(r.Context(), tc, allCoordinators(tc))
	if err != nil {
		return nil, err
	}
	out := txnBufferStatsJSON{State: "Ready", MaxReadPosition: position(t.Log().ID(), last.EntryID)}
	for _, v := range views {
		for _, rec := range v.txns {
			if !rec.State.Ended() && slices.ContainsFunc(rec.Partitions, func(p string) bool { return sameTopic(p, ref.name) }) {
				out.OngoingTxnSize++
			}
		}
	}
	if queryBool(r, "lowWaterMarks") {
		out.LowWaterMarks = lowWaterMarks(views)
	}
	return out, nil
}

// pendingAckStats answers GET …/pendingAckStats/{t}/{ns}/{topic}/{sub} on
// the topic's owner: the transactions holding pending acknowledgements on
// the subscription — as its running actor holds them, else as the
// metadata store keeps them for the next one.
func (a *admin) pendingAckStats(r *http.Request) (any, error) {
	ps, err := a.pendingAckSub(r, "pendingAckStats")
	if err != nil {
		return nil, err
	}
	tc := ps.tc
	out := pendingAckStatsJSON{State: "Ready", OngoingTxnSize: int64(ps.info.PendingAckTxns)}
	if ps.t.LiveSubscription(ps.sub) == nil {
		acks, err := tc.LoadAcks(r.Context(), ps.ref.name.String(), ps.sub)
		if err != nil {
			return nil, err
		}
		out.OngoingTxnSize = int64(len(acks))
	}
	if queryBool(r, "lowWaterMarks") {
		views, err := coordinatorViews(r.Context(), tc, allCoordinators(tc))
		if err != nil {
			return nil, err
		}
		out.LowWaterMarks = lowWaterMarks(views)
	}
	return out, nil
}

// txnInPendingAckStats answers GET
// …/transactionInPendingAckStats/{t}/{ns}/{topic}/{sub}/{most}/{least} on
// the topic's owner: the position of the transaction's cumulative ack on
// the subscription (null without one).
func (a *admin) txnInPendingAckStats(r *http.Request) (any, error) {
	ps, err := a.pendingAckSub(r, "transactionInPendingAckStats")
	if err != nil {
		return nil, err
	}
	tc := ps.tc
	id, err := txnIDOf(r)
	if err != nil {
		return nil, err
	}
	acks, err := tc.LoadAcks(r.Context(), ps.ref.name.String(), ps.sub)
	if err != nil {
		return nil, err
	}
	return txnInPendingAckJSON{CumulativeAckPosition: cumulativePosition(ps.t.Log().ID(), acks[id])}, nil
}

// positionInPendingAck answers GET
// …/positionStatsInPendingAck/{t}/{ns}/{topic}/{sub}/{ledger}/{entry}[?batchIndex=i]
// on the topic's owner: whether the message (record entry+i) is
// acknowledged in the cursor (MarkDelete), pending in a transaction
// (PendingAck), neither (NotInPendingAck), or not in the topic's log
// (InvalidPosition).
func (a *admin) positionInPendingAck(r *http.Request) (any, error) {
	ps, err := a.pendingAckSub(r, "positionStatsInPendingAck")
	if err != nil {
		return nil, err
	}
	tc := ps.tc
	ledger, err1 := strconv.ParseInt(r.PathValue("ledger"), 10, 64)
	entry, err2 := strconv.ParseInt(r.PathValue("entry"), 10, 64)
	batch := int64(0)
	var err3 error
	if s := r.URL.Query().Get("batchIndex"); s != "" {
		batch, err3 = strconv.ParseInt(s, 10, 32)
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("%w: ledgerId, entryId and batchIndex must be numbers: %v", errAdminBadRequest, err)
	}
	log := ps.t.Log()
	next, err := log.NextOffset(r.Context())
	if err != nil {
		return nil, err
	}
	off := entry + max(batch, 0)
	if lakestream.LogID(ledger) != log.ID() || entry < 0 || off >= next {
		return positionInPendingAckJSON{State: "InvalidPosition"}, nil
	}
	if off <= ps.info.MarkDeleteOffset || slices.ContainsFunc(ps.info.AckedRanges, func(rg [2]int64) bool { return rg[0] <= off && off < rg[1] }) {
		return positionInPendingAckJSON{State: "MarkDelete"}, nil
	}
	acks, err := tc.LoadAcks(r.Context(), ps.ref.name.String(), ps.sub)
	if err != nil {
		return nil, err
	}
	for _, v := range acks {
		var val txnAcksValue
		if json.Unmarshal(v, &val) != nil {
			continue
		}
		if slices.ContainsFunc(val.Ranges, func(rg [2]int64) bool { return rg[0] <= off && off < rg[1] }) {
			return positionInPendingAckJSON{State: "PendingAck"}, nil
		}
	}
	return positionInPendingAckJSON{State: "NotInPendingAck"}, nil
}

// txnNoManagedLedger answers the internal stats of a transaction buffer or
// of pending acknowledgements as Pulsar answers them when they do not
// use a managed ledger: 405, once the topic is known.
func (a *admin) txnNoManagedLedger(what string) handler {
	return func(r *http.Request) (any, error) {
		if _, err := a.txnCoordinator(); err != nil {
			return nil, err
		}
		ref, err := a.txnTopic(r, "internal stats")
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: no managed ledger holds %s of %s: lakegate stages a transaction's messages outside the log and keeps pending acknowledgements in the metadata store (docs/transactions.md); use transactionBufferStats and pendingAckStats", errAdminMethodNotAllowed, what, ref.name)
	}
}

// allCoordinators lists every coordinator id.
func allCoordinators(tc txn.Coordinator) []uint64 {
	out := make([]uint64, tc.Coordinators())
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}

// servedOne is the served topic of a single-partition ref.
func (a *admin) servedOne(ctx context.Context, ref topicRef) (broker.ServedTopic, error) {
	ts, err := a.topics(ctx, ref)
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

// pendingAckSubject is the subscription a pending-ack request names, on
// the topic this node serves.
type pendingAckSubject struct {
	tc   txn.Coordinator
	ref  topicRef
	t    broker.ServedTopic
	sub  string
	info actors.SubscriptionInfo
}

// pendingAckSub resolves the coordinator, the request's topic and its
// subscription (404 when the subscription does not exist).
func (a *admin) pendingAckSub(r *http.Request, what string) (pendingAckSubject, error) {
	var ps pendingAckSubject
	var err error
	ps.tc, err = a.txnCoordinator()
	if err == nil {
		ps.sub, err = subscriptionName(r)
	}
	if err == nil {
		ps.ref, err = a.txnTopic(r, what)
	}
	if err == nil {
		ps.t, err = a.servedOne(r.Context(), ps.ref)
	}
	if err == nil {
		ps.info, err = ps.t.SubscriptionInfo(r.Context(), ps.sub)
		if errors.Is(err, lakestream.ErrNoSuchCursor) {
			err = fmt.Errorf("%w: subscription %s of %s not found", errAdminNotFound, ps.sub, ps.ref.name)
		}
	}
	return ps, err
}

// cumulativePosition is the position of a cumulative ack held in a
// txn-acks value (its last record), nil when the value holds none.
func cumulativePosition(log lakestream.LogID, value []byte) *string {
	var v txnAcksValue
	if value == nil || json.Unmarshal(value, &v) != nil || !v.Cumulative || len(v.Ranges) == 0 {
		return nil
	}
	p := position(log, v.Ranges[len(v.Ranges)-1][1]-1)
	return &p
}

// pendingAcks reads, once per request, the pending acknowledgements the
// metadata store keeps for the subscriptions transactions name, and the
// logs of their topics.
type pendingAcks struct {
	a    *admin
	tc   txn.Coordinator
	acks map[txn.Sub]map[txn.ID][]byte
	logs map[string]lakestream.LogID // topic → its log, -1: no such topic
}

func (a *admin) newPendingAcks(tc txn.Coordinator) *pendingAcks {
	return &pendingAcks{a: a, tc: tc, acks: map[txn.Sub]map[txn.ID][]byte{}, logs: map[string]lakestream.LogID{}}
}

// logOf is the log of a topic-partition named as a client names it (-1
// when it does not exist any more).
func (p *pendingAcks) logOf(ctx context.Context, topic string) (lakestream.LogID, error) {
	if id, ok := p.logs[topic]; ok {
		return id, nil
	}
	id := lakestream.LogID(-1)
	tn, err := broker.ParseTopicName(topic)
	if err == nil {
		var ref topicRef
		ref, err = p.a.lookup(ctx, tn)
		i := max(ref.partition, 0)
		if err == nil && !ref.partitioned() && i < len(ref.md.LogIDs) {
			id = ref.md.LogIDs[i]
		}
	}
	if err != nil && !errors.Is(err, errAdminNotFound) && !errors.Is(err, broker.ErrInvalidTopicName) {
		return 0, err
	}
	p.logs[topic] = id
	return id, nil
}

// metadata is a transaction's TransactionMetadata.
func (p *pendingAcks) metadata(ctx context.Context, id txn.ID, rec txn.Record) (txnMetadataJSON, error) {
	md := txnMetadataJSON{
		TxnID: id.String(), Status: pulsarTxnStatus(rec.State), OpenTimestamp: rec.OpenMs, TimeoutAt: rec.TimeoutMs,
		ProducedPartitions: map[string]txnInBufferJSON{},
		AckedPartitions:    map[string]map[string]txnInPendingAckJSON{},
	}
	if rec.Owner != "" {
		md.Owner = &rec.Owner
	}
	for _, part := range rec.Partitions {
		md.ProducedPartitions[part] = txnInBufferJSON{Aborted: rec.State == txn.Aborted}
	}
	for _, s := range rec.Subscriptions {
		acks, ok := p.acks[s]
		if !ok {
			var err error
			if acks, err = p.tc.LoadAcks(ctx, s.Topic, s.Sub); err != nil {
				return txnMetadataJSON{}, err
			}
			p.acks[s] = acks
		}
		var pos *string
		if v, ok := acks[id]; ok {
			log, err := p.logOf(ctx, s.Topic)
			if err != nil {
				return txnMetadataJSON{}, err
			}
			if log >= 0 {
				pos = cumulativePosition(log, v)
			}
		}
		if md.AckedPartitions[s.Topic] == nil {
			md.AckedPartitions[s.Topic] = map[string]txnInPendingAckJSON{}
		}
		md.AckedPartitions[s.Topic][s.Sub] = txnInPendingAckJSON{CumulativeAckPosition: pos}
	}
	return md, nil
}

package admin

// The transactions admin REST (transactions.go) over an in-memory
// coordinator (fakeTxn), catalog and served topic: every path answers,
// with Pulsar's JSON shapes. Run: go test -race -run TestAdminTxn ./admin/

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/internal/testmember"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/txn"
)

// fakeTxn is a txn.Coordinator in memory: records, pending acks by
// topic and subscription, the coordinators this node serves. Only what
// the admin REST calls is implemented.
type fakeTxn struct {
	txn.Coordinator
	n       int
	serving []uint64
	mu      sync.Mutex
	recs    map[txn.ID]txn.Record
	acks    map[txn.Sub]map[txn.ID][]byte
}

func (f *fakeTxn) Coordinators() int { return f.n }
func (f *fakeTxn) Serving() []uint64 { return f.serving }

func (f *fakeTxn) Status(_ context.Context, id txn.ID) (txn.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.recs[id]
	if !ok {
		return txn.Record{}, fmt.Errorf("%w: %v", txn.ErrNotFound, id)
	}
	return rec, nil
}

func (f *fakeTxn) List(_ context.Context, tc uint64) (map[txn.ID]txn.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[txn.ID]txn.Record{}
	for id, rec := range f.recs {
		if id.Most == tc {
			out[id] = rec
		}
	}
	return out, nil
}

func (f *fakeTxn) Abort(_ context.Context, id txn.ID, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.recs[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: %v", txn.ErrNotFound, id)
	case rec.State == txn.Committed || rec.State == txn.Committing:
		return fmt.Errorf("%w: %v is %s", txn.ErrInvalidStatus, id, rec.State)
	}
	rec.State, rec.Reason = txn.Aborted, reason
	f.recs[id] = rec
	return nil
}

func (f *fakeTxn) LoadAcks(_ context.Context, topic, sub string) (map[txn.ID][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.acks[txn.Sub{Topic: topic, Sub: sub}]), nil
}

// txnCatalog adds streams to nsCatalog: public/default/t (not
// partitioned, log 7) and public/default/p (2 partitions, logs 8 and 9).
type txnCatalog struct{ *nsCatalog }

func (txnCatalog) LoadStream(_ context.Context, id lakestream.StreamIdentifier) (lakestream.StreamMetadata, error) {
	switch id {
	case lakestream.StreamIdentifier{Namespace: "public/default", Name: "t"}:
		return lakestream.StreamMetadata{ID: id, LogIDs: []lakestream.LogID{7}}, nil
	case lakestream.StreamIdentifier{Namespace: "public/default", Name: "p"}:
		return lakestream.StreamMetadata{ID: id, Partitioning: lakestream.Partitioning{NumPartitions: 2}, LogIDs: []lakestream.LogID{8, 9}}, nil
	}
	return lakestream.StreamMetadata{}, lakestream.ErrNoSuchStream
}

// txnNode serves public/default/t: log 7 holding offsets [0, 42), the
// subscription "s" acknowledged up to 9 and [20, 25).
type txnNode struct {
	noTopics
	authz bool
}

func (n txnNode) AuthzOn() bool         { return n.authz }
func (txnNode) CountAuthFailure(string) {}

func (txnNode) ServedTopic(_ context.Context, name string) (broker.ServedTopic, error) {
	if name != "persistent://public/default/t" {
		return nil, fmt.Errorf("%w: %s is not served in this test", broker.ErrServiceNotReady, name)
	}
	return txnTopic{}, nil
}

// The roles of the authorization test: "admin" is a superuser, "ops" the
// tenant public's admin.
func (txnNode) CheckSuperUser(role string) error {
	if role == "admin" {
		return nil
	}
	return fmt.Errorf("%w: %s is not a superuser", broker.ErrAuthorization, role)
}

func (n txnNode) CheckSuperOrTenantAdmin(_ context.Context, role, tenant string) error {
	if role == "ops" && tenant == "public" {
		return nil
	}
	return n.CheckSuperUser(role)
}

type txnTopic struct{ broker.ServedTopic }

func (txnTopic) Name() string                                      { return "persistent://public/default/t" }
func (txnTopic) Log() lakestream.Log                               { return txnLog{} }
func (txnTopic) Partition() int32                                  { return -1 }
func (txnTopic) LiveSubscription(string) *actors.SubscriptionActor { return nil }
func (txnTopic) LastMessageID(context.Context) (protocol.MessageID, error) {
	return protocol.MessageID{LedgerID: 7, EntryID: 41, BatchIndex: -1, Partition: -1}, nil
}
func (txnTopic) SubscriptionInfo(_ context.Context, name string) (actors.SubscriptionInfo, error) {
	if name != "s" {
		return actors.SubscriptionInfo{}, lakestream.ErrNoSuchCursor
	}
	return actors.SubscriptionInfo{MarkDeleteOffset: 9, AckedRanges: [][2]int64{{20, 25}}}, nil
}

type txnLog struct{ lakestream.Log }

func (txnLog) ID() lakestream.LogID                      { return 7 }
func (txnLog) NextOffset(context.Context) (int64, error) { return 42, nil }

// txnFixture: 2 coordinators, this node serving 0. At coordinator 0:
// (0,1) open an hour ago, producing to t and holding a cumulative ack on
// t/s up to record 14; (0,2) committed; (0,3) aborting, opened now.
// Coordinator 1 holds nothing.
func txnFixture(t *testing.T, authz bool) (http.Handler, *fakeTxn) {
	t.Helper()
	now := time.Now().UnixMilli()
	hour := time.Hour.Milliseconds()
	tc := &fakeTxn{n: 2, serving: []uint64{0},
		recs: map[txn.ID]txn.Record{
			{Most: 0, Least: 1}: {State: txn.Open, Owner: "app", OpenMs: now - hour, TimeoutMs: now + hour,
				Partitions: []string{"persistent://public/default/t"}, Subscriptions: []txn.Sub{{Topic: "persistent://public/default/t", Sub: "s"}}},
			{Most: 0, Least: 2}: {State: txn.Committed, OpenMs: now - 2*hour, TimeoutMs: now, EndMs: now},
			{Most: 0, Least: 3}: {State: txn.Aborting, OpenMs: now, TimeoutMs: now + hour},
		},
		acks: map[txn.Sub]map[txn.ID][]byte{
			{Topic: "persistent://public/default/t", Sub: "s"}: {{Most: 0, Least: 1}: []byte(`{"ranges":[[10,15],[30,31]],"cumulative":true}`)},
		},
	}
	cat := txnCatalog{&nsCatalog{nss: map[string]map[string]string{"public/default": {}}}}
	self := lakestream.Member{ID: "self", Endpoints: map[string]string{"pulsar": "pulsar://self:6650"}}
	ms := testmember.New(self)
	brk, err := broker.New(broker.Config{Catalog: cat, Membership: ms, Txn: tc})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Node: txnNode{authz: authz}, Broker: brk, Catalog: cat, Membership: ms}
	if authz {
		secret := []byte(strings.Repeat("k", 32))
		au, err := auth.New(auth.Config{Providers: []string{auth.MethodToken}, Token: auth.TokenConfig{SecretKey: secret}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth, cfg.Authorization = au, true
	}
	return Handler(cfg), tc
}

// txnPaths is one request per path of /admin/v3/transactions (Pulsar
// 4.0's 14), about public/default/t, subscription s, transaction (0,1).
var txnPaths = []struct{ method, path, body string }{
	{"GET", "/admin/v3/transactions/coordinators", ""},
	{"GET", "/admin/v3/transactions/coordinatorStats", ""},
	{"GET", "/admin/v3/transactions/transactionMetadata/0/1", ""},
	{"GET", "/admin/v3/transactions/slowTransactions/1000", ""},
	{"POST", "/admin/v3/transactions/abortTransaction/0/3", ""},
	{"GET", "/admin/v3/transactions/coordinatorInternalStats/0", ""},
	{"POST", "/admin/v3/transactions/transactionCoordinator/replicas", "4"},
	{"GET", "/admin/v3/transactions/transactionInBufferStats/public/default/t/0/1", ""},
	{"GET", "/admin/v3/transactions/transactionBufferStats/public/default/t", ""},
	{"GET", "/admin/v3/transactions/transactionBufferInternalStats/public/default/t", ""},
	{"GET", "/admin/v3/transactions/pendingAckStats/public/default/t/s", ""},
	{"GET", "/admin/v3/transactions/transactionInPendingAckStats/public/default/t/s/0/1", ""},
	{"GET", "/admin/v3/transactions/positionStatsInPendingAck/public/default/t/s/7/12", ""},
	{"GET", "/admin/v3/transactions/pendingAckInternalStats/public/default/t/s", ""},
}

// TestAdminTxnDisabled: with transactions off every path is served and
// answers 503 with a reason (Pulsar: transactionCoordinatorEnabled=false).
func TestAdminTxnDisabled(t *testing.T) {
	cat := txnCatalog{&nsCatalog{nss: map[string]map[string]string{"public/default": {}}}}
	ms := testmember.New(lakestream.Member{ID: "self"})
	brk, err := broker.New(broker.Config{Catalog: cat, Membership: ms})
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(Config{Node: txnNode{}, Broker: brk, Catalog: cat, Membership: ms})
	for _, p := range txnPaths {
		var e adminError
		if code := adminCall(t, h, p.method, p.path, p.body, &e); code != 503 || !strings.Contains(e.Reason, "transactions.enabled") {
			t.Errorf("%s %s: %d %q, want 503 naming transactions.enabled", p.method, p.path, code, e.Reason)
		}
	}
}

// TestAdminTxnEveryPathServed: no path falls through to "not an admin
// endpoint" (the path table of docs/compatibility.md lists them served).
func TestAdminTxnEveryPathServed(t *testing.T) {
	h, _ := txnFixture(t, false)
	for _, p := range txnPaths {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(p.method, p.path, strings.NewReader(p.body)))
		if strings.Contains(w.Body.String(), "is not an admin endpoint") || w.Code >= 500 && w.Code != 501 {
			t.Errorf("%s %s: %d %s", p.method, p.path, w.Code, w.Body)
		}
	}
}

func TestAdminTxnCoordinators(t *testing.T) {
	h, _ := txnFixture(t, false)
	var list []txnCoordinatorInfoJSON
	if code := adminCall(t, h, "GET", "/admin/v3/transactions/coordinators", "", &list); code != 200 || len(list) != 2 {
		t.Fatalf("coordinators: %d %+v", code, list)
	}
	for i, c := range list {
		if c.ID != uint64(i) || c.BrokerServiceURL != "pulsar://self:6650" {
			t.Errorf("coordinator %d: %+v", i, c)
		}
	}

	var all map[string]txnCoordinatorStatsJSON
	if code := adminCall(t, h, "GET", "/admin/v3/transactions/coordinatorStats", "", &all); code != 200 {
		t.Fatalf("coordinatorStats: %d", code)
	}
	want := map[string]txnCoordinatorStatsJSON{
		"0": {State: "Ready", LeastSigBits: 3, LowWaterMark: 0, OngoingTxnSize: 2},
		"1": {State: "None", LeastSigBits: -1, LowWaterMark: -1},
	}
	if !maps.Equal(all, want) {
		t.Fatalf("coordinatorStats = %+v, want %+v", all, want)
	}
	var one txnCoordinatorStatsJSON
	if code := adminCall(t, h, "GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=1", "", &one); code != 200 || one != want["1"] {
		t.Fatalf("coordinatorStats of 1: %d %+v", code, one)
	}
	// The raw JSON carries Pulsar's field names.
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=0", nil))
	for _, f := range []string{`"state":"Ready"`, `"leastSigBits":3`, `"lowWaterMark":0`, `"ongoingTxnSize":2`, `"recoverStartTime":0`, `"recoverEndTime":0`} {
		if !strings.Contains(w.Body.String(), f) {
			t.Errorf("coordinatorStats %s lacks %s", w.Body, f)
		}
	}
	var e adminError
	for q, code := range map[string]int{"5": 404, "x": 400, "-1": 400} {
		if got := adminCall(t, h, "GET", "/admin/v3/transactions/coordinatorStats?coordinatorId="+q, "", &e); got != code || e.Reason == "" {
			t.Errorf("coordinatorId=%s: %d %q, want %d", q, got, e.Reason, code)
		}
	}
	if code := adminCall(t, h, "GET", "/admin/v3/transactions/coordinatorInternalStats/0", "", &e); code != 405 || !strings.Contains(e.Reason, "metadata store") {
		t.Errorf("coordinatorInternalStats: %d %q", code, e.Reason)
	}
	if code := adminCall(t, h, "GET", "/admin/v3/transactions/coordinatorInternalStats/9", "", &e); code != 404 {
		t.Errorf("coordinatorInternalStats of 9: %d %q", code, e.Reason)
	}
	for body, code := range map[string]int{"2": 406, "1": 406, "16": 501, "x": 400, "0": 400, "": 400} {
		if got := adminCall(t, h, "POST", "/admin/v3/transactions/transactionCoordinator/replicas", body, &e); got != code || e.Reason == "" {
			t.Errorf("replicas %q: %d %q, want %d", body, got, e.Reason, code)
		}
	}
}

func TestAdminTxnMetadataSlowAbort(t *testing.T) {
	h, tc := txnFixture(t, false)
	var md txnMetadataJSON
	if code := adminCall(t, h, "GET", "/admin/v3/transactions/transactionMetadata/0/1", "", &md); code != 200 {
		t.Fatalf("transactionMetadata: %d", code)
	}
	rec := tc.recs[txn.ID{Most: 0, Least: 1}]
	if md.TxnID != "(0,1)" || md.Status != "OPEN" || md.OpenTimestamp != rec.OpenMs || md.TimeoutAt != rec.TimeoutMs || md.Owner == nil || *md.Owner != "app" {
		t.Fatalf("transactionMetadata = %+v", md)
	}
	if p, ok := md.ProducedPartitions["persistent://public/default/t"]; !ok || p.Aborted || p.StartPosition != nil || len(md.ProducedPartitions) != 1 {
		t.Fatalf("producedPartitions = %+v", md.ProducedPartitions)
	}
	if pos := md.AckedPartitions["persistent://public/default/t"]["s"].CumulativeAckPosition; pos == nil || *pos != "7:30" {
		t.Fatalf("ackedPartitions = %+v", md.AckedPartitions)
	}
	var e adminError
	for path, code := range map[string]int{"0/99": 404, "5/1": 404, "x/1": 400, "0/y": 400} {
		if got := adminCall(t, h, "GET", "/admin/v3/transactions/transactionMetadata/"+path, "", &e); got != code || e.Reason == "" {
			t.Errorf("transactionMetadata/%s: %d %q, want %d", path, got, e.Reason, code)
		}
	}

	// Open for more than 10 minutes and not ended: (0,1) only.
	var slow map[string]txnMetadataJSON
	if code := adminCall(t, h, "GET", "/admin/v3/transactions/slowTransactions/600000", "", &slow); code != 200 || len(slow) != 1 || slow["(0,1)"].Status != "OPEN" {
		t.Fatalf("slowTransactions: %d %+v", code, slow)
	}
	// Open for more than 0 ms: (0,3) too, unless it opened this very
	// millisecond; never the committed (0,2).
	slow = nil
	if adminCall(t, h, "GET", "/admin/v3/transactions/slowTransactions/0?coordinatorId=0", "", &slow); len(slow) == 0 || slow["(0,2)"].TxnID != "" {
		t.Fatalf("slowTransactions/0: %+v", slow)
	}
	slow = nil
	if adminCall(t, h, "GET", "/admin/v3/transactions/slowTransactions/0?coordinatorId=1", "", &slow); len(slow) != 0 {
		t.Fatalf("slowTransactions at 1: %+v", slow)
	}
	if code := adminCall(t, h, "GET", "/admin/v3/transactions/slowTransactions/-5", "", &e); code != 400 {
		t.Errorf("slowTransactions/-5: %d", code)
	}

	if code := adminCall(t, h, "POST", "/admin/v3/transactions/abortTransaction/0/1", "", nil); code != 204 {
		t.Fatalf("abortTransaction: %d", code)
	}
	if adminCall(t, h, "GET", "/admin/v3/transactions/transactionMetadata/0/1", "", &md); md.Status != "ABORTED" || !md.ProducedPartitions["persistent://public/default/t"].Aborted {
		t.Fatalf("after abort: %+v", md)
	}
	if code := adminCall(t, h, "POST", "/admin/v3/transactions/abortTransaction/0/2", "", &e); code != 409 || !strings.Contains(e.Reason, "committed") {
		t.Errorf("abort a committed transaction: %d %q", code, e.Reason)
	}
	if code := adminCall(t, h, "POST", "/admin/v3/transactions/abortTransaction/0/77", "", &e); code != 404 {
		t.Errorf("abort an unknown transaction: %d %q", code, e.Reason)
	}
	if code := adminCall(t, h, "GET", "/admin/v3/transactions/abortTransaction/0/1", "", &e); code != 404 {
		t.Errorf("GET abortTransaction: %d %q", code, e.Reason)
	}
}

func TestAdminTxnTopicStats(t *testing.T) {
	h, _ := txnFixture(t, false)
	const v3 = "/admin/v3/transactions/"
	var inBuf txnInBufferJSON
	if code := adminCall(t, h, "GET", v3+"transactionInBufferStats/public/default/t/0/1", "", &inBuf); code != 200 || inBuf.Aborted {
		t.Fatalf("transactionInBufferStats: %d %+v", code, inBuf)
	}
	var tb txnBufferStatsJSON
	if code := adminCall(t, h, "GET", v3+"transactionBufferStats/public/default/t?lowWaterMarks=true", "", &tb); code != 200 ||
		tb.State != "Ready" || tb.MaxReadPosition != "7:41" || tb.OngoingTxnSize != 1 || !maps.Equal(tb.LowWaterMarks, map[uint64]int64{0: 0, 1: -1}) {
		t.Fatalf("transactionBufferStats: %d %+v", code, tb)
	}
	var pa pendingAckStatsJSON
	if code := adminCall(t, h, "GET", v3+"pendingAckStats/public/default/t/s", "", &pa); code != 200 || pa.State != "Ready" || pa.OngoingTxnSize != 1 || pa.LowWaterMarks != nil {
		t.Fatalf("pendingAckStats: %d %+v", code, pa)
	}
	var inAck txnInPendingAckJSON
	if code := adminCall(t, h, "GET", v3+"transactionInPendingAckStats/public/default/t/s/0/1", "", &inAck); code != 200 || inAck.CumulativeAckPosition == nil || *inAck.CumulativeAckPosition != "7:30" {
		t.Fatalf("transactionInPendingAckStats: %d %+v", code, inAck)
	}
	if adminCall(t, h, "GET", v3+"transactionInPendingAckStats/public/default/t/s/0/2", "", &inAck); inAck.CumulativeAckPosition != nil {
		t.Fatalf("transactionInPendingAckStats of a transaction without acks: %+v", inAck)
	}
	for path, want := range map[string]string{
		"7/5": "MarkDelete", "7/22": "MarkDelete", "7/12": "PendingAck", "7/10?batchIndex=4": "PendingAck",
		"7/16": "NotInPendingAck", "7/30": "PendingAck", "7/42": "InvalidPosition", "99/12": "InvalidPosition",
	} {
		var ps positionInPendingAckJSON
		if code := adminCall(t, h, "GET", v3+"positionStatsInPendingAck/public/default/t/s/"+path, "", &ps); code != 200 || ps.State != want {
			t.Errorf("positionStatsInPendingAck %s: %d %q, want %s", path, code, ps.State, want)
		}
	}
	var e adminError
	for _, c := range []struct {
		path string
		code int
	}{
		{"pendingAckStats/public/default/t/nosuch", 404},
		{"transactionInPendingAckStats/public/default/t/nosuch/0/1", 404},
		{"transactionInBufferStats/public/default/nosuch/0/1", 404},
		{"transactionInBufferStats/public/default/t/0/99", 404},
		{"transactionBufferStats/public/default/p", 405},
		{"pendingAckStats/public/default/p/s", 405},
		{"transactionBufferInternalStats/public/default/t", 405},
		{"pendingAckInternalStats/public/default/t/s", 405},
		{"transactionBufferInternalStats/public/default/nosuch", 404},
		{"positionStatsInPendingAck/public/default/t/s/x/1", 400},
	} {
		if code := adminCall(t, h, "GET", v3+c.path, "", &e); code != c.code || e.Reason == "" {
			t.Errorf("%s: %d %q, want %d", c.path, code, e.Reason, c.code)
		}
	}
}

// TestAdminTxnAuthorization: the coordinator-wide paths are for
// superusers; the per-topic ones for superusers and the tenant's admins.
func TestAdminTxnAuthorization(t *testing.T) {
	h, _ := txnFixture(t, true)
	secret := []byte(strings.Repeat("k", 32))
	call := func(role, path string) int {
		tok, err := auth.NewToken(auth.TokenSpec{Subject: role}, secret, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	coordinatorWide := "/admin/v3/transactions/coordinatorStats"
	perTopic := "/admin/v3/transactions/pendingAckStats/public/default/t/s"
	for _, c := range []struct {
		role, path string
		want       int
	}{
		{"admin", coordinatorWide, 200}, {"ops", coordinatorWide, 403}, {"app", coordinatorWide, 403},
		{"admin", perTopic, 200}, {"ops", perTopic, 200}, {"app", perTopic, 403},
	} {
		if got := call(c.role, c.path); got != c.want {
			t.Errorf("%s GET %s: %d, want %d", c.role, c.path, got, c.want)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", coordinatorWide, nil))
	if w.Code != 401 {
		t.Errorf("no credentials: %d", w.Code)
	}
}

// TestAdminTxnStatus: the coordinator's errors reach their statuses.
func TestAdminTxnStatus(t *testing.T) {
	for err, want := range map[error]int{
		txn.ErrNotFound: 404, txn.ErrNotCoordinator: 404, txn.ErrInvalidStatus: 409,
		txn.ErrNotOwner: 403, txn.ErrTooMany: 412, errAdminNotAcceptable: 406,
	} {
		if got := adminStatus(fmt.Errorf("x: %w", err)); got != want {
			t.Errorf("adminStatus(%v) = %d, want %d", err, got, want)
		}
	}
	if r := adminReason(fmt.Errorf("%w: (0,1)", txn.ErrNotFound)); r != "transaction not found: (0,1)" {
		t.Errorf("reason = %q", r)
	}
}

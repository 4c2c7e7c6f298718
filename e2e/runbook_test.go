package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// rbGet runs GET url and returns the status, the X-Pulsar-Message-ID header
// and the body.
func rbGet(t *testing.T, method, url, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("X-Pulsar-Message-ID"), b
}

// rbProduce sends payloads unbatched to topic and returns their ids.
func rbProduce(t *testing.T, ctx context.Context, cl pulsar.Client, topic string, payloads ...string) []pulsar.MessageID {
	t.Helper()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var ids []pulsar.MessageID
	for _, p := range payloads {
		id, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(p), Key: "k-" + p})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestAdminRunbook: the commands of an operator's runbook that read a
// topic's internals or act on a whole namespace or broker, through
// pulsaradmin (plain REST where pulsaradmin has no call), each checked on
// its result: stats-internal (Pulsar's shape and lakegate's chunks and
// cursors), partitioned-stats-internal, examine-message, get-message-by-id
// (also on a partitioned topic's name), analyze-backlog,
// partitioned-stats --per-partition, delete-subscription --force,
// namespaces clear-backlog (one subscription, then all) and unsubscribe,
// brokers leader-broker and healthcheck.
func TestAdminRunbook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startCluster(t)
	srv := admServer(t, c)
	a := admClient(t, srv)
	cl := c.client()
	base := srv.URL + "/admin/v2/persistent/public/default/"
	const name = "persistent://public/default/rb"
	topic := admTopic(t, name)
	if err := a.Topics().Create(topic, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Subscriptions().Create(topic, "a", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	ids := rbProduce(t, ctx, cl, name, "m0", "m1", "m2", "m3", "m4", "m5")
	ledger := ids[0].LedgerID()
	pos := func(i int) string { return fmt.Sprintf("%d:%d", ledger, ids[i].EntryID()) }
	if err := a.Subscriptions().SkipMessages(topic, "a", 2); err != nil {
		t.Fatal(err)
	}

	// stats-internal: one ledger (the log), six entries, the cursor after
	// the two skipped.
	st, err := a.Topics().GetInternalStats(topic)
	if err != nil {
		t.Fatal(err)
	}
	if st.NumberOfEntries != 6 || len(st.Ledgers) != 1 || st.Ledgers[0].LedgerID != ledger || st.Ledgers[0].Entries != 6 ||
		st.LastConfirmedEntry != pos(5) || st.State != "LedgerOpened" || st.TotalSize < 12 || st.TotalSize != st.Ledgers[0].Size {
		t.Fatalf("internal stats: %+v", st)
	}
	cur := st.Cursors["a"]
	if cur.MarkDeletePosition != pos(1) || cur.ReadPosition != pos(2) || cur.MessagesConsumedCounter != 2 || cur.CursorLedger != -1 {
		t.Fatalf("cursor a: %+v", cur)
	}
	var raw struct {
		Lakegate struct {
			Log        int64 `json:"log"`
			NextOffset int64 `json:"nextOffset"`
			WALChunks  int   `json:"walChunks"`
			Chunks     []struct {
				Kind        string `json:"kind"`
				FirstOffset int64  `json:"firstOffset"`
				EndOffset   int64  `json:"endOffset"`
				Object      string `json:"object"`
			} `json:"chunks"`
			Cursors map[string]struct {
				MarkDeleteOffset int64 `json:"markDeleteOffset"`
				BacklogRecords   int64 `json:"backlogRecords"`
			} `json:"cursors"`
		} `json:"lakegate"`
	}
	if code := admDo(t, "GET", base+"rb/internalStats", "", "", &raw); code != http.StatusOK {
		t.Fatalf("internalStats: HTTP %d", code)
	}
	lg := raw.Lakegate
	if lg.Log != ledger || lg.WALChunks < 1 || len(lg.Chunks) != lg.WALChunks || lg.Chunks[0].FirstOffset != ids[0].EntryID() ||
		lg.Chunks[len(lg.Chunks)-1].EndOffset != lg.NextOffset || lg.Chunks[0].Object == "" || lg.Chunks[0].Kind != "wal" {
		t.Fatalf("lakegate section: %+v", lg)
	}
	if lc := lg.Cursors["a"]; lc.MarkDeleteOffset != ids[1].EntryID() || lc.BacklogRecords != 4 {
		t.Fatalf("lakegate cursor a: %+v", lc)
	}

	// examine-message: from the first entry, back from the last; past the
	// log 404.
	for _, tc := range []struct {
		q    string
		want int
	}{{"initialPosition=earliest&messagePosition=1", 0}, {"initialPosition=earliest&messagePosition=3", 2},
		{"initialPosition=latest&messagePosition=1", 5}, {"initialPosition=latest&messagePosition=2", 4}} {
		code, id, body := rbGet(t, "GET", base+"rb/examinemessage?"+tc.q, "")
		if code != http.StatusOK || string(body) != fmt.Sprintf("m%d", tc.want) || id != pos(tc.want)+":-1" {
			t.Fatalf("examine-message %s: %d %q %q; want m%d at %s", tc.q, code, id, body, tc.want, pos(tc.want))
		}
	}
	if code, _, body := rbGet(t, "GET", base+"rb/examinemessage?initialPosition=earliest&messagePosition=7", ""); code != http.StatusNotFound || !strings.Contains(string(body), "fewer than 7") {
		t.Fatalf("examine-message past the log: %d %s", code, body)
	}
	if code, _, _ := rbGet(t, "GET", base+"rb/examinemessage?initialPosition=middle", ""); code != http.StatusBadRequest {
		t.Fatalf("examine-message initialPosition=middle: %d, want 400", code)
	}

	// get-message-by-id.
	m, err := a.Subscriptions().GetMessageByID(topic, ledger, ids[3].EntryID())
	if err != nil || string(m.Payload) != "m3" {
		t.Fatalf("get-message-by-id: %v %v", m, err)
	}

	// analyze-backlog: the four entries after the skipped two; from a
	// given position, what lies from it on.
	var res struct {
		Entries, Messages, FilterAcceptedEntries int64
		Aborted                                  bool
		FirstMessageID                           string `json:"firstMessageId"`
		LastMessageID                            string `json:"lastMessageId"`
	}
	if code := admDo(t, "POST", base+"rb/subscription/a/analyzeBacklog", "application/json", "", &res); code != http.StatusOK ||
		res.Entries != 4 || res.Messages != 4 || res.FilterAcceptedEntries != 4 || res.Aborted || res.FirstMessageID != pos(2) || res.LastMessageID != pos(5) {
		t.Fatalf("analyze-backlog: %d %+v", code, res)
	}
	from := fmt.Sprintf(`{"ledgerId":%d,"entryId":%d,"partitionIndex":-1}`, ledger, ids[4].EntryID())
	if code := admDo(t, "POST", base+"rb/subscription/a/analyzeBacklog", "application/json", from, &res); code != http.StatusOK || res.Entries != 2 || res.FirstMessageID != pos(4) {
		t.Fatalf("analyze-backlog from m4: %d %+v", code, res)
	}
	if code := admDo(t, "POST", base+"rb/subscription/nope/analyzeBacklog", "application/json", "", nil); code != http.StatusNotFound {
		t.Fatalf("analyze-backlog of an unknown subscription: %d", code)
	}

	// delete-subscription: refused with a consumer connected, done with
	// --force: the consumer is disconnected and the cursor (backlog 4)
	// deleted; the client subscribes again, at latest (backlog 0).
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	admWantCode(t, a.Subscriptions().Delete(topic, "a"), http.StatusPreconditionFailed)
	if err := a.Subscriptions().ForceDelete(topic, "a"); err != nil {
		t.Fatal(err)
	}
	rbWait(t, ctx, "the subscription re-created at latest by the reconnected consumer", func() bool {
		st, err := a.Topics().GetStats(topic)
		s, ok := st.Subscriptions["a"]
		return err == nil && ok && s.MsgBacklog == 0 && len(s.Consumers) == 1
	})

	rbPartitioned(t, ctx, a, cl, base)
	rbNamespace(t, ctx, a, cl)
	rbBrokers(t, a)
}

// rbWait polls cond until it holds or ctx ends.
func rbWait(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("not within the deadline: %s", what)
		case <-tick.C:
		}
	}
}

// rbPartitioned: the runbook commands on a partitioned topic's name.
func rbPartitioned(t *testing.T, ctx context.Context, a pulsaradmin.Client, cl pulsar.Client, base string) {
	const name = "persistent://public/default/rbp"
	topic := admTopic(t, name)
	if err := a.Topics().Create(topic, 2); err != nil {
		t.Fatal(err)
	}
	if err := a.Subscriptions().Create(topic, "s", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	ids := rbProduce(t, ctx, cl, name+"-partition-1", "p0", "p1", "p2")
	var pst struct {
		Metadata   struct{ Partitions int }
		Partitions map[string]utils.PersistentTopicInternalStats
	}
	if code := admDo(t, "GET", base+"rbp/partitioned-internalStats", "", "", &pst); code != http.StatusOK || pst.Metadata.Partitions != 2 || len(pst.Partitions) != 2 {
		t.Fatalf("partitioned-internalStats: %d %+v", code, pst)
	}
	if p1 := pst.Partitions[name+"-partition-1"]; p1.NumberOfEntries != 3 || p1.Ledgers[0].LedgerID != ids[0].LedgerID() || p1.Cursors["s"].MarkDeletePosition == "" {
		t.Fatalf("partition 1 internal stats: %+v", p1)
	}
	if code := admDo(t, "GET", base+"rbp/internalStats", "", "", nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("stats-internal of a partitioned topic: %d, want 405", code)
	}
	m, err := a.Subscriptions().GetMessageByID(topic, ids[2].LedgerID(), ids[2].EntryID())
	if err != nil || string(m.Payload) != "p2" {
		t.Fatalf("get-message-by-id on the partitioned topic's name: %v %v", m, err)
	}
	if code, id, body := rbGet(t, "GET", base+"rbp-partition-1/examinemessage?initialPosition=latest&messagePosition=1", ""); code != http.StatusOK || string(body) != "p2" || !strings.HasSuffix(id, ":1") {
		t.Fatalf("examine-message on a partition: %d %q %q", code, id, body)
	}
	if code, _, _ := rbGet(t, "GET", base+"rbp/examinemessage?initialPosition=latest&messagePosition=1", ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("examine-message on a partitioned topic: %d, want 405", code)
	}
	// partitioned-stats --per-partition: each partition's stats under its name.
	ps, err := a.Topics().GetPartitionedStats(topic, true)
	if err != nil {
		t.Fatal(err)
	}
	p1 := ps.Partitions[name+"-partition-1"]
	if len(ps.Partitions) != 2 || p1.Subscriptions["s"].MsgBacklog != 3 || ps.Subscriptions["s"].MsgBacklog != 3 || ps.Metadata.Partitions != 2 {
		t.Fatalf("partitioned-stats --per-partition: %+v", ps)
	}
	if ps, err = a.Topics().GetPartitionedStats(topic, false); err != nil || len(ps.Partitions) != 0 || ps.Subscriptions["s"].MsgBacklog != 3 {
		t.Fatalf("partitioned-stats without per-partition: %+v %v", ps, err)
	}

	// update-subscription-properties: every partition's subscription; get
	// answers them; stats show them; an empty body clears them.
	if code := admDo(t, "PUT", base+"rbp/subscription/s/properties", "application/json", `{"owner":"ops","tier":"1"}`, nil); code != http.StatusNoContent {
		t.Fatalf("update-subscription-properties: %d", code)
	}
	var props map[string]string
	if code := admDo(t, "GET", base+"rbp/subscription/s/properties", "", "", &props); code != http.StatusOK || len(props) != 2 || props["owner"] != "ops" {
		t.Fatalf("get-subscription-properties: %d %v", code, props)
	}
	if ps, err = a.Topics().GetPartitionedStats(topic, true); err != nil || ps.Partitions[name+"-partition-0"].Subscriptions["s"].SubscriptionProperties["tier"] != "1" ||
		ps.Subscriptions["s"].SubscriptionProperties["owner"] != "ops" {
		t.Fatalf("subscriptionProperties in partitioned-stats: %+v %v", ps, err)
	}
	if code := admDo(t, "PUT", base+"rbp/subscription/nope/properties", "application/json", `{"a":"b"}`, nil); code != http.StatusNotFound {
		t.Fatalf("update-subscription-properties of an unknown subscription: %d", code)
	}
	if code := admDo(t, "PUT", base+"rbp/subscription/s/properties", "application/json", `["a"]`, nil); code != http.StatusBadRequest {
		t.Fatalf("update-subscription-properties with a list: %d", code)
	}
	if code := admDo(t, "PUT", base+"rbp/subscription/s/properties", "application/json", "", nil); code != http.StatusNoContent {
		t.Fatalf("clear subscription properties: %d", code)
	}
	props = nil // (decoding into a map merges)
	if code := admDo(t, "GET", base+"rbp-partition-1/subscription/s/properties", "", "", &props); code != http.StatusOK || len(props) != 0 {
		t.Fatalf("subscription properties after clearing: %d %v", code, props)
	}
	var meta map[string]any
	if code := admDo(t, "GET", base+"rbp/partitions", "", "", &meta); code != http.StatusOK || meta["properties"] != nil {
		t.Fatalf("partitioned metadata shows lakegate's keys: %v", meta)
	}
}

// rbNamespace: namespaces clear-backlog (one subscription, then every one)
// and unsubscribe, across a non-partitioned and a partitioned topic.
func rbNamespace(t *testing.T, ctx context.Context, a pulsaradmin.Client, cl pulsar.Client) {
	const ns = "public/rbns"
	if err := a.Namespaces().CreateNamespace(ns); err != nil {
		t.Fatal(err)
	}
	nsn, err := utils.GetNamespaceName(ns)
	if err != nil {
		t.Fatal(err)
	}
	plain, parted := admTopic(t, "persistent://"+ns+"/t"), admTopic(t, "persistent://"+ns+"/p")
	if err := a.Topics().Create(parted, 2); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []utils.TopicName{plain, parted} {
		for _, s := range []string{"x", "y"} {
			if err := a.Subscriptions().Create(tp, s, utils.Earliest); err != nil {
				t.Fatal(err)
			}
		}
		rbProduce(t, ctx, cl, tp.String(), "n0", "n1", "n2")
	}
	backlogs := func() map[string]int64 {
		out := map[string]int64{}
		st, err := a.Topics().GetStats(plain)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := a.Topics().GetPartitionedStats(parted, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"x", "y"} {
			out["t/"+s], out["p/"+s] = st.Subscriptions[s].MsgBacklog, ps.Subscriptions[s].MsgBacklog
		}
		return out
	}
	if got := backlogs(); got["t/x"] != 3 || got["p/y"] != 3 {
		t.Fatalf("backlogs before: %v", got)
	}
	if err := a.Namespaces().ClearNamespaceBacklogForSubscription(*nsn, "x"); err != nil {
		t.Fatal(err)
	}
	if got := backlogs(); got["t/x"] != 0 || got["p/x"] != 0 || got["t/y"] != 3 || got["p/y"] != 3 {
		t.Fatalf("backlogs after clearing x: %v", got)
	}
	if err := a.Namespaces().ClearNamespaceBacklog(*nsn); err != nil {
		t.Fatal(err)
	}
	if got := backlogs(); got["t/y"] != 0 || got["p/y"] != 0 {
		t.Fatalf("backlogs after clearing all: %v", got)
	}
	if err := a.Namespaces().UnsubscribeNamespace(*nsn, "y"); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []utils.TopicName{plain, parted} {
		if subs, err := a.Subscriptions().List(tp); err != nil || !slices.Equal(subs, []string{"x"}) {
			t.Fatalf("subscriptions of %s after unsubscribe y: %v %v", tp.String(), subs, err)
		}
	}
	nope, err := utils.GetNamespaceName("public/nope")
	if err != nil {
		t.Fatal(err)
	}
	admWantCode(t, a.Namespaces().ClearNamespaceBacklog(*nope), http.StatusNotFound)
}

// rbBrokers: brokers leader-broker names a listed broker; healthcheck ok.
func rbBrokers(t *testing.T, a pulsaradmin.Client) {
	lead, err := a.Brokers().GetLeaderBroker()
	if err != nil {
		t.Fatal(err)
	}
	list, err := a.Brokers().GetActiveBrokers("standalone")
	if err != nil {
		t.Fatal(err)
	}
	// The embedded node has no admin address (brokers list is empty):
	// the leader is named by its member id. TestClusterAdmin checks it
	// against brokers list on three processes.
	if lead.BrokerID == "" || len(list) > 0 && !slices.Contains(list, lead.BrokerID) {
		t.Fatalf("leader broker %+v is not one of %v", lead, list)
	}
	for range 2 {
		if err := a.Brokers().HealthCheck(); err != nil {
			t.Fatalf("healthcheck: %v", err)
		}
	}
	tenants, err := a.Tenants().List()
	if err != nil || slices.ContainsFunc(tenants, func(s string) bool { return strings.HasPrefix(s, "__") }) {
		t.Fatalf("tenants after healthcheck (the heartbeat log is hidden): %v %v", tenants, err)
	}
}

// TestAdminPartitionedBodiesFannedOut: the commands on a partitioned
// topic's name whose body says where to go — create-subscription at
// earliest, reset-cursor to latest or to a partition's message id,
// expire-messages up to a partition's message id — reach every partition
// (or the one the id names) with their body, as pulsar-admin sends them.
func TestAdminPartitionedBodiesFannedOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startCluster(t)
	srv := admServer(t, c)
	a := admClient(t, srv)
	base := srv.URL + "/admin/v2/persistent/public/default/"
	const name = "persistent://public/default/rbb"
	topic := admTopic(t, name)
	if err := a.Topics().Create(topic, 2); err != nil {
		t.Fatal(err)
	}
	cl := c.client()
	ids0 := rbProduce(t, ctx, cl, name+"-partition-0", "a0", "a1")
	ids1 := rbProduce(t, ctx, cl, name+"-partition-1", "b0", "b1", "b2")
	backlogs := func(what string, want0, want1 int64) {
		t.Helper()
		ps, err := a.Topics().GetPartitionedStats(topic, true)
		if err != nil {
			t.Fatal(err)
		}
		got0 := ps.Partitions[name+"-partition-0"].Subscriptions["e"].MsgBacklog
		got1 := ps.Partitions[name+"-partition-1"].Subscriptions["e"].MsgBacklog
		if got0 != want0 || got1 != want1 || ps.Subscriptions["e"].MsgBacklog != want0+want1 {
			t.Fatalf("%s: backlog per partition %d, %d (aggregate %d), want %d, %d", what, got0, got1, ps.Subscriptions["e"].MsgBacklog, want0, want1)
		}
	}
	post := func(what, method, path, body string, want int) {
		t.Helper()
		if code := admDo(t, method, base+path, "application/json", body, nil); code != want {
			t.Fatalf("%s: %d, want %d", what, code, want)
		}
	}
	const earliest = `{"ledgerId":-1,"entryId":-1,"partitionIndex":-1}`
	const latest = `{"ledgerId":9223372036854775807,"entryId":9223372036854775807,"partitionIndex":-1}`
	post("create-subscription at earliest", "PUT", "rbb/subscription/e", earliest, http.StatusNoContent)
	backlogs("created at earliest", 2, 3)
	post("reset-cursor to latest", "POST", "rbb/subscription/e/resetcursor", latest, http.StatusNoContent)
	backlogs("reset to latest", 0, 0)
	post("reset-cursor to a message id of partition 1", "POST", "rbb/subscription/e/resetcursor",
		fmt.Sprintf(`{"ledgerId":%d,"entryId":%d,"partitionIndex":1}`, ids1[1].LedgerID(), ids1[1].EntryID()), http.StatusNoContent)
	backlogs("reset partition 1 to its second message", 0, 2)
	post("reset-cursor to earliest", "POST", "rbb/subscription/e/resetcursor", earliest, http.StatusNoContent)
	backlogs("reset to earliest", 2, 3)
	post("expire-messages up to a message id of partition 0", "POST", "rbb/subscription/e/expireMessages",
		fmt.Sprintf(`{"ledgerId":%d,"entryId":%d,"partitionIndex":0,"isExcluded":false}`, ids0[0].LedgerID(), ids0[0].EntryID()), http.StatusNoContent)
	backlogs("expired partition 0's first message", 1, 3)
}

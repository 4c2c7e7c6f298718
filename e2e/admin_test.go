package e2e

// Admin REST v2 against a real node: the Go client's pulsaradmin package
// (what pulsar-admin users script with) and plain net/http for the raw JSON
// shapes. Run: go test -race -p 1 -run Admin ./e2e/

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/lakegate/lakegate/admin"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node/assembly"
)

// admServer serves the gateway's admin REST on an httptest server.
func admServer(t *testing.T, c *cluster) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(admin.Handler(assembly.AdminConfig(c.gw)))
	t.Cleanup(srv.Close)
	return srv
}

func admClient(t *testing.T, srv *httptest.Server) pulsaradmin.Client {
	t.Helper()
	a, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// admWantCode checks err is a REST error with code and a non-empty reason.
func admWantCode(t *testing.T, err error, code int) {
	t.Helper()
	var re rest.Error
	if !errors.As(err, &re) {
		t.Fatalf("want a REST error %d, got %v", code, err)
	}
	if re.Code != code || re.Reason == "" || strings.HasPrefix(re.Reason, fmt.Sprint(code)) {
		t.Fatalf("want code %d with a reason, got code %d reason %q", code, re.Code, re.Reason)
	}
}

func admTopic(t *testing.T, name string) utils.TopicName {
	t.Helper()
	tn, err := utils.GetTopicName(name)
	if err != nil {
		t.Fatal(err)
	}
	return *tn
}

// admReceive receives until every payload of want was seen, and returns
// them in arrival order (acknowledging each).
//
// It follows a reset of the subscription, which disconnects the consumers:
// a message the client received before the disconnect reached it is
// acknowledged for a consumer the subscription no longer has, and the
// server refuses that acknowledgement (ConsumerNotFound) rather than
// dropping it silently; the reset redelivers the message anyway.
func admReceive(t *testing.T, ctx context.Context, cons pulsar.Consumer, want []string) []string {
	t.Helper()
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	var got []string
	for len(missing) > 0 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive (still missing %d): %v", len(missing), err)
		}
		got = append(got, string(m.Payload()))
		delete(missing, string(m.Payload()))
		if err := cons.Ack(m); err != nil && !strings.Contains(err.Error(), "ConsumerNotFound") {
			t.Fatal(err)
		}
	}
	return got
}

func TestAdminTenantsNamespaces(t *testing.T) {
	c := startCluster(t)
	a := admClient(t, admServer(t, c))

	clusters, err := a.Clusters().List()
	if err != nil || !slices.Equal(clusters, []string{"standalone"}) {
		t.Fatalf("clusters = %v, %v", clusters, err)
	}
	tenants, err := a.Tenants().List()
	if err != nil || !slices.Contains(tenants, "public") {
		t.Fatalf("tenants = %v, %v: public is implied by public/default", tenants, err)
	}
	if err := a.Namespaces().CreateNamespace("acme/ns1"); err != nil {
		admWantCode(t, err, http.StatusNotFound) // unknown tenant
	} else {
		t.Fatal("namespace of an unknown tenant created")
	}
	if err := a.Tenants().Create(utils.TenantData{Name: "acme", AllowedClusters: []string{"standalone"}}); err != nil {
		t.Fatal(err)
	}
	admWantCode(t, a.Tenants().Create(utils.TenantData{Name: "acme"}), http.StatusConflict)
	td, err := a.Tenants().Get("acme")
	if err != nil || !slices.Equal(td.AllowedClusters, []string{"standalone"}) {
		t.Fatalf("tenant = %+v, %v", td, err)
	}
	for _, ns := range []string{"acme/ns1", "acme/ns2"} {
		if err := a.Namespaces().CreateNamespace(ns); err != nil {
			t.Fatal(err)
		}
	}
	admWantCode(t, a.Namespaces().CreateNamespace("acme/ns1"), http.StatusConflict)
	nss, err := a.Namespaces().GetNamespaces("acme")
	if err != nil || !slices.Equal(nss, []string{"acme/ns1", "acme/ns2"}) {
		t.Fatalf("namespaces = %v, %v", nss, err)
	}
	if _, err := a.Namespaces().GetPolicies("acme/ns1"); err != nil {
		t.Fatal(err)
	}
	_, err = a.Namespaces().GetPolicies("acme/nope")
	admWantCode(t, err, http.StatusNotFound)

	// A namespace with a topic is not deleted without force.
	if err := a.Topics().Create(admTopic(t, "persistent://acme/ns2/t"), 0); err != nil {
		t.Fatal(err)
	}
	admWantCode(t, a.Namespaces().DeleteNamespace("acme/ns2"), http.StatusConflict)
	admWantCode(t, a.Tenants().Delete("acme"), http.StatusConflict)
	if err := a.Topics().Delete(admTopic(t, "persistent://acme/ns2/t"), false, true); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"acme/ns1", "acme/ns2"} {
		if err := a.Namespaces().DeleteNamespace(ns); err != nil {
			t.Fatal(err)
		}
	}
	admWantCode(t, a.Namespaces().DeleteNamespace("acme/ns1"), http.StatusNotFound)
	if err := a.Tenants().Delete("acme"); err != nil {
		t.Fatal(err)
	}
	tenants, err = a.Tenants().List()
	if err != nil || slices.Contains(tenants, "acme") {
		t.Fatalf("tenants after delete = %v, %v", tenants, err)
	}
}

// TestAdminPartitionedTopic is the pulsar-admin script: create 4
// partitions, list, grow to 6, produce, consume part, stats show the
// backlog, reset by time re-delivers, delete the subscription and the topic.
func TestAdminPartitionedTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startCluster(t)
	a := admClient(t, admServer(t, c))
	const name = "persistent://public/default/orders"
	topic := admTopic(t, name)

	if err := a.Topics().Create(topic, 4); err != nil {
		t.Fatal(err)
	}
	admWantCode(t, a.Topics().Create(topic, 4), http.StatusConflict)
	ns, _ := utils.GetNamespaceName("public/default")
	partitioned, plain, err := a.Topics().List(*ns)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(partitioned, []string{name}) {
		t.Fatalf("partitioned topics = %v", partitioned)
	}
	for i := range 4 {
		if !slices.Contains(plain, fmt.Sprintf("%s-partition-%d", name, i)) {
			t.Fatalf("topics = %v: partition %d missing", plain, i)
		}
	}
	md, err := a.Topics().GetMetadata(topic)
	if err != nil || md.Partitions != 4 {
		t.Fatalf("metadata = %+v, %v", md, err)
	}
	if err := a.Topics().Update(topic, 6); err != nil {
		t.Fatal(err)
	}
	admWantCode(t, a.Topics().Update(topic, 5), http.StatusUnprocessableEntity)
	if md, err = a.Topics().GetMetadata(topic); err != nil || md.Partitions != 6 {
		t.Fatalf("metadata after grow = %+v, %v", md, err)
	}

	cl := c.client()
	const n = 60
	before := time.Now().UnixMilli() - 1
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true, Name: "orders-writer"})
	if err != nil {
		t.Fatal(err)
	}
	payloads := make([]string, n)
	for i := range n {
		payloads[i] = fmt.Sprintf("order-%02d", i)
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payloads[i])}); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic: name, SubscriptionName: "billing", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		AckWithResponse:             true, // the stats below see every ack
	})
	if err != nil {
		t.Fatal(err)
	}
	// Messages come in order per partition: the first 20 received are a
	// prefix of every partition, so the mark-delete points move over them.
	consumed := map[string]bool{}
	for range 20 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		consumed[string(m.Payload())] = true
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}

	ps, err := a.Topics().GetPartitionedStats(topic, true)
	if err != nil {
		t.Fatal(err)
	}
	sub, ok := ps.Subscriptions["billing"]
	if !ok || sub.MsgBacklog != n-20 || len(sub.Consumers) != 6 || sub.SubType != "Shared" {
		t.Fatalf("partitioned stats subscription = %+v (ok %v)", sub, ok)
	}
	if ps.Metadata.Partitions != 6 || len(ps.Partitions) != 6 || len(ps.Publishers) != 6 {
		t.Fatalf("partitioned stats: metadata %+v, %d partitions, %d publishers", ps.Metadata, len(ps.Partitions), len(ps.Publishers))
	}
	if ps.Publishers[0].ProducerName == "" || ps.StorageSize <= 0 {
		t.Fatalf("publishers %+v, storage %d", ps.Publishers, ps.StorageSize)
	}
	st, err := a.Topics().GetStats(admTopic(t, name+"-partition-0"))
	if err != nil {
		t.Fatal(err)
	}
	if s0, ok := st.Subscriptions["billing"]; !ok || len(s0.Consumers) != 1 || st.MsgCounterIn != 10 {
		t.Fatalf("partition 0 stats = %+v", st)
	}
	_, err = a.Topics().GetStats(topic)
	admWantCode(t, err, http.StatusNotFound) // a partitioned topic has partitioned-stats
	subs, err := a.Subscriptions().List(topic)
	if err != nil || !slices.Equal(subs, []string{"billing"}) {
		t.Fatalf("subscriptions = %v, %v", subs, err)
	}

	// Reset by time with the consumer connected: like SEEK, the consumers
	// are disconnected and resubscribe from the first message.
	if err := a.Subscriptions().ResetCursorToTimestamp(topic, "billing", before); err != nil {
		t.Fatal(err)
	}
	got := admReceive(t, ctx, cons, payloads)
	again := 0
	for _, p := range got {
		if consumed[p] {
			again++
		}
	}
	if again < 20 {
		t.Fatalf("after the reset, %d of the 20 consumed messages came again", again)
	}

	admWantCode(t, a.Subscriptions().Delete(topic, "billing"), http.StatusPreconditionFailed) // consumers connected
	cons.Close()
	if err := a.Subscriptions().Delete(topic, "billing"); err != nil {
		t.Fatal(err)
	}
	if subs, err = a.Subscriptions().List(topic); err != nil || len(subs) != 0 {
		t.Fatalf("subscriptions after delete = %v, %v", subs, err)
	}
	admWantCode(t, a.Subscriptions().Delete(topic, "billing"), http.StatusNotFound)

	admWantCode(t, a.Topics().Delete(topic, false, false), http.StatusPreconditionFailed) // producer connected
	prod.Close()
	if err := a.Topics().Delete(topic, false, false); err != nil {
		t.Fatal(err)
	}
	_, err = a.Topics().GetMetadata(topic)
	admWantCode(t, err, http.StatusNotFound)
	if partitioned, plain, err = a.Topics().List(*ns); err != nil || len(partitioned)+len(plain) != 0 {
		t.Fatalf("topics after delete: %v %v %v", partitioned, plain, err)
	}
}

// TestAdminSubscriptionByMessageID creates a subscription and resets it by
// message id with no consumer connected, then checks lastMessageId and
// terminate on a non-partitioned topic.
func TestAdminSubscriptionByMessageID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startCluster(t)
	a := admClient(t, admServer(t, c))
	const name = "persistent://public/default/ledger"
	topic := admTopic(t, name)
	if err := a.Topics().Create(topic, 0); err != nil {
		t.Fatal(err)
	}
	admWantCode(t, a.Topics().Create(topic, 0), http.StatusConflict)
	if err := a.Subscriptions().Create(topic, "audit", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	admWantCode(t, a.Subscriptions().Create(topic, "audit", utils.Earliest), http.StatusConflict)

	cl := c.client()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var ids []pulsar.MessageID
	for i := range 10 {
		id, err := prod.Send(ctx, &pulsar.ProducerMessage{
			Payload: fmt.Appendf(nil, "m%d", i), Properties: map[string]string{"k": fmt.Sprint("v", i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	st, err := a.Topics().GetStats(topic)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Subscriptions["audit"]; s.MsgBacklog != 10 || len(st.Publishers) != 1 {
		t.Fatalf("stats = %+v", st)
	}
	last, err := a.Topics().GetLastMessageID(topic)
	if err != nil || last.LedgerID != ids[9].LedgerID() || last.EntryID != ids[9].EntryID() || last.PartitionIndex != -1 {
		t.Fatalf("lastMessageId = %+v, %v; want %v", last, err, ids[9])
	}

	msgs, err := a.Subscriptions().GetMessagesByID(topic, ids[3].LedgerID(), ids[3].EntryID())
	if err != nil || len(msgs) != 1 || string(msgs[0].Payload) != "m3" || msgs[0].Properties["k"] != "v3" {
		t.Fatalf("message by id = %+v, %v", msgs, err)
	}

	reset := utils.MessageID{LedgerID: ids[5].LedgerID(), EntryID: ids[5].EntryID(), PartitionIndex: -1}
	if err := a.Subscriptions().ResetCursorToMessageID(topic, "audit", reset); err != nil {
		t.Fatal(err)
	}
	if st, err = a.Topics().GetStats(topic); err != nil || st.Subscriptions["audit"].MsgBacklog != 5 {
		t.Fatalf("stats after reset = %+v, %v", st.Subscriptions, err)
	}
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "audit"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	m, err := cons.Receive(ctx)
	if err != nil || string(m.Payload()) != "m5" {
		t.Fatalf("first message after reset = %v, %v; want m5", m, err)
	}

	if err := a.Topics().Unload(topic); err != nil {
		t.Fatal(err)
	}
	term, err := a.Topics().Terminate(topic)
	if err != nil || term.EntryID != ids[9].EntryID() {
		t.Fatalf("terminate = %+v, %v", term, err)
	}
	// The log is fenced. (Checked on the log: the Go client keeps a SEND
	// that got TopicTerminatedError pending until its send timeout.)
	l, err := c.catalog.OpenLog(ctx, lakestream.MustParseStreamID("public/default/ledger"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, 1, []byte("late")); !errors.Is(err, lakestream.ErrFenced) {
		t.Fatalf("append to a terminated topic: %v, want ErrFenced", err)
	}

	_, err = a.Topics().GetStats(admTopic(t, "persistent://public/default/nope"))
	admWantCode(t, err, http.StatusNotFound)
	admWantCode(t, a.Subscriptions().ResetCursorToTimestamp(topic, "nope", 0), http.StatusNotFound)
}

// admDo sends a raw request and decodes a JSON answer into out (if not nil).
func admDo(t *testing.T, method, url, contentType, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
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
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// TestAdminRawJSON pins the wire shapes Pulsar tools parse.
func TestAdminRawJSON(t *testing.T) {
	c := startCluster(t)
	base := admServer(t, c).URL + "/admin/v2/persistent/public/default"

	if code := admDo(t, "PUT", base+"/raw/partitions", "application/vnd.partitioned-topic-metadata+json", `{"partitions":3}`, nil); code != http.StatusNoContent {
		t.Fatalf("create partitioned: %d", code)
	}
	if code := admDo(t, "PUT", base+"/raw2/partitions", "application/json", `2`, nil); code != http.StatusNoContent {
		t.Fatalf("create partitioned with an int body: %d", code)
	}
	var e struct {
		Reason string `json:"reason"`
	}
	if code := admDo(t, "PUT", base+"/raw/partitions", "application/json", `3`, &e); code != http.StatusConflict || e.Reason == "" {
		t.Fatalf("create twice: %d %q", code, e.Reason)
	}
	if code := admDo(t, "PUT", base+"/bad/partitions", "application/json", `0`, &e); code != http.StatusPreconditionFailed || e.Reason == "" {
		t.Fatalf("0 partitions: %d %q", code, e.Reason)
	}
	var md map[string]any
	if code := admDo(t, "GET", base+"/raw/partitions", "", "", &md); code != http.StatusOK || md["partitions"] != float64(3) {
		t.Fatalf("get partitions: %d %v", code, md)
	}
	if code := admDo(t, "POST", base+"/raw/partitions", "application/json", `4`, nil); code != http.StatusNoContent {
		t.Fatalf("grow: %d", code)
	}
	var list []string
	if code := admDo(t, "GET", base+"/partitioned", "", "", &list); code != http.StatusOK ||
		!slices.Equal(list, []string{"persistent://public/default/raw", "persistent://public/default/raw2"}) {
		t.Fatalf("partitioned list: %d %v", code, list)
	}
	if code := admDo(t, "GET", base, "", "", &list); code != http.StatusOK || len(list) != 6 || list[0] != "persistent://public/default/raw-partition-0" {
		t.Fatalf("list: %d %v", code, list)
	}
	if code := admDo(t, "PUT", base+"/raw/subscription/s1", "application/json", `{"ledgerId":-1,"entryId":-1,"partitionIndex":-1}`, nil); code != http.StatusNoContent {
		t.Fatalf("create subscription: %d", code)
	}
	var stats map[string]any
	if code := admDo(t, "GET", base+"/raw/partitioned-stats", "", "", &stats); code != http.StatusOK {
		t.Fatalf("partitioned-stats: %d", code)
	}
	for _, k := range []string{"msgRateIn", "msgRateOut", "storageSize", "publishers", "subscriptions", "metadata", "partitions"} {
		if _, ok := stats[k]; !ok {
			t.Fatalf("partitioned-stats has no %q: %v", k, stats)
		}
	}
	subs := stats["subscriptions"].(map[string]any)
	s1 := subs["s1"].(map[string]any)
	for _, k := range []string{"msgBacklog", "type", "consumers"} {
		if _, ok := s1[k]; !ok {
			t.Fatalf("subscription stats has no %q: %v", k, s1)
		}
	}
	var id map[string]any
	if code := admDo(t, "GET", base+"/raw-partition-1/lastMessageId", "", "", &id); code != http.StatusOK ||
		id["entryId"] != float64(-1) || id["partitionIndex"] != float64(1) || id["ledgerId"] == nil {
		t.Fatalf("lastMessageId: %d %v", code, id)
	}
	if code := admDo(t, "GET", base+"/raw/lastMessageId", "", "", &e); code != http.StatusMethodNotAllowed || e.Reason == "" {
		t.Fatalf("lastMessageId of a partitioned topic: %d %q", code, e.Reason)
	}
	if code := admDo(t, "POST", base+"/raw/subscription/s1/resetcursor/0", "", "", nil); code != http.StatusNoContent {
		t.Fatalf("reset by time: %d", code)
	}
	if code := admDo(t, "POST", base+"/raw/subscription/s1/resetcursor", "application/json", `{"ledgerId":-1,"entryId":-1,"partitionIndex":-1}`, nil); code != http.StatusNoContent {
		t.Fatalf("reset every partition to earliest: %d", code)
	}
	if code := admDo(t, "POST", base+"/raw/subscription/s1/resetcursor", "application/json", `{"ledgerId":5,"entryId":0,"partitionIndex":-1}`, &e); code != http.StatusPreconditionFailed || e.Reason == "" {
		t.Fatalf("reset a partitioned topic by id without a partition: %d %q", code, e.Reason)
	}
	if code := admDo(t, "PUT", base+"/raw/subscription/s2", "application/json", `{"ledgerId":5,"entryId":0,"partitionIndex":-1}`, &e); code != http.StatusPreconditionFailed || e.Reason == "" {
		t.Fatalf("create a partitioned subscription at an id: %d %q", code, e.Reason)
	}
	if code := admDo(t, "PUT", base+"/raw/subscription/__lakegate.x", "", "", &e); code != http.StatusPreconditionFailed || e.Reason == "" {
		t.Fatalf("reserved subscription name: %d %q", code, e.Reason)
	}
	var subList []string
	if code := admDo(t, "GET", base+"/raw/subscriptions", "", "", &subList); code != http.StatusOK || !slices.Equal(subList, []string{"s1"}) {
		t.Fatalf("subscriptions: %d %v", code, subList)
	}
	if code := admDo(t, "GET", base+"/nope/stats", "", "", &e); code != http.StatusNotFound || e.Reason == "" {
		t.Fatalf("unknown topic: %d %q", code, e.Reason)
	}
	np := strings.Replace(base, "/persistent/", "/non-persistent/", 1)
	if code := admDo(t, "GET", np, "", "", &list); code != http.StatusOK || len(list) != 0 {
		t.Fatalf("non-persistent list: %d %v", code, list)
	}
	if code := admDo(t, "PUT", np+"/x/partitions", "application/json", `2`, &e); code != http.StatusNotImplemented || e.Reason == "" {
		t.Fatalf("non-persistent create: %d %q", code, e.Reason)
	}
	if code := admDo(t, "DELETE", base+"/raw/partitions?force=true", "", "", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if code := admDo(t, "PUT", base+"/raw/partitions", "application/json", `2`, &e); code != http.StatusConflict || !strings.Contains(e.Reason, "deleted") {
		t.Fatalf("re-create a deleted name: %d %q", code, e.Reason)
	}
	var cl []string
	if code := admDo(t, "GET", strings.Replace(base, "/persistent/public/default", "/clusters", 1), "", "", &cl); code != http.StatusOK || !slices.Equal(cl, []string{"standalone"}) {
		t.Fatalf("clusters: %d %v", code, cl)
	}
}

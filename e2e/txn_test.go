package e2e

// Transactions (docs/transactions.md) with the unmodified Go client
// (EnableTransaction): messages produced in a transaction reach no
// consumer until it commits, all at once, and never if it aborts;
// acknowledgements in a transaction take effect on commit and are undone
// (redelivered) on abort. Visibility is checked without waiting: a
// message published outside the transaction after its messages (a
// sentinel) arrives first, and nothing of the transaction before it. Run:
// go test -p 1 -count=1 -run TestTxn ./e2e/

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/txn"
)

// txnClient is a client with transactions on.
func (c *cluster) txnClient() pulsar.Client {
	c.t.Helper()
	return newTxnClient(c.t, c.gw.ServiceURL(), 30*time.Second, 10*time.Second)
}

// partitionRouter routes a message to the partition its "p" property
// names.
func partitionRouter(m *pulsar.ProducerMessage, _ pulsar.TopicMetadata) int {
	p, _ := strconv.Atoi(m.Properties["p"])
	return p
}

// sendTo publishes payload to partition p (in tx when not nil).
func sendTo(t *testing.T, ctx context.Context, prod pulsar.Producer, p int, payload string, tx pulsar.Transaction) pulsar.MessageID {
	t.Helper()
	id, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload), Properties: map[string]string{"p": strconv.Itoa(p)}, Transaction: tx})
	if err != nil {
		t.Fatalf("send %s: %v", payload, err)
	}
	return id
}

// receiveAll receives n messages and returns their payloads in arrival
// order, with their ids.
func receiveAll(t *testing.T, ctx context.Context, cons pulsar.Consumer, n int) ([]string, []pulsar.MessageID) {
	t.Helper()
	got, ids := make([]string, 0, n), make([]pulsar.MessageID, 0, n)
	for len(got) < n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d of %d messages (%v): %v", len(got), n, got, err)
		}
		got, ids = append(got, string(m.Payload())), append(ids, m.ID())
	}
	return got, ids
}

func TestTxnProduceCommitAbort(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c := startCluster(t)
	const topic = "persistent://public/default/txn-out"
	c.createPartitioned(topic, 3)
	cl := c.txnClient()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "check",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// Batching off: the Go client (v0.19.0) keeps a transactional batch's
	// transaction id on the producer's later batches (pulsar-client-go
	// issue 1498), which would stage the sentinels in the transaction.
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, MessageRouter: partitionRouter,
		DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	// Transaction 1: 10 messages to each of the 3 partitions, sent
	// asynchronously (batched) — then a sentinel per partition outside it.
	tx1, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 30)
	for i := range 30 {
		prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("tx1-%d-%02d", i%3, i)),
			Properties: map[string]string{"p": strconv.Itoa(i % 3)}, Transaction: tx1},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
	}
	if err := prod.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		if err := <-errs; err != nil {
			t.Fatalf("transactional send: %v", err)
		}
	}
	for p := range 3 {
		sendTo(t, ctx, prod, p, fmt.Sprintf("sentinel-a-%d", p), nil)
	}
	got, _ := receiveAll(t, ctx, cons, 3)
	for _, g := range got {
		if !strings.HasPrefix(g, "sentinel-a-") {
			t.Fatalf("before the commit the consumer got %q (all: %v)", g, got)
		}
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	got, ids := receiveAll(t, ctx, cons, 30)
	last := map[int32]pulsar.MessageID{}
	lastPayload := map[int32]string{}
	for i, g := range got {
		if !strings.HasPrefix(g, "tx1-") {
			t.Fatalf("after the commit: %q (all: %v)", g, got)
		}
		p := ids[i].PartitionIdx()
		if fmt.Sprintf("tx1-%d-", p) != g[:6] {
			t.Fatalf("%q arrived from partition %d", g, p)
		}
		// Per partition, the transaction's messages keep their send order.
		if prev, ok := last[p]; ok && (lastPayload[p] >= g || recordOf(ids[i]) <= recordOf(prev)) {
			t.Fatalf("partition %d: %q (%v) after %q (%v)", p, g, ids[i], lastPayload[p], prev)
		}
		last[p], lastPayload[p] = ids[i], g
	}
	if len(last) != 3 {
		t.Fatalf("the committed messages came from %d partitions", len(last))
	}

	// Transaction 2 aborts: none of its messages is ever delivered.
	tx2, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		sendTo(t, ctx, prod, i%3, fmt.Sprintf("tx2-%d", i), tx2)
	}
	if err := tx2.Abort(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("late"), Properties: map[string]string{"p": "0"}, Transaction: tx2}); err == nil {
		t.Fatal("a send in an aborted transaction succeeded")
	}
	if err := tx2.Commit(ctx); err == nil {
		t.Fatal("an aborted transaction committed")
	}
	for p := range 3 {
		sendTo(t, ctx, prod, p, fmt.Sprintf("sentinel-b-%d", p), nil)
	}
	got, _ = receiveAll(t, ctx, cons, 3)
	for _, g := range got {
		if !strings.HasPrefix(g, "sentinel-b-") {
			t.Fatalf("after the abort the consumer got %q (all: %v)", g, got)
		}
	}

	// A reader of partition 0 from the start sees the same history.
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic + "-partition-0", StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var hist []string
	for len(hist) < 12 {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hist = append(hist, string(m.Payload()))
	}
	want := []string{"sentinel-a-0"}
	for i := 0; i < 30; i += 3 {
		want = append(want, fmt.Sprintf("tx1-0-%02d", i))
	}
	want = append(want, "sentinel-b-0")
	if fmt.Sprint(hist) != fmt.Sprint(want) {
		t.Fatalf("partition 0 reads\n%v\nwant\n%v", hist, want)
	}
	if r.HasNext() {
		m, _ := r.Next(ctx)
		t.Fatalf("partition 0 holds more: %q", m.Payload())
	}
}

// A transaction's staged messages and its coordinator's records survive a
// restart of the node: the transaction opened before it commits after it;
// one left open times out and is aborted.
func TestTxnSurvivesRestart(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	dir := t.TempDir()
	c := startClusterIn(t, dir)
	const topic = "persistent://public/default/txn-restart"
	cl := c.txnClient()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	short, err := cl.NewTransaction(3 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m-%d", i)), Transaction: tx}); err != nil {
			t.Fatal(err)
		}
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("dropped-%d", i)), Transaction: short}); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()
	id := txnIDOf(t, tx)
	shortID := txnIDOf(t, short)
	cl.Close()
	c.stop()

	c2 := startClusterIn(t, dir)
	// The client's transaction handle died with its client; the
	// coordinator's record did not: commit it as a client resuming it
	// would, through the node's coordinator.
	if err := c2.tn.Txn.End(ctx, id, true, ""); err != nil {
		t.Fatalf("commit after restart: %v", err)
	}
	// The short one times out on the restarted node.
	waitFor(t, ctx, "the short transaction aborted", func() bool {
		rec, err := c2.tn.Txn.Status(ctx, shortID)
		return err == nil && rec.State == txn.Aborted
	})
	cl2 := c2.client()
	p2, err := cl2.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("sentinel")}); err != nil {
		t.Fatal(err)
	}
	r, err := cl2.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, want := payloads(readToSentinel(t, ctx, r, "sentinel")), "[m-0 m-1 m-2 m-3 m-4]"; fmt.Sprint(got) != want {
		t.Fatalf("read %v before the sentinel, want %s", got, want)
	}
}

// txnIDOf is the coordinator's id of a client transaction.
func txnIDOf(t *testing.T, tx pulsar.Transaction) txn.ID {
	t.Helper()
	id := tx.GetTxnID()
	return txn.ID{Most: id.MostSigBits, Least: id.LeastSigBits}
}

// Consume-transform-produce: messages of an input topic are acknowledged
// in the transaction that produces their results. Abort: no result is
// delivered and the inputs come back; commit: every result is delivered
// once and no input comes back, also to a consumer of the subscription
// that attaches after the commit.
func TestTxnAckCommitAbort(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c := startCluster(t)
	const in, out = "persistent://public/default/txn-ack-in", "persistent://public/default/txn-ack-out"
	c.createPartitioned(in, 3)
	c.createPartitioned(out, 3)
	cl := c.txnClient()
	outCons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: out, SubscriptionName: "check",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer outCons.Close()
	inCons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: in, SubscriptionName: "work", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	// Batching off: pulsar-client-go issue 1498 (TestTxnProduceCommitAbort).
	inProd, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: in, MessageRouter: partitionRouter, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	outProd, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: out, MessageRouter: partitionRouter, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := range n {
		sendTo(t, ctx, inProd, i%3, fmt.Sprintf("in-%02d", i), nil)
	}
	// process consumes every input in one transaction and produces its
	// result; it returns the inputs it consumed, sorted.
	process := func(tx pulsar.Transaction, tag string) []string {
		t.Helper()
		var got []string
		for len(got) < n {
			m, err := inCons.Receive(ctx)
			if err != nil {
				t.Fatalf("%s: after %d inputs: %v", tag, len(got), err)
			}
			p := string(m.Payload())
			got = append(got, p)
			if err := inCons.AckWithTxn(m, tx); err != nil {
				t.Fatalf("%s: ack of %s in the transaction: %v", tag, p, err)
			}
			sendTo(t, ctx, outProd, int(m.ID().PartitionIdx()), tag+"-"+p, tx)
		}
		slices.Sort(got)
		return got
	}
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("in-%02d", i)
	}
	tx1, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := process(tx1, "tx1"); !slices.Equal(got, want) {
		t.Fatalf("tx1 consumed %v", got)
	}
	if err := tx1.Abort(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
	// The aborted acknowledgements are dropped: every input comes back.
	tx2, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := process(tx2, "tx2"); !slices.Equal(got, want) {
		t.Fatalf("after the abort, tx2 consumed %v", got)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// The results of tx2 only, each once: sentinels published after the
	// commit arrive after them, and nothing of tx1 before them.
	for p := range 3 {
		sendTo(t, ctx, outProd, p, fmt.Sprintf("sentinel-%d", p), nil)
	}
	var results []string
	sentinels := 0
	for sentinels < 3 {
		m, err := outCons.Receive(ctx)
		if err != nil {
			t.Fatalf("results %v: %v", results, err)
		}
		if p := string(m.Payload()); strings.HasPrefix(p, "sentinel-") {
			sentinels++
		} else {
			results = append(results, p)
		}
		outCons.Ack(m)
	}
	slices.Sort(results)
	wantResults := make([]string, n)
	for i := range n {
		wantResults[i] = "tx2-" + want[i]
	}
	if !slices.Equal(results, wantResults) {
		t.Fatalf("results\n%v\nwant\n%v", results, wantResults)
	}
	// The committed acknowledgements hold: a consumer attaching to the
	// subscription now gets only what was published after them.
	inCons.Close()
	for p := range 3 {
		sendTo(t, ctx, inProd, p, fmt.Sprintf("after-%d", p), nil)
	}
	again, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: in, SubscriptionName: "work", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	got, _ := receiveAll(t, ctx, again, 3)
	for _, g := range got {
		if !strings.HasPrefix(g, "after-") {
			t.Fatalf("after the commit the subscription redelivered %q (all: %v)", g, got)
		}
	}
}

// Acknowledgements in transactions survive a restart of the node: saved
// before they were answered, they are loaded by the subscription's next
// owner and resolved against the transactions' outcomes — the committed
// ones hold, the aborted ones are redelivered.
func TestTxnAcksSurviveRestart(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	dir := t.TempDir()
	c := startClusterIn(t, dir)
	const topic = "persistent://public/default/txn-ack-restart"
	cl := c.txnClient()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "work", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	txA, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	txB, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	inB := map[string]bool{}
	for i := range 4 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := txA
		if i%2 == 1 {
			tx, inB[string(m.Payload())] = txB, true
		}
		if err := cons.AckWithTxn(m, tx); err != nil {
			t.Fatalf("ack of %s: %v", m.Payload(), err)
		}
	}
	idA, idB := txnIDOf(t, txA), txnIDOf(t, txB)
	cl.Close()
	c.stop()

	c2 := startClusterIn(t, dir)
	// The transactions end while no node serves the topic.
	if err := c2.tn.Txn.End(ctx, idA, true, ""); err != nil {
		t.Fatalf("commit A: %v", err)
	}
	if err := c2.tn.Txn.End(ctx, idB, false, ""); err != nil {
		t.Fatalf("abort B: %v", err)
	}
	cl2 := c2.client()
	cons2, err := cl2.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "work", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons2.Close()
	got, _ := receiveAll(t, ctx, cons2, 2)
	for _, g := range got {
		if !inB[g] {
			t.Fatalf("redelivered %q, acknowledged in the committed transaction (got %v, B held %v)", g, got, inB)
		}
	}
	if got[0] == got[1] {
		t.Fatalf("redelivered %v", got)
	}
	// Nothing else comes: a sentinel is next.
	p2, err := cl2.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("sentinel")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := receiveAll(t, ctx, cons2, 1); got[0] != "sentinel" {
		t.Fatalf("after the redeliveries: %q", got[0])
	}
}

// The coordinator's metrics carry Pulsar's names (pulsar_txn_*) and count
// what the node's coordinators did: opened, committed, aborted, timed out.
func TestTxnMetrics(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	c := startNode(t, testnode.Config{Node: node.Config{DataDir: t.TempDir()}, HTTP: true})
	cl := c.txnClient()
	committed, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	aborted, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.NewTransaction(time.Second); err != nil { // left to time out
		t.Fatal(err)
	}
	if err := committed.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"pulsar_txn_created_total": 3, "pulsar_txn_committed_total": 1,
		"pulsar_txn_aborted_total": 2, "pulsar_txn_timeout_total": 1, "pulsar_txn_active_count": 0}
	var got map[string]float64
	waitFor(t, ctx, "the transaction metrics", func() bool {
		fams := scrape(t, c.tn.HTTP.URL+"/metrics")
		got = map[string]float64{}
		ok := true
		for name, v := range want {
			got[name], _ = familyValue(fams[name], map[string]string{"cluster": broker.ClusterName})
			ok = ok && got[name] == v
		}
		appends, _ := familyValue(fams["pulsar_txn_append_log_total"], nil)
		return ok && appends >= 3+2*2+2 // opens, two writes per end (decision, outcome), the timeout's two
	})
}

// The tables are read-committed: a `lakegate standalone` process
// materializes a topic while a transaction is open, after it commits, and
// after another aborts; with no partition lagging, the Delta and Iceberg
// tables hold exactly the committed messages.
func TestTxnTablesReadCommitted(t *testing.T) {
	node := startLakegate(t, lakegateBinary(t), t.TempDir(), "--tables-age", "200ms", "--tables-interval", "100ms", "--tables-scan-interval", "200ms")
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "persistent://public/default/txn-table"
	if code := admDo(t, http.MethodPut, node.httpURL+"/admin/v2/persistent/public/default/txn-table/partitions", "application/json", "2", nil); code/100 != 2 {
		t.Fatalf("create: HTTP %d", code)
	}
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: node.pulsarURL, OperationTimeout: 30 * time.Second,
		EnableTransaction: true, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, MessageRouter: partitionRouter, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	send := func(n int, tag string, tx pulsar.Transaction) {
		for i := range n {
			sendTo(t, ctx, prod, i%2, fmt.Sprintf("%s-%d", tag, i), tx)
		}
	}
	formats := []string{"DELTA", "ICEBERG"}
	const table = "public/default/txn-table"
	open, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	send(10, "plain", nil)
	send(10, "open", open)
	waitForTable(t, ctx, node.httpURL, table, 10, formats...)
	if err := open.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitForTable(t, ctx, node.httpURL, table, 20, formats...)
	aborted, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	send(6, "aborted", aborted)
	if err := aborted.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	send(4, "later", nil)
	waitForTable(t, ctx, node.httpURL, table, 24, formats...)
}

// TestTxnDedupLostReceipt: deduplication on (the namespace policy), a
// transactional producer with a fixed name on `lakegate standalone`,
// behind a relay that loses a receipt on demand (receipt_relay_test.go).
// The Go client resends a message whose receipt was lost on its new
// connection, and the resend is answered as a duplicate: on the same
// owner, and on the node restarted after a kill -9 that came before the
// node saw the client leave (so no deduplication snapshot holds the
// message: the new owner learns the transaction's staging set from the
// engine). After the commit each message is in the topic once.
func TestTxnDedupLostReceipt(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	bin := lakegateBinary(t)
	dir := t.TempDir()
	pulsarAddr, httpAddr := freeAddr(t), freeAddr(t)
	relay := startReceiptRelay(t, pulsarAddr)
	flags := []string{"--pulsar-addr", pulsarAddr, "--http-addr", httpAddr, "--pulsar-advertised-addr", relay.addr()}
	node := startLakegate(t, bin, dir, flags...)
	if code := admDo(t, http.MethodPost, node.httpURL+"/admin/v2/namespaces/public/default/deduplication",
		"application/json", "true", nil); code/100 != 2 {
		t.Fatalf("deduplication policy: HTTP %d", code)
	}
	const topic = "persistent://public/default/txn-dedup"
	// Timeouts longer than a kill and restart: the client waits for the
	// node rather than failing its send.
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + relay.addr(), OperationTimeout: 60 * time.Second,
		ConnectionTimeout: 60 * time.Second, EnableTransaction: true, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Batching off: pulsar-client-go issue 1498 (TestTxnProduceCommitAbort).
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "tp", DisableBatching: true,
		SendTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	tx, err := cl.NewTransaction(2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	msg := func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i), Transaction: tx}
	}
	stored := func(i int) {
		t.Helper()
		id, err := prod.Send(ctx, msg(i))
		if err != nil || isDupID(id) {
			t.Fatalf("send m-%d: %v %v", i, id, err)
		}
	}
	lostSeq := func(lost <-chan uint64) uint64 {
		t.Helper()
		select {
		case seq := <-lost:
			return seq
		case <-ctx.Done():
			t.Fatal("no receipt was lost")
			return 0
		}
	}
	stored(0)

	// The same owner: the receipt of m-1 is lost, the client reconnects and
	// resends it.
	lost := relay.loseNextReceipt(false, false)
	id, err := prod.Send(ctx, msg(1))
	if seq := lostSeq(lost); seq != 1 {
		t.Fatalf("lost the receipt of sequence %d, want 1", seq)
	}
	if err != nil || !isDupID(id) {
		t.Fatalf("m-1 resent to the same owner: %v %v, want a duplicate", id, err)
	}
	stored(2)

	// A new owner: the receipt of m-3 is lost, the node is killed before it
	// sees the connection go, and the client resends m-3 to it restarted.
	lost = relay.loseNextReceipt(true, true)
	type result struct {
		id  pulsar.MessageID
		err error
	}
	res := make(chan result, 1)
	prod.SendAsync(ctx, msg(3), func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { res <- result{id, err} })
	if seq := lostSeq(lost); seq != 3 {
		t.Fatalf("lost the receipt of sequence %d, want 3", seq)
	}
	node.kill(t)
	node = startLakegate(t, bin, dir, flags...)
	relay.resume()
	if r := <-res; r.err != nil || !isDupID(r.id) {
		t.Fatalf("m-3 resent to the restarted node: %v %v, want a duplicate", r.id, r.err)
	}
	stored(4)
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("sentinel")}); err != nil {
		t.Fatal(err)
	}
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, want := payloads(readToSentinel(t, ctx, r, "sentinel")), "[m-0 m-1 m-2 m-3 m-4]"; fmt.Sprint(got) != want {
		t.Fatalf("the topic holds %v before the sentinel, want %s", got, want)
	}
}

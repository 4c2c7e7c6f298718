package e2e

// Transactions on three `lakegate serve` processes: a consume-transform-
// produce loop keeps running while the owner of an output partition (a
// node that serves transaction coordinators too) is killed with SIGKILL
// and restarted. Every input's result is committed exactly once. Run: go
// test -count=1 -run TestTxnCluster ./e2e/

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// txnClient is a client of url with transactions on.
func (c *lgCluster) txnClient(url string) pulsar.Client {
	c.t.Helper()
	return newTxnClient(c.t, url, 30*time.Second, 2*time.Second)
}

// txnStatus is a transaction's status as the admin REST reports it
// (Pulsar's names), "" once its record is gone.
func (c *lgCluster) txnStatus(node *lakegateProc, id pulsar.TxnID) string {
	c.t.Helper()
	var md struct {
		Status string `json:"status"`
	}
	url := fmt.Sprintf("%s/admin/v3/transactions/transactionMetadata/%d/%d", node.httpURL, id.MostSigBits, id.LeastSigBits)
	switch code := httpJSON(c.t, http.MethodGet, url, &md); code {
	case http.StatusOK:
		return md.Status
	case http.StatusNotFound:
		return ""
	default:
		c.t.Fatalf("GET %s: HTTP %d", url, code)
		return ""
	}
}

func TestTxnClusterKill9(t *testing.T) {
	c := startLGCluster(t, 3, "file://"+t.TempDir(), keepAllFlags...)
	ctx := ctxFor(t, 4*time.Minute)
	const in, out = "persistent://public/default/txn-k9-in", "persistent://public/default/txn-k9-out"
	for _, name := range []string{"txn-k9-in", "txn-k9-out"} {
		if code := admDo(t, http.MethodPut, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/"+name+"/partitions", "application/json", "3", nil); code/100 != 2 {
			t.Fatalf("create %s: HTTP %d", name, code)
		}
	}
	cl := c.txnClient(c.serviceURL())
	// Batching off: pulsar-client-go issue 1498 (TestTxnProduceCommitAbort).
	inProd, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: in, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	for i := range n {
		if _, err := inProd.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "in-%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	outProd, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: out, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	work, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: in, SubscriptionName: "work", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, NackRedeliveryDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	check, err := c.client(c.serviceURL()).Subscribe(pulsar.ConsumerOptions{Topic: out, SubscriptionName: "check",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	// results counts each result the checker received, by input: distinct
	// messages (a message the checker gets again — redelivered because
	// its ack was lost with a node — is one message; a result committed
	// twice is two).
	reads := newDistinctReads()
	results := reads.payloads
	type result struct{ payload, id string }
	resultsIn := make(chan result, 1024)
	go func() {
		for {
			m, err := check.Receive(ctx)
			if err != nil {
				close(resultsIn)
				return
			}
			check.Ack(m)
			resultsIn <- result{string(m.Payload()), m.ID().String()}
		}
	}()
	victim := c.nodeByURL(c.lookup(c.nodes[0], out+"-partition-0"))
	// diagnose logs what explains a stall: the nodes' warnings and the
	// input subscription's state on each partition.
	diagnose := func() {
		for _, nd := range c.nodes {
			for _, l := range nd.logTail(5000) {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
					t.Logf("%s: %s", nd.name, l)
				}
			}
		}
		for p := range 3 {
			var st map[string]any
			url := fmt.Sprintf("%s/admin/v2/persistent/public/default/txn-k9-in-partition-%d/stats", c.nodes[1].httpURL, p)
			if code := httpJSON(t, http.MethodGet, url, &st); code == http.StatusOK {
				subs, _ := st["subscriptions"].(map[string]any)
				t.Logf("input partition %d: subscription work: %v", p, subs["work"])
			}
		}
	}
	var txns []pulsar.Transaction
	killed, restarted := false, false
	drain := func() {
		for {
			select {
			case r, ok := <-resultsIn:
				if !ok {
					diagnose()
					t.Fatalf("the checker stopped: %v (%d of %d results)", ctx.Err(), len(results), n)
				}
				reads.add(r.payload, r.id)
			default:
				return
			}
		}
	}
	// The loop: batches of up to 4 inputs, each in a transaction that
	// produces their results and acknowledges them. A transaction that
	// saw the kill is aborted (what a pipeline does on a failure: its
	// messages in flight may have been resent), which may fail when its
	// coordinator died — the coordinator's next owner times it out.
	for batch := 0; len(results) < n; batch++ {
		if ctx.Err() != nil {
			diagnose()
			var missing []string
			for i := range n {
				if k := fmt.Sprintf("out-in-%02d", i); results[k] == 0 {
					missing = append(missing, k)
				}
			}
			t.Fatalf("after %d batches, %d of %d results (missing %v)", batch, len(results), n, missing)
		}
		tx, err := cl.NewTransaction(10 * time.Second)
		if err != nil {
			t.Logf("batch %d: new transaction: %v", batch, err)
			drain()
			continue
		}
		txns = append(txns, tx)
		sawKill := false
		for i := 0; i < 4; i++ {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			m, err := work.Receive(rctx)
			cancel()
			if err != nil {
				break // nothing now: the rest is held by transactions not ended yet
			}
			// A message whose processing failed is handed back (a
			// negative ack), as an application does; otherwise it stays
			// with this consumer, unacknowledged, until it reconnects.
			if _, err := outProd.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "out-%s", m.Payload()), Transaction: tx}); err != nil {
				t.Logf("batch %d: send: %v", batch, err)
				work.Nack(m)
				sawKill = true
				break
			}
			if err := work.AckWithTxn(m, tx); err != nil {
				t.Logf("batch %d: ack: %v", batch, err)
				work.Nack(m)
				sawKill = true
				break
			}
			if !killed && len(results) >= n/3 && i == 1 {
				t.Logf("killing %s (owner of %s-partition-0) in batch %d", victim.name, out, batch)
				victim.kill(t)
				killed, sawKill = true, true
			}
		}
		if sawKill {
			if err := tx.Abort(ctx); err != nil {
				t.Logf("batch %d: abort: %v", batch, err)
			}
		} else if err := tx.Commit(ctx); err != nil {
			t.Logf("batch %d: commit: %v", batch, err)
		}
		if killed && !restarted {
			c.restart(victim)
			restarted = true
		}
		drain()
	}
	// Every transaction has ended before the results are counted: one
	// whose commit failed may still commit.
	for _, tx := range txns {
		id := tx.GetTxnID()
		waitFor(t, ctx, fmt.Sprintf("transaction %v ended", id), func() bool {
			s := c.txnStatus(c.nodes[1], id)
			return s == "" || s == "COMMITTED" || s == "ABORTED"
		})
	}
	sp, err := c.client(c.serviceURL()).CreateProducer(pulsar.ProducerOptions{Topic: out, DisableBatching: true,
		MessageRouter: partitionRouter})
	if err != nil {
		t.Fatal(err)
	}
	for p := range 3 {
		sendTo(t, ctx, sp, p, fmt.Sprintf("sentinel-%d", p), nil)
	}
	for reads.sentinels < 3 {
		select {
		case r, ok := <-resultsIn:
			if !ok {
				t.Fatalf("the checker stopped before the sentinels: %v", ctx.Err())
			}
			reads.add(r.payload, r.id)
		case <-ctx.Done():
			t.Fatal("sentinels not received")
		}
	}
	var missing, dup []string
	for i := range n {
		switch k := fmt.Sprintf("out-in-%02d", i); results[k] {
		case 1:
		case 0:
			missing = append(missing, k)
		default:
			dup = append(dup, fmt.Sprintf("%s×%d", k, results[k]))
		}
	}
	slices.Sort(dup)
	if len(missing) > 0 || len(dup) > 0 || len(results) != n {
		t.Fatalf("results: missing %v, duplicated %v, %d distinct (want %d)", missing, dup, len(results), n)
	}
	t.Logf("%d transactions; every input's result exactly once", len(txns))
}

// servingCoordinator is the node whose log says it serves coordinator tc
// (nil: none yet).
func (c *lgCluster) servingCoordinator(tc uint64) *lakegateProc {
	want := fmt.Sprintf(`msg="serving transaction coordinator" tc=%d `, tc)
	for _, n := range c.nodes {
		for _, l := range n.logTail(1 << 20) {
			if strings.Contains(l, want) {
				return n
			}
		}
	}
	return nil
}

// TestTxnAckOnAnotherNode: an acknowledgement in a transaction goes to the
// owner of its topic, which is often not the node serving the
// transaction's coordinator (the client has registered the subscription
// there first, with ADD_SUBSCRIPTION_TO_TXN). The owner accepts it, and the
// commit applies it: a consumer that subscribes again does not get the
// message back. (The owner used to require serving the coordinator itself
// and answered TransactionCoordinatorNotFound.)
func TestTxnAckOnAnotherNode(t *testing.T) {
	c := startLGCluster(t, 3, "file://"+t.TempDir(), keepAllFlags...)
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "persistent://public/default/txn-ack-elsewhere"
	cl := c.txnClient(c.serviceURL())
	prod, err := c.client(c.serviceURL()).CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"m-0", "m-1"} {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(m)}); err != nil {
			t.Fatal(err)
		}
	}
	subscribe := func() pulsar.Consumer {
		cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	cons := subscribe()
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := c.nodeByURL(c.lookup(c.nodes[0], topic))
	// The client opens transactions at its coordinators in turn: open them
	// until one is served by another node than the topic's owner.
	var tx pulsar.Transaction
	for i := 0; i < 64 && tx == nil; i++ {
		x, err := cl.NewTransaction(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if n := c.servingCoordinator(x.GetTxnID().MostSigBits); n != nil && n != owner {
			tx = x
			t.Logf("transaction %v: coordinator on %s, topic on %s", x.GetTxnID(), n.name, owner.name)
		} else if err := x.Abort(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if tx == nil {
		t.Fatalf("every coordinator the client used is served by %s, the topic's owner", owner.name)
	}
	if err := cons.AckWithTxn(m, tx); err != nil {
		t.Fatalf("ack of %s in transaction %v on the topic's owner %s: %v", m.Payload(), tx.GetTxnID(), owner.name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	again := subscribe()
	got, err := again.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Payload()) != "m-1" {
		t.Fatalf("after the commit a new consumer got %q first, want m-1 (m-0 was acknowledged in the transaction)", got.Payload())
	}
}

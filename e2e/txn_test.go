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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/lakegate/lakegate/txn"
)

// txnClient is a client with transactions on.
func (c *cluster) txnClient() pulsar.Client {
	c.t.Helper()
	cl, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               c.gw.ServiceURL(),
		OperationTimeout:  30 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		EnableTransaction: true,
		Logger:            plog.DefaultNopLogger(),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
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
	var got []string
	for {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(m.Payload()))
		if string(m.Payload()) == "sentinel" {
			break
		}
	}
	if want := "[m-0 m-1 m-2 m-3 m-4 sentinel]"; fmt.Sprint(got) != want {
		t.Fatalf("read %v, want %s", got, want)
	}
}

// txnIDOf is the coordinator's id of a client transaction.
func txnIDOf(t *testing.T, tx pulsar.Transaction) txn.ID {
	t.Helper()
	id := tx.GetTxnID()
	return txn.ID{Most: id.MostSigBits, Least: id.LeastSigBits}
}

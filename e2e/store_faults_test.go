package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/internal/faultproxy"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/internal/testservers"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
)

// startProxiedS3Node starts a lakegate node (embedded etcd, gateway) whose
// object store is bucket on SeaweedFS reached through proxy.
func startProxiedS3Node(t *testing.T, s3 *testservers.Seaweed, proxy *faultproxy.Proxy, bucket string, commitTimeout time.Duration) *etcdNode {
	t.Helper()
	s3.CreateBucket(t, bucket)
	q := url.Values{
		"endpoint":       {proxy.URL},
		"use_path_style": {"true"},
		"region":         {"us-east-1"},
		"anonymous":      {"true"},
	}
	cfg := node.Config{
		DataDir:   filepath.Join(t.TempDir(), "node"),
		ObjectURL: "s3://" + bucket + "?" + q.Encode(),
	}
	cfg.Engine.CommitTimeout = commitTimeout
	cfg.Engine.Linger = 20 * time.Millisecond                                       // many small objects: many PUTs to fault
	return startNode(t, testnode.Config{Node: cfg, OnStop: func() { proxy.Set() }}) // no faults while the node flushes and stops
}

// faultTopic creates topic with deduplication on and starts a consumer
// that records every message in l; it returns a function that sends a
// sentinel through p and waits for it (everything p got acknowledged
// before has then been delivered).
func faultTopic(t *testing.T, ctx context.Context, n *etcdNode, cl pulsar.Client, topic string, l *ledger) func(p pulsar.Producer, key string, within time.Duration) {
	t.Helper()
	if _, err := n.catalog.CreateStream(ctx, mustStreamID(t, topic), lakestream.StreamConfig{}, lakestream.Partitioning{},
		lakestream.SchemaConfig{Type: lakestream.SchemaNone}, map[string]string{"lakegate.dedup": "true"}, nil); err != nil {
		t.Fatal(err)
	}
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "all", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		BackOffPolicyFunc:           newCappedBackoff,
	})
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := cons.Receive(cctx)
			if err != nil {
				return
			}
			l.receive(string(m.Payload()), m.ID())
			_ = cons.Ack(m)
		}
	}()
	t.Cleanup(func() { ccancel(); <-done })
	return func(p pulsar.Producer, key string, within time.Duration) {
		t.Helper()
		got := l.expect(key)
		sctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		var err error
		for sctx.Err() == nil {
			var id pulsar.MessageID
			if id, err = p.Send(sctx, &pulsar.ProducerMessage{Payload: []byte(key)}); err == nil {
				l.mu.Lock()
				l.sent[key] = true
				l.acked[key] = id
				l.mu.Unlock()
				break
			}
			select { // a failed send is retried after a pause, until the deadline
			case <-sctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		if err != nil {
			t.Fatalf("sentinel %s: %v", key, err)
		}
		select {
		case <-got:
		case <-sctx.Done():
			t.Fatalf("sentinel %s not received within %v", key, within)
		}
	}
}

// TestStoreFaults runs a lakegate node on S3 (SeaweedFS) behind a
// fault-injecting proxy (internal/faultproxy), producers and a consumer
// on the Pulsar client:
//
//	throttled: 12% of PUTs answered 503 SlowDown, 4% of PUTs' connections
//	  dropped before and 5% after the PUT took effect (lost replies), 10%
//	  of GETs answered 500, 5-20 ms latency: every
//	  send is acknowledged (retries and backpressure only; failed == 0) and
//	  every acknowledged message is delivered exactly once;
//	outage: every request answered 503 for longer than the node's
//	  CommitTimeout: sends fail with a client error within SendTimeout plus
//	  slack, nothing is acknowledged, and after the outage new sends are
//	  acknowledged and every acknowledged message is delivered.
func TestStoreFaults(t *testing.T) {
	s3 := testservers.StartSeaweed(t)
	proxy, err := faultproxy.Start(s3.Endpoint, 42)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })

	t.Run("throttled", func(t *testing.T) {
		// A 20 s CommitTimeout: longer than any likely run of retries here.
		n := startProxiedS3Node(t, s3, proxy, "faults-throttled", 20*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl := n.etcdClient(t)
		l := newLedger()
		const topic = "persistent://public/default/store-throttled"
		sentinel := faultTopic(t, ctx, n, cl, topic, l)
		var prods []pulsar.Producer
		for i := range 2 {
			p, err := cl.CreateProducer(pulsar.ProducerOptions{
				Topic: topic, Name: fmt.Sprintf("p%d", i+1), DisableBatching: true,
				SendTimeout: 30 * time.Second, MaxPendingMessages: 200,
				BackOffPolicyFunc: newCappedBackoff,
			})
			if err != nil {
				t.Fatal(err)
			}
			prods = append(prods, p)
		}
		before := proxy.Stats()
		proxy.Set(
			faultproxy.Rule{Methods: []string{"PUT"}, Latency: 20 * time.Millisecond,
				DropRate: 0.04, ErrorRate: 0.12, Status: http.StatusServiceUnavailable, Code: "SlowDown", DropAfterRate: 0.05},
			faultproxy.Rule{Methods: []string{"GET"}, Latency: 5 * time.Millisecond, ErrorRate: 0.10, Status: http.StatusInternalServerError},
		)
		// Rounds of a few sends per producer, each waited for, so that the
		// load is many small WAL objects (many PUTs to fault).
		const rounds, perRound = 40, 5
		var wg sync.WaitGroup
		start := time.Now()
		for r := range rounds {
			for i := range perRound {
				for k, p := range prods {
					l.sendAsync(ctx, p, fmt.Sprintf("p%d-t-%d", k+1, r*perRound+i), &wg)
				}
			}
			for _, p := range prods {
				if err := p.FlushWithCtx(ctx); err != nil {
					t.Logf("flush: %v", err)
				}
			}
		}
		wg.Wait()
		took := time.Since(start)
		faults := proxy.Stats()
		proxy.Set()
		for k, p := range prods {
			sentinel(p, fmt.Sprintf("p%d-t-sentinel", k+1), 30*time.Second)
		}
		c, missing := l.counts("")
		puts := faults.Requests["PUT"] - before.Requests["PUT"]
		t.Logf("store faults (throttled): %v in %v; proxy: PUT requests=%d errors=%d dropped=%d dropped-after=%d, GET errors=%d",
			c, took.Round(time.Millisecond), puts,
			faults.Errors["PUT"]-before.Errors["PUT"], faults.Dropped["PUT"]-before.Dropped["PUT"],
			faults.DroppedAfter["PUT"]-before.DroppedAfter["PUT"], faults.Errors["GET"]-before.Errors["GET"])
		if faults.Errors["PUT"]-before.Errors["PUT"] == 0 {
			t.Error("no PUT error was injected: the test tested nothing")
		}
		if c.failed != 0 {
			l.mu.Lock()
			for k, err := range l.failed {
				t.Errorf("send %s failed: %v", k, err)
				break
			}
			l.mu.Unlock()
			t.Errorf("%d sends failed under throttling (want retries and backpressure only)", c.failed)
		}
		if c.missing != 0 {
			t.Errorf("%d acknowledged messages not delivered: %v", c.missing, firstN(missing, 10))
		}
		if c.duplicated != 0 || c.redelivered != 0 {
			t.Errorf("duplicates: %d stored twice, %d redelivered", c.duplicated, c.redelivered)
		}
	})

	t.Run("outage", func(t *testing.T) {
		const (
			commitTimeout = 3 * time.Second
			sendTimeout   = 6 * time.Second
		)
		n := startProxiedS3Node(t, s3, proxy, "faults-outage", commitTimeout)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl := n.etcdClient(t)
		l := newLedger()
		const topic = "persistent://public/default/store-outage"
		sentinel := faultTopic(t, ctx, n, cl, topic, l)
		p, err := cl.CreateProducer(pulsar.ProducerOptions{
			Topic: topic, Name: "p1", DisableBatching: true, SendTimeout: sendTimeout,
			BackOffPolicyFunc: newCappedBackoff,
		})
		if err != nil {
			t.Fatal(err)
		}
		sentinel(p, "p1-before-sentinel", 30*time.Second)

		proxy.Outage(true)
		const nOut = 50
		var wg sync.WaitGroup
		start := time.Now()
		for i := range nOut {
			l.sendAsync(ctx, p, fmt.Sprintf("p1-o-%d", i), &wg)
		}
		answered := make(chan struct{})
		go func() { wg.Wait(); close(answered) }()
		bound := 2*sendTimeout + commitTimeout + 10*time.Second // see TestEtcdClusterMemberLoss (b)
		select {
		case <-answered:
		case <-time.After(bound):
			t.Fatalf("sends neither acknowledged nor failed within %v of a store outage", bound)
		}
		took := time.Since(start)
		outage := proxy.Stats()
		proxy.Outage(false)
		co, _ := l.counts("o")
		var sample error
		l.mu.Lock()
		for k, err := range l.failed {
			if strings.Contains(k, "-o-") {
				sample = err
				break
			}
		}
		l.mu.Unlock()
		t.Logf("store faults (outage): all %d sends answered in %v: %v; e.g. %v; proxy: %v",
			co.sent, took.Round(time.Millisecond), co, sample, outage)
		if co.acked != 0 {
			t.Errorf("%d sends acknowledged during a total store outage", co.acked)
		}
		if co.failed != nOut {
			t.Errorf("%d of %d sends failed", co.failed, nOut)
		}

		// Recovery: new sends go through, everything acknowledged is there.
		var wg2 sync.WaitGroup
		for i := range 100 {
			l.sendAsync(ctx, p, fmt.Sprintf("p1-r-%d", i), &wg2)
		}
		if err := p.FlushWithCtx(ctx); err != nil {
			t.Logf("flush: %v", err)
		}
		wg2.Wait()
		sentinel(p, "p1-r-sentinel", 30*time.Second)
		cr, _ := l.counts("r")
		all, missing := l.counts("")
		// A send failed on the client may still have been stored after the
		// outage (a resend queued in the node): allowed, and reported.
		coEnd, _ := l.counts("o")
		t.Logf("store faults (outage) summary: outage %v (at the end: received=%d of the failed sends) | recovery %v | all %v",
			co, coEnd.received, cr, all)
		if cr.failed != 0 {
			t.Errorf("%d sends failed after the outage", cr.failed)
		}
		if all.missing != 0 {
			t.Errorf("%d acknowledged messages not delivered: %v", all.missing, firstN(missing, 10))
		}
		if all.duplicated != 0 {
			t.Errorf("%d messages stored twice", all.duplicated)
		}
	})
}

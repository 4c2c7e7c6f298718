package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"

	"github.com/lakegate/lakegate/internal/testservers"
)

// keyedLoad is a keyed, batched workload against a cluster and its
// bookkeeping: what producers sent and got receipts for, what each
// subscription's consumers got, in order.
type keyedLoad struct {
	t     *testing.T
	topic string
	keys  int

	mu    sync.Mutex
	acked map[string]bool // "key:seq" with a send receipt
	subs  map[string]*subLedger
	// firstAfter is when each partition delivered its first message sent
	// after mark (kill -9 to first message served by the new owner).
	mark       time.Time
	firstAfter map[int]time.Time
}

// subLedger is one subscription's deliveries.
type subLedger struct {
	typ        pulsar.SubscriptionType
	delivered  map[string]int // "key:seq" → deliveries
	lastSeq    map[string]int // per consumer+key: the highest new seq delivered
	outOfOrder []string
	redelivers int
}

func newKeyedLoad(t *testing.T, topic string, keys int) *keyedLoad {
	return &keyedLoad{t: t, topic: topic, keys: keys, acked: map[string]bool{}, subs: map[string]*subLedger{}, firstAfter: map[int]time.Time{}}
}

// subscribe attaches n consumers of subscription name (type typ) through cl.
func (l *keyedLoad) subscribe(ctx context.Context, cl pulsar.Client, name string, typ pulsar.SubscriptionType, n int) {
	l.t.Helper()
	l.mu.Lock()
	sl := &subLedger{typ: typ, delivered: map[string]int{}, lastSeq: map[string]int{}}
	l.subs[name] = sl
	l.mu.Unlock()
	for i := range n {
		cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: l.topic, SubscriptionName: name, Type: typ,
			Name: fmt.Sprintf("%s-%d", name, i), SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			l.t.Fatal(err)
		}
		l.t.Cleanup(cons.Close)
		go func() {
			for {
				m, err := cons.Receive(ctx)
				if err != nil {
					return
				}
				l.record(name, i, m)
				cons.Ack(m)
			}
		}()
	}
}

func (l *keyedLoad) record(sub string, consumer int, m pulsar.Message) {
	id := string(m.Payload())
	key, seqs, _ := strings.Cut(id, ":")
	seq, _ := strconv.Atoi(seqs)
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.subs[sub]
	if sl.delivered[id] > 0 {
		sl.redelivers++
	} else {
		ck := fmt.Sprintf("%d/%s", consumer, key)
		if last, ok := sl.lastSeq[ck]; ok && seq < last && sl.typ != pulsar.Shared {
			sl.outOfOrder = append(sl.outOfOrder, fmt.Sprintf("%s after %s:%d on consumer %d", id, key, last, consumer))
		}
		sl.lastSeq[ck] = max(sl.lastSeq[ck], seq)
	}
	sl.delivered[id]++
	if !l.mark.IsZero() && m.PublishTime().After(l.mark) {
		p := int(m.ID().PartitionIdx())
		if _, ok := l.firstAfter[p]; !ok {
			l.firstAfter[p] = time.Now()
		}
	}
}

// produce sends from producers (each with its own keys) until stop is
// closed, at about rate messages per second each.
func (l *keyedLoad) produce(ctx context.Context, ps []pulsar.Producer, rate int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for pi, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / time.Duration(rate))
			defer tick.Stop()
			seq := map[string]int{}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				key := fmt.Sprintf("p%dk%d", pi, i%l.keys)
				id := fmt.Sprintf("%s:%d", key, seq[key])
				seq[key]++
				wg.Add(1)
				p.SendAsync(ctx, &pulsar.ProducerMessage{Key: key, Payload: []byte(id)},
					func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						defer wg.Done()
						if err == nil {
							l.mu.Lock()
							l.acked[id] = true
							l.mu.Unlock()
						}
					})
			}
		}()
	}
	return &wg
}

// settle waits until every acknowledged message was delivered to every
// subscription (or ctx ends), then reports and checks: missing and
// out-of-order must be 0.
func (l *keyedLoad) settle(ctx context.Context) {
	l.t.Helper()
	missing := func() map[string]int {
		l.mu.Lock()
		defer l.mu.Unlock()
		out := map[string]int{}
		for name, sl := range l.subs {
			for id := range l.acked {
				if sl.delivered[id] == 0 {
					out[name]++
				}
			}
		}
		return out
	}
	for {
		m := missing()
		done := true
		for _, n := range m {
			done = done && n == 0
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			l.report(m)
			l.t.Fatalf("acknowledged messages never delivered: %v", m)
		case <-time.After(100 * time.Millisecond): // progress check, bounded by ctx
		}
	}
	l.report(missing())
}

func (l *keyedLoad) report(missing map[string]int) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.subs))
	for n := range l.subs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		sl := l.subs[name]
		l.t.Logf("%-4s %-9v acked %d, delivered %d distinct, missing %d, redelivered %d, out of order %d",
			name, subTypeName(sl.typ), len(l.acked), len(sl.delivered), missing[name], sl.redelivers, len(sl.outOfOrder))
		if len(sl.outOfOrder) > 0 {
			l.t.Errorf("%s: %d messages out of order per key, e.g. %v", name, len(sl.outOfOrder), sl.outOfOrder[:min(5, len(sl.outOfOrder))])
		}
	}
}

func subTypeName(t pulsar.SubscriptionType) string {
	return map[pulsar.SubscriptionType]string{pulsar.Exclusive: "Exclusive", pulsar.Shared: "Shared",
		pulsar.Failover: "Failover", pulsar.KeyShared: "Key_Shared"}[t]
}

// TestClusterKill9Owner: kill -9 of the node owning partition 0 while
// producers and consumers of all four subscription types work through the
// cluster, then a restart of the killed node, for several rounds
// (LAKEGATE_FAILOVER_ROUNDS, default 2). Clients reach new owners (session
// TTL + reconnect backoff), no acknowledged message is lost and none is out
// of order per key; redeliveries are reported, and so is the time from each
// kill to the first message served from partition 0 by its new owner (p50
// and max over the rounds: docs/benchmarks.md).
func TestClusterKill9Owner(t *testing.T) {
	runKill9Owner(t, "file://"+filepath.ToSlash(t.TempDir()))
}

// TestClusterKill9OwnerS3 is TestClusterKill9Owner on S3 (SeaweedFS): the
// nodes share one bucket, with the remote-store WAL defaults (250 ms
// linger).
func TestClusterKill9OwnerS3(t *testing.T) {
	runKill9Owner(t, testservers.StartSeaweed(t).URL+"&prefix=cluster/")
}

func failoverRounds(t *testing.T) int {
	if v := os.Getenv("LAKEGATE_FAILOVER_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LAKEGATE_FAILOVER_ROUNDS=%q: want a positive count", v)
		}
		return n
	}
	return 2
}

// runKill9Owner runs the rounds on three nodes over objects. A killed node
// comes back on its ports, as a pod behind a Service does: the clients'
// service URL stays valid.
func runKill9Owner(t *testing.T, objects string) {
	c := startLGCluster(t, 0, objects)
	c.fixedPorts = true
	for range 3 {
		c.addNode()
	}
	rounds := failoverRounds(t)
	ctx := ctxFor(t, time.Duration(rounds)*time.Minute+2*time.Minute)
	const topic = "persistent://public/default/c-kill9"
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: c.nodes[0].httpURL})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(admTopic(t, topic), 4); err != nil {
		t.Fatal(err)
	}
	cl := c.client(c.serviceURL())
	load := newKeyedLoad(t, topic, 16)
	load.subscribe(ctx, cl, "ex", pulsar.Exclusive, 1)
	load.subscribe(ctx, cl, "fo", pulsar.Failover, 2)
	load.subscribe(ctx, cl, "sh", pulsar.Shared, 2)
	load.subscribe(ctx, cl, "ks", pulsar.KeyShared, 2)
	var ps []pulsar.Producer
	for range 2 {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		ps = append(ps, p)
	}
	stop := make(chan struct{})
	sending := load.produce(ctx, ps, 200, stop)
	delivered := func() int {
		load.mu.Lock()
		defer load.mu.Unlock()
		return len(load.subs["ex"].delivered)
	}
	var times []time.Duration
	for round := range rounds {
		victim := c.nodeByURL(c.lookup(c.nodes[(round+1)%len(c.nodes)], topic+"-partition-0"))
		target := delivered() + 300
		waitFor(t, ctx, "deliveries before the kill", func() bool { return delivered() >= target })
		load.mu.Lock()
		load.mark, load.firstAfter = time.Now(), map[int]time.Time{}
		load.mu.Unlock()
		victim.kill(t)
		waitFor(t, ctx, "partition 0 served again", func() bool {
			load.mu.Lock()
			defer load.mu.Unlock()
			_, ok := load.firstAfter[0]
			return ok
		})
		load.mu.Lock()
		d := load.firstAfter[0].Sub(load.mark)
		load.mark = time.Time{}
		load.mu.Unlock()
		times = append(times, d)
		t.Logf("round %d: killed %s (owner of partition 0); first message served by the new owner after %v", round+1, victim.name, d.Round(time.Millisecond))
		c.restart(victim)
	}
	target := delivered() + 300
	waitFor(t, ctx, "deliveries after the last round", func() bool { return delivered() >= target })
	close(stop)
	sending.Wait()
	load.settle(ctx)
	slices.Sort(times)
	t.Logf("kill -9 to first message served by the new owner over %d rounds: p50 %v, max %v (session TTL %v)",
		rounds, times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), clusterSessionTTL)
}

// waitFor waits (checking every 20 ms) until cond holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// TestClusterSigtermHandover: SIGTERM makes a node hand its topics over
// before it exits; clients move to the new owners with no acknowledged
// message redelivered (acks are persisted by the hand-over) and nothing
// lost.
func TestClusterSigtermHandover(t *testing.T) {
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()))
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "persistent://public/default/c-sigterm"
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: c.nodes[0].httpURL})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(admTopic(t, topic), 3); err != nil {
		t.Fatal(err)
	}
	cl := c.client(c.serviceURL())
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n1, n2 = 600, 600
	for i := range n1 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: strconv.Itoa(i % 30), Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	for len(got) < n1 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[string(m.Payload())]++
		if err := cons.Ack(m); err != nil { // acknowledged with a response: applied
			t.Fatal(err)
		}
	}
	victim := c.nodeByURL(c.lookup(c.nodes[0], topic+"-partition-0"))
	victim.signal(t, syscall.SIGTERM)
	victim.waitExit(t, 45*time.Second)
	for i := n1; i < n1+n2; i++ {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: strconv.Itoa(i % 30), Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatalf("send %d after the hand-over: %v", i, err)
		}
	}
	redelivered := 0
	for len(got) < n1+n2 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got[string(m.Payload())] > 0 {
			redelivered++
		}
		got[string(m.Payload())]++
		cons.Ack(m)
	}
	if redelivered > 0 {
		t.Fatalf("%d acknowledged messages redelivered after a SIGTERM hand-over", redelivered)
	}
	if !strings.Contains(strings.Join(victim.logTail(200), "\n"), "shutting down") {
		t.Fatalf("%s exited without its shutdown log", victim.name)
	}
}

// TestClusterSigstopPastLease: the owner of a topic is paused (SIGSTOP)
// past its session TTL. Another node takes the topic over; when the paused
// node resumes it must stop serving at once — it neither dispatches nor
// stores anything for the topic (its in-flight appends are refused by the
// ownership guard), and its clients move to the new owner.
func TestClusterSigstopPastLease(t *testing.T) {
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()), keepAllFlags...)
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "persistent://public/default/c-sigstop"
	owner := c.nodeByURL(c.lookup(c.nodes[0], topic))
	var other *lakegateProc
	for _, n := range c.nodes {
		if n != owner {
			other = n
			break
		}
	}
	// c1 and p1 talk to the owner only.
	cl1 := c.client(owner.pulsarURL)
	c1, err := cl1.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	p1, err := cl1.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	for i := range 50 {
		if _, err := p1.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "before-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	c1got := map[string]int{}
	go func() {
		for {
			m, err := c1.Receive(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			c1got[string(m.Payload())]++
			mu.Unlock()
			c1.Ack(m)
		}
	}()
	waitFor(t, ctx, "c1 got the first messages", func() bool { mu.Lock(); defer mu.Unlock(); return len(c1got) == 50 })

	owner.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	// Sends made while the owner is paused: answered later (by whoever
	// serves the topic then) or failed, never stored twice.
	var sendWG sync.WaitGroup
	acked := map[string]bool{}
	var sendErrs []error
	for i := range 20 {
		id := fmt.Sprintf("paused-%d", i)
		sendWG.Add(1)
		p1.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(id)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer sendWG.Done()
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				acked[id] = true
			} else {
				sendErrs = append(sendErrs, err)
			}
		})
	}
	// Through another node, a new Exclusive consumer of "s" gets the topic
	// once the owner's session has expired.
	// A client that connects to the paused owner waits for its CONNECTED
	// (the Go client: 30 s): look the topic up until the owner's session
	// has expired and another node takes it.
	waitFor(t, ctx, "the paused owner's session to expire", func() bool { return c.lookup(other, topic) != owner.pulsarURL })
	cl2 := c.clientTimeout(other.pulsarURL, 3*time.Second)
	var c2 pulsar.Consumer
	waitFor(t, ctx, "another node to serve the topic", func() bool {
		c2, err = cl2.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
		return err == nil
	})
	defer c2.Close()
	tookOver := time.Since(stopped)
	p2, err := cl2.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	for i := range 30 {
		if _, err := p2.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "after-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	owner.signal(t, syscall.SIGCONT)
	owner.waitLog(t, "cluster session lost", 30*time.Second)
	t.Logf("paused owner %s; %s served the topic %v later", owner.name, other.name, tookOver.Round(time.Millisecond))

	// c2 holds the subscription: it gets every message after the
	// acknowledged ones, and c1 (moved off the resumed node) gets none of
	// those sent after the takeover.
	c2got := map[string]int{}
	for {
		m, err := c2.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c2got[string(m.Payload())]++
		c2.Ack(m)
		if c2got["after-29"] > 0 {
			break
		}
	}
	sendWG.Wait()
	mu.Lock()
	for id := range c1got {
		if strings.HasPrefix(id, "after-") {
			t.Errorf("the resumed node dispatched %s (sent after the takeover) to its old consumer", id)
		}
	}
	mu.Unlock()
	// Every acknowledged message is stored exactly once.
	stored := map[string]int{}
	r, err := cl2.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.HasNext() {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stored[string(m.Payload())]++
	}
	mu.Lock()
	defer mu.Unlock()
	for id := range acked {
		if stored[id] != 1 {
			t.Errorf("acknowledged %s stored %d times", id, stored[id])
		}
	}
	for i := range 30 {
		if id := fmt.Sprintf("after-%d", i); stored[id] != 1 {
			t.Errorf("%s stored %d times", id, stored[id])
		}
	}
	// The producer of the paused node is moved to the new owner and
	// resends what it had pending there.
	if len(acked) != 20 {
		t.Errorf("sends made while the owner was paused: %d of 20 acknowledged: %v", len(acked), sendErrs[:min(3, len(sendErrs))])
	}
}

// TestClusterProxyMode: with proxy lookups, a client that can reach only
// one node (a load-balanced address) produces to and consumes from
// partitions owned by every node, through that node.
func TestClusterProxyMode(t *testing.T) {
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()), "--cluster-proxy-lookups=true")
	ctx := ctxFor(t, time.Minute)
	const topic = "persistent://public/default/c-proxy"
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: c.nodes[0].httpURL})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(admTopic(t, topic), 6); err != nil {
		t.Fatal(err)
	}
	owners := map[string]bool{}
	for i := range 6 {
		owners[c.lookup(c.nodes[1], fmt.Sprintf("%s-partition-%d", topic, i))] = true
	}
	if len(owners) < 2 {
		t.Fatalf("6 partitions on %d nodes: the test needs several owners", len(owners))
	}
	entry := c.nodes[0]
	cl := c.client(entry.pulsarURL) // the only address this client knows
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 600
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: strconv.Itoa(i), Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	partitions := map[int32]bool{}
	for len(got) < n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[string(m.Payload())] = true
		partitions[m.ID().PartitionIdx()] = true
		cons.Ack(m)
	}
	if len(partitions) != 6 {
		t.Fatalf("messages came from %d partitions, want 6", len(partitions))
	}
	body := httpGet(t, entry.httpURL+"/metrics")
	if !strings.Contains(body, "lakegate_proxied_connections_total") || strings.Contains(body, "lakegate_proxied_connections_total 0\n") {
		t.Fatalf("the entry node relayed no connection:\n%s", grepLines(body, "proxied"))
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestClusterBehavesAsOne runs the scenarios of issue #10's table against
// three `lakegate serve` processes on one etcd and one file store, each
// scenario with a client per node: every row must have Apache Pulsar's
// outcome.
func TestClusterBehavesAsOne(t *testing.T) {
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()), keepAllFlags...)
	clients := []pulsar.Client{c.client(c.nodes[0].pulsarURL), c.client(c.nodes[1].pulsarURL), c.client(c.nodes[2].pulsarURL)}
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: c.nodes[0].httpURL})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ProducersOnTwoNodesOnePartitionedTopic", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		const topic = "persistent://public/default/c-orders"
		if err := adm.Topics().Create(admTopic(t, topic), 4); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i, cl := range clients[:2] {
			p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: fmt.Sprintf("p%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for j := range 1500 {
				wg.Add(1)
				p.SendAsync(ctx, &pulsar.ProducerMessage{Key: strconv.Itoa(j % 40), Payload: fmt.Appendf(nil, "%d-%d", i, j)},
					func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						if err != nil {
							t.Errorf("send: %v", err)
						}
						wg.Done()
					})
			}
		}
		wg.Wait()
		// Every node reads the same 3000 messages in the same order.
		var orders [][]string
		for _, cl := range clients {
			r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic + "-partition-0", StartMessageID: pulsar.EarliestMessageID()})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for r.HasNext() {
				m, err := r.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(m.Payload()))
			}
			r.Close()
			orders = append(orders, got)
		}
		for i := 1; i < len(orders); i++ {
			if !slices.Equal(orders[0], orders[i]) {
				t.Fatalf("partition 0 read through node %d differs from node 0 (%d vs %d messages)", i, len(orders[i]), len(orders[0]))
			}
		}
		total := 0
		for p := range 4 {
			total += countTopic(t, ctx, clients[2], fmt.Sprintf("%s-partition-%d", topic, p))
		}
		if total != 3000 {
			t.Fatalf("stored %d messages, want 3000", total)
		}
	})

	t.Run("ExclusiveSubscriptionBusyAcrossNodes", func(t *testing.T) {
		const topic = "persistent://public/default/c-exclusive"
		a, err := clients[0].Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "x", Type: pulsar.Exclusive})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		_, err = clients[1].Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "x", Type: pulsar.Exclusive})
		if err == nil || !strings.Contains(err.Error(), "ConsumerBusy") {
			t.Fatalf("second Exclusive consumer through another node: %v, want ConsumerBusy", err)
		}
	})

	t.Run("SharedOneConsumerPerNode", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		const topic, n = "persistent://public/default/c-shared", 1000
		got := consumeAcross(t, ctx, clients, topic, pulsar.Shared, n)
		if len(got.delivered) != n || got.duplicates != 0 {
			t.Fatalf("Shared across nodes: %d distinct of %d delivered, %d duplicates", len(got.delivered), n, got.duplicates)
		}
		if busy := got.consumersWithMessages(); busy < 2 {
			t.Fatalf("Shared across nodes: only %d consumers got messages", busy)
		}
	})

	t.Run("FailoverOneActiveAcrossNodes", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		const topic, n = "persistent://public/default/c-failover", 300
		got := consumeAcross(t, ctx, clients, topic, pulsar.Failover, n)
		if len(got.delivered) != n || got.duplicates != 0 || got.consumersWithMessages() != 1 {
			t.Fatalf("Failover across nodes: %d distinct of %d, %d duplicates, %d consumers got messages (want 1)",
				len(got.delivered), n, got.duplicates, got.consumersWithMessages())
		}
	})

	t.Run("DedupAcrossNodes", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		const topic = "persistent://public/default/c-dedup"
		if err := adm.Topics().Create(admTopic(t, topic), 0); err != nil {
			t.Fatal(err)
		}
		if err := adm.Topics().SetDeduplicationStatus(admTopic(t, topic), true); err != nil {
			t.Fatal(err)
		}
		p, err := clients[0].CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dp", DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		sendSeqs(t, ctx, p, 0, 100)
		p.Close()
		q, err := clients[1].CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dp", DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		for i, id := range sendSeqs(t, ctx, q, 50, 100) {
			if !isDupID(id) {
				t.Fatalf("resend of %d through another node stored as %v, want a duplicate", 50+i, id)
			}
		}
		if n := countTopic(t, ctx, clients[2], topic); n != 100 {
			t.Fatalf("stored %d, want 100", n)
		}
	})

	t.Run("ProducerRulesAcrossNodes", func(t *testing.T) {
		const topic = "persistent://public/default/c-producers"
		a, err := clients[0].CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "same"})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		_, err = clients[1].CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "same"})
		if err == nil || !strings.Contains(err.Error(), "ProducerBusy") {
			t.Fatalf("same producer name through another node: %v, want ProducerBusy", err)
		}
		const xtopic = "persistent://public/default/c-exclusive-producer"
		x, err := clients[0].CreateProducer(pulsar.ProducerOptions{Topic: xtopic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		_, err = clients[2].CreateProducer(pulsar.ProducerOptions{Topic: xtopic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
		if err == nil || !strings.Contains(err.Error(), "ProducerFenced") {
			t.Fatalf("second Exclusive producer through another node: %v, want ProducerFenced", err)
		}
	})

	t.Run("LookupSpreadsPartitions", func(t *testing.T) {
		const topic = "persistent://public/default/c-spread"
		if err := adm.Topics().Create(admTopic(t, topic), 12); err != nil {
			t.Fatal(err)
		}
		owners := map[string]int{}
		for i := range 12 {
			p := fmt.Sprintf("%s-partition-%d", topic, i)
			owner := c.lookup(c.nodes[i%3], p)
			if again := c.lookup(c.nodes[(i+1)%3], p); again != owner {
				t.Fatalf("%s: node %d says %s, node %d says %s", p, i%3, owner, (i+1)%3, again)
			}
			owners[owner]++
		}
		if len(owners) != 3 {
			t.Fatalf("12 partitions placed on %d nodes (%v), want all 3", len(owners), owners)
		}
		var brokers []string
		if code := httpJSON(t, "GET", c.nodes[1].httpURL+"/admin/v2/brokers/standalone", &brokers); code != 200 || len(brokers) != 3 {
			t.Fatalf("brokers: HTTP %d %v, want 3", code, brokers)
		}
	})
}

// countTopic reads a topic from the start and returns how many messages it
// holds.
func countTopic(t *testing.T, ctx context.Context, cl pulsar.Client, topic string) int {
	t.Helper()
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for r.HasNext() {
		if _, err := r.Next(ctx); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// acrossResult is what consumeAcross saw.
type acrossResult struct {
	delivered   map[string]int // payload → consumer index of its first delivery
	duplicates  int
	perConsumer []int
}

func (r acrossResult) consumersWithMessages() int {
	n := 0
	for _, k := range r.perConsumer {
		if k > 0 {
			n++
		}
	}
	return n
}

// consumeAcross subscribes one consumer per client (subscription "s" of
// type typ), produces n messages through the first client, and collects
// deliveries until every message arrived and a short quiet period passes
// with no more (a duplicate would arrive within it: every consumer acks).
func consumeAcross(t *testing.T, ctx context.Context, clients []pulsar.Client, topic string, typ pulsar.SubscriptionType, n int) acrossResult {
	t.Helper()
	res := acrossResult{delivered: map[string]int{}, perConsumer: make([]int, len(clients))}
	var mu sync.Mutex
	all := make(chan struct{})
	var once sync.Once
	var consumers []pulsar.Consumer
	for i, cl := range clients {
		cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: typ,
			Name: fmt.Sprintf("c%d", i), SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, cons)
		go func() {
			for {
				m, err := cons.Receive(ctx)
				if err != nil {
					return
				}
				cons.Ack(m)
				mu.Lock()
				if _, seen := res.delivered[string(m.Payload())]; seen {
					res.duplicates++
				} else {
					res.delivered[string(m.Payload())] = i
				}
				res.perConsumer[i]++
				if len(res.delivered) == n {
					once.Do(func() { close(all) })
				}
				mu.Unlock()
			}
		}()
	}
	defer func() {
		for _, c := range consumers {
			c.Close()
		}
	}()
	p, err := clients[0].CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d delivered before the deadline", len(res.delivered), n)
	}
	// Duplicates would be deliveries of messages already delivered to
	// another consumer, in flight by now: watch for them a little longer.
	// (An absence is observed for a bounded time; nothing waits on it.)
	quiet := time.NewTimer(500 * time.Millisecond)
	defer quiet.Stop()
	select {
	case <-quiet.C:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	return res
}

// TestClusterAdmin: admin requests reach the owners of the partitions they
// are about, from any node (pulsaradmin, as pulsar-admin would use it), and
// partitioned views aggregate across owners.
func TestClusterAdmin(t *testing.T) {
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()))
	ctx := ctxFor(t, 2*time.Minute)
	const topic, parts = "persistent://public/default/c-admin", 6
	adms := make([]pulsaradmin.Client, 3)
	for i, n := range c.nodes {
		a, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: n.httpURL})
		if err != nil {
			t.Fatal(err)
		}
		adms[i] = a
	}
	tn := admTopic(t, topic)
	if err := adms[0].Topics().Create(tn, parts); err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for i := range parts {
		p := fmt.Sprintf("%s-partition-%d", topic, i)
		owners[p] = c.lookup(c.nodes[0], p)
	}
	cl := c.client(c.serviceURL())
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "live", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "admin-p"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 60 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: strconv.Itoa(i), Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}

	// Every node shows the same aggregate: one consumer per partition.
	for i, a := range adms {
		st, err := a.Topics().GetPartitionedStats(tn, true)
		if err != nil {
			t.Fatalf("partitioned stats through node %d: %v", i, err)
		}
		if got := len(st.Subscriptions["live"].Consumers); got != parts {
			t.Fatalf("partitioned stats through node %d: %d consumers of live, want %d", i, got, parts)
		}
		var raw struct {
			MsgInCounter int64 `json:"msgInCounter"`
		}
		httpJSON(t, "GET", c.nodes[i].httpURL+"/admin/v2/persistent/public/default/c-admin/partitioned-stats", &raw)
		if raw.MsgInCounter != 60 || len(st.Partitions) != parts || len(st.Publishers) != parts {
			t.Fatalf("partitioned stats through node %d: in %d, %d partitions, %d publishers", i, raw.MsgInCounter, len(st.Partitions), len(st.Publishers))
		}
	}
	// One partition's stats through a node that does not own it.
	for p, owner := range owners {
		var other int
		for i, n := range c.nodes {
			if n.pulsarURL != owner {
				other = i
			}
		}
		st, err := adms[other].Topics().GetStats(admTopic(t, p))
		if err != nil || len(st.Subscriptions["live"].Consumers) != 1 || len(st.Publishers) != 1 {
			t.Fatalf("stats of %s through a non-owner: %v %+v", p, err, st)
		}
	}
	// Subscriptions created, reset and deleted through different nodes.
	if err := adms[1].Subscriptions().Create(tn, "made", utilsEarliest()); err != nil {
		t.Fatal(err)
	}
	subs, err := adms[2].Subscriptions().List(tn)
	if err != nil || !slicesContains(subs, "made") || !slicesContains(subs, "live") {
		t.Fatalf("subscriptions through another node: %v %v", subs, err)
	}
	for i := range parts {
		ps, err := adms[i%3].Subscriptions().List(admTopic(t, fmt.Sprintf("%s-partition-%d", topic, i)))
		if err != nil || !slicesContains(ps, "made") {
			t.Fatalf("partition %d lacks the new subscription: %v %v", i, ps, err)
		}
	}
	if err := adms[2].Subscriptions().ResetCursorToTimestamp(tn, "made", time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	st, err := adms[0].Topics().GetPartitionedStats(tn, false)
	if err != nil || st.Subscriptions["made"].MsgBacklog != 0 || st.Subscriptions["live"].MsgBacklog > 60 {
		t.Fatalf("backlog after a reset to the end: %v %+v", err, st.Subscriptions)
	}
	// The backlog runbook through nodes that own none, some or all of the
	// partitions: back to the start, skip on one partition, clear-backlog
	// and expire-messages-all-subscriptions on the whole topic.
	if err := adms[0].Subscriptions().ResetCursorToTimestamp(tn, "made", 0); err != nil {
		t.Fatal(err)
	}
	if st, err = adms[1].Topics().GetPartitionedStats(tn, false); err != nil || st.Subscriptions["made"].MsgBacklog != 60 {
		t.Fatalf("backlog after a reset to the start: %v %+v", err, st.Subscriptions["made"])
	}
	part0 := admTopic(t, topic+"-partition-0")
	before, err := adms[2].Topics().GetStats(part0)
	if err != nil {
		t.Fatal(err)
	}
	if err := adms[2].Subscriptions().SkipMessages(part0, "made", 1); err != nil {
		t.Fatal(err)
	}
	after, err := adms[1].Topics().GetStats(part0)
	if err != nil || after.Subscriptions["made"].MsgBacklog != before.Subscriptions["made"].MsgBacklog-1 {
		t.Fatalf("skip 1 on partition 0: backlog %d → %d (%v)", before.Subscriptions["made"].MsgBacklog, after.Subscriptions["made"].MsgBacklog, err)
	}
	if err := adms[1].Subscriptions().ClearBacklog(tn, "made"); err != nil {
		t.Fatal(err)
	}
	if st, err = adms[2].Topics().GetPartitionedStats(tn, false); err != nil || st.Subscriptions["made"].MsgBacklog != 0 {
		t.Fatalf("backlog after clear-backlog: %v %+v", err, st.Subscriptions["made"])
	}
	if err := adms[0].Subscriptions().ResetCursorToTimestamp(tn, "made", 0); err != nil {
		t.Fatal(err)
	}
	if err := adms[2].Subscriptions().ExpireAllMessages(tn, 0); err != nil {
		t.Fatal(err)
	}
	if st, err = adms[0].Topics().GetPartitionedStats(tn, false); err != nil || st.Subscriptions["made"].MsgBacklog != 0 || st.Subscriptions["live"].MsgBacklog != 0 {
		t.Fatalf("backlog after expire-messages-all-subscriptions: %v %+v", err, st.Subscriptions)
	}
	if err := adms[1].Subscriptions().Delete(tn, "made"); err != nil {
		t.Fatal(err)
	}
	if subs, _ := adms[0].Subscriptions().List(tn); slicesContains(subs, "made") {
		t.Fatalf("deleted subscription still listed: %v", subs)
	}
	// Unload with a destination moves a partition there.
	p0 := fmt.Sprintf("%s-partition-%d", topic, 0)
	var dest *lakegateProc
	for _, n := range c.nodes {
		if n.pulsarURL != owners[p0] {
			dest = n
		}
	}
	if code := httpJSON(t, "PUT", c.nodes[0].httpURL+"/admin/v2/persistent/public/default/c-admin-partition-0/unload?destinationBroker="+dest.name, nil); code != 204 {
		t.Fatalf("unload: HTTP %d", code)
	}
	// The unload hands the partition over before it answers.
	if got := c.lookup(c.nodes[1], p0); got != dest.pulsarURL {
		t.Fatalf("after an unload to %s, partition 0 is at %s", dest.pulsarURL, got)
	}
	// The clients follow: the producer still sends to every partition.
	for i := range 12 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: strconv.Itoa(i), Payload: []byte("after")}); err != nil {
			t.Fatalf("send after the move: %v", err)
		}
	}
}

func utilsEarliest() utils.MessageID { return utils.Earliest }

func slicesContains(s []string, v string) bool { return slices.Contains(s, v) }

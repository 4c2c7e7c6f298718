package e2e

// TestKill9KeyedLoad: kill -9 of the real binary under keyed, batched load
// (issue #16). pulsar-client-go v0.19.0: 4 producers with key-based
// batching send 64 keys (each key from one producer, with a per-key
// sequence number) to a 4-partition topic; a Failover, a Key_Shared and a
// Shared subscription have 2 consumers each (one client per consumer,
// acknowledging every message after recording it, with the client's
// default 100 ms ack grouping). The node is killed with SIGKILL and
// restarted on the same data dir and ports; the clients reconnect by
// themselves. At the end the producers stop and every subscription must
// receive every message whose send was acknowledged.
//
// Per subscription it reports acked sends, delivered (unique), missed,
// redelivered (deliveries beyond the first), out of order (a key's message
// delivered for the first time after a later one of the key), the longest
// pause of a key and the longest send-to-delivery time; per restart the
// time from kill to ready and from ready to the first receipt and the
// first delivery of a message sent after the restart. Missed must be 0
// for every subscription, out of order 0 for Failover and Key_Shared
// (Shared has no order). Nothing waits by sleeping: kills are triggered by
// counts of receipts and deliveries (short run) or by the schedule (long
// run), the end by every acknowledged message being delivered.
//
//	go test -run TestKill9KeyedLoad ./e2e/              short: 2 kills (make test)
//	LAKEGATE_FAULT_KILLS=8 LAKEGATE_FAULT_EVERY=15s-35s \
//	  go test -run TestKill9KeyedLoad -timeout 30m -v ./e2e/     the long run (docs/fault-runs.md)
//
// Knobs (environment): LAKEGATE_FAULT_KILLS (default 2),
// LAKEGATE_FAULT_EVERY ("MIN-MAX" durations; unset: kill once 600 sends
// were acknowledged and every subscription received 300 messages sent
// since the restart), LAKEGATE_FAULT_RATE (messages/s, default 300; 800
// with EVERY), LAKEGATE_FAULT_SEED (kill schedule; default the time).

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
)

type faultParams struct {
	kills              int
	everyMin, everyMax time.Duration // 0: kill on counts (killReceipts, killDeliveries)
	killReceipts       int           // acknowledged sends since the node became ready
	killDeliveries     int           // messages sent since the restart, delivered to every subscription
	rate               int           // messages/s over all producers
	burst              int           // messages of one key sent together (one batch)
	keys, producers    int
	partitions         int
	seed               int64
	drain              time.Duration // deadline for delivering every acknowledged message at the end
}

func faultParamsFromEnv(t *testing.T) faultParams {
	t.Helper()
	p := faultParams{kills: 2, killReceipts: 600, killDeliveries: 300, rate: 300, burst: 3,
		keys: 64, producers: 4, partitions: 4, seed: time.Now().UnixNano(), drain: 90 * time.Second}
	atoi := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
			*dst = n
		}
	}
	if v := os.Getenv("LAKEGATE_FAULT_EVERY"); v != "" {
		lo, hi, ok := strings.Cut(v, "-")
		a, err1 := time.ParseDuration(lo)
		b, err2 := time.ParseDuration(hi)
		if !ok || err1 != nil || err2 != nil || a <= 0 || b < a {
			t.Fatalf("LAKEGATE_FAULT_EVERY=%q: want MIN-MAX durations, e.g. 15s-35s", v)
		}
		p.everyMin, p.everyMax, p.rate, p.drain = a, b, 800, 180*time.Second
	}
	atoi("LAKEGATE_FAULT_KILLS", &p.kills)
	atoi("LAKEGATE_FAULT_RATE", &p.rate)
	if v := os.Getenv("LAKEGATE_FAULT_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("LAKEGATE_FAULT_SEED=%q: %v", v, err)
		}
		p.seed = n
	}
	return p
}

type loadMsg struct{ key, seq int }

// subRecord is what one subscription received.
type subRecord struct {
	name    string
	typ     pulsar.SubscriptionType
	ordered bool // order per key is promised (Failover, Key_Shared)

	deliveries  map[loadMsg]int
	firstAt     map[loadMsg]time.Time
	maxSeq      map[int]int // highest sequence delivered per key
	lastNewAt   map[int]time.Time
	outOfOrder  []string // samples
	ooCount     int
	longestGap  time.Duration // longest time between two new messages of a key
	newSinceRdy int           // messages sent since the last restart, delivered
}

type restartRecord struct {
	killAt, readyAt time.Time
	// getMiB: chunk bytes the restarted node read from the object store
	// until the next kill (or the end): old data read again, since the
	// node caches what it writes. On a cluster: summed over the nodes,
	// each since its own start.
	getMiB        float64
	firstReceipt  time.Duration            // ready → first receipt of a message sent after ready
	firstDelivery map[string]time.Duration // per subscription: ready → first delivery of a message sent after ready
}

// loadState is shared by producers, consumers and the test; changed is
// closed and replaced on every receipt and delivery, so the test waits on
// conditions without polling.
type loadState struct {
	mu       sync.Mutex
	changed  chan struct{}
	sentAt   map[loadMsg]time.Time
	acked    map[loadMsg]bool
	readyAt  time.Time
	receipts int // since readyAt
	restarts []*restartRecord
	subs     []*subRecord
}

func (s *loadState) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitUntil waits until cond (called with s.mu held) is true, or fails
// the test at deadline, describing the state with what.
func (s *loadState) waitUntil(t *testing.T, deadline time.Time, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (s *loadState) receipt(m loadMsg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.acked[m] = true
	s.receipts++
	if r := s.lastRestart(); r != nil && r.firstReceipt == 0 && s.sentAt[m].After(r.readyAt) {
		r.firstReceipt = now.Sub(r.readyAt)
	}
	s.notifyLocked()
}

func (s *loadState) lastRestart() *restartRecord {
	if len(s.restarts) == 0 {
		return nil
	}
	return s.restarts[len(s.restarts)-1]
}

func (s *loadState) delivered(sub *subRecord, m loadMsg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	n := sub.deliveries[m]
	sub.deliveries[m] = n + 1
	if n > 0 {
		s.notifyLocked()
		return
	}
	sub.firstAt[m] = now
	if max, ok := sub.maxSeq[m.key]; ok && m.seq < max {
		sub.ooCount++
		if len(sub.outOfOrder) < 10 {
			sub.outOfOrder = append(sub.outOfOrder, fmt.Sprintf("key %d: %d after %d", m.key, m.seq, max))
		}
	} else {
		sub.maxSeq[m.key] = m.seq
	}
	if last, ok := sub.lastNewAt[m.key]; ok {
		sub.longestGap = max(sub.longestGap, now.Sub(last))
	}
	sub.lastNewAt[m.key] = now
	if s.sentAt[m].After(s.readyAt) {
		sub.newSinceRdy++
		if r := s.lastRestart(); r != nil {
			if _, ok := r.firstDelivery[sub.name]; !ok {
				r.firstDelivery[sub.name] = now.Sub(r.readyAt)
			}
		}
	}
	s.notifyLocked()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestKill9KeyedLoad(t *testing.T) {
	p := faultParamsFromEnv(t)
	bin := lakegateBinary(t)
	dir := t.TempDir()
	pulsarAddr, httpAddr := freeAddr(t), freeAddr(t)
	flags := []string{"--pulsar-addr", pulsarAddr, "--http-addr", httpAddr}
	node := startLakegate(t, bin, dir, flags...)
	runKeyedLoad(t, p, &loadTarget{
		serviceURL: node.pulsarURL, // the URL never changes
		adminURL:   func() string { return node.httpURL },
		getMiB:     func() float64 { return objectGetMiB(t, node.httpURL) },
		killRestart: func(int) string {
			node.kill(t)
			node = startLakegate(t, bin, dir, flags...)
			return "standalone"
		},
	})
}

// TestClusterKill9KeyedLoad is the same load against three `lakegate serve`
// nodes (one etcd, one file store) on fixed ports, the clients configured
// with all three: each kill -9's the owner of one partition (the next
// partition each time) and restarts it on the same ports, so the
// partitions it owned and their subscriptions move to other nodes.
//
//	go test -run TestClusterKill9KeyedLoad ./e2e/                 short: 2 kills (make test)
//	LAKEGATE_FAULT_KILLS=8 LAKEGATE_FAULT_EVERY=15s-35s \
//	  go test -run TestClusterKill9KeyedLoad -timeout 30m -v ./e2e/   the long run
func TestClusterKill9KeyedLoad(t *testing.T) {
	p := faultParamsFromEnv(t)
	c := startLGCluster(t, 0, "file://"+t.TempDir())
	c.fixedPorts = true
	for range 3 {
		c.addNode()
	}
	topic := "persistent://public/default/kill9-load"
	runKeyedLoad(t, p, &loadTarget{
		serviceURL: c.serviceURL(), // fixed ports: the URL never changes
		adminURL:   func() string { return c.nodes[0].httpURL },
		getMiB: func() float64 {
			var sum float64
			for _, n := range c.nodes {
				sum += objectGetMiB(t, n.httpURL)
			}
			return sum
		},
		killRestart: func(i int) string {
			part := fmt.Sprintf("%s-partition-%d", topic, i%p.partitions)
			victim := c.nodeByURL(c.lookup(c.nodes[(i+1)%len(c.nodes)], part))
			victim.kill(t)
			c.restart(victim)
			return victim.name + " (owner of partition " + strconv.Itoa(i%p.partitions) + ")"
		},
	})
}

// loadTarget is what runKeyedLoad runs against: a standalone node or a
// cluster.
type loadTarget struct {
	serviceURL string
	adminURL   func() string // a live node's admin API
	// getMiB is the chunk bytes read from the object store (summed over
	// the nodes of a cluster) since the node(s) started.
	getMiB func() float64
	// killRestart kill -9's a node (for kill i) and starts it again on the
	// same ports and data; it returns which node.
	killRestart func(i int) string
}

func runKeyedLoad(t *testing.T, p faultParams, target *loadTarget) {
	t.Logf("kills %d, every %v-%v (0: on counts), %d msg/s, %d keys, %d producers, %d partitions, burst %d, seed %d",
		p.kills, p.everyMin, p.everyMax, p.rate, p.keys, p.producers, p.partitions, p.burst, p.seed)
	topic := "persistent://public/default/kill9-load"
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: target.adminURL()})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(admTopic(t, topic), p.partitions); err != nil {
		t.Fatal(err)
	}

	st := &loadState{changed: make(chan struct{}), sentAt: map[loadMsg]time.Time{}, acked: map[loadMsg]bool{}, readyAt: time.Now()}
	newClient := func() pulsar.Client { return binClient(t, target.serviceURL) }
	for _, s := range []struct {
		name    string
		typ     pulsar.SubscriptionType
		ordered bool
	}{{"failover", pulsar.Failover, true}, {"key-shared", pulsar.KeyShared, true}, {"shared", pulsar.Shared, false}} {
		st.subs = append(st.subs, &subRecord{name: s.name, typ: s.typ, ordered: s.ordered,
			deliveries: map[loadMsg]int{}, firstAt: map[loadMsg]time.Time{}, maxSeq: map[int]int{}, lastNewAt: map[int]time.Time{}})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var consumersDone sync.WaitGroup
	var consumers []pulsar.Consumer
	for _, sub := range st.subs {
		for range 2 {
			c, err := newClient().Subscribe(pulsar.ConsumerOptions{
				Topic: topic, SubscriptionName: sub.name, Type: sub.typ,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			})
			if err != nil {
				t.Fatal(err)
			}
			consumers = append(consumers, c)
			consumersDone.Add(1)
			go func() {
				defer consumersDone.Done()
				for {
					m, err := c.Receive(ctx)
					if err != nil {
						return // ctx ended
					}
					var lm loadMsg
					if _, err := fmt.Sscanf(string(m.Payload()), "%d:%d", &lm.key, &lm.seq); err != nil {
						t.Errorf("%s: payload %q", sub.name, m.Payload())
						return
					}
					st.delivered(sub, lm)
					c.Ack(m)
				}
			}()
		}
	}

	// Producers: producer i sends the keys k with k % producers == i, a
	// burst of p.burst messages of one key per tick (one batch).
	pcl := newClient()
	stop := make(chan struct{})
	var producersDone, callbacks sync.WaitGroup
	var producers []pulsar.Producer
	for i := range p.producers {
		prod, err := pcl.CreateProducer(pulsar.ProducerOptions{
			Topic: topic, BatcherBuilderType: pulsar.KeyBasedBatchBuilder,
		})
		if err != nil {
			t.Fatal(err)
		}
		producers = append(producers, prod)
		var own []int
		for k := i; k < p.keys; k += p.producers {
			own = append(own, k)
		}
		producersDone.Add(1)
		go func() {
			defer producersDone.Done()
			next := map[int]int{}
			tick := time.NewTicker(time.Duration(p.burst*p.producers) * time.Second / time.Duration(p.rate))
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				k := own[n%len(own)]
				for range p.burst {
					m := loadMsg{k, next[k]}
					next[k]++
					st.mu.Lock()
					st.sentAt[m] = time.Now()
					st.mu.Unlock()
					callbacks.Add(1)
					prod.SendAsync(ctx, &pulsar.ProducerMessage{
						Key: fmt.Sprintf("key-%02d", k), Payload: fmt.Appendf(nil, "%d:%d", m.key, m.seq),
					}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						defer callbacks.Done()
						if err == nil {
							st.receipt(m)
						}
					})
				}
			}
		}()
	}

	rng := rand.New(rand.NewSource(p.seed))
	for i := range p.kills {
		if p.everyMin > 0 {
			wait := p.everyMin + time.Duration(rng.Int63n(int64(p.everyMax-p.everyMin)+1))
			select {
			case <-time.After(wait): // the kill schedule, not a wait for a condition
			case <-ctx.Done():
			}
		} else {
			st.waitUntil(t, time.Now().Add(2*time.Minute), fmt.Sprintf("kill %d's load", i+1), func() bool {
				if st.receipts < p.killReceipts {
					return false
				}
				for _, s := range st.subs {
					if s.newSinceRdy < p.killDeliveries {
						return false
					}
				}
				return true
			})
		}
		if last := st.lastRestart(); last != nil {
			last.getMiB = target.getMiB()
		}
		r := &restartRecord{killAt: time.Now(), firstDelivery: map[string]time.Duration{}}
		victim := target.killRestart(i)
		r.readyAt = time.Now()
		st.mu.Lock()
		st.readyAt, st.receipts = r.readyAt, 0
		for _, s := range st.subs {
			s.newSinceRdy = 0
		}
		st.restarts = append(st.restarts, r)
		st.mu.Unlock()
		t.Logf("kill %d of %s: restarted in %v", i+1, victim, r.readyAt.Sub(r.killAt).Round(time.Millisecond))
	}
	// After the last restart: load until every subscription got messages
	// sent since, then stop the producers and let everything drain.
	settle := max(p.killDeliveries, p.rate*5)
	st.waitUntil(t, time.Now().Add(3*time.Minute), "the load after the last restart", func() bool {
		for _, s := range st.subs {
			if s.newSinceRdy < settle {
				return false
			}
		}
		return true
	})
	st.lastRestart().getMiB = target.getMiB()
	close(stop)
	producersDone.Wait()
	for _, prod := range producers {
		fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
		if err := prod.FlushWithCtx(fctx); err != nil {
			t.Errorf("flush: %v", err)
		}
		fcancel()
	}
	// No connection died since the last restart: every send is answered.
	answered := make(chan struct{})
	go func() { callbacks.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(2 * time.Minute):
		t.Fatal("sends not answered 2 minutes after the producers stopped")
	}
	drainStart := time.Now()
	allDelivered := func(s *subRecord) bool {
		for m := range st.acked {
			if s.deliveries[m] == 0 {
				return false
			}
		}
		return true
	}
	timer := time.NewTimer(p.drain)
drain:
	for {
		st.mu.Lock()
		drained, ch := true, st.changed
		for _, s := range st.subs {
			drained = drained && allDelivered(s)
		}
		st.mu.Unlock()
		if drained {
			break
		}
		select {
		case <-ch:
		case <-timer.C:
			break drain // what is missing is reported below
		}
	}
	drainTime := time.Since(drainStart)
	cancel()
	consumersDone.Wait()
	for _, c := range consumers {
		c.Close()
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d kills; acked sends %d; drained in %v after the producers stopped\n", p.kills, len(st.acked), drainTime.Round(time.Millisecond))
	fmt.Fprintf(&b, "| subscription | acked sends | delivered (unique) | missed | redelivered | out of order per key | longest pause of a key | max send→delivery |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range st.subs {
		unique, redelivered, missed := 0, 0, 0
		var maxLag time.Duration
		stalled := map[int]bool{}
		for m, n := range s.deliveries {
			unique++
			redelivered += n - 1
			maxLag = max(maxLag, s.firstAt[m].Sub(st.sentAt[m]))
		}
		for m := range st.acked {
			if s.deliveries[m] == 0 {
				missed++
				stalled[m.key] = true
			}
		}
		ooo := strconv.Itoa(s.ooCount)
		if !s.ordered {
			ooo = "— (" + ooo + ")"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %v | %v |\n", s.name, len(st.acked), unique, missed, redelivered, ooo,
			s.longestGap.Round(time.Millisecond), maxLag.Round(time.Millisecond))
		if missed > 0 {
			keys := make([]int, 0, len(stalled))
			for k := range stalled {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			t.Errorf("%s: %d acknowledged messages never delivered (keys %v)", s.name, missed, keys)
		}
		if s.ordered && s.ooCount > 0 {
			t.Errorf("%s: %d messages out of order per key, e.g. %v", s.name, s.ooCount, s.outOfOrder)
		}
	}
	fmt.Fprintf(&b, "\n| restart | kill → ready | ready → first receipt | ready → first new delivery (failover / key-shared / shared) | object GETs until the next kill |\n|---|---|---|---|---|\n")
	for i, r := range st.restarts {
		var fd []string
		for _, s := range st.subs {
			d, ok := r.firstDelivery[s.name]
			if !ok {
				fd = append(fd, "none")
				continue
			}
			fd = append(fd, d.Round(time.Millisecond).String())
		}
		fmt.Fprintf(&b, "| %d | %v | %v | %s | %.1f MiB |\n", i+1, r.readyAt.Sub(r.killAt).Round(time.Millisecond),
			r.firstReceipt.Round(time.Millisecond), strings.Join(fd, " / "), r.getMiB)
	}
	t.Log(b.String())
}

// objectGetMiB reads lakegate_engine_object_get_bytes_total from the
// node's /metrics: chunk bytes read from the object store since it started.
func objectGetMiB(t *testing.T, httpURL string) float64 {
	t.Helper()
	const name = "lakegate_engine_object_get_bytes_total"
	resp, err := http.Get(httpURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f / (1 << 20)
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

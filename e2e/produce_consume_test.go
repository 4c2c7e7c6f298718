package e2e

// End-to-end tests with the unmodified pulsar-client-go v0.19.0 against an
// in-process lakegate node (engine + gateway over TCP on 127.0.0.1).
//
//	go test -p 1 ./e2e/                        everything (~1 min budget)
//	go test -p 1 -run 'TestProduceConsume/batch=false/partitions=4' ./e2e/
//	LAKEGATE_E2E_DEBUG=1 go test ...           gateway and engine debug logs
//
// No test sleeps to wait: completion is observed through the client (a
// receipt, a message, a sentinel message published after the fact).

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

const messagesPerRun = 1000

// sent is what a test produced: message i has payload "payload-i", key
// "key-(i%17)", properties {"i": i, "run": run}, event time base+i ms.
type sent struct {
	run  string
	base time.Time
	ids  []pulsar.MessageID
}

func produce(t *testing.T, cl pulsar.Client, topic string, batching bool, n int) sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{
		Topic:                   topic,
		DisableBatching:         !batching,
		BatchingMaxPublishDelay: 5 * time.Millisecond,
		BatchingMaxMessages:     50,
		// Route by key so every partition gets messages.
	})
	if err != nil {
		t.Fatalf("create producer: %v", err)
	}
	defer p.Close()
	s := sent{run: t.Name(), base: time.UnixMilli(time.Now().UnixMilli()), ids: make([]pulsar.MessageID, n)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := range n {
		wg.Add(1)
		p.SendAsync(ctx, &pulsar.ProducerMessage{
			Payload:    []byte("payload-" + strconv.Itoa(i)),
			Key:        fmt.Sprintf("key-%d", i%17),
			Properties: map[string]string{"i": strconv.Itoa(i), "run": s.run},
			EventTime:  s.base.Add(time.Duration(i) * time.Millisecond),
		}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			s.ids[i] = id
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("send: %v", firstErr)
	}
	t.Logf("produced %d messages (batching=%v) in %v", n, batching, time.Since(start))
	return s
}

// check verifies a received message against what was sent and returns its index.
func (s sent) check(t *testing.T, m pulsar.Message) int {
	t.Helper()
	i, err := strconv.Atoi(m.Properties()["i"])
	if err != nil || i < 0 || i >= len(s.ids) {
		t.Fatalf("message %v has bad properties %v", m.ID(), m.Properties())
	}
	if got, want := string(m.Payload()), "payload-"+strconv.Itoa(i); got != want {
		t.Fatalf("message %d payload %q, want %q", i, got, want)
	}
	if got, want := m.Key(), fmt.Sprintf("key-%d", i%17); got != want {
		t.Fatalf("message %d key %q, want %q", i, got, want)
	}
	if m.Properties()["run"] != s.run || len(m.Properties()) != 2 {
		t.Fatalf("message %d properties %v", i, m.Properties())
	}
	if want := s.base.Add(time.Duration(i) * time.Millisecond); !m.EventTime().Equal(want) {
		t.Fatalf("message %d event time %v, want %v", i, m.EventTime(), want)
	}
	if !sameEntry(m.ID(), s.ids[i]) {
		t.Fatalf("message %d id %v, producer was told %v", i, m.ID(), s.ids[i])
	}
	return i
}

// sameEntry compares ids as the broker assigns them (ledger, entry,
// partition, batch index).
func sameEntry(a, b pulsar.MessageID) bool {
	return a.LedgerID() == b.LedgerID() && a.EntryID() == b.EntryID() &&
		a.PartitionIdx() == b.PartitionIdx() && a.BatchIdx() == b.BatchIdx()
}

// idOrder checks message ids increase per partition.
type idOrder map[int32]pulsar.MessageID

func (o idOrder) next(t *testing.T, id pulsar.MessageID) {
	t.Helper()
	if prev, ok := o[id.PartitionIdx()]; ok {
		if prev.LedgerID() != id.LedgerID() || prev.EntryID() > id.EntryID() ||
			(prev.EntryID() == id.EntryID() && prev.BatchIdx() >= id.BatchIdx()) {
			t.Fatalf("ids out of order on partition %d: %v then %v", id.PartitionIdx(), prev, id)
		}
	}
	o[id.PartitionIdx()] = id
}

func subscribe(t *testing.T, cl pulsar.Client, topic, sub string, typ pulsar.SubscriptionType) pulsar.Consumer {
	t.Helper()
	c, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic:                          topic,
		SubscriptionName:               sub,
		Type:                           typ,
		SubscriptionInitialPosition:    pulsar.SubscriptionPositionEarliest,
		EnableBatchIndexAcknowledgment: true,
	})
	if err != nil {
		t.Fatalf("subscribe %s: %v", sub, err)
	}
	return c
}

func TestProduceConsume(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	for _, batching := range []bool{false, true} {
		for _, partitions := range []int{0, 4} {
			t.Run(fmt.Sprintf("batch=%v/partitions=%d", batching, partitions), func(t *testing.T) {
				topic := fmt.Sprintf("persistent://public/default/pc-%v-%d", batching, partitions)
				if partitions > 0 {
					c.createPartitioned(topic, partitions)
				}
				s := produce(t, cl, topic, batching, messagesPerRun)
				exclusiveAckCloseReconnect(t, cl, topic, s)
				sharedConsumers(t, cl, topic, s)
				lastMessageID(t, cl, topic, s)
			})
		}
	}
}

// exclusiveAckCloseReconnect consumes everything with an Exclusive
// subscription, acks two thirds (individually, so batches are partially
// acknowledged), closes, resubscribes and expects exactly the unacked third.
func exclusiveAckCloseReconnect(t *testing.T, cl pulsar.Client, topic string, s sent) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons := subscribe(t, cl, topic, "ex", pulsar.Exclusive)
	order := idOrder{}
	lastIndex := map[int32]int{}
	seen := make([]bool, len(s.ids))
	for range len(s.ids) {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		i := s.check(t, m)
		if seen[i] {
			t.Fatalf("message %d delivered twice", i)
		}
		seen[i] = true
		order.next(t, m.ID())
		// One producer: per partition, messages arrive in send order.
		if prev, ok := lastIndex[m.ID().PartitionIdx()]; ok && prev > i {
			t.Fatalf("partition %d: message %d after %d", m.ID().PartitionIdx(), i, prev)
		}
		lastIndex[m.ID().PartitionIdx()] = i
		if m.RedeliveryCount() != 0 {
			t.Fatalf("first delivery of %d has redelivery count %d", i, m.RedeliveryCount())
		}
		if i%3 != 0 {
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A second Exclusive consumer is refused while the first is attached.
	if c2, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "ex", Type: pulsar.Exclusive}); err == nil {
		c2.Close()
		t.Fatal("second exclusive consumer was accepted")
	}
	cons.Close()

	cons = subscribe(t, cl, topic, "ex", pulsar.Exclusive)
	defer cons.Close()
	want := 0
	for i := range s.ids {
		if i%3 == 0 {
			want++
		}
	}
	got := map[int]bool{}
	for len(got) < want {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive redelivered (%d of %d): %v", len(got), want, err)
		}
		i := s.check(t, m)
		if i%3 != 0 {
			t.Fatalf("acknowledged message %d was redelivered", i)
		}
		if got[i] {
			t.Fatalf("message %d redelivered twice", i)
		}
		got[i] = true
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing else is pending: a sentinel published now is the next message.
	expectOnlySentinel(t, ctx, cl, topic, cons)
}

// expectOnlySentinel publishes one message and expects it to be the next one
// cons receives (so nothing acknowledged is still queued for it).
func expectOnlySentinel(t *testing.T, ctx context.Context, cl pulsar.Client, topic string, cons pulsar.Consumer) {
	t.Helper()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("sentinel"), Properties: map[string]string{"sentinel": "1"}}); err != nil {
		t.Fatal(err)
	}
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "sentinel" {
		t.Fatalf("expected the sentinel, got %q (props %v, id %v)", m.Payload(), m.Properties(), m.ID())
	}
	cons.Ack(m)
}

// sharedConsumers consumes everything with two Shared consumers: every
// message exactly once across them.
func sharedConsumers(t *testing.T, cl pulsar.Client, topic string, s sent) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := subscribe(t, cl, topic, "sh", pulsar.Shared)
	defer a.Close()
	b := subscribe(t, cl, topic, "sh", pulsar.Shared)
	defer b.Close()
	var mu sync.Mutex
	seen := map[int]pulsar.Consumer{}
	counts := map[pulsar.Consumer]int{}
	done := make(chan struct{})
	var once sync.Once
	errs := make(chan error, 2)
	for _, cons := range []pulsar.Consumer{a, b} {
		go func() {
			for {
				m, err := cons.Receive(ctx)
				if err != nil {
					select {
					case <-done:
					default:
						errs <- err
					}
					return
				}
				i, _ := strconv.Atoi(m.Properties()["i"])
				if m.Properties()["sentinel"] != "" {
					cons.Ack(m)
					continue
				}
				cons.Ack(m)
				mu.Lock()
				if prev, dup := seen[i]; dup {
					mu.Unlock()
					errs <- fmt.Errorf("message %d delivered twice (first to %p, now %p)", i, prev, cons)
					return
				}
				seen[i] = cons
				counts[cons]++
				if len(seen) == len(s.ids) {
					once.Do(func() { close(done) })
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatalf("shared: received %d of %d", len(seen), len(s.ids))
	}
	mu.Lock()
	defer mu.Unlock()
	// How the messages spread depends on timing (the first consumer may
	// take every entry before the second one subscribes); only log it.
	t.Logf("shared: %d + %d messages", counts[a], counts[b])
}

// lastMessageID checks GetLastMessageIDs against the producer's last ids.
func lastMessageID(t *testing.T, cl pulsar.Client, topic string, s sent) {
	cons := subscribe(t, cl, topic, "last", pulsar.Exclusive)
	defer cons.Close()
	ids, err := cons.GetLastMessageIDs()
	if err != nil {
		t.Fatal(err)
	}
	// The client drops the partition index and turns batch index -1 into 0
	// in these ids, so match them to partitions by ledger (= log id).
	lastSent := map[int64]pulsar.MessageID{}
	for _, id := range s.ids {
		if prev, ok := lastSent[id.LedgerID()]; !ok || prev.EntryID() < id.EntryID() ||
			(prev.EntryID() == id.EntryID() && prev.BatchIdx() < id.BatchIdx()) {
			lastSent[id.LedgerID()] = id
		}
	}
	if len(ids) != len(lastSent) {
		t.Fatalf("GetLastMessageIDs returned %d ids, producer used %d partitions", len(ids), len(lastSent))
	}
	for _, id := range ids {
		want, ok := lastSent[id.LedgerID()]
		if !ok {
			t.Fatalf("last message id %v names no partition the producer used", id)
		}
		// The exclusive test's sentinel may follow the last produced message.
		if id.EntryID() < want.EntryID() {
			t.Fatalf("last message id %v before the last sent %v", id, want)
		}
		if id.EntryID() == want.EntryID() && id.BatchIdx() != max(want.BatchIdx(), 0) {
			t.Fatalf("last message id %v, last sent %v", id, want)
		}
	}
}

// TestReaderFromEarliest reads a non-partitioned topic from the start with a
// Reader (non-durable subscription): everything, in order, then HasNext is
// false.
func TestReaderFromEarliest(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/reader"
	s := produce(t, cl, topic, true, 300)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	order := idOrder{}
	for want := range len(s.ids) {
		if !r.HasNext() {
			t.Fatalf("HasNext false after %d messages", want)
		}
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i != want {
			t.Fatalf("reader got message %d, want %d", i, want)
		}
		order.next(t, m.ID())
	}
	if r.HasNext() {
		t.Fatal("HasNext true at the end")
	}
}

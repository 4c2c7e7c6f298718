package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestNackRedeliversWithCount: a negatively acknowledged message comes back
// with redelivery count 1 (Shared), others are not redelivered.
func TestNackRedeliversWithCount(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/nack"
	s := produce(t, cl, topic, false, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "n", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		NackRedeliveryDelay:         10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for range 10 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i == 3 {
			cons.Nack(m)
		} else {
			cons.Ack(m)
		}
	}
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := s.check(t, m); i != 3 || m.RedeliveryCount() != 1 {
		t.Fatalf("redelivered message %d with count %d, want 3 with count 1", i, m.RedeliveryCount())
	}
	cons.Ack(m)
	expectOnlySentinel(t, ctx, cl, topic, cons)
}

// TestSharedUnackedGoToOtherConsumerOnClose: a Shared consumer that closes
// with unacknowledged messages hands them to the remaining consumer.
func TestSharedUnackedGoToOtherConsumerOnClose(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/handover"
	s := produce(t, cl, topic, false, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := subscribe(t, cl, topic, "h", pulsar.Shared)
	// a takes everything (it is alone), acks nothing, leaves.
	for range 20 {
		m, err := a.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.check(t, m)
	}
	b := subscribe(t, cl, topic, "h", pulsar.Shared)
	defer b.Close()
	a.Close()
	seen := map[int]bool{}
	for len(seen) < 20 {
		m, err := b.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := s.check(t, m)
		if seen[i] {
			t.Fatalf("message %d twice", i)
		}
		seen[i] = true
		b.Ack(m)
	}
	expectOnlySentinel(t, ctx, cl, topic, b)
}

// TestSubscriptionSurvivesRestart: acknowledgements (cumulative, then
// individual ones above it) survive a gateway+node restart on the same data.
func TestSubscriptionSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	c := startClusterIn(t, dir)
	cl := c.client()
	topic := "persistent://public/default/restart"
	s := produce(t, cl, topic, true, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons := subscribe(t, cl, topic, "r", pulsar.Exclusive)
	var at40 pulsar.Message
	for range 100 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := s.check(t, m)
		switch {
		case i == 40:
			at40 = m
		case i > 40 && i%2 == 0:
			cons.Ack(m)
		}
	}
	if err := cons.AckCumulative(at40); err != nil {
		t.Fatal(err)
	}
	cons.Close() // flushes the acknowledgements
	cl.Close()
	c.stop()

	c = startClusterIn(t, dir)
	cl = c.client()
	cons = subscribe(t, cl, topic, "r", pulsar.Exclusive)
	defer cons.Close()
	for want := 41; want < 100; want += 2 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i != want {
			t.Fatalf("after restart got message %d, want %d", i, want)
		}
		cons.Ack(m)
	}
	expectOnlySentinel(t, ctx, cl, topic, cons)
}

// TestFailoverHandsOverOnClose: with two Failover consumers only the active
// one receives; when it leaves, the other becomes active and gets what the
// first had not acknowledged.
func TestFailoverHandsOverOnClose(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/failover"
	s := produce(t, cl, topic, true, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Failover's active consumer is the first by name: name them.
	a := subscribeNamed(t, cl, topic, "f", "a", pulsar.Failover)
	b := subscribeNamed(t, cl, topic, "f", "b", pulsar.Failover)
	defer b.Close()
	for want := range 20 { // a is active: it gets all 20, in order
		m, err := a.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i != want {
			t.Fatalf("active consumer got %d, want %d", i, want)
		}
		if want < 5 {
			a.Ack(m)
		}
	}
	a.Close()
	for want := 5; want < 20; want++ {
		m, err := b.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i != want {
			t.Fatalf("new active consumer got %d, want %d", i, want)
		}
		b.Ack(m)
	}
	expectOnlySentinel(t, ctx, cl, topic, b)
}

// TestUnsubscribeDeletesTheCursor: after Unsubscribe, subscribing again
// from earliest starts over.
func TestUnsubscribeDeletesTheCursor(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/unsub"
	s := produce(t, cl, topic, false, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons := subscribe(t, cl, topic, "u", pulsar.Exclusive)
	for range 10 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.check(t, m)
		cons.Ack(m)
	}
	if err := cons.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	cons = subscribe(t, cl, topic, "u", pulsar.Exclusive)
	defer cons.Close()
	for want := range 10 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i != want {
			t.Fatalf("got %d, want %d", i, want)
		}
	}
}

// TestEmptyTopicHasNoNext: a reader on an empty topic has nothing next
// (GET_LAST_MESSAGE_ID answers entry -1).
func TestEmptyTopicHasNoNext(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: "persistent://public/default/empty", StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.HasNext() {
		t.Fatal("HasNext on an empty topic")
	}
}

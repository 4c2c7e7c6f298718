package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// Delayed delivery tests. A message sent with DeliverAt carries, as the
// property "deliver-at", its delivery time in Unix ms (DeliverAt is set to
// a whole millisecond, so the client sends exactly that value); a
// consumer checks "not before" against the moment Receive returned it.
// Nothing here sleeps: each test waits for messages, and the delay itself
// is what it measures.

const deliverAtProp = "deliver-at"

// sendDelayed sends payload to be delivered at now+d (a whole ms).
func sendDelayed(t *testing.T, ctx context.Context, p pulsar.Producer, payload string, d time.Duration) int64 {
	t.Helper()
	at := time.Now().Add(d).Truncate(time.Millisecond)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload), DeliverAt: at,
		Properties: map[string]string{deliverAtProp: strconv.FormatInt(at.UnixMilli(), 10)}}); err != nil {
		t.Fatal(err)
	}
	return at.UnixMilli()
}

// receiveChecked receives n messages; a message with a "deliver-at"
// property must not arrive before it. It returns the payloads in arrival
// order and how late (ms) the latest delayed message was.
func receiveChecked(t *testing.T, ctx context.Context, cons pulsar.Consumer, n int) (got []string, maxLateMs int64) {
	t.Helper()
	for range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive (after %v): %v", got, err)
		}
		now := time.Now().UnixMilli()
		if v, ok := m.Properties()[deliverAtProp]; ok {
			at, _ := strconv.ParseInt(v, 10, 64)
			if now < at {
				t.Fatalf("%s delivered %d ms before its delivery time", m.Payload(), at-now)
			}
			maxLateMs = max(maxLateMs, now-at)
		}
		got = append(got, string(m.Payload()))
		cons.Ack(m)
	}
	return got, maxLateMs
}

// TestDelayedDelivery: on Shared and Key_Shared subscriptions a delayed
// message is held until its time while the others flow; on an Exclusive
// subscription it is delivered at once (as Pulsar does); admin stats count
// the held messages (msgDelayed).
func TestDelayedDelivery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startCluster(t)
	a := admClient(t, admServer(t, c))
	const topic = "persistent://public/default/delayed"
	cl := c.client()
	shared, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "shared", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	keyShared, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "key-shared", Type: pulsar.KeyShared})
	if err != nil {
		t.Fatal(err)
	}
	defer keyShared.Close()
	excl, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "exclusive", Type: pulsar.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer excl.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	const delay = 1500 * time.Millisecond
	far := sendDelayed(t, ctx, prod, "far", time.Hour) // the Exclusive subscription gets it at once
	for i := range 3 {
		sendDelayed(t, ctx, prod, fmt.Sprintf("late-%d", i), delay)
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "now-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Exclusive: everything, in order, long before "far" is due.
	m, err := excl.Receive(ctx)
	if err != nil || string(m.Payload()) != "far" || time.Now().UnixMilli() >= far {
		t.Fatalf("exclusive got %v, %v", m, err)
	}
	// Held messages show in the stats while undelivered.
	st, err := a.Topics().GetStats(admTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Subscriptions["shared"].MsgDelayed; d < 1 {
		t.Fatalf("shared msgDelayed = %d while messages are held", d)
	}
	for _, cons := range []pulsar.Consumer{shared, keyShared} {
		got, late := receiveChecked(t, ctx, cons, 6)
		for i, p := range got[:3] {
			if p != fmt.Sprintf("now-%d", i) {
				t.Fatalf("%s: got %v; want the undelayed messages first", cons.Subscription(), got)
			}
		}
		t.Logf("%s: delayed messages delivered at most %d ms after their time", cons.Subscription(), late)
	}
	// "far" is still held for the shared subscriptions.
	st, err = a.Topics().GetStats(admTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Subscriptions["key-shared"].MsgDelayed; d != 1 {
		t.Fatalf("key-shared msgDelayed = %d, want 1 (the message due in an hour)", d)
	}
}

// TestDelayedDeliveryAfterRestart: messages still held when the node stops
// are delivered by the restarted node at their time — none early, none
// lost.
func TestDelayedDeliveryAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	c := startClusterIn(t, dir)
	const topic = "persistent://public/default/delayed-restart"
	cl := c.client()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	for i := range n {
		sendDelayed(t, ctx, prod, fmt.Sprintf("d-%d", i), 3*time.Second)
	}
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("now")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := receiveChecked(t, ctx, cons, 1); got[0] != "now" {
		t.Fatalf("got %v before the restart, want only the undelayed message", got)
	}
	prod.Close()
	cons.Close()
	c.stop()

	c2 := startClusterIn(t, dir)
	cons2, err := c2.client().Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons2.Close()
	got, late := receiveChecked(t, ctx, cons2, n)
	seen := map[string]bool{}
	for _, p := range got {
		seen[p] = true
	}
	if len(seen) != n {
		t.Fatalf("after the restart got %v, want the %d delayed messages once each", got, n)
	}
	t.Logf("delivered after the restart, at most %d ms after their time", late)
}

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestDeadLetterAfterMaxDeliveries: with DLQPolicy{MaxDeliveries: 2} a
// message nacked on its first two deliveries (redelivery counts 0 and 1)
// comes back with count 2, which the client routes to the dead-letter topic
// (a producer of its own) and acknowledges on the original subscription.
// The dead letter keeps payload, key and properties; nothing else is
// redelivered on the original subscription.
//
// Ack timeout is not tested: pulsar-client-go v0.19.0 has no AckTimeout
// option (it is a client-side timer in the Java client that sends
// REDELIVER_UNACKNOWLEDGED_MESSAGES, which nack already exercises).
func TestDeadLetterAfterMaxDeliveries(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/dlq"
	dlqTopic := "persistent://public/default/dlq-dead"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dead := subscribe(t, cl, dlqTopic, "d", pulsar.Exclusive)
	defer dead.Close()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		NackRedeliveryDelay:         10 * time.Millisecond,
		DLQ:                         &pulsar.DLQPolicy{MaxDeliveries: 2, DeadLetterTopic: dlqTopic},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	s := produce(t, cl, topic, false, 10)

	const poison = 4
	for range 10 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i == poison {
			cons.Nack(m)
		} else {
			cons.Ack(m)
		}
	}
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := s.check(t, m); i != poison || m.RedeliveryCount() != 1 {
		t.Fatalf("redelivered message %d with count %d, want %d with count 1", i, m.RedeliveryCount(), poison)
	}
	cons.Nack(m)

	d, err := dead.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "payload-4"
	if string(d.Payload()) != want || d.Key() != "key-4" || d.Properties()["i"] != "4" || d.Properties()["run"] != s.run {
		t.Fatalf("dead letter %q key %q properties %v, want %q", d.Payload(), d.Key(), d.Properties(), want)
	}
	dead.Ack(d)
	// The client acknowledged the dead-lettered message on "s": only the
	// sentinel comes next.
	expectOnlySentinel(t, ctx, cl, topic, cons)
}

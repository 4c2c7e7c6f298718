package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestBrokerEntryMetadata: a client that supports broker entry metadata
// (pulsar-client-go does) gets each message's index — its record offset,
// the table's __offset — and the broker publish time, batched or not.
func TestBrokerEntryMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := startCluster(t)
	cl := c.client()
	const topic = "persistent://public/default/indexed"
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	sendStart := time.Now().Add(-time.Second)
	for _, batched := range []bool{false, true} {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: !batched,
			BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%v-%d", batched, i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					t.Errorf("send: %v", err)
				}
			})
		}
		if err := p.FlushWithCtx(ctx); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	for want := uint64(0); want < 20; want++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		idx, bt := m.Index(), m.BrokerPublishTime()
		if idx == nil || *idx != want {
			t.Fatalf("message %q: index %v, want %d", m.Payload(), idx, want)
		}
		if bt == nil || bt.Before(sendStart) || bt.After(time.Now().Add(time.Second)) {
			t.Fatalf("message %q: broker publish time %v", m.Payload(), bt)
		}
		cons.Ack(m)
	}
}

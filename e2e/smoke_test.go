package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func TestSmokeProduceConsume(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "persistent://public/default/smoke"
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	for i := range 10 {
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i)), Key: fmt.Sprint("k", i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("sent %d as %v", i, id)
	}
	t.Logf("10 sync sends in %v", time.Since(start))
	for i := range 10 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("got %q want %d", m.Payload(), i)
		}
		cons.Ack(m)
	}
}

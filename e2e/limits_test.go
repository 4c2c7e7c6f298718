package e2e

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/protocol"
)

// TestMessageSizeLimit: with batching off, a message just under the 5 MiB
// max_message_size (announced in CONNECTED) goes through intact. Larger
// ones are refused by the client itself, before anything is sent (a raw
// frame above the limit is the wire tests' business):
//   - payload 5 MiB + 1: pulsar.ErrMessageTooLarge (payload check);
//   - payload exactly 5 MiB: the client counts metadata towards the limit
//     and fails it with its internal ErrExceedMaxMessageSize, which callers
//     cannot match with errors.Is (package internal), so only err != nil is
//     asserted.
//
// The same producer, its connection and another producer keep working.
func TestMessageSizeLimit(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/limits"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons := subscribe(t, cl, topic, "l", pulsar.Exclusive)
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	other, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	// Random bytes: no codec could shrink them (none is used anyway).
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, protocol.DefaultMaxMessageSize+1)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	sizes := []int{protocol.DefaultMaxMessageSize - 1024, protocol.DefaultMaxMessageSize - 64}
	for _, size := range sizes {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: big[:size], Key: "big"}); err != nil {
			t.Fatalf("send %d bytes: %v", size, err)
		}
	}
	_, err = p.Send(ctx, &pulsar.ProducerMessage{Payload: big[:protocol.DefaultMaxMessageSize]})
	if err == nil {
		t.Fatalf("send %d bytes (+ metadata) was accepted", protocol.DefaultMaxMessageSize)
	}
	t.Logf("%d bytes: %v", protocol.DefaultMaxMessageSize, err)
	_, err = p.Send(ctx, &pulsar.ProducerMessage{Payload: big})
	if !errors.Is(err, pulsar.ErrMessageTooLarge) {
		t.Fatalf("send %d bytes: err %v, want ErrMessageTooLarge", len(big), err)
	}
	t.Logf("%d bytes: %v", len(big), err)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatalf("send after the refused one: %v", err)
	}
	if _, err := other.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("other")}); err != nil {
		t.Fatalf("other producer: %v", err)
	}
	for _, size := range sizes {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Payload(), big[:size]) || m.Key() != "big" {
			t.Fatalf("received %d bytes (key %q), want the %d sent", len(m.Payload()), m.Key(), size)
		}
		cons.Ack(m)
	}
	for _, want := range []string{"after", "other"} {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
		cons.Ack(m)
	}
}

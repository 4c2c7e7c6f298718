package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// receiveRange expects messages from..to-1 in order.
func receiveRange(t *testing.T, ctx context.Context, cons pulsar.Consumer, s sent, from, to int) {
	t.Helper()
	for want := from; want < to; want++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d: %v", want, err)
		}
		if i := s.check(t, m); i != want {
			t.Fatalf("got message %d, want %d", i, want)
		}
		cons.Ack(m)
	}
}

// TestSeekByIDAndTime: a durable subscription that acknowledged everything
// seeks back to a message id inside a batch and then to a publish time, and
// receives from there again.
func TestSeekByIDAndTime(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/seek"
	s := produce(t, cl, topic, true, 30)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons := subscribe(t, cl, topic, "sk", pulsar.Exclusive)
	defer cons.Close()
	receiveRange(t, ctx, cons, s, 0, 30)

	// The gateway resets to the entry holding message 7 (as Pulsar does);
	// pulsar-client-go v0.19.0 then drops every message up to and including
	// the sought id, so 8 comes next.
	if err := cons.Seek(s.ids[7]); err != nil {
		t.Fatal(err)
	}
	receiveRange(t, ctx, cons, s, 8, 30)

	// Entries carry the producer's publish time; seek to just after the
	// first message's entry was published: everything from a later entry on.
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	before := time.Now()
	late := produceOne(t, ctx, p, "late")
	if err := cons.SeekByTime(before); err != nil {
		t.Fatal(err)
	}
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "late" || !sameEntry(m.ID(), late) {
		t.Fatalf("after SeekByTime got %q %v, want the late message %v", m.Payload(), m.ID(), late)
	}
}

func produceOne(t *testing.T, ctx context.Context, p pulsar.Producer, payload string) pulsar.MessageID {
	t.Helper()
	id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestReaderSeekBack: a reader reads some, seeks back to the first message
// it read (the Go reader needs an id with a partition index, so not
// EarliestMessageID on a non-partitioned topic) and reads on after it.
func TestReaderSeekBack(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/reader-seek"
	s := produce(t, cl, topic, false, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	next := func(want int) pulsar.Message {
		t.Helper()
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i != want {
			t.Fatalf("reader got %d, want %d", i, want)
		}
		return m
	}
	first := next(0)
	for i := 1; i < 6; i++ {
		next(i)
	}
	if err := r.Seek(first.ID()); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 10; i++ {
		next(i)
	}
}

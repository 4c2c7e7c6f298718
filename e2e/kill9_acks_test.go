package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
)

// TestKill9AcksBeforeRedelivery (issue #16): acknowledgements that reach a
// node restarted after kill -9 before it delivers their entries again — the
// acks a client queued while the node was down, sent right after it
// subscribes again — acknowledge exactly what they name: a whole entry
// without ack_set, every record up to the entry with a cumulative ack, the
// records of the ack_set with one. The restarted node holds none of these
// entries in memory; it takes their record counts from the log.
//
// The acks are sent by zero-queue consumers (no FLOW, so nothing is
// dispatched before they arrive) with AckWithResponse (so they are applied
// when AckID returns). Then msgBacklog must count exactly the
// unacknowledged messages, and a fresh consumer must receive exactly them.
// Before the fix an individual ack acknowledged the entry's first message
// only, and a batch-index ack the 64 records after the entry's start.
//
//	go test -run TestKill9AcksBeforeRedelivery ./e2e/
func TestKill9AcksBeforeRedelivery(t *testing.T) {
	bin := lakegateBinary(t)
	dir := t.TempDir()
	const (
		batches   = 4
		batchSize = 5
	)
	topic := "persistent://public/default/kill9-acks"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	type subCase struct {
		name     string
		typ      pulsar.SubscriptionType
		batchIdx bool // EnableBatchIndexAcknowledgment
		// ack acknowledges with z, given the messages received before the
		// kill (their ids carry the client's batch trackers) by entry.
		ack func(t *testing.T, z pulsar.Consumer, byEntry [][]pulsar.Message)
		// want: the messages (entry, batch index) still unacknowledged.
		want func(entry, idx int) bool
	}
	ackID := func(t *testing.T, z pulsar.Consumer, id pulsar.MessageID) {
		t.Helper()
		if err := z.AckID(id); err != nil {
			t.Fatalf("ack %v: %v", id, err)
		}
	}
	cases := []subCase{{
		// Whole entries 0 and 1 (the client acks a batch as its entry once
		// every message of it is acknowledged).
		name: "individual", typ: pulsar.Shared,
		ack: func(t *testing.T, z pulsar.Consumer, byEntry [][]pulsar.Message) {
			for _, e := range byEntry[:2] {
				for _, m := range e {
					ackID(t, z, m.ID())
				}
			}
		},
		want: func(e, _ int) bool { return e >= 2 },
	}, {
		// Cumulative up to the last message of entry 1.
		name: "cumulative", typ: pulsar.Exclusive,
		ack: func(t *testing.T, z pulsar.Consumer, byEntry [][]pulsar.Message) {
			if err := z.AckIDCumulative(byEntry[1][batchSize-1].ID()); err != nil {
				t.Fatal(err)
			}
		},
		want: func(e, _ int) bool { return e >= 2 },
	}, {
		// Cumulative up to a message in the middle of entry 2: the client
		// acks "the entry before" (entryId-1, a record inside entry 1).
		name: "previous-entry", typ: pulsar.Failover,
		ack: func(t *testing.T, z pulsar.Consumer, byEntry [][]pulsar.Message) {
			if err := z.AckIDCumulative(byEntry[2][2].ID()); err != nil {
				t.Fatal(err)
			}
		},
		want: func(e, _ int) bool { return e >= 2 },
	}, {
		// Batch-index acks of messages 0..2 of entry 0 (ack_set).
		name: "batch-index", typ: pulsar.Exclusive, batchIdx: true,
		ack: func(t *testing.T, z pulsar.Consumer, byEntry [][]pulsar.Message) {
			for _, m := range byEntry[0][:3] {
				ackID(t, z, m.ID())
			}
		},
		want: func(e, i int) bool { return e > 0 || i >= 3 },
	}}

	node := startLakegate(t, bin, dir)
	cl := crashClient(t, node.pulsarURL)
	subOpts := func(c subCase) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: c.name, Type: c.typ,
			SubscriptionInitialPosition:    pulsar.SubscriptionPositionEarliest,
			EnableBatchIndexAcknowledgment: c.batchIdx,
			AckWithResponse:                true,
		}
	}
	before := map[string]pulsar.Consumer{}
	for _, c := range cases {
		cons, err := cl.Subscribe(subOpts(c))
		if err != nil {
			t.Fatal(err)
		}
		before[c.name] = cons
	}
	// batches entries of batchSize messages: the batch is cut by size only.
	p, err := cl.CreateProducer(pulsar.ProducerOptions{
		Topic: topic, BatchingMaxMessages: batchSize, BatchingMaxPublishDelay: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sendErr error
	for i := range batches * batchSize {
		wg.Add(1)
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil && sendErr == nil {
					sendErr = err
				}
			})
	}
	if err := p.FlushWithCtx(ctx); err != nil { // cuts the last batch
		t.Fatal(err)
	}
	wg.Wait()
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	// Every subscription receives everything before the kill and
	// acknowledges nothing.
	received := map[string][][]pulsar.Message{}
	for _, c := range cases {
		byEntry := make([][]pulsar.Message, batches)
		var entryIDs []int64
		for i := range batches * batchSize {
			m, err := before[c.name].Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Payload()) != strconv.Itoa(i) {
				t.Fatalf("%s: message %d is %q", c.name, i, m.Payload())
			}
			if k := len(entryIDs); k == 0 || entryIDs[k-1] != m.ID().EntryID() {
				entryIDs = append(entryIDs, m.ID().EntryID())
			}
			e := len(entryIDs) - 1
			if e >= batches || int(m.ID().BatchIdx()) != len(byEntry[e]) {
				t.Fatalf("%s: message %d has id %v: not %d entries of %d", c.name, i, m.ID(), batches, batchSize)
			}
			byEntry[e] = append(byEntry[e], m)
		}
		received[c.name] = byEntry
	}
	node.kill(t)
	cl.Close()

	node = startLakegate(t, bin, dir)
	cl = binClient(t, node.pulsarURL)
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: node.httpURL})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		opts := subOpts(c)
		opts.EnableZeroQueueConsumer = true
		z, err := cl.Subscribe(opts)
		if err != nil {
			t.Fatal(err)
		}
		c.ack(t, z, received[c.name])
		z.Close()
	}
	// A sentinel after the test's messages ends each receive below.
	sp, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("sentinel")}); err != nil {
		t.Fatal(err)
	}
	stats, err := adm.Topics().GetStats(admTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		var want []string
		for e := range batches {
			for i := range batchSize {
				if c.want(e, i) {
					want = append(want, strconv.Itoa(e*batchSize+i))
				}
			}
		}
		want = append(want, "sentinel")
		if got := stats.Subscriptions[c.name].MsgBacklog; got != int64(len(want)) {
			t.Errorf("%s: msgBacklog %d, want %d (the unacknowledged messages and the sentinel)", c.name, got, len(want))
		}
		cons, err := cl.Subscribe(subOpts(c))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for !slices.Contains(got, "sentinel") {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("%s: receive (got %v): %v", c.name, got, err)
			}
			got = append(got, string(m.Payload()))
		}
		cons.Close()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: after the acks and a restart received %v, want %v", c.name, got, want)
		}
	}
}

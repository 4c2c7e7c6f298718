package e2e

// Producer deduplication (stream property lakegate.dedup=true) with
// pulsar-client-go v0.19.0: a producer resending under the same name after
// reconnecting, and after a restart, creates no duplicates; duplicates get
// message id (-1,-1); PRODUCER_SUCCESS reports last_sequence_id.
//
//	go test -p 1 -run TestDedup ./e2e/

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol/pb"
)

// sendSeqs sends payload "i" with sequence id i for i in [from, to) and
// returns the ids the gateway answered.
func sendSeqs(t *testing.T, ctx context.Context, p pulsar.Producer, from, to int) []pulsar.MessageID {
	t.Helper()
	var ids []pulsar.MessageID
	for i := from; i < to; i++ {
		seq := int64(i)
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i)), SequenceID: &seq})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func isDupID(id pulsar.MessageID) bool { return id.LedgerID() == -1 && id.EntryID() == -1 }

// rawLastSequenceID opens a producer named name over a raw connection and
// returns PRODUCER_SUCCESS's last_sequence_id.
func rawLastSequenceID(t *testing.T, c *cluster, topic, name string) int64 {
	t.Helper()
	r := dialRaw(t, c)
	r.connect()
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String(name),
	}})
	resp := r.read()
	if resp.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER: %v", resp)
	}
	// Close the producer (answered once the name is free) before the
	// connection, so the next producer of that name is not ProducerBusy.
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{
		ProducerId: proto.Uint64(1), RequestId: proto.Uint64(2),
	}})
	if got := r.read(); got.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("CLOSE_PRODUCER: %v", got)
	}
	r.c.Close()
	return resp.GetProducerSuccess().GetLastSequenceId()
}

func TestDedupResendAfterReconnectAndRestart(t *testing.T) {
	dir := t.TempDir()
	c := startClusterIn(t, dir)
	const topic = "persistent://public/default/dedup"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.catalog.CreateStream(ctx, mustStreamID(t, topic), lakestream.StreamConfig{}, lakestream.Partitioning{},
		lakestream.SchemaConfig{Type: lakestream.SchemaNone}, map[string]string{"lakegate.dedup": "true"}, nil); err != nil {
		t.Fatal(err)
	}
	cl := c.client()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dd", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range sendSeqs(t, ctx, p, 0, 10) {
		if isDupID(id) {
			t.Fatalf("message %d answered as a duplicate", i)
		}
	}
	p.Close()
	if got := rawLastSequenceID(t, c, topic, "dd"); got != 9 {
		t.Fatalf("last_sequence_id %d, want 9", got)
	}

	// Reconnect under the same name and resend 5..14: 5..9 are duplicates.
	p, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dd", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range sendSeqs(t, ctx, p, 5, 15) {
		if dup := isDupID(id); dup != (i+5 < 10) {
			t.Fatalf("resent message %d: id %v", i+5, id)
		}
	}
	p.Close()
	cl.Close()
	c.stop()

	// After a restart the state is back: 12..16 resent, 15 and 16 are new.
	c = startClusterIn(t, dir)
	if got := rawLastSequenceID(t, c, topic, "dd"); got != 14 {
		t.Fatalf("last_sequence_id after restart %d, want 14", got)
	}
	cl = c.client()
	p, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dd", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, id := range sendSeqs(t, ctx, p, 12, 17) {
		if dup := isDupID(id); dup != (i+12 < 15) {
			t.Fatalf("after restart, message %d: id %v", i+12, id)
		}
	}
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "d", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for want := range 17 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != strconv.Itoa(want) {
			t.Fatalf("message %q, want %d (a duplicate was stored?)", m.Payload(), want)
		}
		cons.Ack(m)
	}
	// Nothing after 16: the backlog is empty once 0..16 are acknowledged.
	if hasNext, err := lastIsSixteen(ctx, cons); err != nil || !hasNext {
		t.Fatalf("last message is not 16: %v", err)
	}
}

// lastIsSixteen checks GET_LAST_MESSAGE_ID names the 17th entry (offset 16).
func lastIsSixteen(ctx context.Context, cons pulsar.Consumer) (bool, error) {
	ids, err := cons.GetLastMessageIDs()
	if err != nil {
		return false, err
	}
	return len(ids) == 1 && ids[0].EntryID() == 16, nil
}

// TestDedupOffByDefault: without the property, a resent sequence id is
// stored again.
func TestDedupOffByDefault(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/nodedup", Name: "nd", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sendSeqs(t, ctx, p, 0, 3)
	for _, id := range sendSeqs(t, ctx, p, 0, 3) {
		if isDupID(id) {
			t.Fatal("dedup on by default")
		}
	}
}

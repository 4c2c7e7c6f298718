package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

// TestAckWithResponse: with AckWithResponse the client waits for
// ACK_RESPONSE on every ack; acknowledged messages are not redelivered to
// the next consumer of the subscription.
func TestAckWithResponse(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/ack-response"
	s := produce(t, cl, topic, false, 30)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "ar", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true,
	}
	cons, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	for want := range 20 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i != want {
			t.Fatalf("got %d, want %d", i, want)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatalf("ack %d: %v", want, err)
		}
	}
	cons.Close()
	cons, err = cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for want := 20; want < 30; want++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := s.check(t, m); i != want {
			t.Fatalf("after resubscribing got %d, want %d", i, want)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAckResponseErrors: an ACK with request_id gets ACK_RESPONSE echoing
// it; one naming an id of another topic gets NotAllowedError, one for an
// unknown consumer ConsumerNotFound.
func TestAckResponseErrors(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/ack-errors"
	s := produce(t, cl, topic, false, 1)
	r := dialRaw(t, c)
	r.connect()
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: proto.String(topic), Subscription: proto.String("raw"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1),
		InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
	}})
	if got := r.read(); got.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("subscribe: %v", got)
	}
	ack := func(consumerID, requestID uint64, ledger, entry uint64) *pb.CommandAckResponse {
		t.Helper()
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{
			ConsumerId: proto.Uint64(consumerID), AckType: pb.CommandAck_Individual.Enum(),
			MessageId: []*pb.MessageIdData{{LedgerId: proto.Uint64(ledger), EntryId: proto.Uint64(entry)}},
			RequestId: proto.Uint64(requestID),
		}})
		got := r.read()
		if got.GetType() != pb.BaseCommand_ACK_RESPONSE || got.GetAckResponse().GetRequestId() != requestID ||
			got.GetAckResponse().GetConsumerId() != consumerID {
			t.Fatalf("got %v, want ACK_RESPONSE for request %d", got, requestID)
		}
		return got.GetAckResponse()
	}
	id := s.ids[0]
	if res := ack(1, 10, uint64(id.LedgerID()), uint64(id.EntryID())); res.Error != nil {
		t.Fatalf("valid ack answered %v", res)
	}
	if res := ack(1, 11, uint64(id.LedgerID())+1000, 0); res.GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("ack of another topic's id answered %v", res)
	}
	if res := ack(9, 12, uint64(id.LedgerID()), 0); res.GetError() != pb.ServerError_ConsumerNotFound {
		t.Fatalf("ack for an unknown consumer answered %v", res)
	}
}

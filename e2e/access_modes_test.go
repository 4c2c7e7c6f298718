package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

// producerCmd is a raw PRODUCER; epoch is the topic epoch a reconnecting
// producer sends (nil: none).
func producerCmd(topic, name string, producerID, requestID uint64, mode pb.ProducerAccessMode, epoch *uint64) *pb.BaseCommand {
	c := &pb.CommandProducer{
		Topic: proto.String(topic), ProducerId: proto.Uint64(producerID), RequestId: proto.Uint64(requestID),
		ProducerName: proto.String(name), ProducerAccessMode: mode.Enum(), TopicEpoch: epoch,
	}
	return &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: c}
}

// expectProducerSuccess reads the next command: a PRODUCER_SUCCESS for
// requestID with the given readiness. It returns the topic epoch.
func (r *rawConn) expectProducerSuccess(requestID uint64, ready bool) uint64 {
	r.t.Helper()
	c := r.read()
	ps := c.GetProducerSuccess()
	if c.GetType() != pb.BaseCommand_PRODUCER_SUCCESS || ps.GetRequestId() != requestID || ps.GetProducerReady() != ready {
		r.t.Fatalf("got %v, want PRODUCER_SUCCESS request %d ready=%v", c, requestID, ready)
	}
	if ps.TopicEpoch == nil {
		r.t.Fatalf("PRODUCER_SUCCESS without topic epoch: %v", c)
	}
	return ps.GetTopicEpoch()
}

func (r *rawConn) expectError(requestID uint64, code pb.ServerError) {
	r.t.Helper()
	c := r.read()
	if c.GetType() != pb.BaseCommand_ERROR || c.GetError().GetRequestId() != requestID || c.GetError().GetError() != code {
		r.t.Fatalf("got %v, want ERROR %s for request %d", c, code, requestID)
	}
}

func closeProducerCmd(producerID, requestID uint64) *pb.BaseCommand {
	return &pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{
		ProducerId: proto.Uint64(producerID), RequestId: proto.Uint64(requestID),
	}}
}

// TestExclusiveProducerEpochs: each exclusive acquisition increments the
// topic epoch; a producer coming back with the epoch it holds keeps it, one
// with an older epoch is fenced; while an exclusive producer holds the
// topic, Exclusive producers are fenced and Shared ones refused.
func TestExclusiveProducerEpochs(t *testing.T) {
	c := startCluster(t)
	topic := "persistent://public/default/epochs"
	r := dialRaw(t, c)
	r.connect()
	r.cmd(producerCmd(topic, "x1", 1, 1, pb.ProducerAccessMode_Exclusive, nil))
	e1 := r.expectProducerSuccess(1, true)

	// Go client: Exclusive fenced, Shared refused.
	cl := c.client()
	if p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive}); err == nil {
		p.Close()
		t.Fatal("second exclusive producer accepted")
	} else if !containsAny(err.Error(), "ProducerFenced", "fenced") {
		t.Fatalf("second exclusive: %v", err)
	}
	if p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
		p.Close()
		t.Fatal("shared producer accepted next to an exclusive one")
	}

	// Coming back (same connection, closed first) with the held epoch.
	r.cmd(closeProducerCmd(1, 2))
	if got := r.read(); got.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("close producer: %v", got)
	}
	r.cmd(producerCmd(topic, "x1", 1, 3, pb.ProducerAccessMode_Exclusive, proto.Uint64(e1)))
	if e := r.expectProducerSuccess(3, true); e != e1 {
		t.Fatalf("reconnect with epoch %d got epoch %d", e1, e)
	}
	r.cmd(closeProducerCmd(1, 4))
	r.read()

	// A new acquisition increments the epoch; the old epoch is fenced.
	r.cmd(producerCmd(topic, "x2", 2, 5, pb.ProducerAccessMode_Exclusive, nil))
	e2 := r.expectProducerSuccess(5, true)
	if e2 != e1+1 {
		t.Fatalf("epoch %d after %d", e2, e1)
	}
	r.cmd(closeProducerCmd(2, 6))
	r.read()
	r.cmd(producerCmd(topic, "x1", 1, 7, pb.ProducerAccessMode_Exclusive, proto.Uint64(e1)))
	r.expectError(7, pb.ServerError_ProducerFenced)

	// The holder coming back on a new connection while the old one still
	// stands (a client that lost its connection before the gateway
	// noticed) keeps the topic and its epoch; the old one is closed.
	r.cmd(producerCmd(topic, "x3", 3, 8, pb.ProducerAccessMode_Exclusive, nil))
	e3 := r.expectProducerSuccess(8, true)
	r2 := dialRaw(t, c)
	r2.connect()
	r2.cmd(producerCmd(topic, "x3", 1, 1, pb.ProducerAccessMode_Exclusive, proto.Uint64(e3)))
	if e := r2.expectProducerSuccess(1, true); e != e3 {
		t.Fatalf("holder back with epoch %d got epoch %d", e3, e)
	}
	if got := r.read(); got.GetType() != pb.BaseCommand_CLOSE_PRODUCER || got.GetCloseProducer().GetProducerId() != 3 {
		t.Fatalf("old connection got %v, want CLOSE_PRODUCER", got)
	}
}

// TestWaitForExclusiveProducer: a WaitForExclusive producer gets
// PRODUCER_SUCCESS(producer_ready=false) while another producer holds the
// topic, then PRODUCER_SUCCESS(ready=true) with a new epoch when it leaves;
// the Go client's CreateProducer returns only then, and can send.
func TestWaitForExclusiveProducer(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/wait-exclusive"
	holder, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "holder", ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	if err != nil {
		t.Fatal(err)
	}

	r := dialRaw(t, c)
	r.connect()
	r.cmd(producerCmd(topic, "waiter", 1, 1, pb.ProducerAccessMode_WaitForExclusive, nil))
	e0 := r.expectProducerSuccess(1, false)
	holder.Close()
	if e := r.expectProducerSuccess(1, true); e != e0+1 {
		t.Fatalf("promoted with epoch %d, want %d", e, e0+1)
	}

	// The Go client waits behind the raw producer now.
	type result struct {
		p   pulsar.Producer
		err error
	}
	created := make(chan result, 1)
	go func() {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "go-waiter", ProducerAccessMode: pulsar.ProducerAccessModeWaitForExclusive})
		created <- result{p, err}
	}()
	// A Shared producer is refused, and the refusal counts the producers
	// waiting for exclusive access: once it says 1, go-waiter is queued.
	// (The client gives no other sign of a producer not ready yet.)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err == nil {
			p.Close()
			t.Fatal("shared producer accepted next to an exclusive one")
		}
		if containsAny(err.Error(), "1 waiting") {
			break
		}
		if !containsAny(err.Error(), "ProducerBusy", "busy") {
			t.Fatalf("shared producer: %v", err)
		}
		select {
		case res := <-created:
			t.Fatalf("WaitForExclusive producer created while the topic is held: %v", res.err)
		case <-ctx.Done():
			t.Fatalf("shared producer: %v", err)
		default:
		}
	}
	select {
	case res := <-created:
		t.Fatalf("WaitForExclusive producer created while the topic is held: %v", res.err)
	default:
	}
	r.cmd(closeProducerCmd(1, 2))
	var res result
	select {
	case res = <-created:
	case <-ctx.Done():
		t.Fatal("WaitForExclusive producer not promoted")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.p.Close()
	if _, err := res.p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("mine")}); err != nil {
		t.Fatal(err)
	}
}

// TestExclusiveWithFencing: an ExclusiveWithFencing producer takes the
// topic: the holder gets CLOSE_PRODUCER and, coming back with its epoch,
// ProducerFenced; a waiting producer's PRODUCER gets ProducerFenced.
func TestExclusiveWithFencing(t *testing.T) {
	c := startCluster(t)
	topic := "persistent://public/default/fencing"
	old := dialRaw(t, c)
	old.connect()
	old.cmd(producerCmd(topic, "old", 1, 1, pb.ProducerAccessMode_Exclusive, nil))
	e1 := old.expectProducerSuccess(1, true)
	waiter := dialRaw(t, c)
	waiter.connect()
	waiter.cmd(producerCmd(topic, "waiter", 1, 1, pb.ProducerAccessMode_WaitForExclusive, nil))
	waiter.expectProducerSuccess(1, false)

	fencer := dialRaw(t, c)
	fencer.connect()
	fencer.cmd(producerCmd(topic, "fencer", 1, 1, pb.ProducerAccessMode_ExclusiveWithFencing, nil))
	if e := fencer.expectProducerSuccess(1, true); e != e1+1 {
		t.Fatalf("fencing producer epoch %d, want %d", e, e1+1)
	}
	if got := old.read(); got.GetType() != pb.BaseCommand_CLOSE_PRODUCER || got.GetCloseProducer().GetProducerId() != 1 {
		t.Fatalf("fenced producer got %v, want CLOSE_PRODUCER", got)
	}
	waiter.expectError(1, pb.ServerError_ProducerFenced)
	// The fenced producer reconnects as clients do: same id, its epoch.
	old.cmd(producerCmd(topic, "old", 1, 2, pb.ProducerAccessMode_Exclusive, proto.Uint64(e1)))
	old.expectError(2, pb.ServerError_ProducerFenced)
}

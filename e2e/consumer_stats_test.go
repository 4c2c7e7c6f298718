package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/protocol/pb"
)

// TestConsumerStats: CONSUMER_STATS (what the C++ client's
// getBrokerConsumerStats sends; no Go, Java or Python API sends it, so a
// raw connection drives the consumer) answers the consumer's permits,
// unacknowledged messages and backlog, and the admin stats report the same
// per-consumer numbers. An unknown consumer id gets ConsumerNotFound.
func TestConsumerStats(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startCluster(t)
	a := admClient(t, admServer(t, c))
	const topic = "persistent://public/default/consumer-stats"
	prod, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 10 {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatal(err)
		}
	}

	r := dialRaw(t, c)
	r.connect()
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Shared.Enum(),
		ConsumerId: proto.Uint64(7), RequestId: proto.Uint64(1), ConsumerName: proto.String("raw-consumer"),
		InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
	}})
	if got := r.read(); got.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("SUBSCRIBE: %v", got)
	}
	flow := func(n uint32) {
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: proto.Uint64(7), MessagePermits: proto.Uint32(n)}})
	}
	var ids []*pb.MessageIdData
	receive := func(n int) {
		for range n {
			m := r.read()
			if m.GetType() != pb.BaseCommand_MESSAGE {
				t.Fatalf("got %v, want MESSAGE", m)
			}
			ids = append(ids, m.GetMessage().GetMessageId())
		}
	}
	flow(4)
	receive(4)
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{ConsumerId: proto.Uint64(7),
		AckType: pb.CommandAck_Individual.Enum(), MessageId: []*pb.MessageIdData{ids[0]}, RequestId: proto.Uint64(2)}})
	if got := r.read(); got.GetType() != pb.BaseCommand_ACK_RESPONSE {
		t.Fatalf("ACK: %v", got)
	}
	flow(10)
	receive(6) // 10 messages delivered, 1 acknowledged, 4 permits left

	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONSUMER_STATS.Enum(), ConsumerStats: &pb.CommandConsumerStats{
		RequestId: proto.Uint64(3), ConsumerId: proto.Uint64(7)}})
	got := r.read()
	st := got.GetConsumerStatsResponse()
	if got.GetType() != pb.BaseCommand_CONSUMER_STATS_RESPONSE || st.ErrorCode != nil {
		t.Fatalf("CONSUMER_STATS: %v", got)
	}
	if st.GetRequestId() != 3 || st.GetAvailablePermits() != 4 || st.GetUnackedMessages() != 9 || st.GetMsgBacklog() != 9 ||
		st.GetConsumerName() != "raw-consumer" || st.GetType() != "Shared" || st.GetAddress() == "" || st.GetConnectedSince() == "" {
		t.Fatalf("CONSUMER_STATS = %v; want 4 permits, 9 unacked, backlog 9, name raw-consumer, type Shared", st)
	}

	ts, err := a.Topics().GetStats(admTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	ss := ts.Subscriptions["s"]
	if len(ss.Consumers) != 1 {
		t.Fatalf("admin stats consumers: %+v", ss.Consumers)
	}
	if cs := ss.Consumers[0]; cs.AvailablePermits != 4 || cs.UnAckedMessages != 9 || cs.ConsumerName != "raw-consumer" || cs.ConnectedSince == "" {
		t.Fatalf("admin consumer stats %+v; want 4 permits, 9 unacked", cs)
	}
	if ss.UnAckedMessages != 9 || ss.MsgBacklog != 9 {
		t.Fatalf("admin subscription stats: unacked %d backlog %d, want 9 and 9", ss.UnAckedMessages, ss.MsgBacklog)
	}

	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONSUMER_STATS.Enum(), ConsumerStats: &pb.CommandConsumerStats{
		RequestId: proto.Uint64(4), ConsumerId: proto.Uint64(99)}})
	if got := r.read().GetConsumerStatsResponse(); got.GetErrorCode() != pb.ServerError_ConsumerNotFound || got.GetErrorMessage() == "" {
		t.Fatalf("CONSUMER_STATS of an unknown consumer: %v", got)
	}
}

// TestBacklogBeforeFirstConsumer: a subscription created through the
// admin API has its backlog in /metrics and in the admin stats before any
// consumer connects, and after the node restarts.
func TestBacklogBeforeFirstConsumer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	c := startNode(t, testnode.Config{Node: node.Config{DataDir: dir}, HTTP: true})
	const topic = "persistent://public/default/early-backlog"
	a := admClient(t, admServer(t, c))
	tn := admTopic(t, topic)
	if err := a.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Subscriptions().Create(tn, "early", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	prod, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()
	check := func(c *cluster, when string) {
		t.Helper()
		fams := scrape(t, c.tn.HTTP.URL+"/metrics")
		v, n := familyValue(fams["lakegate_subscription_backlog_messages"], map[string]string{"topic": topic, "subscription": "early"})
		if n != 1 || v != 5 {
			t.Fatalf("%s: backlog series %d value %v, want one series of 5", when, n, v)
		}
		st, err := admClient(t, admServer(t, c)).Topics().GetStats(tn)
		if err != nil {
			t.Fatal(err)
		}
		if b := st.Subscriptions["early"].MsgBacklog; b != 5 {
			t.Fatalf("%s: admin backlog %d, want 5", when, b)
		}
	}
	check(c, "before any consumer")
	c.stop()
	c2 := startNode(t, testnode.Config{Node: node.Config{DataDir: dir}, HTTP: true})
	// After a restart nothing is loaded until used: the stats request
	// loads the topic (as a Pulsar broker does), then the scrape sees it.
	if _, err := admClient(t, admServer(t, c2)).Topics().GetStats(tn); err != nil {
		t.Fatal(err)
	}
	check(c2, "after a restart")
}

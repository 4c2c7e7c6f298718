package e2e

// Pattern (regex) consumers and GET_TOPICS_OF_NAMESPACE.
//
//	go test -p 1 -run 'TestRegex|TestWireTopicsOfNamespace' ./e2e/

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol/pb"
)

func produceN(t *testing.T, ctx context.Context, cl pulsar.Client, topic string, n int) {
	t.Helper()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{
			Key: fmt.Sprint(i), Payload: fmt.Appendf(nil, "%s/%d", topic, i),
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRegexConsumer: a TopicsPattern consumer subscribes to the matching
// topics of the namespace (partitioned and not) and only to them.
func TestRegexConsumer(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const ns = "persistent://public/default/"
	c.createPartitioned(ns+"rx-b", 2)
	produceN(t, ctx, cl, ns+"rx-a", 10)
	produceN(t, ctx, cl, ns+"rx-b", 10)
	produceN(t, ctx, cl, ns+"other-c", 10)

	cons, err := cl.Subscribe(pulsar.ConsumerOptions{
		TopicsPattern:               ns + "rx-.*",
		SubscriptionName:            "rx",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]bool{}
	for range 20 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := string(m.Payload())
		if !strings.HasPrefix(p, ns+"rx-") || got[p] {
			t.Fatalf("unexpected message %q (topic %s)", p, m.Topic())
		}
		got[p] = true
		cons.Ack(m)
	}
	// The subscription exists on the matching topics only.
	for topic, want := range map[string]bool{"rx-a": true, "rx-b-partition-0": true, "rx-b-partition-1": true, "other-c": false} {
		tn, _ := broker.ParseTopicName(ns + topic)
		part := max(tn.Partition, 0)
		log, err := c.catalog.OpenLog(ctx, tn.StreamID(), part)
		if err != nil {
			t.Fatal(err)
		}
		names, err := log.CursorNames(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(names, "rx") != want {
			t.Fatalf("%s: cursors %v, want rx=%v", topic, names, want)
		}
	}
}

// TestWireTopicsOfNamespace: partitions are listed, unknown namespaces and
// non-persistent mode give empty lists, a pattern filters.
func TestWireTopicsOfNamespace(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createPartitioned("persistent://public/default/ns-p", 2)
	produceN(t, ctx, cl, "persistent://public/default/ns-a", 1)
	r := dialRaw(t, c)
	r.connect()
	list := func(ns string, mode pb.CommandGetTopicsOfNamespace_Mode, pattern string) *pb.CommandGetTopicsOfNamespaceResponse {
		t.Helper()
		req := &pb.CommandGetTopicsOfNamespace{RequestId: proto.Uint64(7), Namespace: proto.String(ns), Mode: mode.Enum()}
		if pattern != "" {
			req.TopicsPattern = proto.String(pattern)
		}
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(), GetTopicsOfNamespace: req})
		resp := r.read()
		if resp.GetType() != pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE || resp.GetGetTopicsOfNamespaceResponse().GetRequestId() != 7 {
			t.Fatalf("got %v", resp)
		}
		return resp.GetGetTopicsOfNamespaceResponse()
	}
	want := []string{
		"persistent://public/default/ns-a",
		"persistent://public/default/ns-p-partition-0",
		"persistent://public/default/ns-p-partition-1",
	}
	if got := list("public/default", pb.CommandGetTopicsOfNamespace_PERSISTENT, "").GetTopics(); !slices.Equal(got, want) {
		t.Fatalf("topics %v, want %v", got, want)
	}
	if got := list("public/default", pb.CommandGetTopicsOfNamespace_ALL, "").GetTopics(); !slices.Equal(got, want) {
		t.Fatalf("ALL topics %v, want %v", got, want)
	}
	if got := list("public/default", pb.CommandGetTopicsOfNamespace_NON_PERSISTENT, "").GetTopics(); len(got) != 0 {
		t.Fatalf("non-persistent topics %v", got)
	}
	if got := list("nope/nothing", pb.CommandGetTopicsOfNamespace_PERSISTENT, "").GetTopics(); len(got) != 0 {
		t.Fatalf("unknown namespace topics %v", got)
	}
	resp := list("public/default", pb.CommandGetTopicsOfNamespace_PERSISTENT, "persistent://public/default/ns-p.*")
	if got := resp.GetTopics(); !resp.GetFiltered() || !slices.Equal(got, want[1:]) {
		t.Fatalf("filtered topics %v (filtered=%v), want %v", got, resp.GetFiltered(), want[1:])
	}
}

func mustStreamID(t *testing.T, topic string) lakestream.StreamIdentifier {
	t.Helper()
	tn, err := broker.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	return tn.StreamID()
}

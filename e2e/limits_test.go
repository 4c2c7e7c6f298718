package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/nodehttp"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
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

// ---- limits (gateway/limits.go, docs/security.md "Limits") ----
//
// Each limit is driven past with a real Go client (or a raw connection
// where the client would hide what the server answers), checking a clean
// refusal or backpressure, while a well-behaved client on its own
// connection to the same node keeps producing and consuming.

// startLimitNode starts a node with HTTP (metrics, admin REST) and the
// gateway configuration g.
func startLimitNode(t *testing.T, g gateway.Config, opts ...func(*testnode.Config)) *cluster {
	t.Helper()
	cfg := testnode.Config{HTTP: true, Gateway: g}
	for _, o := range opts {
		o(&cfg)
	}
	return startNode(t, cfg)
}

// metric is the sum of a family's series whose labels include labels
// (name=value pairs).
func metric(t *testing.T, c *cluster, family string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	v, _ := familyValue(scrape(t, c.tn.HTTP.URL+"/metrics")[family], want)
	return v
}

func limitAdmin(t *testing.T, c *cluster) pulsaradmin.Client {
	t.Helper()
	a, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: c.tn.HTTP.URL})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wellBehaved produces n messages to topic and consumes them on a new
// subscription with client cl: what a client untouched by a limit does.
func wellBehaved(t *testing.T, ctx context.Context, cl pulsar.Client, topic string, n int) {
	t.Helper()
	sub := fmt.Sprintf("wb-%d", rand.Uint64())
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest})
	if err != nil {
		t.Fatalf("well-behaved client: subscribe: %v", err)
	}
	defer cons.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatalf("well-behaved client: producer: %v", err)
	}
	defer p.Close()
	start := time.Now()
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("well-behaved client: send %d: %v", i, err)
		}
	}
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("well-behaved client: receive %d: %v", i, err)
		}
		cons.Ack(m)
	}
	took := time.Since(start)
	t.Logf("well-behaved client: %d messages sent one by one and received in %v (%.0f msg/s)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
}

// dialRawFrom is dialRaw from a local address (127.0.0.x: every loopback
// address reaches the node on Linux).
func dialRawFrom(t *testing.T, c *cluster, ip string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", c.gw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, c: conn, br: bufio.NewReader(conn)}
}

// expectRefused sends CONNECT on r as a client does and expects Pulsar's
// refusal: ERROR (NotAllowedError) with a message containing want, then
// the connection closed.
func expectRefused(t *testing.T, r *rawConn, want string) {
	t.Helper()
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: new("raw-test"), ProtocolVersion: new(int32(21)),
	}})
	c := r.read()
	if c.GetType() != pb.BaseCommand_ERROR || c.GetError().GetError() != pb.ServerError_NotAllowedError ||
		!strings.Contains(c.GetError().GetMessage(), want) {
		t.Fatalf("got %s %v, want ERROR NotAllowedError %q", c.GetType(), c.GetError(), want)
	}
	r.expectClosed()
}

// TestConnectionLimits: over brokerMaxConnectionsPerIp and
// brokerMaxConnections a connection is answered ERROR NotAllowedError
// and closed (a Go client's CreateProducer fails, it does not hang); the
// connections under the limits, a well-behaved client's included, carry
// on; a connection closed frees its place.
func TestConnectionLimits(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c := startLimitNode(t, gateway.Config{MaxConnections: 3, MaxConnectionsPerIP: 2})
	good := c.client() // one connection from 127.0.0.1
	wellBehaved(t, ctx, good, "persistent://public/default/conn-good", 50)

	second := dialRawFrom(t, c, "127.0.0.1")
	second.connect()
	expectRefused(t, dialRawFrom(t, c, "127.0.0.1"), "Reached the maximum number of connections on address 127.0.0.1")
	other := dialRawFrom(t, c, "127.0.0.2") // another address: the node's third
	other.connect()
	expectRefused(t, dialRawFrom(t, c, "127.0.0.3"), "Reached the maximum number of connections")

	refusedClient, err := pulsar.NewClient(pulsar.ClientOptions{URL: c.gw.ServiceURL(), OperationTimeout: 3 * time.Second,
		ConnectionTimeout: 3 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer refusedClient.Close()
	start := time.Now()
	if _, err := refusedClient.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/conn-refused"}); err == nil {
		t.Fatal("a producer was created over the connection limits")
	} else {
		t.Logf("refused client after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	wellBehaved(t, ctx, good, "persistent://public/default/conn-good", 50)
	if v := metric(t, c, "lakegate_limit_refusals_total", "limit", "max_connections_per_ip"); v < 1 {
		t.Errorf("max_connections_per_ip refusals %v", v)
	}
	if v := metric(t, c, "lakegate_limit_refusals_total", "limit", "max_connections"); v < 2 {
		t.Errorf("max_connections refusals %v", v)
	}
	// A closed connection frees its place.
	second.c.Close()
	other.c.Close()
	waitFor(t, ctx, "the closed connections to be counted out", func() bool { return metric(t, c, "lakegate_connections") == 1 })
	p, err := refusedClient.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/conn-refused"})
	if err != nil {
		t.Fatalf("producer once connections were freed: %v", err)
	}
	p.Close()
}

// TestTopicCountLimits: maxProducers, maxConsumersPerSubscription,
// maxConsumers and maxSubscriptionsPerTopic, set as topic and namespace
// policies with pulsaradmin, refuse as Pulsar does (ProducerBusy,
// ConsumerBusy, NotAllowedError for a new subscription; 412 for the admin
// API's), a topic policy of 0 lifts a namespace's; the producer and the
// consumer already attached keep working.
func TestTopicCountLimits(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c := startLimitNode(t, gateway.Config{})
	a := limitAdmin(t, c)
	cl := c.client()
	const topic = "persistent://public/default/counts"
	tn := admTopic(t, topic)
	if err := a.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	busy := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want %s", err, want)
		}
	}

	// maxProducers 1.
	if err := a.Topics().SetMaxProducers(tn, 1); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Topics().GetMaxProducers(tn); err != nil || n != 1 {
		t.Fatalf("maxProducers read back: %d, %v", n, err)
	}
	p1, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	_, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	busy(err, "ProducerBusy")

	// maxConsumersPerSubscription 1, then maxConsumers 2.
	if err := a.Topics().SetMaxConsumersPerSubscription(tn, 1); err != nil {
		t.Fatal(err)
	}
	c1 := subscribe(t, cl, topic, "s1", pulsar.Shared)
	defer c1.Close()
	_, err = cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s1", Type: pulsar.Shared})
	busy(err, "ConsumerBusy")
	c2 := subscribe(t, cl, topic, "s2", pulsar.Shared)
	if err := a.Topics().SetMaxConsumers(tn, 2); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s3", Type: pulsar.Shared})
	busy(err, "ConsumerBusy")

	// The attached producer and consumers carry on.
	if _, err := p1.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for _, cons := range []pulsar.Consumer{c1, c2} {
		if m, err := cons.Receive(ctx); err != nil || string(m.Payload()) != "x" {
			t.Fatalf("receive: %v", err)
		}
	}

	// maxSubscriptionsPerTopic 2 (s1, s2 exist): a third is refused, by
	// SUBSCRIBE and by the admin API; an existing one takes consumers.
	for _, remove := range []func(utils.TopicName) error{a.Topics().RemoveMaxConsumers, a.Topics().RemoveMaxConsumersPerSubscription} {
		if err := remove(tn); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Topics().SetMaxSubscriptionsPerTopic(tn, 2); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s3", Type: pulsar.Shared})
	busy(err, "max subscriptions")
	admWantCode(t, a.Subscriptions().Create(tn, "s3", utils.Earliest), http.StatusPreconditionFailed)
	c2.Close()
	c2b := subscribe(t, cl, topic, "s2", pulsar.Shared) // an existing subscription
	c2b.Close()

	// A namespace policy applies to its topics; a topic policy of 0 lifts it.
	ns, _ := utils.GetNamespaceName("public/default")
	if err := a.Namespaces().SetMaxProducersPerTopic(*ns, 1); err != nil {
		t.Fatal(err)
	}
	const topic2 = "persistent://public/default/counts-ns"
	q1, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic2})
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Close()
	_, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: topic2})
	busy(err, "ProducerBusy")
	if err := a.Topics().SetMaxProducers(admTopic(t, topic2), 0); err != nil {
		t.Fatal(err)
	}
	q2, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic2})
	if err != nil {
		t.Fatalf("second producer once the topic's policy lifts the namespace's: %v", err)
	}
	q2.Close()
	if err := a.Namespaces().RemoveMaxProducersPerTopic(*ns); err != nil {
		t.Fatal(err)
	}
	admWantCode(t, a.Topics().SetMaxProducers(tn, -1), http.StatusPreconditionFailed)

	for _, limit := range []string{"max_producers_per_topic", "max_consumers_per_subscription", "max_consumers_per_topic", "max_subscriptions_per_topic"} {
		if v := metric(t, c, "lakegate_limit_refusals_total", "limit", limit); v < 1 {
			t.Errorf("refusals of %s: %v", limit, v)
		}
	}
	wellBehaved(t, ctx, c.client(), "persistent://public/default/counts-good", 50)
}

// subStats is a subscription's stats (pulsaradmin).
func subStats(t *testing.T, a pulsaradmin.Client, tn utils.TopicName, sub string) utils.SubscriptionStats {
	t.Helper()
	st, err := a.Topics().GetStats(tn)
	if err != nil {
		t.Fatal(err)
	}
	return st.Subscriptions[sub]
}

// TestMaxUnackedPerConsumer: a Shared consumer that does not acknowledge
// gets maxUnackedMessagesOnConsumer messages and then nothing (stats:
// blockedConsumerOnUnackedMsgs) while the other consumer of the
// subscription gets the rest; its acknowledgements down to half the limit
// unblock it. Acknowledgements are never refused.
func TestMaxUnackedPerConsumer(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c := startLimitNode(t, gateway.Config{})
	a := limitAdmin(t, c)
	cl := c.client()
	const topic = "persistent://public/default/unacked-consumer"
	tn := admTopic(t, topic)
	if err := a.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Topics().SetMaxUnackMessagesPerConsumer(tn, 10); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Topics().GetMaxUnackMessagesPerConsumer(tn); err != nil || n != 10 {
		t.Fatalf("read back %d, %v", n, err)
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	slow, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, Name: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	for i := range 40 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	consumer := func(name string) utils.ConsumerStats {
		for _, cs := range subStats(t, a, tn, "s").Consumers {
			if cs.ConsumerName == name {
				return cs
			}
		}
		return utils.ConsumerStats{}
	}
	waitFor(t, ctx, "the slow consumer blocked at 10", func() bool {
		cs := consumer("slow")
		return cs.BlockedConsumerOnUnAckedMsgs && cs.UnAckedMessages == 10
	})
	// The well-behaved consumer of the subscription gets the other 30.
	fast, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, Name: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	for range 30 {
		m, err := fast.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fast.Ack(m)
	}
	if cs := consumer("slow"); cs.UnAckedMessages != 10 || cs.MsgOutCounter != 10 {
		t.Fatalf("slow consumer: %d unacked, %d delivered; want 10 and 10", cs.UnAckedMessages, cs.MsgOutCounter)
	}
	// The well-behaved consumer's acknowledgements are grouped (100 ms):
	// it may be blocked a moment itself; the slow one stays blocked.
	waitFor(t, ctx, "one consumer blocked: the slow one", func() bool { return metric(t, c, "lakegate_consumers_blocked_on_unacked") == 1 })
	// Acks down to 5 (half of 10) unblock it.
	for i := range 10 {
		m, err := slow.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i < 5 {
			if err := slow.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, ctx, "the slow consumer unblocked", func() bool { return !consumer("slow").BlockedConsumerOnUnAckedMsgs })
	wellBehaved(t, ctx, cl, "persistent://public/default/unacked-good", 50)
}

// TestMaxUnackedPerSubscription: a Shared subscription whose consumers
// hold maxUnackedMessagesOnSubscription unacknowledged messages gets
// nothing more (stats: blockedSubscriptionOnUnackedMsgs; metric
// pulsar_subscription_blocked_on_unacked_messages) until acknowledgements
// bring it to half; another subscription of the topic is served
// throughout.
func TestMaxUnackedPerSubscription(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c := startLimitNode(t, gateway.Config{})
	a := limitAdmin(t, c)
	cl := c.client()
	const topic = "persistent://public/default/unacked-sub"
	tn := admTopic(t, topic)
	if err := a.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Topics().SetMaxUnackMessagesPerSubscription(tn, 12); err != nil {
		t.Fatal(err)
	}
	holders := make([]pulsar.Consumer, 2)
	for i := range holders {
		var err error
		if holders[i], err = cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "held", Type: pulsar.Shared}); err != nil {
			t.Fatal(err)
		}
		defer holders[i].Close()
	}
	other := subscribe(t, cl, topic, "other", pulsar.Shared)
	defer other.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 40 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "the subscription blocked at 12", func() bool {
		st := subStats(t, a, tn, "held")
		return st.BlockedSubscriptionOnUnackedMsgs && st.UnAckedMessages == 12
	})
	for range 40 { // the other subscription gets everything
		m, err := other.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		other.Ack(m)
	}
	if st := subStats(t, a, tn, "held"); st.UnAckedMessages != 12 || st.MsgBacklog != 40 {
		t.Fatalf("held: %d unacked, backlog %d; want 12 and 40", st.UnAckedMessages, st.MsgBacklog)
	}
	if v := metric(t, c, "pulsar_subscription_blocked_on_unacked_messages", "subscription", "held"); v != 1 {
		t.Fatalf("pulsar_subscription_blocked_on_unacked_messages %v", v)
	}
	// Acknowledge 6 of what the holders got (the subscription is at 6,
	// half its limit): dispatch goes on.
	type received struct {
		c pulsar.Consumer
		m pulsar.Message
	}
	got := make(chan received, 64)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, h := range holders {
		go func() {
			for {
				m, err := h.Receive(rctx)
				if err != nil {
					return
				}
				got <- received{h, m}
			}
		}()
	}
	for range 6 {
		r := <-got
		if err := r.c.Ack(r.m); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "the subscription served again", func() bool {
		var out int64
		for _, cs := range subStats(t, a, tn, "held").Consumers {
			out += cs.MsgOutCounter
		}
		return out >= 18
	})
	wellBehaved(t, ctx, cl, "persistent://public/default/unacked-sub-good", 50)
}

// appendHold wraps the gateway's catalog: the appends of the streams
// whose name starts with prefix are stored as usual, but their outcomes
// reach the gateway only once released — an object store that stalls for
// those topics alone. appends counts the appends asked for.
type appendHold struct {
	lakestream.StreamCatalog
	prefix  string
	appends atomic.Int64
	mu      sync.Mutex // held while released outcomes are delivered, in order
	held    bool
	queue   []func()
}

func newAppendHold(prefix string) *appendHold { return &appendHold{prefix: prefix, held: true} }

func (h *appendHold) wrap(cat lakestream.StreamCatalog) lakestream.StreamCatalog {
	h.StreamCatalog = cat
	return h
}

func (h *appendHold) Stream(ctx context.Context, id lakestream.StreamIdentifier) (lakestream.Stream, error) {
	st, err := h.StreamCatalog.Stream(ctx, id)
	if err != nil || !strings.HasPrefix(id.Name, h.prefix) {
		return st, err
	}
	return holdStream{st, h}, nil
}

func (h *appendHold) complete(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.queue = append(h.queue, f)
		return
	}
	f()
}

// release delivers the held outcomes, in order, and stops holding.
func (h *appendHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = false
	for _, f := range h.queue {
		f()
	}
	h.queue = nil
}

type holdStream struct {
	lakestream.Stream
	h *appendHold
}

func (s holdStream) Log(ctx context.Context, i int) (lakestream.Log, error) {
	lg, err := s.Stream.Log(ctx, i)
	if err != nil {
		return nil, err
	}
	return holdLog{lg, s.h}, nil
}

type holdLog struct {
	lakestream.Log
	h *appendHold
}

func (l holdLog) AppendAsync(ctx context.Context, records int, payload []byte, done func(lakestream.EntryHeader, error), opts ...lakestream.AppendOption) error {
	l.h.appends.Add(1)
	return l.Log.AppendAsync(ctx, records, payload, func(eh lakestream.EntryHeader, err error) {
		l.h.complete(func() { done(eh, err) })
	}, opts...)
}

// sendAsync sends n messages of size bytes without waiting; the returned
// channel gets each send's error.
func sendAsync(p pulsar.Producer, ctx context.Context, n, size int) <-chan error {
	errs := make(chan error, n)
	for i := range n {
		payload := make([]byte, size)
		copy(payload, fmt.Sprint(i))
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
	}
	return errs
}

func waitSent(t *testing.T, ctx context.Context, errs <-chan error, n int) {
	t.Helper()
	for i := range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d sends answered", i, n)
		}
	}
}

// TestMaxPendingPublishRequestsPerConnection: a connection with
// maxPendingPublishRequestsPerConnection SENDs unanswered (their topic's
// store stalls) is not read further — the server took exactly that many
// SENDs — and no send fails: once answers come, the rest are read and
// stored. Meanwhile a well-behaved client produces and consumes on another
// topic of the node.
func TestMaxPendingPublishRequestsPerConnection(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	hold := newAppendHold("slow")
	c := startLimitNode(t, gateway.Config{MaxPendingPublishRequestsPerConnection: 10},
		func(cfg *testnode.Config) { cfg.GatewayCatalog = hold.wrap })
	t.Cleanup(hold.release)
	const topic = "persistent://public/default/slow-pending"
	cl := c.client()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, MaxPendingMessages: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	errs := sendAsync(p, ctx, 100, 100)
	waitFor(t, ctx, "the connection's reads paused", func() bool {
		return metric(t, c, "lakegate_connections_read_paused", "reason", "pending_publish") == 1 &&
			metric(t, c, "pulsar_broker_throttled_connections") == 1
	})
	if n := hold.appends.Load(); n != 10 {
		t.Fatalf("the server took %d SENDs, want 10 (the connection's limit)", n)
	}
	wellBehaved(t, ctx, c.client(), "persistent://public/default/pending-good", 50)
	if n := hold.appends.Load(); n != 10 {
		t.Fatalf("the paused connection was read: %d SENDs taken", n)
	}
	hold.release()
	waitSent(t, ctx, errs, 100)
	if v := metric(t, c, "lakegate_connection_read_pauses_total", "reason", "pending_publish"); v < 1 {
		t.Fatalf("pauses %v", v)
	}
	waitFor(t, ctx, "the pause to end", func() bool { return metric(t, c, "pulsar_broker_throttled_connections") == 0 })
}

// TestPublishBufferPausesProducerConnections: with more SEND payload held
// unanswered than maxMessagePublishBufferSizeInMB, every connection with
// producers stops being read at its next frame
// (pulsar_broker_throttled_connections_global_limit) until half of it is
// answered; a consumer's connection keeps being read (its client consumes
// and acknowledges); no send fails.
func TestPublishBufferPausesProducerConnections(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	hold := newAppendHold("slow")
	c := startLimitNode(t, gateway.Config{MaxPublishBufferBytes: 64 << 10},
		func(cfg *testnode.Config) { cfg.GatewayCatalog = hold.wrap })
	t.Cleanup(hold.release)
	if v := metric(t, c, "lakegate_publish_buffer_limit_bytes"); v != 64<<10 {
		t.Fatalf("limit %v", v)
	}
	// A consumer (its own client) of a topic that already holds messages.
	const good = "persistent://public/default/buffer-good"
	pp, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: good, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pp.Close()
	cons, err := c.client().Subscribe(pulsar.ConsumerOptions{Topic: good, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for i := range 20 {
		if _, err := pp.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	// A producer fills the buffer: 100 × 4 KiB to a stalled topic.
	p, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/slow-buffer", DisableBatching: true, MaxPendingMessages: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	errs := sendAsync(p, ctx, 100, 4<<10)
	waitFor(t, ctx, "its connection paused", func() bool {
		return metric(t, c, "pulsar_broker_throttled_connections_global_limit") == 1
	})
	if v := metric(t, c, "lakegate_publish_buffer_bytes"); v < 64<<10 || v > 72<<10 {
		t.Fatalf("publish buffer holds %v bytes, want the 64 KiB limit and at most one more message's", v)
	}
	taken := hold.appends.Load()
	// The other producer's connection: the frame it was waiting for is
	// read, the next one not.
	ppErrs := sendAsync(pp, ctx, 2, 10)
	waitFor(t, ctx, "the other producer's connection paused", func() bool {
		return metric(t, c, "pulsar_broker_throttled_connections_global_limit") == 2
	})
	// The consumer's connection is read: it consumes and acknowledges.
	for range 20 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.Ack(m); err != nil { // answered: AckWithResponse
			t.Fatalf("ack while producers are paused: %v", err)
		}
	}
	if n := hold.appends.Load(); n != taken {
		t.Fatalf("a paused connection was read: %d SENDs taken, then %d", taken, n)
	}
	hold.release()
	waitSent(t, ctx, errs, 100)
	waitSent(t, ctx, ppErrs, 2)
	if _, err := pp.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0", "1", "after"} {
		if m, err := cons.Receive(ctx); err != nil || !strings.HasPrefix(string(m.Payload()), want) {
			t.Fatalf("after the pause: got %v, want %q", err, want)
		} else {
			cons.Ack(m)
		}
	}
	waitFor(t, ctx, "the buffer to drain", func() bool { return metric(t, c, "lakegate_publish_buffer_bytes") == 0 })
	if v := metric(t, c, "lakegate_connection_read_pauses_total", "reason", "publish_buffer"); v < 2 {
		t.Fatalf("publish buffer pauses %v", v)
	}
}

// TestPublishRateLimit: a topic's publishRate (Pulsar's
// publishThrottlingRateInMsg) paces its producer — the connection's reads
// pause, nothing fails — to the rate after a burst of one second's worth;
// a well-behaved client on another topic is not slowed. A namespace's
// publish rate is what its topics without one get (?applied=true).
func TestPublishRateLimit(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c := startLimitNode(t, gateway.Config{})
	a := limitAdmin(t, c)
	const topic = "persistent://public/default/rated"
	tn := admTopic(t, topic)
	if err := a.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Topics().SetPublishRate(tn, utils.PublishRateData{PublishThrottlingRateInMsg: 20, PublishThrottlingRateInByte: -1}); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Topics().GetPublishRate(tn); err != nil || r == nil || r.PublishThrottlingRateInMsg != 20 {
		t.Fatalf("publish rate read back: %+v, %v", r, err)
	}
	p, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, MaxPendingMessages: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 80
	start := time.Now()
	errs := sendAsync(p, ctx, n, 10)
	wellStart := time.Now()
	wellBehaved(t, ctx, c.client(), "persistent://public/default/rated-good", 50)
	wellTook := time.Since(wellStart)
	waitSent(t, ctx, errs, n)
	took := time.Since(start)
	t.Logf("%d messages at 20/s took %v; the well-behaved client's 50 took %v", n, took.Round(time.Millisecond), wellTook.Round(time.Millisecond))
	// 20 at once, the other 60 at 20 per second.
	if took < 2500*time.Millisecond {
		t.Fatalf("%d messages took %v at 20/s, want at least 2.5 s", n, took)
	}
	if v := metric(t, c, "lakegate_connection_read_pauses_total", "reason", "publish_rate"); v < 1 {
		t.Fatalf("publish rate pauses %v", v)
	}

	ns, _ := utils.GetNamespaceName("public/default")
	if err := a.Namespaces().SetPublishRate(*ns, utils.PublishRate{PublishThrottlingRateInMsg: 7, PublishThrottlingRateInByte: -1}); err != nil {
		t.Fatal(err)
	}
	var applied struct {
		Msgs int64 `json:"publishThrottlingRateInMsg"`
	}
	if code := admDo(t, "GET", c.tn.HTTP.URL+"/admin/v2/persistent/public/default/rated-good/publishRate?applied=true", "", "", &applied); code != http.StatusOK || applied.Msgs != 7 {
		t.Fatalf("applied publish rate of a topic without one: %d %+v, want the namespace's 7", code, applied)
	}
	if err := a.Namespaces().SetPublishRate(*ns, utils.PublishRate{PublishThrottlingRateInMsg: -1, PublishThrottlingRateInByte: -1}); err != nil {
		t.Fatal(err)
	}
}

// receiveTimed receives n messages (acknowledging them) and returns how
// long it took.
func receiveTimed(t *testing.T, ctx context.Context, cons pulsar.Consumer, n int) time.Duration {
	t.Helper()
	start := time.Now()
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		cons.Ack(m)
	}
	return time.Since(start)
}

// TestDispatchRateLimits: a topic's dispatchRate and a namespace's
// subscriptionDispatchRate pace delivery to the rate (after a burst of one
// period's worth); a consumer of another topic is served at once.
func TestDispatchRateLimits(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c := startLimitNode(t, gateway.Config{})
	a := limitAdmin(t, c)
	cl := c.client()
	produce := func(topic string, n int) {
		t.Helper()
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for i := range n {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const topic = "persistent://public/default/dispatch-rated"
	produce(topic, 60)
	produce("persistent://public/default/dispatch-free", 60)
	if err := a.Topics().SetDispatchRate(admTopic(t, topic), utils.DispatchRateData{DispatchThrottlingRateInMsg: 20,
		DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}); err != nil {
		t.Fatal(err)
	}
	free := subscribe(t, cl, "persistent://public/default/dispatch-free", "s", pulsar.Shared)
	defer free.Close()
	rated := subscribe(t, cl, topic, "s", pulsar.Shared)
	defer rated.Close()
	freeTook := receiveTimed(t, ctx, free, 60)
	took := receiveTimed(t, ctx, rated, 60)
	t.Logf("60 messages at 20/s took %v; 60 unlimited took %v", took.Round(time.Millisecond), freeTook.Round(time.Millisecond))
	if took < 1500*time.Millisecond { // 20 at once, 40 at 20/s
		t.Fatalf("60 messages took %v at 20/s, want at least 1.5 s", took)
	}

	ns, _ := utils.GetNamespaceName("public/default")
	if err := a.Namespaces().SetSubscriptionDispatchRate(*ns, utils.DispatchRate{DispatchThrottlingRateInMsg: 10,
		DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}); err != nil {
		t.Fatal(err)
	}
	const subRated = "persistent://public/default/dispatch-sub-rated"
	produce(subRated, 30)
	cons := subscribe(t, cl, subRated, "s", pulsar.Shared)
	defer cons.Close()
	if took := receiveTimed(t, ctx, cons, 30); took < 1500*time.Millisecond { // 10 at once, 20 at 10/s
		t.Fatalf("30 messages took %v at 10/s per subscription, want at least 1.5 s", took)
	}
	if err := a.Namespaces().SetSubscriptionDispatchRate(*ns, utils.DispatchRate{DispatchThrottlingRateInMsg: -1, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}); err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"topic", "subscription"} {
		if v := metric(t, c, "lakegate_dispatch_throttled_total", "scope", scope); v < 1 {
			t.Errorf("dispatch throttled by the %s rate: %v", scope, v)
		}
	}
}

// TestAdminHTTPLimits: the admin REST answers a body over its limit 413
// with a reason (announced or chunked), cuts a connection whose headers
// do not come within ReadHeaderTimeout (slow headers), and serves at most
// MaxConnections connections at once; other requests are served
// throughout.
func TestAdminHTTPLimits(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	c := startLimitNode(t, gateway.Config{AdminMaxRequestBytes: 4 << 10}, func(cfg *testnode.Config) {
		cfg.HTTPLimits = nodehttp.Limits{ReadHeaderTimeout: 500 * time.Millisecond, MaxConnections: 4}
	})
	base := c.tn.HTTP.URL + "/admin/v2/namespaces/public/default"
	post := func(body io.Reader, length int64) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "POST", base+"/retention", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	big := `{"retentionTimeInMinutes": 1, "retentionSizeInMB": 1, "pad": "` + strings.Repeat("x", 8<<10) + `"}`
	if code, body := post(strings.NewReader(big), int64(len(big))); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "request body too large") {
		t.Fatalf("announced %d bytes: %d %s, want 413 with a reason", len(big), code, body)
	}
	if code, body := post(io.MultiReader(strings.NewReader(big)), -1); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "request body too large") {
		t.Fatalf("chunked %d bytes: %d %s, want 413 with a reason", len(big), code, body)
	}
	if code, body := post(strings.NewReader(`{"retentionTimeInMinutes": 1, "retentionSizeInMB": 1}`), -1); code != http.StatusNoContent {
		t.Fatalf("a small body: %d %s", code, body)
	}
	if v := metric(t, c, "lakegate_limit_refusals_total", "limit", "http_max_request_size"); v < 1 {
		t.Fatalf("http_max_request_size refusals %v", v)
	}

	// Slow headers: the connection is closed once ReadHeaderTimeout passes.
	slow, err := net.Dial("tcp", c.tn.HTTP.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slow.SetDeadline(time.Now().Add(20 * time.Second)) // a bound for the test, far above the server's
	start := time.Now()
	if _, err := slow.Write([]byte("GET /metrics HTTP/1.1\r\nHost: lakegate\r\nX-Slow: ")); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(strings.NewReader(`{"retentionTimeInMinutes": 2, "retentionSizeInMB": 1}`), -1); code != http.StatusNoContent {
		t.Fatalf("a request while a slow one waits: %d", code)
	}
	_, err = io.Copy(io.Discard, slow) // returns when the server closes it
	if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the slow-header connection was not closed")
	}
	cut := time.Since(start)
	t.Logf("slow headers cut after %v", cut.Round(time.Millisecond))
	if cut > 5*time.Second {
		t.Fatalf("slow headers cut after %v, want about the 500 ms ReadHeaderTimeout", cut)
	}

	wellBehaved(t, ctx, c.client(), "persistent://public/default/http-good", 50)
}

// TestHTTPConnectionLimit: the HTTP server holds at most maxConnections
// connections; one more waits (it is not answered) until one closes,
// then it is served.
func TestHTTPConnectionLimit(t *testing.T) {
	c := startLimitNode(t, gateway.Config{}, func(cfg *testnode.Config) {
		cfg.HTTPLimits = nodehttp.Limits{MaxConnections: 2}
	})
	request := func() (net.Conn, <-chan error) {
		conn, err := net.Dial("tcp", c.tn.HTTP.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: lakegate\r\n\r\n")
		answered := make(chan error, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			answered <- err
		}()
		return conn, answered
	}
	first, a1 := request()
	_, a2 := request()
	for _, a := range []<-chan error{a1, a2} {
		if err := <-a; err != nil {
			t.Fatal(err)
		}
	}
	// Both stay open (keep-alive): a third connection is not served.
	_, a3 := request()
	select {
	case err := <-a3:
		t.Fatalf("a third connection was served (%v) while 2 were open", err)
	case <-time.After(500 * time.Millisecond): // a bound on what must not happen
	}
	first.Close()
	if err := <-a3; err != nil {
		t.Fatalf("the third connection, once the first closed: %v", err)
	}
}

// TestPublishBufferReleasedWhenProducerLeaves: the SENDs of a producer
// whose connection drops while they are unanswered leave the node's
// publish buffer and the connection's count at once (the partition drops
// their outcomes with the producer): a client that vanishes does not
// shrink the budget of the others.
func TestPublishBufferReleasedWhenProducerLeaves(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	hold := newAppendHold("slow")
	c := startLimitNode(t, gateway.Config{}, func(cfg *testnode.Config) { cfg.GatewayCatalog = hold.wrap })
	t.Cleanup(hold.release)
	r := dialRaw(t, c)
	r.connect()
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: new("persistent://public/default/slow-leaves"), ProducerId: new(uint64(1)), RequestId: new(uint64(1)),
	}})
	if ps := r.read().GetProducerSuccess(); ps == nil {
		t.Fatal("PRODUCER refused")
	}
	for seq := range uint64(5) {
		md, _ := protocol.MarshalMetadata(&pb.MessageMetadata{ProducerName: new("x"), SequenceId: new(seq), PublishTime: new(uint64(1))})
		r.write(protocol.Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
			ProducerId: new(uint64(1)), SequenceId: new(seq)}}, Metadata: md, Payload: make([]byte, 1000)})
	}
	waitFor(t, ctx, "5 SENDs held", func() bool { return metric(t, c, "lakegate_publish_buffer_bytes") >= 5000 })
	r.c.Close()
	waitFor(t, ctx, "the buffer released", func() bool { return metric(t, c, "lakegate_publish_buffer_bytes") == 0 })
	wellBehaved(t, ctx, c.client(), "persistent://public/default/leaves-good", 50)
}

package e2e

// Connections that stop reading their socket get backpressure on their own
// connection only: no partition or subscription actor waits for them
// (gateway/doc.go, "Outbound queue"; docs/protocol.md, "Slow connections").

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// dialStalled opens a raw connection with a small receive buffer (so the
// node's socket fills after a few KiB once the test stops reading), sends
// CONNECT and returns it after CONNECTED.
func dialStalled(t *testing.T, c *cluster) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", c.gw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReaderSize(conn, 4096)
	if err := protocol.WriteFrame(conn, protocol.Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(),
		Connect: &pb.CommandConnect{ClientVersion: proto.String("stalled"), ProtocolVersion: proto.Int32(21)}}}); err != nil {
		t.Fatal(err)
	}
	if f, err := protocol.ReadFrame(br, 0); err != nil || f.Cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("CONNECT: %v %v", f.Cmd.GetType(), err)
	}
	conn.SetDeadline(time.Time{})
	return conn, br
}

// TestSlowConsumerDoesNotStallShared: on a Shared subscription, a consumer
// that asks for a million messages and then never reads its socket holds
// what reached its connection, and nothing more: two Go consumers on the
// same subscription receive every other message meanwhile, at full rate,
// and everything once the stalled one's connection closes. The same load
// without the stalled consumer is the rate logged for comparison.
func TestSlowConsumerDoesNotStallShared(t *testing.T) {
	const (
		msgs    = 10000
		size    = 4 << 10
		stalled = "stalled-consumer"
	)
	c := startNode(t, testnode.Config{HTTP: true})
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "persistent://public/default/slow-consumer"
	cl := c.client()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	payload := make([]byte, size)
	publish := func() {
		var wg sync.WaitGroup
		var failed atomic.Value
		for i := range msgs {
			wg.Add(1)
			prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload, Properties: map[string]string{"i": strconv.Itoa(i)}},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						failed.Store(err)
					}
					wg.Done()
				})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	// receivers runs two Go consumers on sub; got counts the distinct
	// messages (of this phase) they received.
	receivers := func(sub string) (got func() int, stop func()) {
		var (
			mu   sync.Mutex
			seen = map[string]bool{}
		)
		rctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for k := range 2 {
			cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
				Name: fmt.Sprintf("reader-%d", k), SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer cons.Close()
				for {
					m, err := cons.Receive(rctx)
					if err != nil {
						return
					}
					mu.Lock()
					seen[m.Properties()["i"]] = true
					mu.Unlock()
					cons.Ack(m)
				}
			}()
		}
		return func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(seen)
			}, func() {
				cancel()
				wg.Wait()
			}
	}

	// Without a stalled consumer.
	got, stop := receivers("base")
	start := time.Now()
	publish()
	waitFor(t, ctxFor(t, 60*time.Second), "two consumers to receive everything", func() bool { return got() == msgs })
	base := time.Since(start)
	stop()
	t.Logf("two consumers alone: %d messages of %d KiB in %v (%.0f msg/s)", msgs, size>>10, base, msgs/base.Seconds())

	// With one: subscribed first, with permits for everything.
	conn, _ := dialStalled(t, c)
	raw := func(cmd *pb.BaseCommand) {
		t.Helper()
		if err := protocol.WriteFrame(conn, protocol.Frame{Cmd: cmd}); err != nil {
			t.Fatal(err)
		}
	}
	raw(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Shared.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1), ConsumerName: proto.String(stalled),
		InitialPosition: pb.CommandSubscribe_Latest.Enum(),
	}})
	raw(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(1 << 20)}})
	waitFor(t, ctxFor(t, 30*time.Second), "the stalled consumer to attach", func() bool {
		_, ok := consumerUnacked(c, topic, "s", stalled)
		return ok
	})
	got, stop = receivers("s")
	defer stop()
	start = time.Now()
	publish()
	var held int
	waitFor(t, ctxFor(t, 30*time.Second), "the two to receive every message the stalled consumer does not hold", func() bool {
		n, ok := consumerUnacked(c, topic, "s", stalled)
		held = n
		return ok && got()+n >= msgs
	})
	under := time.Since(start)
	t.Logf("beside a stalled consumer holding %d: %d messages in %v (%.0f msg/s)", held, got(), under, float64(got())/under.Seconds())
	if held == 0 || held == msgs {
		t.Fatalf("the stalled consumer holds %d of %d messages: the test did not stall it", held, msgs)
	}
	if v, _ := familyValue(scrape(t, c.tn.HTTP.URL+"/metrics")["lakegate_dispatch_deferred_entries_total"], nil); v == 0 {
		t.Fatal("lakegate_dispatch_deferred_entries_total is 0: no entry was refused")
	}
	conn.Close()
	waitFor(t, ctxFor(t, 30*time.Second), "the two to receive everything once the stalled consumer is gone", func() bool { return got() == msgs })
}

// TestSlowProducerDoesNotStallPartition: a producer connection that sends
// and never reads its receipts is no longer read once its queue is full,
// and nothing else waits: a Go producer on the same partition keeps
// publishing.
func TestSlowProducerDoesNotStallPartition(t *testing.T) {
	c := startCluster(t)
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "persistent://public/default/slow-producer"
	prod, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: topic, SendTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	sends := func() time.Duration {
		start := time.Now()
		for i := range 200 {
			if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("well-behaved")}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		return time.Since(start)
	}
	t.Logf("200 sends alone in %v", sends())

	sent, stopped := silentProducer(t, c, topic)
	select {
	case err := <-stopped:
		if !isTimeout(err) {
			t.Fatalf("the silent producer's connection failed: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the node kept reading a connection that reads none of its receipts")
	}
	t.Logf("the node stopped reading the silent producer after about %d SENDs", sent())

	t.Logf("200 sends beside a silent producer in %v", sends())
}

// silentProducer attaches a producer on a raw connection that then sends
// SENDs, in batches of 256, and never reads a receipt. It returns how many
// it has written, and a channel that gets the error that stopped it: a
// write blocked for a second (the node no longer reads the connection), or
// the connection closed by the node.
func silentProducer(t *testing.T, c *cluster, topic string) (sent func() int64, stopped <-chan error) {
	t.Helper()
	conn, br := dialStalled(t, c)
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if err := protocol.WriteFrame(conn, protocol.Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}}}); err != nil {
		t.Fatal(err)
	}
	if f, err := protocol.ReadFrame(br, 0); err != nil || f.Cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("PRODUCER: %v %v", f.Cmd, err)
	}
	conn.SetDeadline(time.Time{})
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		var batch []byte
		for seq := uint64(0); ; {
			batch = batch[:0]
			for range 256 {
				md, _ := protocol.MarshalMetadata(&pb.MessageMetadata{ProducerName: proto.String("raw"),
					SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(1)})
				var err error
				batch, err = protocol.AppendFrame(batch, protocol.Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(),
					Send: &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(seq)}}, Metadata: md, Payload: []byte("x")})
				if err != nil {
					done <- err
					return
				}
				seq++
			}
			conn.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := conn.Write(batch); err != nil {
				done <- err
				return
			}
			n.Add(256)
		}
	}()
	return n.Load, done
}

// TestSilentProducerOverflowClosesConnection: with a small outbound bound,
// a producer connection that never reads its receipts makes the node owe
// it more than OutboundFramesMax + OutboundOwedMax frames (its pending
// window is larger): the node closes that connection — counted in
// lakegate_connections_overflowed_total — and nothing else notices.
func TestSilentProducerOverflowClosesConnection(t *testing.T) {
	c := startNode(t, testnode.Config{HTTP: true, Gateway: gateway.Config{OutboundFramesMax: 16, OutboundOwedMax: 64}})
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "persistent://public/default/silent-overflow"
	sent, stopped := silentProducer(t, c, topic)
	waitFor(t, ctx, "the node to close the silent producer's connection", func() bool {
		v, _ := familyValue(scrape(t, c.tn.HTTP.URL+"/metrics")["lakegate_connections_overflowed_total"], nil)
		return v == 1
	})
	select {
	case err := <-stopped:
		if isTimeout(err) {
			t.Fatalf("the silent producer's connection was not closed: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the silent producer's writes go on")
	}
	t.Logf("closed after about %d SENDs", sent())
	prod, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
}

// consumerUnacked is the unacknowledged messages of the consumer named
// name on topic's subscription sub (admin stats), and whether it is
// attached; false as well when stats do not answer within 2 s.
func consumerUnacked(c *cluster, topic, sub, name string) (int, bool) {
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(c.tn.HTTP.URL + "/admin/v2/" + strings.Replace(topic, "://", "/", 1) + "/stats")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var st struct {
		Subscriptions map[string]struct {
			Consumers []struct {
				ConsumerName    string `json:"consumerName"`
				UnackedMessages int    `json:"unackedMessages"`
			} `json:"consumers"`
		} `json:"subscriptions"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return 0, false
	}
	for _, cs := range st.Subscriptions[sub].Consumers {
		if cs.ConsumerName == name {
			return cs.UnackedMessages, true
		}
	}
	return 0, false
}

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/lakestream"
)

// receiveSet receives n messages from cons (acknowledging each) and
// returns their payloads.
func receiveSet(t *testing.T, ctx context.Context, cons pulsar.Consumer, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive (%d of %d so far): %v", len(got), n, err)
		}
		got[string(m.Payload())]++
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestNonPersistentTopic: non-persistent://… topics fan messages out to
// the subscriptions connected when they are published (Shared splits,
// Exclusive gets all), keep nothing (no stream, no late delivery), are
// listed by the admin API while they have clients, and are gone after.
func TestNonPersistentTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startNode(t, testnode.Config{HTTP: true})
	const topic = "non-persistent://public/default/np-fanout"
	cl := c.client()
	sub := func(name string, typ pulsar.SubscriptionType) pulsar.Consumer {
		t.Helper()
		cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: name, Type: typ})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	s1, s2, x := sub("s", pulsar.Shared), sub("s", pulsar.Shared), sub("x", pulsar.Exclusive)
	if _, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "x", Type: pulsar.Exclusive}); err == nil {
		t.Fatal("a second consumer on an Exclusive non-persistent subscription was accepted")
	}
	// The client grants a consumer's first permits (FLOW) after Subscribe
	// returns, and a non-persistent message skips a consumer without
	// permits (as on Pulsar, it is dropped for it): publish once every
	// consumer in want (subscription → consumers) has them.
	waitPermits := func(want map[string]int) {
		t.Helper()
		waitFor(t, ctx, fmt.Sprintf("consumers %v with permits", want), func() bool {
			var ps struct {
				Subscriptions map[string]struct {
					Consumers []struct {
						AvailablePermits int `json:"availablePermits"`
					} `json:"consumers"`
				} `json:"subscriptions"`
			}
			code := admDo(t, http.MethodGet, c.tn.HTTP.URL+"/admin/v2/non-persistent/public/default/np-fanout/stats", "", "", &ps)
			ready := code == http.StatusOK
			for name, k := range want {
				cs := ps.Subscriptions[name].Consumers
				ready = ready && len(cs) == k
				for _, c := range cs {
					ready = ready && c.AvailablePermits > 0
				}
			}
			return ready
		})
	}
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	waitPermits(map[string]int{"s": 2, "x": 1})
	const n = 20
	for i := range n {
		id, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if id.LedgerID() != 0 || id.EntryID() <= 0 {
			t.Fatalf("receipt id %v", id)
		}
	}
	all := receiveSet(t, ctx, x, n)
	if len(all) != n {
		t.Fatalf("exclusive subscription got %d distinct messages, want %d", len(all), n)
	}
	// Shared: the two consumers together get each message once.
	shared := map[string]int{}
	for len(shared) < n {
		var m pulsar.Message
		select {
		case cm := <-s1.Chan():
			m = cm.Message
			s1.Ack(m)
		case cm := <-s2.Chan():
			m = cm.Message
			s2.Ack(m)
		case <-ctx.Done():
			t.Fatalf("shared subscription got %d of %d", len(shared), n)
		}
		shared[string(m.Payload())]++
	}
	for p, k := range shared {
		if k != 1 {
			t.Fatalf("shared: %s delivered %d times", p, k)
		}
	}

	// Listed while it has clients; nothing stored.
	var list []string
	if code := admDo(t, http.MethodGet, c.tn.HTTP.URL+"/admin/v2/non-persistent/public/default", "", "", &list); code != http.StatusOK || !slices.Equal(list, []string{topic}) {
		t.Fatalf("non-persistent list: %d %v", code, list)
	}
	if ok, err := c.catalog.StreamExists(ctx, lakestream.MustParseStreamID("public/default/np-fanout")); err != nil || ok {
		t.Fatalf("a stream exists for the non-persistent topic: %v %v", ok, err)
	}
	var st struct {
		MsgInCounter  int64 `json:"msgInCounter"`
		Publishers    []any `json:"publishers"`
		Subscriptions map[string]struct {
			Type      string `json:"type"`
			Consumers []any  `json:"consumers"`
		} `json:"subscriptions"`
	}
	if code := admDo(t, http.MethodGet, c.tn.HTTP.URL+"/admin/v2/non-persistent/public/default/np-fanout/stats", "", "", &st); code != http.StatusOK ||
		st.MsgInCounter != n || len(st.Publishers) != 1 || len(st.Subscriptions["s"].Consumers) != 2 || st.Subscriptions["x"].Type != "Exclusive" {
		t.Fatalf("stats: %d %+v", code, st)
	}

	// At most once: what was published before a subscription existed is
	// not delivered to it.
	x.Close()
	for i := range 5 {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "before-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	late := sub("x", pulsar.Exclusive)
	waitPermits(map[string]int{"x": 1})
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if got := receiveSet(t, ctx, late, 1); got["after"] != 1 {
		t.Fatalf("a new subscription got %v, want only the message published after it", got)
	}
	for _, cons := range []pulsar.Consumer{s1, s2} {
		if err := cons.Seek(pulsar.EarliestMessageID()); err == nil {
			t.Fatal("seek on a non-persistent topic succeeded")
		}
	}

	// Gone once its last client leaves.
	prod.Close()
	for _, cons := range []pulsar.Consumer{s1, s2, late} {
		cons.Close()
	}
	for {
		list = nil
		admDo(t, http.MethodGet, c.tn.HTTP.URL+"/admin/v2/non-persistent/public/default", "", "", &list)
		if len(list) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("still listed after its clients left: %v", list)
		}
		time.Sleep(10 * time.Millisecond) // polling an observable state
	}
	if code := admDo(t, http.MethodGet, c.tn.HTTP.URL+"/admin/v2/non-persistent/public/default/np-fanout/stats", "", "", nil); code != http.StatusNotFound {
		t.Fatalf("stats of a topic without clients: %d, want 404", code)
	}
}

// TestClusterNonPersistentTopic: on a two-node cluster a producer that
// reached one node and a consumer that reached the other meet at the
// topic's owner; either node lists the topic.
func TestClusterNonPersistentTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startLGCluster(t, 2, "file://"+t.TempDir())
	const topic = "non-persistent://public/default/np-cluster"
	cons, err := c.client(c.nodes[1].pulsarURL).Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := c.client(c.nodes[0].pulsarURL).CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 10 {
		prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Errorf("send: %v", err)
			}
		})
	}
	if err := prod.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := receiveSet(t, ctx, cons, 10); len(got) != 10 {
		t.Fatalf("got %v", got)
	}
	for _, n := range c.nodes {
		var list []string
		if code := httpJSON(t, http.MethodGet, n.httpURL+"/admin/v2/non-persistent/public/default", &list); code != http.StatusOK || !slices.Equal(list, []string{topic}) {
			t.Fatalf("%s lists %d %v", n.name, code, list)
		}
	}
}

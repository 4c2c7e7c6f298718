package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestAdminStatsRatesAndMetadata: topic stats name the connected producer
// and consumer with their metadata and client version, count what each
// moved, and report non-zero rates while messages flow (rates are measured
// between stats requests ≥ 1 s apart, so the test keeps traffic going and
// polls until both rates show).
func TestAdminStatsRatesAndMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startCluster(t)
	a := admClient(t, admServer(t, c))
	const name = "persistent://public/default/rates"
	topic := admTopic(t, name)
	cl := c.client()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic: name, SubscriptionName: "s", Name: "reader-1", Properties: map[string]string{"team": "payments"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name, Name: "writer-1", Properties: map[string]string{"app": "checkout"}})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	sent := 0
	for round := 0; ; round++ {
		for range 50 {
			if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", sent)}); err != nil {
				t.Fatal(err)
			}
			sent++
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cons.Ack(m)
		}
		st, err := a.Topics().GetStats(topic)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Publishers) != 1 || len(st.Subscriptions["s"].Consumers) != 1 {
			t.Fatalf("stats: %d publishers, subscription %+v", len(st.Publishers), st.Subscriptions["s"])
		}
		p, sc := st.Publishers[0], st.Subscriptions["s"].Consumers[0]
		if p.ProducerName != "writer-1" || p.Metadata["app"] != "checkout" || p.ClientVersion == "" || p.Address == "" {
			t.Fatalf("publisher %+v", p)
		}
		if sc.ConsumerName != "reader-1" || sc.Metadata["team"] != "payments" || sc.ClientVersion == "" || sc.MsgOutCounter != int64(sent) {
			t.Fatalf("consumer %+v (sent %d)", sc, sent)
		}
		if p.MsgRateIn > 0 && sc.MsgRateOut > 0 && st.MsgRateIn > 0 && st.MsgRateOut > 0 && p.MsgThroughputIn > 0 {
			t.Logf("after %d rounds: publish %.0f msg/s, dispatch %.0f msg/s", round+1, st.MsgRateIn, st.MsgRateOut)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("rates never showed: %+v", st)
		}
	}
}

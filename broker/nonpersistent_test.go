package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/internal/testmember"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

type npProducer struct {
	name   string
	closed string
}

func (p *npProducer) ProducerName() string      { return p.name }
func (p *npProducer) Closed(assignedURL string) { p.closed = "closed:" + assignedURL }

type npConsumer struct {
	name, sub string
	permits   int64
	got       []int64 // entry ids delivered
	closed    string
}

func (c *npConsumer) ConsumerName() string { return c.name }
func (c *npConsumer) Subscription() string { return c.sub }
func (c *npConsumer) PriorityLevel() int32 { return 0 }
func (c *npConsumer) Permits() int64       { return c.permits }
func (c *npConsumer) DeliverNP(id protocol.MessageID, records int32, entry []byte) bool {
	c.permits -= int64(records)
	c.got = append(c.got, id.EntryID)
	return true
}
func (c *npConsumer) CloseNP(assignedURL string) { c.closed = "closed:" + assignedURL }

// A non-persistent topic without a socket: Shared round-robins over the
// consumers with permits, drops what no consumer may take, refuses by
// the limits and a second exclusive consumer, releases its ownership when
// its last user leaves, and closes everyone on Close.
func TestNPTopicFanOut(t *testing.T) {
	ctx := context.Background()
	m := testmember.New(lakestream.Member{ID: "a"})
	tn, err := broker.ParseTopicName("non-persistent://public/default/np")
	if err != nil {
		t.Fatal(err)
	}
	own, err := m.Acquire(ctx, tn.String())
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	forgotten := 0
	np := broker.NewNPTopic[*npProducer, *npConsumer](broker.NPTopicOptions{Name: tn, Owner: own,
		Limits:  broker.TopicLimits{MaxProducers: 1},
		Refused: func(l string) { refused = append(refused, l) },
		Forget:  func() { forgotten++ }})
	p := &npProducer{name: "p"}
	if err := np.AddProducer(p); err != nil {
		t.Fatal(err)
	}
	if err := np.AddProducer(&npProducer{name: "q"}); !errors.Is(err, broker.ErrTooManyProducers) || len(refused) != 1 {
		t.Fatalf("second producer: %v (refusals %v)", err, refused)
	}
	c1, c2 := &npConsumer{name: "c1", sub: "s", permits: 1}, &npConsumer{name: "c2", sub: "s", permits: 1}
	for _, c := range []*npConsumer{c1, c2} {
		if err := np.AddConsumer(c, "s", actors.SubShared); err != nil {
			t.Fatal(err)
		}
	}
	ex := &npConsumer{name: "x", sub: "e", permits: 10}
	if err := np.AddConsumer(ex, "e", actors.SubExclusive); err != nil {
		t.Fatal(err)
	}
	if err := np.AddConsumer(&npConsumer{name: "y", sub: "e"}, "e", actors.SubExclusive); !errors.Is(err, actors.ErrConsumerBusy) {
		t.Fatalf("second exclusive consumer: %v", err)
	}
	for range 3 {
		if _, err := np.Publish(1, []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	if len(c1.got) != 1 || len(c2.got) != 1 || len(ex.got) != 3 {
		t.Fatalf("delivered: c1 %v, c2 %v, exclusive %v", c1.got, c2.got, ex.got)
	}
	st := np.State(time.Now())
	if st.MsgsIn != 3 || st.Dropped != 1 || len(st.Producers) != 1 || len(st.Subscriptions) != 2 {
		t.Fatalf("state: %+v", st)
	}
	np.RemoveConsumer(ex)
	np.Close("pulsar://b:6650")
	if p.closed != "closed:pulsar://b:6650" || c1.closed != "closed:pulsar://b:6650" || forgotten != 1 || own.Held() {
		t.Fatalf("close: producer %q, consumer %q, forgotten %d, held %v", p.closed, c1.closed, forgotten, own.Held())
	}
	if _, err := np.Publish(1, []byte("m")); !errors.Is(err, broker.ErrServiceNotReady) {
		t.Fatalf("publish after close: %v", err)
	}
}

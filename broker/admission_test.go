package broker_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/lakegate/lakegate/broker"
)

func TestTopicAdmission(t *testing.T) {
	b, _ := newBroker(t, broker.Config{TopicLimits: broker.TopicLimits{MaxProducers: 1}})
	var refusals []string
	a := b.NewTopicAdmission("persistent://public/default/t", func(label string) { refusals = append(refusals, label) })
	if err := a.AdmitProducer(0); err != nil {
		t.Fatal(err)
	}
	if err := a.AdmitProducer(1); !errors.Is(err, broker.ErrTooManyProducers) {
		t.Fatalf("second producer: %v, want ErrTooManyProducers (the node's default)", err)
	}
	a.Apply(broker.TopicLimits{MaxConsumersPerSubscription: 1, MaxConsumers: 2, MaxSubscriptions: 1})
	if err := a.AdmitProducer(5); err != nil {
		t.Fatalf("no producer limit after Apply: %v", err)
	}
	if err := a.ReserveConsumer("s"); err != nil {
		t.Fatal(err)
	}
	if err := a.ReserveConsumer("s"); !errors.Is(err, broker.ErrTooManyConsumers) {
		t.Fatalf("second consumer of s: %v, want ErrTooManyConsumers", err)
	}
	if err := a.ReserveConsumer("s2"); err != nil {
		t.Fatal(err)
	}
	if err := a.ReserveConsumer("s3"); !errors.Is(err, broker.ErrTooManyConsumers) {
		t.Fatalf("third consumer: %v, want ErrTooManyConsumers", err)
	}
	a.ReleaseConsumer("s")
	if err := a.ReserveConsumer("s"); err != nil {
		t.Fatalf("a released place: %v", err)
	}
	if err := a.AdmitSubscription(1); !errors.Is(err, broker.ErrTooManySubscriptions) {
		t.Fatalf("second subscription: %v, want ErrTooManySubscriptions", err)
	}
	want := []string{"max_producers_per_topic", "max_consumers_per_subscription", "max_consumers_per_topic", "max_subscriptions_per_topic"}
	if !slices.Equal(refusals, want) {
		t.Fatalf("refusals %v, want %v", refusals, want)
	}
}

// watcher is a consumer of a terminated topic's end.
type watcher struct {
	sub       string
	delivered int64
	told      *int
}

func (w *watcher) Subscription() string      { return w.sub }
func (w *watcher) ReachedEnd(end int64) bool { return w.delivered >= end }
func (w *watcher) NotifyEnd()                { *w.told++ }

func TestTopicEnd(t *testing.T) {
	var e broker.TopicEnd[*watcher]
	var toldA, toldB int
	a := &watcher{sub: "a", delivered: 10, told: &toldA}
	b := &watcher{sub: "b", delivered: 5, told: &toldB}
	e.AddWatcher(a)
	e.AddWatcher(b)
	if _, ok := e.Offset(); ok {
		t.Fatal("an end before the topic is terminated")
	}
	e.MarkTerminated(10)
	if end, ok := e.Offset(); !ok || end != 10 {
		t.Fatalf("Offset = %d, %v", end, ok)
	}
	if toldA != 1 || toldB != 0 {
		t.Fatalf("told a %d, b %d times; want 1, 0", toldA, toldB)
	}
	if ws := e.Watchers("b"); len(ws) != 1 || ws[0] != b {
		t.Fatalf("Watchers(b) = %v", ws)
	}
	e.RemoveWatcher(b)
	if ws := e.Watchers(""); len(ws) != 1 {
		t.Fatalf("Watchers after a removal = %v", ws)
	}
}

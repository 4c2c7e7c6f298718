package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// activeRecorder is a ConsumerEventListener shared by several consumers: it
// keeps the latest ACTIVE_CONSUMER_CHANGE per (consumer name, partition)
// and wakes waiters on each one.
type activeRecorder struct {
	mu      sync.Mutex
	state   map[string]map[int32]bool
	changed chan struct{} // closed and replaced on each event
}

func newActiveRecorder() *activeRecorder {
	return &activeRecorder{state: map[string]map[int32]bool{}, changed: make(chan struct{})}
}

// listener is the EventListener of the consumer called name.
func (r *activeRecorder) listener(name string) pulsar.ConsumerEventListener {
	return activeListener{r, name}
}

type activeListener struct {
	r    *activeRecorder
	name string
}

func (l activeListener) BecameActive(_ pulsar.Consumer, _ string, p int32) { l.r.set(l.name, p, true) }
func (l activeListener) BecameInactive(_ pulsar.Consumer, _ string, p int32) {
	l.r.set(l.name, p, false)
}

func (r *activeRecorder) set(name string, p int32, active bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state[name] == nil {
		r.state[name] = map[int32]bool{}
	}
	r.state[name][p] = active
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitActive waits until, for every partition i < len(want), the consumer
// want[i] is told it is active and every other of names that it is not.
func (r *activeRecorder) waitActive(t *testing.T, ctx context.Context, names []string, want []string) {
	t.Helper()
	for {
		r.mu.Lock()
		ok, ch := true, r.changed
		var got []string
		for p := range want {
			for _, n := range names {
				a, known := r.state[n][int32(p)]
				if !known || a != (n == want[p]) {
					ok = false
				}
				if a {
					got = append(got, fmt.Sprintf("p%d:%s", p, n))
				}
			}
		}
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("active consumers %v, want %v", got, want)
		}
	}
}

type received struct {
	consumer string
	msg      pulsar.Message
}

// TestFailoverActivePerPartition: three named Failover consumers on a
// 4-partition topic. The active consumer of partition i is the (priority,
// name)-sorted consumers[i % 3], every consumer learns which partitions it
// is active for, and each message goes to its partition's active consumer.
// Closing one (with messages it has not acknowledged) hands its partitions
// over by the same rule over the two left, and every message is
// acknowledged in the end.
func TestFailoverActivePerPartition(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/failover-order"
	c.createPartitioned(topic, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	rec := newActiveRecorder()
	names := []string{"c3", "c1", "c2"} // subscribe order differs from name order
	cons := map[string]pulsar.Consumer{}
	out := make(chan received, 1000)
	var wg sync.WaitGroup
	for _, n := range names {
		co, err := cl.Subscribe(pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "fo", Type: pulsar.Failover, Name: n,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			EventListener:               rec.listener(n),
			AckWithResponse:             true,
		})
		if err != nil {
			t.Fatalf("subscribe %s: %v", n, err)
		}
		cons[n] = co
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := co.Receive(ctx)
				if err != nil {
					return // closed, or the test is over
				}
				out <- received{n, m}
			}
		}()
	}
	defer func() {
		for _, co := range cons {
			co.Close()
		}
		cancel()
		wg.Wait()
	}()
	rec.waitActive(t, ctx, names, []string{"c1", "c2", "c3", "c1"})

	const n = 60
	s := produce(t, cl, topic, false, n)
	partitions := map[int32]bool{}
	for _, id := range s.ids {
		partitions[id.PartitionIdx()] = true
	}
	if len(partitions) != 4 {
		t.Fatalf("messages reached partitions %v, want all 4", partitions)
	}
	acked := map[int]bool{}
	held := 0 // received by c1, not acknowledged
	want := map[int32]string{0: "c1", 1: "c2", 2: "c3", 3: "c1"}
	for seen := map[int]bool{}; len(seen) < n; {
		var r received
		select {
		case r = <-out:
		case <-ctx.Done():
			t.Fatalf("received %d of %d messages", len(seen), n)
		}
		i := s.check(t, r.msg)
		seen[i] = true
		if p := r.msg.ID().PartitionIdx(); r.consumer != want[p] {
			t.Fatalf("message %d of partition %d went to %s, want %s", i, p, r.consumer, want[p])
		}
		if r.consumer == "c1" {
			held++
			continue
		}
		if err := cons[r.consumer].Ack(r.msg); err != nil {
			t.Fatalf("ack with response: %v", err)
		}
		acked[i] = true
	}
	if held == 0 {
		t.Fatal("c1 got nothing to hold")
	}

	// c1 leaves with its messages unacknowledged: sorted [c2 c3] now.
	cons["c1"].Close()
	delete(cons, "c1")
	want = map[int32]string{0: "c2", 1: "c3", 2: "c2", 3: "c3"}
	rec.waitActive(t, ctx, []string{"c2", "c3"}, []string{"c2", "c3", "c2", "c3"})
	for len(acked) < n {
		var r received
		select {
		case r = <-out:
		case <-ctx.Done():
			t.Fatalf("acknowledged %d of %d messages after the handover", len(acked), n)
		}
		if r.consumer == "c1" {
			continue // delivered to c1 before it closed
		}
		i := s.check(t, r.msg)
		if p := r.msg.ID().PartitionIdx(); r.consumer != want[p] {
			t.Fatalf("after the handover message %d of partition %d went to %s, want %s", i, p, r.consumer, want[p])
		}
		if err := cons[r.consumer].Ack(r.msg); err != nil {
			t.Fatalf("ack with response: %v", err)
		}
		acked[i] = true
	}
	for i := range n {
		if !acked[i] {
			t.Fatalf("message %s lost", strconv.Itoa(i))
		}
	}
}

// subscribeNamed is subscribe with a consumer name (Failover orders
// consumers by name; the client otherwise picks a random one).
func subscribeNamed(t *testing.T, cl pulsar.Client, topic, sub, name string, typ pulsar.SubscriptionType) pulsar.Consumer {
	t.Helper()
	c, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic:                          topic,
		SubscriptionName:               sub,
		Name:                           name,
		Type:                           typ,
		SubscriptionInitialPosition:    pulsar.SubscriptionPositionEarliest,
		EnableBatchIndexAcknowledgment: true,
	})
	if err != nil {
		t.Fatalf("subscribe %s/%s: %v", sub, name, err)
	}
	return c
}

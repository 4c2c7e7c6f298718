package e2e

// Key_Shared with pulsar-client-go v0.19.0: every key goes to one consumer
// at a time, in order, through consumers joining; sticky consumers get the
// hashes of their ranges.
//
//	go test -p 1 -run TestKeyShared ./e2e/

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/actors"
)

const (
	ksKeys       = 100
	ksPerKey     = 10
	ksTotal      = ksKeys * ksPerKey
	ksKeyPattern = "k-%03d"
)

// ksProduce sends messages for keys [0, ksKeys), sequence numbers
// [from, to) each, as (key, payload "seq").
func ksProduce(t *testing.T, ctx context.Context, p pulsar.Producer, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for seq := from; seq < to; seq++ {
		for k := range ksKeys {
			wg.Add(1)
			p.SendAsync(ctx, &pulsar.ProducerMessage{
				Key:     fmt.Sprintf(ksKeyPattern, k),
				Payload: []byte(strconv.Itoa(seq)),
			}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
			})
		}
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// ksLog records, per key, the sequence numbers in the order they were
// received and by which consumer; a message is recorded before it is
// acknowledged, so the record order is the delivery order.
type ksLog struct {
	mu    sync.Mutex
	seqs  map[string][]int
	by    map[string][]int // consumer index per received message
	total int
	done  chan struct{}
	want  int
}

func newKSLog(want int) *ksLog {
	return &ksLog{seqs: map[string][]int{}, by: map[string][]int{}, done: make(chan struct{}), want: want}
}

// receive runs a receive loop for consumer i until ctx ends.
func (l *ksLog) receive(ctx context.Context, t *testing.T, i int, c pulsar.Consumer) {
	l.receiveUpTo(ctx, t, i, c, -1)
}

// receiveUpTo is receive that stops after limit messages (< 0: no limit).
func (l *ksLog) receiveUpTo(ctx context.Context, t *testing.T, i int, c pulsar.Consumer, limit int) {
	for n := 0; n != limit; n++ {
		m, err := c.Receive(ctx)
		if err != nil {
			return
		}
		seq, err := strconv.Atoi(string(m.Payload()))
		if err != nil {
			t.Errorf("payload %q", m.Payload())
			return
		}
		l.mu.Lock()
		l.seqs[m.Key()] = append(l.seqs[m.Key()], seq)
		l.by[m.Key()] = append(l.by[m.Key()], i)
		l.total++
		if l.total == l.want {
			close(l.done)
		}
		l.mu.Unlock()
		c.Ack(m)
	}
}

func (l *ksLog) wait(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-l.done:
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Fatalf("received %d of %d messages", l.total, l.want)
	}
}

// checkOrder: every key's messages arrived exactly once, in order.
func (l *ksLog) checkOrder(t *testing.T, perKey int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seqs) != ksKeys {
		t.Fatalf("%d keys received, want %d", len(l.seqs), ksKeys)
	}
	for k, seqs := range l.seqs {
		if len(seqs) != perKey {
			t.Fatalf("key %s: %d messages %v, want %d", k, len(seqs), seqs, perKey)
		}
		for i, s := range seqs {
			if s != i {
				t.Fatalf("key %s out of order: %v (consumers %v)", k, seqs, l.by[k])
			}
		}
	}
}

func ksSubscribe(t *testing.T, cl pulsar.Client, topic string, policy *pulsar.KeySharedPolicy) (pulsar.Consumer, error) {
	return cl.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "ks", Type: pulsar.KeyShared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		KeySharedPolicy:             policy,
	})
}

func ksProducer(t *testing.T, cl pulsar.Client, topic string, batching bool) pulsar.Producer {
	t.Helper()
	opts := pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching}
	if batching {
		opts.BatcherBuilderType = pulsar.KeyBasedBatchBuilder
		opts.BatchingMaxPublishDelay = 5 * time.Millisecond
	}
	p, err := cl.CreateProducer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestKeySharedOrderPerKey: 3 AUTO_SPLIT consumers, 100 keys × 10
// messages: each key's messages all go to one consumer, in order, and every
// consumer gets some keys.
func TestKeySharedOrderPerKey(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	for _, tc := range []struct {
		batching   bool
		partitions int
	}{{false, 0}, {true, 0}, {false, 4}} {
		batching := tc.batching
		t.Run(fmt.Sprintf("batch=%v/partitions=%d", batching, tc.partitions), func(t *testing.T) {
			topic := fmt.Sprintf("persistent://public/default/ks-order-%v-%d", batching, tc.partitions)
			if tc.partitions > 0 {
				c.createPartitioned(topic, tc.partitions)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			l := newKSLog(ksTotal)
			var wg sync.WaitGroup
			rctx, stop := context.WithCancel(ctx)
			for i := range 3 {
				cons, err := ksSubscribe(t, cl, topic, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer cons.Close()
				wg.Add(1)
				go func() { defer wg.Done(); l.receive(rctx, t, i, cons) }()
			}
			start := time.Now()
			ksProduce(t, ctx, ksProducer(t, cl, topic, batching), 0, ksPerKey)
			l.wait(t, ctx)
			stop()
			wg.Wait()
			t.Logf("%d messages through 3 Key_Shared consumers in %v", ksTotal, time.Since(start))
			l.checkOrder(t, ksPerKey)
			perConsumer := map[int]int{}
			for k, by := range l.by {
				for _, i := range by {
					if i != by[0] {
						t.Fatalf("key %s went to consumers %v", k, by)
					}
				}
				perConsumer[by[0]]++
			}
			if len(perConsumer) != 3 {
				t.Fatalf("keys per consumer %v: want all 3 used", perConsumer)
			}
		})
	}
}

// TestKeySharedJoinKeepsOrder: consumers joining while messages flow take
// over keys without breaking any key's order.
func TestKeySharedJoinKeepsOrder(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/ks-join"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newKSLog(ksTotal)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	subscribeAndReceive := func(i int) {
		cons, err := ksSubscribe(t, cl, topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cons.Close)
		wg.Add(1)
		go func() { defer wg.Done(); l.receive(rctx, t, i, cons) }()
	}
	p := ksProducer(t, cl, topic, false)
	subscribeAndReceive(0)
	ksProduce(t, ctx, p, 0, ksPerKey/2)
	subscribeAndReceive(1)
	subscribeAndReceive(2)
	ksProduce(t, ctx, p, ksPerKey/2, ksPerKey)
	l.wait(t, ctx)
	stop()
	wg.Wait()
	l.checkOrder(t, ksPerKey)
}

// TestKeySharedLeaveKeepsOrder: a consumer that leaves with messages
// unacknowledged (prefetched by its client) hands its keys over in order.
func TestKeySharedLeaveKeepsOrder(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/ks-leave"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newKSLog(ksTotal)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 3 {
		cons, err := ksSubscribe(t, cl, topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		if i == 0 {
			// Consumer 0 takes 50 messages, then closes with the rest of
			// its prefetched messages unacknowledged.
			go func() { defer wg.Done(); l.receiveUpTo(rctx, t, i, cons, 50); cons.Close() }()
			continue
		}
		t.Cleanup(cons.Close)
		go func() { defer wg.Done(); l.receive(rctx, t, i, cons) }()
	}
	ksProduce(t, ctx, ksProducer(t, cl, topic, false), 0, ksPerKey)
	l.wait(t, ctx)
	stop()
	wg.Wait()
	l.checkOrder(t, ksPerKey)
}

// TestKeySharedSticky: sticky consumers get exactly the hashes of their
// ranges; an overlapping range is refused.
func TestKeySharedSticky(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	topic := "persistent://public/default/ks-sticky"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ranges := [][]int{{0, 32767}, {32768, 65535}}
	l := newKSLog(ksTotal)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, r := range ranges {
		pol, err := pulsar.NewKeySharedPolicySticky(r)
		if err != nil {
			t.Fatal(err)
		}
		cons, err := ksSubscribe(t, cl, topic, pol)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		wg.Add(1)
		go func() { defer wg.Done(); l.receive(rctx, t, i, cons) }()
	}
	pol, _ := pulsar.NewKeySharedPolicySticky([]int{30000, 40000})
	if cons, err := ksSubscribe(t, cl, topic, pol); err == nil {
		cons.Close()
		t.Fatal("overlapping sticky range accepted")
	}
	ksProduce(t, ctx, ksProducer(t, cl, topic, false), 0, ksPerKey)
	l.wait(t, ctx)
	stop()
	wg.Wait()
	l.checkOrder(t, ksPerKey)
	for k, by := range l.by {
		h := int(actors.KeyHash([]byte(k)))
		want := 0
		if h > ranges[0][1] {
			want = 1
		}
		for _, i := range by {
			if i != want {
				t.Fatalf("key %s (hash %d) went to consumer %d, want %d", k, h, i, want)
			}
		}
	}
}

package e2e

// Key_Shared with pulsar-client-go v0.19.0: every key goes to one consumer
// at a time, in order, through consumers joining; sticky consumers get the
// hashes of their ranges.
//
//	go test -p 1 -run TestKeyShared ./e2e/

import (
	"context"
	"fmt"
	"slices"
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

// ksStats is the part of a topic's stats the draining test reads (PIP-379).
type ksStats struct {
	Subscriptions map[string]struct {
		KeySharedMode                 string `json:"keySharedMode"`
		DrainingHashesCount           int    `json:"drainingHashesCount"`
		DrainingHashesUnackedMessages int64  `json:"drainingHashesUnackedMessages"`
		Consumers                     []struct {
			ConsumerName                  string       `json:"consumerName"`
			KeyHashRangeArrays            [][2]int32   `json:"keyHashRangeArrays"`
			DrainingHashesCount           int          `json:"drainingHashesCount"`
			DrainingHashesClearedTotal    int64        `json:"drainingHashesClearedTotal"`
			DrainingHashesUnackedMessages int64        `json:"drainingHashesUnackedMessages"`
			DrainingHashes                []ksDraining `json:"drainingHashes"`
		} `json:"consumers"`
	} `json:"subscriptions"`
}

// ksDraining is one of a consumer's drainingHashes.
type ksDraining struct {
	Hash            int32 `json:"hash"`
	UnackMsgs       int64 `json:"unackMsgs"`
	BlockedAttempts int64 `json:"blockedAttempts"`
}

// TestKeySharedDrainingStats: the admin stats show Pulsar 4.0's Key_Shared
// observability (PIP-379). Consumer "ka" holds one unacknowledged message
// of each of 100 keys; "kb" joins and takes over some hashes: ka's stats
// list exactly those of its held hashes that kb owns now as draining (with
// their unacknowledged messages, and blocked attempts once the keys' next
// messages wait for them), kb's hash ranges and ka's cover the hash space;
// once ka acknowledges, the hashes are cleared and kb gets the waiting
// messages.
func TestKeySharedDrainingStats(t *testing.T) {
	c := startCluster(t)
	srv := admServer(t, c)
	cl := c.client()
	const topic = "persistent://public/default/ks-draining"
	statsURL := srv.URL + "/admin/v2/persistent/public/default/ks-draining/stats"
	ctx := ctxFor(t, time.Minute)
	sub := func(name string) pulsar.Consumer {
		cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "ks", Name: name,
			Type: pulsar.KeyShared, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cons.Close)
		return cons
	}
	p := ksProducer(t, cl, topic, false)
	ka := sub("ka")
	ksProduce(t, ctx, p, 0, 1) // one message per key, all to ka
	var held []pulsar.Message
	for range ksKeys {
		m, err := ka.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, m)
	}
	kb := sub("kb")
	var st ksStats
	byName := func(name string) int {
		for i, cs := range st.Subscriptions["ks"].Consumers {
			if cs.ConsumerName == name {
				return i
			}
		}
		return -1
	}
	waitFor(t, ctx, "kb in the subscription's stats", func() bool {
		return httpJSON(t, "GET", statsURL, &st) == 200 && byName("kb") >= 0
	})
	ks := st.Subscriptions["ks"]
	a, b := ks.Consumers[byName("ka")], ks.Consumers[byName("kb")]
	if ks.KeySharedMode != "AUTO_SPLIT" {
		t.Fatalf("keySharedMode %q", ks.KeySharedMode)
	}
	// The two consumers' ranges split the hash space.
	covered := 0
	owns := func(rs [][2]int32, h int32) bool {
		return slices.ContainsFunc(rs, func(r [2]int32) bool { return r[0] <= h && h <= r[1] })
	}
	for _, cs := range ks.Consumers {
		for _, r := range cs.KeyHashRangeArrays {
			covered += int(r[1]-r[0]) + 1
		}
	}
	if covered != actors.KeyHashRange || owns(a.KeyHashRangeArrays, 0) == owns(b.KeyHashRangeArrays, 0) {
		t.Fatalf("ranges cover %d hashes, want %d, each hash once: ka %v kb %v", covered, actors.KeyHashRange, a.KeyHashRangeArrays, b.KeyHashRangeArrays)
	}
	// What ka drains: its held keys' hashes that kb owns now.
	moved := map[int32]int64{}
	for k := range ksKeys {
		if h := actors.KeyHash(fmt.Appendf(nil, ksKeyPattern, k)); owns(b.KeyHashRangeArrays, h) {
			moved[h]++
		}
	}
	if len(moved) == 0 {
		t.Fatal("kb took no hash of the 100 keys")
	}
	var movedMsgs int64
	for _, n := range moved {
		movedMsgs += n
	}
	if a.DrainingHashesCount != len(moved) || a.DrainingHashesUnackedMessages != movedMsgs || len(a.DrainingHashes) != len(moved) ||
		b.DrainingHashesCount != 0 || ks.DrainingHashesCount != len(moved) || ks.DrainingHashesUnackedMessages != movedMsgs {
		t.Fatalf("draining: ka %d hashes / %d msgs (%d listed), kb %d, subscription %d / %d; want %d hashes / %d msgs on ka",
			a.DrainingHashesCount, a.DrainingHashesUnackedMessages, len(a.DrainingHashes), b.DrainingHashesCount,
			ks.DrainingHashesCount, ks.DrainingHashesUnackedMessages, len(moved), movedMsgs)
	}
	for _, d := range a.DrainingHashes {
		if moved[d.Hash] != d.UnackMsgs {
			t.Fatalf("draining hash %d with %d unacknowledged, want %d", d.Hash, d.UnackMsgs, moved[d.Hash])
		}
	}
	// The keys' next messages wait for the drain: every draining hash
	// counts blocked attempts.
	ksProduce(t, ctx, p, 1, 2)
	waitFor(t, ctx, "blocked attempts on every draining hash", func() bool {
		if httpJSON(t, "GET", statsURL, &st) != 200 || byName("ka") < 0 {
			return false
		}
		a = st.Subscriptions["ks"].Consumers[byName("ka")]
		return len(a.DrainingHashes) == len(moved) && !slices.ContainsFunc(a.DrainingHashes, func(d ksDraining) bool { return d.BlockedAttempts == 0 })
	})
	for _, m := range held {
		if err := ka.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	// kb gets the moved keys' second messages, and ka drains nothing.
	for range movedMsgs {
		m, err := kb.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h := actors.KeyHash([]byte(m.Key())); moved[h] == 0 || string(m.Payload()) != "1" {
			t.Fatalf("kb got key %s (hash %d) payload %q: not a moved key's second message", m.Key(), h, m.Payload())
		}
	}
	waitFor(t, ctx, "the drain cleared in the stats", func() bool {
		if httpJSON(t, "GET", statsURL, &st) != 200 || byName("ka") < 0 {
			return false
		}
		a = st.Subscriptions["ks"].Consumers[byName("ka")]
		return a.DrainingHashesCount == 0
	})
	if a.DrainingHashesClearedTotal != int64(len(moved)) || a.DrainingHashesUnackedMessages != 0 || len(a.DrainingHashes) != 0 {
		t.Fatalf("after the acks: ka cleared %d (want %d), %d unacked, %d listed", a.DrainingHashesClearedTotal, len(moved),
			a.DrainingHashesUnackedMessages, len(a.DrainingHashes))
	}
}

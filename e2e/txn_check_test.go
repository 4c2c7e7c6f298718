package e2e

// A Jepsen-style check of transactions (e2e/txncheck; docs/transactions.md,
// "Invariants and how they are checked"): writers append unique values to
// partitions of one topic in transactions that commit or abort, on three
// `lakegate serve` processes running on a three-member etcd cluster, while
// a nemesis kills (SIGKILL) and restarts the owner of a partition, the
// node serving the coordinator of an open transaction, and the etcd
// leader. A consumer reads throughout; after the faults, once every
// transaction has ended, a sentinel per partition and a Reader per
// partition from the earliest message give the final history, which
// txncheck judges: no aborted read, no lost committed write, no
// duplicate, per-partition order, all-or-nothing for unknown outcomes.
// Some transactions also consume an input (a message of another topic)
// and acknowledge it in the transaction: after the end, the inputs a new
// consumer of that subscription receives are exactly those no committed
// transaction acknowledged.
//
// Short mode (go test ./e2e/, part of `make test`): 3 writers, 4
// partitions, one fault of each kind, under a minute. Long mode (`make
// txn-check`): LAKEGATE_TXNCHECK_LONG=<duration> (e.g. 10m): 6 writers,
// 8 partitions, faults in turn until the duration is over.
// LAKEGATE_TXNCHECK_SEED=<n> replays a seed (each run logs its own).
// Run: go test -count=1 -run TestTxnCheck ./e2e/

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/e2e/txncheck"
	"github.com/lakegate/lakegate/internal/testservers"
)

// txnCheckConfig is a run's shape.
type txnCheckConfig struct {
	writers, partitions int
	// faultEvery paces the nemesis: it waits this long, injects a fault,
	// waits this long again and repairs it.
	faultEvery time.Duration
	// duration: faults go on in turn until it is over (0: one round, one
	// fault of each kind).
	duration time.Duration
	// txnTimeout is each transaction's (the coordinator aborts it then);
	// opTimeout bounds each send, commit and abort.
	txnTimeout, opTimeout time.Duration
	abortPercent          int // transactions the writer aborts
	// consumePercent: transactions that first receive an input and
	// acknowledge it in the transaction; inputs: how many the input topic
	// holds.
	consumePercent, inputs int
	seed                   uint64
}

func txnCheckConfigFromEnv(t *testing.T) txnCheckConfig {
	cfg := txnCheckConfig{writers: 3, partitions: 4, faultEvery: 3 * time.Second,
		txnTimeout: 10 * time.Second, opTimeout: 10 * time.Second, abortPercent: 25,
		consumePercent: 30, inputs: 300, seed: 30}
	if v := os.Getenv("LAKEGATE_TXNCHECK_LONG"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("LAKEGATE_TXNCHECK_LONG=%q: a duration, e.g. 10m: %v", v, err)
		}
		cfg.writers, cfg.partitions, cfg.faultEvery, cfg.duration = 6, 8, 5*time.Second, d
		cfg.inputs = int(d/time.Second) * 8 // about what 6 writers consume
		cfg.seed = uint64(time.Now().UnixNano())
	}
	if v := os.Getenv("LAKEGATE_TXNCHECK_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LAKEGATE_TXNCHECK_SEED=%q: %v", v, err)
		}
		cfg.seed = s
	}
	return cfg
}

// txnWriter runs transactions one after the other and records them.
type txnWriter struct {
	id   int
	cfg  txnCheckConfig
	rng  *rand.Rand
	prod pulsar.Producer
	work pulsar.Consumer // of the inputs, shared by the writers
	// open is the coordinator of the transaction open now, plus one (0:
	// none): the nemesis kills the node serving it.
	open atomic.Uint64
	// Written by the writer's goroutine, read once it has returned.
	txns    []txncheck.Txn
	ids     []pulsar.TxnID // of txns, by index
	newErrs int            // NEW_TXN failures (no transaction to record)
	errs    map[string]int // errors seen, by operation and text
}

const txnCheckTopic = "persistent://public/default/txn-check"

// txnCheckInputs is the topic whose messages transactions acknowledge.
const txnCheckInputs = "persistent://public/default/txn-check-in"

// txnCheckReceiveWait bounds a writer's wait for an input (none may be
// left to it).
const txnCheckReceiveWait = 200 * time.Millisecond

// txnCheckConsumerLag bounds how long after the readers the consumer may
// take to reach the sentinels.
const txnCheckConsumerLag = time.Minute

// run runs transactions until stop is closed.
func (w *txnWriter) run(ctx context.Context, cl pulsar.Client, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		tx, err := cl.NewTransaction(w.cfg.txnTimeout)
		if err != nil {
			w.newErrs++
			w.errs["new: "+err.Error()]++
			select { // pacing: a cluster without coordinators answers at once
			case <-stop:
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		w.open.Store(tx.GetTxnID().MostSigBits + 1)
		w.txns = append(w.txns, w.transact(ctx, tx, len(w.txns)))
		w.ids = append(w.ids, tx.GetTxnID())
		w.open.Store(0)
	}
}

// transact, in tx, sometimes receives an input and acknowledges it, sends
// 1–2 values to each of 2–3 partitions, then commits or aborts it (aborts
// it after a failed acknowledgement or send), and returns its record.
func (w *txnWriter) transact(ctx context.Context, tx pulsar.Transaction, seq int) txncheck.Txn {
	rec := txncheck.Txn{Name: fmt.Sprintf("w%d-t%d", w.id, seq), Writer: w.id, Seq: seq, Writes: map[int][]string{}}
	ps := w.rng.Perm(w.cfg.partitions)[:2+w.rng.IntN(2)]
	counts := make([]int, len(ps))
	for i := range ps {
		counts[i] = 1 + w.rng.IntN(2)
	}
	commit := w.rng.IntN(100) >= w.cfg.abortPercent
	if w.rng.IntN(100) < w.cfg.consumePercent {
		rctx, cancel := context.WithTimeout(ctx, txnCheckReceiveWait)
		m, err := w.work.Receive(rctx)
		cancel()
		if err == nil {
			rec.Acks = []string{string(m.Payload())} // its outcome is the transaction's
			if err := w.work.AckWithTxn(m, tx); err != nil {
				// The Go client cannot end the transaction now (TxnError):
				// its coordinator aborts it at its timeout. The input is
				// handed back, as an application does.
				w.errs["ack: "+err.Error()]++
				w.work.Nack(m)
				commit = false
				ps = nil
			}
		}
	}
sends:
	for i, p := range ps {
		for k := range counts[i] {
			v := fmt.Sprintf("%s-p%d-k%d", rec.Name, p, k)
			rec.Writes[p] = append(rec.Writes[p], v) // sent: its outcome is the transaction's
			sctx, cancel := context.WithTimeout(ctx, w.cfg.opTimeout)
			_, err := w.prod.Send(sctx, &pulsar.ProducerMessage{Payload: []byte(v),
				Properties: map[string]string{"p": strconv.Itoa(p)}, Transaction: tx})
			cancel()
			if err != nil {
				w.errs["send: "+err.Error()]++
				commit = false
				break sends
			}
		}
	}
	ectx, cancel := context.WithTimeout(ctx, w.cfg.opTimeout)
	defer cancel()
	rec.CommitAsked = commit
	if commit {
		if err := tx.Commit(ectx); err != nil {
			w.errs["commit: "+err.Error()]++
		} else {
			rec.Outcome = txncheck.Committed
		}
	} else if err := tx.Abort(ectx); err != nil {
		w.errs["abort: "+err.Error()]++
	} else {
		rec.Outcome = txncheck.Aborted
	}
	return rec
}

func TestTxnCheck(t *testing.T) {
	cfg := txnCheckConfigFromEnv(t)
	t.Logf("seed %d (LAKEGATE_TXNCHECK_SEED=%d replays it): %d writers, %d partitions, faults every %v for %v",
		cfg.seed, cfg.seed, cfg.writers, cfg.partitions, cfg.faultEvery, cfg.duration)
	rng := rand.New(rand.NewPCG(cfg.seed, 0))
	ctx := ctxFor(t, 3*time.Minute+2*cfg.duration)
	etcd := testservers.StartEtcdCluster(t, 3)
	c := startLGClusterOn(t, etcd, 0, "file://"+t.TempDir(), keepAllFlags...)
	c.fixedPorts = true // the clients' service URL stays valid across restarts
	for range 3 {
		c.addNode()
	}
	// Deduplication on: a send resent after a lost receipt is stored once
	// (without it Pulsar stores it twice, which the check would report).
	if code := admDo(t, http.MethodPost, c.nodes[0].httpURL+"/admin/v2/namespaces/public/default/deduplication",
		"application/json", "true", nil); code/100 != 2 {
		t.Fatalf("deduplication policy: HTTP %d", code)
	}
	if code := admDo(t, http.MethodPut, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/txn-check/partitions",
		"application/json", strconv.Itoa(cfg.partitions), nil); code/100 != 2 {
		t.Fatalf("create the topic: HTTP %d", code)
	}
	cl := newTxnClient(t, c.serviceURL(), cfg.opTimeout, 2*time.Second)
	plain := c.client(c.serviceURL())

	// The consumer reads throughout, up to the sentinels.
	live, err := plain.Subscribe(pulsar.ConsumerOptions{Topic: txnCheckTopic, SubscriptionName: "live",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	var liveMu sync.Mutex
	var liveReads []txncheck.Read
	liveDone := make(chan error, 1)
	go func() {
		sentinels := map[int]bool{}
		for len(sentinels) < cfg.partitions {
			m, err := live.Receive(ctx)
			if err != nil {
				liveDone <- err
				return
			}
			live.Ack(m)
			p := int(m.ID().PartitionIdx())
			if v := string(m.Payload()); strings.HasPrefix(v, "sentinel-") {
				sentinels[p] = true
			} else {
				liveMu.Lock()
				liveReads = append(liveReads, txncheck.Read{Partition: p, Value: v, ID: m.ID().String()})
				liveMu.Unlock()
			}
		}
		liveDone <- nil
	}()

	// The inputs, and the consumer the writers share to acknowledge them
	// in their transactions. One input per entry: pulsar-client-go v0.19.0 without batch-index
	// acknowledgement answers AckWithTxn of a batched message that is not
	// its batch's last with success and sends nothing (ackIDCommon), so
	// the transaction does not acknowledge it; the last one acknowledges
	// the whole entry in its own transaction.
	inProd, err := plain.CreateProducer(pulsar.ProducerOptions{Topic: txnCheckInputs, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	inputs := make([]string, cfg.inputs)
	for i := range inputs {
		inputs[i] = fmt.Sprintf("in-%d", i)
		inProd.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(inputs[i])}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Errorf("input %s: %v", inputs[i], err)
			}
		})
	}
	if err := inProd.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	work, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: txnCheckInputs, SubscriptionName: "work", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, NackRedeliveryDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}

	writers := make([]*txnWriter, cfg.writers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		// Batching off: pulsar-client-go issue 1498 (TestTxnProduceCommitAbort).
		// A send ends within opTimeout, also inside the client: its abort
		// waits for its sends in flight.
		prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: txnCheckTopic, DisableBatching: true,
			MessageRouter: partitionRouter, SendTimeout: cfg.opTimeout})
		if err != nil {
			t.Fatal(err)
		}
		w := &txnWriter{id: i, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i+1))), prod: prod, work: work, errs: map[string]int{}}
		writers[i] = w
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx, cl, stop) }()
	}

	faults := txnNemesis(t, ctx, c, etcd, cfg, rng, writers)
	close(stop)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the run outlived its deadline: %v", ctx.Err())
	}

	// Every transaction has ended (an unknown outcome is settled by the
	// coordinator, by its timeout if nothing else) before the sentinels:
	// what they follow is final.
	var h txncheck.History
	newErrs, errs := 0, map[string]int{}
	for _, w := range writers {
		for i, id := range w.ids {
			waitFor(t, ctx, fmt.Sprintf("transaction %v (%s) ended", id, w.txns[i].Name), func() bool {
				s := c.txnStatus(c.nodes[0], id)
				return s == "" || s == "COMMITTED" || s == "ABORTED"
			})
		}
		h.Txns = append(h.Txns, w.txns...)
		newErrs += w.newErrs
		for k, n := range w.errs {
			errs[k] += n
		}
	}
	sp, err := plain.CreateProducer(pulsar.ProducerOptions{Topic: txnCheckTopic, DisableBatching: true, MessageRouter: partitionRouter})
	if err != nil {
		t.Fatal(err)
	}
	for p := range cfg.partitions {
		sendTo(t, ctx, sp, p, fmt.Sprintf("sentinel-%d", p), nil)
	}
	final := txncheck.View{Name: "readers", Complete: true, Ordered: true}
	for p := range cfg.partitions {
		r, err := plain.CreateReader(pulsar.ReaderOptions{Topic: fmt.Sprintf("%s-partition-%d", txnCheckTopic, p),
			StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range readToSentinel(t, ctx, r, fmt.Sprintf("sentinel-%d", p)) {
			final.Reads = append(final.Reads, txncheck.Read{Partition: p, Value: string(m.Payload()), ID: m.ID().String()})
		}
		r.Close()
	}
	h.Views = append(h.Views, final)
	// The consumer reaches the sentinels too: the readers read them, so
	// they are there to dispatch.
	var liveErr error
	select {
	case liveErr = <-liveDone:
	case <-time.After(txnCheckConsumerLag):
		liveErr = fmt.Errorf("not within %v of the readers", txnCheckConsumerLag)
	}
	liveMu.Lock()
	consumer := txncheck.View{Name: "consumer", Complete: liveErr == nil, Reads: slices.Clone(liveReads)}
	liveMu.Unlock()
	if liveErr != nil {
		t.Errorf("the consumer did not reach the sentinels: %v (%d reads)", liveErr, len(consumer.Reads))
	}
	h.Views = append(h.Views, consumer)

	// The inputs left: a consumer of the subscription, once the writers'
	// consumer is gone (what it held is redelivered), receives the inputs
	// no committed transaction acknowledged — up to a sentinel, and until
	// every one expected has come (an aborted transaction's
	// acknowledgements are dropped after its end).
	work.Close()
	h.Inputs = inputs
	if err := inProd.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := inProd.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("sentinel-in")}); err != nil {
		t.Fatal(err)
	}
	h.Left = txnCheckLeft(t, ctx, plain, txncheck.LeftExpected(h))

	res := txncheck.Check(h)
	s := res.Stats
	t.Logf("%d transactions (%d committed, %d aborted, %d unknown: %d of them committed), %d values, %d reads; "+
		"inputs: %d acknowledged by committed transactions, %d left of %d; %d NEW_TXN failures; %d faults: %s",
		s.Txns, s.Committed, s.Aborted, s.Unknown, s.UnknownSeen, s.Values, s.Reads,
		s.Acked, s.Left, len(inputs), newErrs, len(faults), strings.Join(faults, "; "))
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("client error ×%d: %s", errs[k], k)
	}
	for _, v := range res.Violations {
		t.Errorf("violation: %v", v)
	}
	if s.Committed == 0 || s.Aborted == 0 || s.Acked == 0 {
		t.Errorf("the run committed %d and aborted %d transactions, acknowledged %d inputs: it checks too little", s.Committed, s.Aborted, s.Acked)
	}
	t.Logf("violations: %d (seed %d)", len(res.Violations), cfg.seed)
}

// txnCheckLeft receives, on a new consumer of the input subscription,
// up to the sentinel and until every input of expected has come (bounded
// by txnCheckConsumerLag), and returns what it received.
func txnCheckLeft(t *testing.T, ctx context.Context, cl pulsar.Client, expected []string) []txncheck.Read {
	t.Helper()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: txnCheckInputs, SubscriptionName: "work", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	missing := map[string]bool{}
	for _, in := range expected {
		missing[in] = true
	}
	lctx, cancel := context.WithTimeout(ctx, txnCheckConsumerLag)
	defer cancel()
	var left []txncheck.Read
	for sentinel := false; !sentinel || len(missing) > 0; {
		m, err := cons.Receive(lctx)
		if err != nil {
			t.Logf("inputs left: %v; %d expected not received", err, len(missing))
			return left
		}
		cons.Ack(m)
		switch v := string(m.Payload()); {
		case v == "sentinel-in":
			sentinel = true
		default:
			delete(missing, v)
			left = append(left, txncheck.Read{Value: v, ID: m.ID().String()})
		}
	}
	return left
}

// txnNemesis injects faults in turn — kill -9 of a partition's owner, of
// the node serving an open transaction's coordinator, of the etcd leader
// — each repaired (restarted) cfg.faultEvery later, until cfg.duration is
// over (one of each with no duration), and returns what it did. It waits
// for a restarted node to be ready and for etcd to be healthy before the
// next fault.
func txnNemesis(t *testing.T, ctx context.Context, c *lgCluster, etcd *testservers.EtcdCluster,
	cfg txnCheckConfig, rng *rand.Rand, writers []*txnWriter) []string {
	t.Helper()
	pace := func() {
		select {
		case <-ctx.Done():
		case <-time.After(cfg.faultEvery):
		}
	}
	start := time.Now()
	var done []string
	note := func(f string, args ...any) {
		s := fmt.Sprintf("%.1fs ", time.Since(start).Seconds()) + fmt.Sprintf(f, args...)
		t.Logf("nemesis: %s", s)
		done = append(done, s)
	}
	restartAfter := func(victim *lakegateProc) {
		victim.kill(t)
		pace()
		c.restart(victim)
	}
	for round := 0; ; round++ {
		for _, fault := range []string{"owner", "coordinator", "etcd"} {
			if ctx.Err() != nil || (round > 0 && time.Since(start) >= cfg.duration) {
				return done
			}
			pace()
			switch fault {
			case "owner":
				p := rng.IntN(cfg.partitions)
				victim := c.nodeByURL(c.lookup(c.nodes[rng.IntN(len(c.nodes))], fmt.Sprintf("%s-partition-%d", txnCheckTopic, p)))
				note("kill -9 %s (owner of partition %d)", victim.name, p)
				restartAfter(victim)
			case "coordinator":
				tc := uint64(rng.IntN(16))
				for _, w := range writers {
					if o := w.open.Load(); o != 0 {
						tc = o - 1
						break
					}
				}
				victim := c.servingCoordinator(tc)
				if victim == nil {
					victim = c.nodes[rng.IntN(len(c.nodes))]
				}
				note("kill -9 %s (serving coordinator %d)", victim.name, tc)
				restartAfter(victim)
			case "etcd":
				m := etcd.Leader()
				if m < 0 {
					m = rng.IntN(len(etcd.Members))
				}
				note("kill -9 etcd member %s (leader)", etcd.Members[m].Name)
				etcd.Stop(m)
				pace()
				etcd.Start(m)
				etcd.WaitHealthy()
			}
		}
	}
}

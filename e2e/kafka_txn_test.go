package e2e

// Kafka transactions (docs/kafka.md, "Transactions") with franz-go's kgo
// client over TCP against a real node, on the transaction coordinator the
// Pulsar clients use: a transaction's records reach read_committed
// consumers (and Pulsar consumers) when it commits, all at once, and
// never when it aborts; consume-transform-produce moves the group's
// offsets with the outputs; a newer producer of a transactional.id fences
// the older; a transaction timed out by the coordinator aborts. Visibility
// is checked without waiting: records produced outside the transaction
// after it ended (sentinels, one per partition) arrive, and nothing of an
// aborted transaction before them. Run:
// go test -p 1 -count=1 -run TestKafkaTxn ./e2e/

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/txn"
)

// kafkaClients makes kgo clients of a node or a cluster.
type kafkaClients interface {
	kafkaClient(opts ...kgo.Opt) *kgo.Client
}

// txnProducer is a transactional kgo client producing to topic.
func txnProducer(c kafkaClients, tid, topic string, opts ...kgo.Opt) *kgo.Client {
	return c.kafkaClient(append([]kgo.Opt{kgo.TransactionalID(tid), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// produceTxnRecords produces one record per value to partition i % parts
// in the client's open transaction.
func produceTxnRecords(t *testing.T, ctx context.Context, cl *kgo.Client, parts int, values ...string) {
	t.Helper()
	for i, v := range values {
		r := &kgo.Record{Value: []byte(v), Partition: int32(i % parts)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
}

// readUntilSentinels produces a sentinel to every partition of topic
// (outside any transaction), then reads the topic read_committed from the
// start until every sentinel arrived, and returns the other values read.
func readUntilSentinels(t *testing.T, c kafkaClients, topic string, parts int, tag string) []string {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	plain := c.kafkaClient(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range parts {
		if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("sentinel-" + tag), Partition: int32(p)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := c.kafkaClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	for seen := 0; seen < parts; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("sentinels: %d of %d (read %v): %v", seen, parts, got, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			switch v := string(r.Value); {
			case v == "sentinel-"+tag:
				seen++
			case strings.HasPrefix(v, "sentinel-"):
			default:
				got = append(got, v)
			}
		}
	}
	slices.Sort(got)
	return got
}

func TestKafkaTxnCommitAbort(t *testing.T) {
	c := startKafkaNode(t)
	ctx := ctxFor(t, 2*time.Minute)
	admin := c.kafkaClient()
	createKafkaTopic(t, admin, "txn-out", 3)

	// A Pulsar consumer of the same topic sees what a read_committed
	// Kafka consumer sees.
	pc := c.client()
	pcons, err := pc.Subscribe(pulsar.ConsumerOptions{Topic: "persistent://public/default/txn-out", SubscriptionName: "p",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer pcons.Close()

	cl := txnProducer(c, "tx-a", "txn-out")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, cl, 3, "c0", "c1", "c2", "c3", "c4", "c5")
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got, want := readUntilSentinels(t, c, "txn-out", 3, "1"), []string{"c0", "c1", "c2", "c3", "c4", "c5"}; !slices.Equal(got, want) {
		t.Fatalf("after the commit, read_committed read %v, want %v", got, want)
	}

	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, cl, 3, "a0", "a1", "a2")
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if got, want := readUntilSentinels(t, c, "txn-out", 3, "2"), []string{"c0", "c1", "c2", "c3", "c4", "c5"}; !slices.Equal(got, want) {
		t.Fatalf("after the abort, read_committed read %v, want %v", got, want)
	}
	// read_uncommitted reads the same: aborted records never enter a log.
	cons := c.kafkaClient(kgo.ConsumeTopics("txn-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var all []string
	for len(all) < 12 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_uncommitted read %v: %v", all, ctx.Err())
		}
		for _, r := range fs.Records() {
			all = append(all, string(r.Value))
		}
	}
	if slices.ContainsFunc(all, func(v string) bool { return strings.HasPrefix(v, "a") }) {
		t.Fatalf("read_uncommitted read an aborted record: %v", all)
	}

	// The Pulsar consumer: the committed records and the sentinels (12),
	// nothing aborted.
	var pulsarGot []string
	for len(pulsarGot) < 12 {
		m, err := pcons.Receive(ctx)
		if err != nil {
			t.Fatalf("pulsar consumer after %v: %v", pulsarGot, err)
		}
		pcons.Ack(m)
		pulsarGot = append(pulsarGot, string(m.Payload()))
	}
	if slices.ContainsFunc(pulsarGot, func(v string) bool { return strings.HasPrefix(v, "a") }) {
		t.Fatalf("the Pulsar consumer read an aborted record: %v", pulsarGot)
	}

	// An EndTxn with no transaction open: INVALID_TXN_STATE, as Kafka.
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "tx-a", 1, 0, true
	resp, err := end.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.InvalidProducerIDMapping) && !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("EndTxn of another producer id: %v", err)
	}
}

func TestKafkaTxnConsumeTransformProduce(t *testing.T) {
	c := startKafkaNode(t)
	ctx := ctxFor(t, 2*time.Minute)
	admin := c.kafkaClient()
	createKafkaTopic(t, admin, "ctp-in", 2)
	createKafkaTopic(t, admin, "ctp-out", 2)
	in := c.kafkaClient(kgo.DefaultProduceTopic("ctp-in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 6 {
		if err := in.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "in-%d", i), Partition: int32(i % 2)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// round consumes every input not committed yet, produces its outputs
	// and ends the transaction (commit or abort); it returns the inputs
	// it read.
	round := func(commit kgo.TransactionEndTry) []string {
		t.Helper()
		sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.tn.Kafka.Addr().String()),
			kgo.TransactionalID("ctp"), kgo.ConsumerGroup("ctp-g"), kgo.ConsumeTopics("ctp-in"),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("ctp-out"))
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		var read []string
		for len(read) < 6 {
			fs := sess.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %v: %v", read, ctx.Err())
			}
			fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
			for _, r := range fs.Records() {
				read = append(read, string(r.Value))
				out := &kgo.Record{Value: []byte("out-" + strings.TrimPrefix(string(r.Value), "in-"))}
				if err := sess.ProduceSync(ctx, out).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
		}
		committed, err := sess.End(ctx, commit)
		if err != nil {
			t.Fatalf("end (commit %v): %v", commit, err)
		}
		if committed != bool(commit) {
			t.Fatalf("end: committed %v, asked %v", committed, commit)
		}
		slices.Sort(read)
		return read
	}
	want := []string{"in-0", "in-1", "in-2", "in-3", "in-4", "in-5"}
	if got := round(kgo.TryAbort); !slices.Equal(got, want) {
		t.Fatalf("first round read %v", got)
	}
	// Aborted: the offsets did not move (the next round reads it all
	// again) and no output is visible.
	if got := readUntilSentinels(t, c, "ctp-out", 2, "1"); len(got) != 0 {
		t.Fatalf("outputs of an aborted transaction: %v", got)
	}
	if got := round(kgo.TryCommit); !slices.Equal(got, want) {
		t.Fatalf("second round read %v (the abort moved the offsets?)", got)
	}
	if got := readUntilSentinels(t, c, "ctp-out", 2, "2"); !slices.Equal(got, []string{"out-0", "out-1", "out-2", "out-3", "out-4", "out-5"}) {
		t.Fatalf("outputs after the commit: %v", got)
	}
	// Committed: the group's offsets are past every input.
	offs, err := fetchGroupOffsets(ctx, admin, "ctp-g", "ctp-in")
	if err != nil {
		t.Fatal(err)
	}
	if offs[0] != 3 || offs[1] != 3 {
		t.Fatalf("committed offsets %v, want 3 and 3", offs)
	}
}

// fetchGroupOffsets reads a group's committed offsets of a topic
// (RequireStable: an offset pending in an open transaction is an error).
func fetchGroupOffsets(ctx context.Context, cl *kgo.Client, group, topic string) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{0, 1}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	req.RequireStable = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
				}
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

func TestKafkaTxnFencing(t *testing.T) {
	c := startKafkaNode(t)
	ctx := ctxFor(t, 2*time.Minute)
	createKafkaTopic(t, c.kafkaClient(), "fence", 2)

	old := txnProducer(c, "fenced", "fence")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, old, 2, "old-0", "old-1")

	// The newer producer of the id: its InitProducerId aborts the old
	// one's open transaction and fences it.
	cur := txnProducer(c, "fenced", "fence")
	if err := cur.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, cur, 2, "new-0", "new-1")

	// The zombie's produce and commit fail fenced.
	err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("old-2"), Partition: 0}).FirstErr()
	if err == nil {
		t.Fatal("the fenced producer's produce succeeded")
	}
	t.Logf("the fenced producer's produce: %v", err)
	err = old.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Fatal("the fenced producer's commit succeeded")
	}
	t.Logf("the fenced producer's commit: %v", err)
	// Its abort (franz-go only marks its producer id for a reload) and
	// next transaction re-initialize (KIP-360, its producer id and old
	// epoch): fenced, for good.
	if err := old.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("the fenced producer's abort: %v", err)
	}
	err = old.BeginTransaction()
	if err == nil {
		err = old.ProduceSync(ctx, &kgo.Record{Value: []byte("old-3"), Partition: 0}).FirstErr()
	}
	if !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("the fenced producer's next transaction: %v, want PRODUCER_FENCED", err)
	}

	if err := cur.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the current producer's commit: %v", err)
	}
	if got, want := readUntilSentinels(t, c, "fence", 2, "1"), []string{"new-0", "new-1"}; !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v (the zombie's records never)", got, want)
	}

	// A raw request of the old epoch: PRODUCER_FENCED (EndTxn v2+).
	init := kmsg.NewPtrInitProducerIDRequest()
	tid := "raw"
	init.TransactionalID, init.TransactionTimeoutMillis = &tid, 60_000
	admin := c.kafkaClient()
	first, err := init.RequestWith(ctx, admin)
	if err != nil || first.ErrorCode != 0 {
		t.Fatalf("init: %v %v", first, err)
	}
	second, err := init.RequestWith(ctx, admin)
	if err != nil || second.ErrorCode != 0 || second.ProducerID != first.ProducerID || second.ProducerEpoch != first.ProducerEpoch+1 {
		t.Fatalf("second init: %+v %v (first %+v)", second, err, first)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 3
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = tid, first.ProducerID, first.ProducerEpoch, false
	resp, err := end.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.ErrorCode; code != kerr.ProducerFenced.Code {
		t.Fatalf("EndTxn of the old epoch: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}
}

func TestKafkaTxnTimeout(t *testing.T) {
	c := startKafkaNode(t)
	ctx := ctxFor(t, 2*time.Minute)
	createKafkaTopic(t, c.kafkaClient(), "tmo", 1)
	cl := txnProducer(c, "tmo", "tmo", kgo.TransactionTimeout(time.Second))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, cl, 1, "late-0")

	// The coordinator aborts it once its timeout passed.
	waitFor(t, ctx, "the transaction to time out", func() bool {
		for tc := range uint64(c.tn.Txn.Coordinators()) {
			txns, err := c.tn.Txn.List(ctx, tc)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range txns {
				if rec.State != txn.Aborted {
					return false
				}
			}
		}
		return true
	})
	err := cl.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("commit after the timeout: %v, want PRODUCER_FENCED (as Kafka, whose coordinator bumps a timed-out producer)", err)
	}
	if got := readUntilSentinels(t, c, "tmo", 1, "1"); len(got) != 0 {
		t.Fatalf("records of a timed-out transaction: %v", got)
	}
	// A new producer of the id starts over.
	next := txnProducer(c, "tmo", "tmo")
	if err := next.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, next, 1, "ok-0")
	if err := next.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := readUntilSentinels(t, c, "tmo", 1, "2"); !slices.Equal(got, []string{"ok-0"}) {
		t.Fatalf("read %v, want ok-0", got)
	}
}

// Offsets committed in a transaction are durable before it ends: the node
// that saved them restarts (its wait for the outcome lost), the producer
// ends the transaction on the restarted node, and the next OffsetFetch
// settles them — applied when it committed, dropped when it aborted.
// While the transaction is open, RequireStable answers
// UNSTABLE_OFFSET_COMMIT.
func TestKafkaTxnOffsetsSurviveRestart(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	dir := t.TempDir()
	c := startNode(t, testnode.Config{Node: node.Config{DataDir: dir}, Kafka: true})
	admin := c.kafkaClient()
	createKafkaTopic(t, admin, "so", 2)

	pid, epoch := rawInitTxn(t, ctx, admin, "so")
	rawAddOffsets(t, ctx, admin, "so", "so-g", pid, epoch)
	rawTxnCommitOffsets(t, ctx, admin, "so", "so-g", pid, epoch, "so", 5)
	if _, err := fetchGroupOffsets(ctx, admin, "so-g", "so"); !errors.Is(err, kerr.UnstableOffsetCommit) {
		t.Fatalf("offsets of an open transaction, RequireStable: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}
	c.stop()

	c2 := startNode(t, testnode.Config{Node: node.Config{DataDir: dir}, Kafka: true})
	admin2 := c2.kafkaClient()
	rawEndTxn(t, ctx, admin2, "so", pid, epoch, true)
	offs, err := fetchGroupOffsets(ctx, admin2, "so-g", "so")
	if err != nil || offs[0] != 5 || offs[1] != 5 {
		t.Fatalf("after the commit on the restarted node: %v %v, want 5 and 5", offs, err)
	}

	// An aborted transaction's offsets are dropped.
	rawAddOffsets(t, ctx, admin2, "so", "so-g", pid, epoch)
	rawTxnCommitOffsets(t, ctx, admin2, "so", "so-g", pid, epoch, "so", 9)
	rawEndTxn(t, ctx, admin2, "so", pid, epoch, false)
	offs, err = fetchGroupOffsets(ctx, admin2, "so-g", "so")
	if err != nil || offs[0] != 5 || offs[1] != 5 {
		t.Fatalf("after the abort: %v %v, want 5 and 5", offs, err)
	}
}

// rawInitTxn is InitProducerId of a transactional.id.
func rawInitTxn(t *testing.T, ctx context.Context, cl *kgo.Client, tid string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = &tid, 60_000
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func rawAddOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, tid, group string, pid int64, epoch int16) {
	t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = tid, pid, epoch, group
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("AddOffsetsToTxn: %v", err)
	}
}

// rawTxnCommitOffsets commits offset for partitions 0 and 1 of topic in
// the transaction.
func rawTxnCommitOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, tid, group string, pid int64, epoch int16, topic string, offset int64) {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = tid, group, pid, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for p := range int32(2) {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("TxnOffsetCommit of partition %d: %v", rp.Partition, err)
			}
		}
	}
}

func rawEndTxn(t *testing.T, ctx context.Context, cl *kgo.Client, tid string, pid int64, epoch int16, commit bool) {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = tid, pid, epoch, commit
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("EndTxn (commit %v): %v", commit, err)
	}
}

// lgKafkaClients makes kgo clients of an lgCluster's Kafka listeners.
type lgKafkaClients struct{ c *lgCluster }

func (k lgKafkaClients) kafkaClient(opts ...kgo.Opt) *kgo.Client {
	k.c.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(k.c.kafkaSeeds()...), kgo.RequestTimeoutOverhead(10 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		k.c.t.Fatal(err)
	}
	k.c.t.Cleanup(cl.Close)
	return cl
}

// TestKafkaTxnCluster: transactions on three `lakegate serve` processes,
// where the transactional.id's coordinator, the partitions' owners and
// the group's coordinator are spread over the nodes: a transaction to six
// partitions commits and one aborts; a consume-transform-produce round
// commits its offsets; a newer producer fences the older.
func TestKafkaTxnCluster(t *testing.T) {
	lc := startLGCluster(t, 3, "file://"+t.TempDir(), append([]string{"--kafka-addr", "127.0.0.1:0"}, keepAllFlags...)...)
	c := lgKafkaClients{lc}
	ctx := ctxFor(t, 3*time.Minute)
	start := time.Now()
	admin := c.kafkaClient()
	createKafkaTopic(t, admin, "ct-out", 6)
	createKafkaTopic(t, admin, "ct-in", 3)

	// Several ids: their coordinators land on different nodes.
	want := []string(nil)
	for i := range 3 {
		cl := txnProducer(c, fmt.Sprintf("ct-%d", i), "ct-out")
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var vals []string
		for p := range 6 {
			vals = append(vals, fmt.Sprintf("c%d-%d", i, p))
		}
		produceTxnRecords(t, ctx, cl, 6, vals...)
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		want = append(want, vals...)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produceTxnRecords(t, ctx, cl, 6, "aborted-0", "aborted-1", "aborted-2", "aborted-3", "aborted-4", "aborted-5")
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatalf("abort %d: %v", i, err)
		}
		t.Logf("%v: transactional.id ct-%d committed and aborted", time.Since(start).Round(time.Millisecond), i)
	}
	slices.Sort(want)
	if got := readUntilSentinels(t, c, "ct-out", 6, "1"); !slices.Equal(got, want) {
		t.Fatalf("read_committed read %v\nwant %v", got, want)
	}

	t.Logf("%v: read", time.Since(start).Round(time.Millisecond))
	// Zombie fencing across nodes.
	old := txnProducer(c, "ct-0", "ct-out")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, old, 6, "zombie-0", "zombie-1")
	cur := txnProducer(c, "ct-0", "ct-out")
	if err := cur.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, cur, 6, "new-0", "new-1")
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-2"), Partition: 2}).FirstErr(); err == nil {
		t.Fatal("the fenced producer's produce succeeded")
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer's commit succeeded")
	}
	if err := cur.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	want = append(want, "new-0", "new-1")
	slices.Sort(want)
	if got := readUntilSentinels(t, c, "ct-out", 6, "2"); !slices.Equal(got, want) {
		t.Fatalf("after the fencing read %v\nwant %v", got, want)
	}

	t.Logf("%v: fenced", time.Since(start).Round(time.Millisecond))
	// Consume-transform-produce: the inputs' offsets commit with the
	// outputs.
	in := c.kafkaClient(kgo.DefaultProduceTopic("ct-in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 6 {
		if err := in.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "in-%d", i), Partition: int32(i % 3)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(lc.kafkaSeeds()...), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.TransactionalID("ct-ctp"), kgo.ConsumerGroup("ct-g"), kgo.ConsumeTopics("ct-in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("ct-out"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Begin(); err != nil {
		t.Fatal(err)
	}
	for read := 0; read < 6; {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d inputs: %v", read, ctx.Err())
		}
		for _, r := range fs.Records() {
			read++
			if err := sess.ProduceSync(ctx, &kgo.Record{Value: []byte("out-" + string(r.Value)), Partition: r.Partition}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if committed, err := sess.End(ctx, kgo.TryCommit); err != nil || !committed {
		t.Fatalf("end: committed %v, %v", committed, err)
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "ct-g"
	req.Groups, req.RequireStable = append(req.Groups, rg), true
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	got, codes := map[int32]int64{}, map[int32]error{}
	for _, g := range resp.Groups {
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == "ct-in" {
					got[p.Partition], codes[p.Partition] = p.Offset, kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
	}
	if got[0] != 2 || got[1] != 2 || got[2] != 2 || codes[0] != nil || codes[1] != nil || codes[2] != nil {
		t.Fatalf("the group's committed offsets: %v (errors %v), want 2 on each of 3 partitions", got, codes)
	}
}

// With transactions.enabled off, a transactional producer is told so
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, fatal in the clients) instead of
// hanging.
func TestKafkaTxnDisabled(t *testing.T) {
	c := startNode(t, testnode.Config{Node: node.Config{DataDir: t.TempDir()}, Kafka: true, DisableTransactions: true})
	ctx := ctxFor(t, time.Minute)
	createKafkaTopic(t, c.kafkaClient(), "off", 1)
	tid := "off"
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = &tid, 60_000
	// kgo finds the transaction coordinator first: FindCoordinator answers
	// the error.
	resp, err := req.RequestWith(ctx, c.kafkaClient())
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("InitProducerId: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	// franz-go initializes the producer id at BeginTransaction or at the
	// first produce.
	cl := txnProducer(c, "off", "off")
	err = cl.BeginTransaction()
	if err == nil {
		err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("transactional produce: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
}

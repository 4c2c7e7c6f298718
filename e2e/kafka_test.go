package e2e

// The Kafka listener (docs/kafka.md) with franz-go's kgo client over TCP
// against a real node: produce and fetch, the cross-protocol reads (a
// Kafka record read by a Pulsar consumer and the other way round), offsets,
// idempotent resends.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
)

// startKafkaNode starts a node with the Kafka listener.
func startKafkaNode(t *testing.T) *cluster {
	t.Helper()
	return startNode(t, testnode.Config{Node: node.Config{DataDir: t.TempDir()}, Kafka: true})
}

// kafkaClient is a kgo client of c's Kafka listener.
func (c *cluster) kafkaClient(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.tn.Kafka.Addr().String()), kgo.RequestTimeoutOverhead(10 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// createKafkaTopic creates a topic with CreateTopics.
func createKafkaTopic(t *testing.T, cl *kgo.Client, name string, partitions int32) {
	t.Helper()
	if err := createTopicErrN(ctxFor(t, 30*time.Second), cl, name, partitions); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// createTopicErr creates a one-partition topic, returning the answer's error.
func createTopicErr(ctx context.Context, cl *kgo.Client, name string) error {
	return createTopicErrN(ctx, cl, name, 1)
}

func createTopicErrN(ctx context.Context, cl *kgo.Client, name string, partitions int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
}

// consumeKafka reads n records of topic from the start of every partition.
func consumeKafka(t *testing.T, c *cluster, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := c.kafkaClient(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx := ctxFor(t, 60*time.Second)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestKafkaProduceFetch(t *testing.T) {
	c := startKafkaNode(t)
	cl := c.kafkaClient(kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createKafkaTopic(t, cl, "orders", 3)
	ctx := ctxFor(t, 60*time.Second)
	const n = 600
	for i := range n {
		r := &kgo.Record{
			Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "v%d", i), Partition: int32(i % 3),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}, {Key: "bin", Value: []byte{0xff, 0x00, byte(i)}}},
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)),
		}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Value, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := consumeKafka(t, c, "orders", n)
	if len(got) != n {
		t.Fatalf("got %d records, want %d", len(got), n)
	}
	next := map[int32]int64{}
	seen := map[string]bool{}
	for _, r := range got {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d (order or gaps)", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		var i int
		if _, err := fmt.Sscanf(string(r.Value), "v%d", &i); err != nil {
			t.Fatalf("value %q", r.Value)
		}
		if int32(i%3) != r.Partition || string(r.Key) != fmt.Sprintf("k%d", i%7) {
			t.Fatalf("record %d: partition %d key %q", i, r.Partition, r.Key)
		}
		if len(r.Headers) != 2 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != fmt.Sprint(i) ||
			r.Headers[1].Key != "bin" || !slices.Equal(r.Headers[1].Value, []byte{0xff, 0x00, byte(i)}) {
			t.Fatalf("record %d: headers %+v", i, r.Headers)
		}
		if r.Timestamp.UnixMilli() != 1_700_000_000_000+int64(i) {
			t.Fatalf("record %d: timestamp %v", i, r.Timestamp)
		}
		seen[string(r.Value)] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct records of %d", len(seen), n)
	}
	// Per-partition order: partition p holds values p, p+3, p+6, … in order.
	for p := range int32(3) {
		var vals []int
		for _, r := range got {
			if r.Partition == p {
				var i int
				fmt.Sscanf(string(r.Value), "v%d", &i)
				vals = append(vals, i)
			}
		}
		if !slices.IsSorted(vals) {
			t.Fatalf("partition %d out of order: %v", p, vals[:min(len(vals), 20)])
		}
	}
}

// TestKafkaCrossProtocol: a Kafka producer's records read by a Pulsar
// consumer, and a Pulsar producer's messages read by a Kafka consumer, on
// one topic: key, value, headers/properties and timestamps the same.
func TestKafkaCrossProtocol(t *testing.T) {
	c := startKafkaNode(t)
	kc := c.kafkaClient(kgo.DefaultProduceTopic("mixed"), kgo.AllowAutoTopicCreation())
	pc := c.client()
	ctx := ctxFor(t, 60*time.Second)
	topic := "persistent://public/default/mixed"
	cons, err := pc.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "p", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ts := time.UnixMilli(1_700_000_123_000)
	for i := range 10 {
		err := kc.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "kafka-%d", i),
			Headers: []kgo.RecordHeader{{Key: "from", Value: []byte("kafka")}}, Timestamp: ts}).FirstErr()
		if err != nil {
			t.Fatal(err)
		}
	}
	prod, err := pc.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 10 {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i), Payload: fmt.Appendf(nil, "pulsar-%d", i),
			Properties: map[string]string{"from": "pulsar"}, EventTime: ts}); err != nil {
			t.Fatal(err)
		}
	}
	// The Pulsar consumer reads all 20, in order.
	for i := range 20 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		from, j := "kafka", i
		if i >= 10 {
			from, j = "pulsar", i-10
		}
		if string(m.Payload()) != fmt.Sprintf("%s-%d", from, j) || m.Key() != fmt.Sprintf("k%d", j) ||
			m.Properties()["from"] != from || !m.EventTime().Equal(ts) {
			t.Fatalf("pulsar message %d: %q key %q props %v event %v", i, m.Payload(), m.Key(), m.Properties(), m.EventTime())
		}
		cons.Ack(m)
	}
	// The Kafka consumer reads the same 20.
	got := consumeKafka(t, c, "mixed", 20)
	for i, r := range got {
		from, j := "kafka", i
		if i >= 10 {
			from, j = "pulsar", i-10
		}
		if string(r.Value) != fmt.Sprintf("%s-%d", from, j) || string(r.Key) != fmt.Sprintf("k%d", j) ||
			len(r.Headers) != 1 || string(r.Headers[0].Value) != from || !r.Timestamp.Equal(ts) || r.Offset != int64(i) {
			t.Fatalf("kafka record %d: %q key %q headers %v ts %v offset %d", i, r.Value, r.Key, r.Headers, r.Timestamp, r.Offset)
		}
	}
}

// rawBatch encodes values as one uncompressed RecordBatch v2 of an
// idempotent producer (pid, base sequence seq), as a client sends it.
func rawBatch(pid int64, seq int32, values ...string) []byte {
	var raw []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
	}
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000,
		ProducerID: pid, FirstSequence: seq, NumRecords: int32(len(values)), Records: raw}
	b.Length = int32(49 + len(raw))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// produceRaw sends one batch to partition 0 of topic with acks=all,
// retrying the answers a client retries (NOT_LEADER_OR_FOLLOWER), and
// returns the base offset answered (-1 for a duplicate).
func produceRaw(t *testing.T, cl *kgo.Client, topic string, batch []byte) int64 {
	t.Helper()
	off, _ := produceRawCounted(t, cl, topic, batch)
	return off
}

// produceRawCounted is produceRaw, also returning how many answers were
// retried.
func produceRawCounted(t *testing.T, cl *kgo.Client, topic string, batch []byte) (int64, int) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for retries := 0; ; retries++ {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		err = kerr.ErrorForCode(p.ErrorCode)
		if errors.Is(err, kerr.NotLeaderForPartition) {
			continue
		}
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		return p.BaseOffset, retries
	}
}

// TestKafkaIdempotentResend: an idempotent producer's resent batch is
// appended once — on the same node, and after the node restarted (the
// sequences are persisted with the partition) — on a topic whose
// deduplication is off for Pulsar producers.
func TestKafkaIdempotentResend(t *testing.T) {
	dir := t.TempDir()
	c := startNode(t, testnode.Config{Node: node.Config{DataDir: dir}, Kafka: true})
	cl := c.kafkaClient()
	createKafkaTopic(t, cl, "idem", 1)
	ctx := ctxFor(t, 30*time.Second)
	init, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %d", err, init.ErrorCode)
	}
	pid := init.ProducerID
	// A topic the listener created keeps a deduplication state from the
	// start: the first idempotent batch is taken at once.
	if off, retries := produceRawCounted(t, cl, "idem", rawBatch(pid, 0, "a", "b", "c")); off != 0 || retries != 0 {
		t.Fatalf("first batch at %d after %d retried answers", off, retries)
	}
	if off := produceRaw(t, cl, "idem", rawBatch(pid, 0, "a", "b", "c")); off != -1 {
		t.Fatalf("resent batch answered offset %d, want -1 (a duplicate)", off)
	}
	if off := produceRaw(t, cl, "idem", rawBatch(pid, 3, "d")); off != 3 {
		t.Fatalf("next batch at %d", off)
	}
	// A topic created on the Pulsar side gets the state at its first
	// idempotent batch (a reload, which the client retries through), and
	// judges resends as well.
	c.createPartitioned("persistent://public/default/idem-pulsar", 1)
	if off := produceRaw(t, cl, "idem-pulsar", rawBatch(pid, 0, "x")); off != 0 {
		t.Fatalf("first batch on the Pulsar-made topic at %d", off)
	}
	if off := produceRaw(t, cl, "idem-pulsar", rawBatch(pid, 0, "x")); off != -1 {
		t.Fatalf("resend on the Pulsar-made topic answered offset %d, want -1", off)
	}
	// A Pulsar producer on the same topic is not judged by sequence.
	pc := c.client()
	for range 2 {
		p, err := pc.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/idem-partition-0", Name: "same"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("p")}); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	c.stop()

	c = startNode(t, testnode.Config{Node: node.Config{DataDir: dir}, Kafka: true})
	cl = c.kafkaClient()
	if off := produceRaw(t, cl, "idem", rawBatch(pid, 3, "d")); off != -1 {
		t.Fatalf("batch resent after a restart answered offset %d, want -1 (a duplicate)", off)
	}
	got := consumeKafka(t, c, "idem", 6)
	var vals []string
	for _, r := range got {
		vals = append(vals, string(r.Value))
	}
	if want := []string{"a", "b", "c", "d", "p", "p"}; !slices.Equal(vals, want) {
		t.Fatalf("log holds %q, want %q", vals, want)
	}
}

// TestKafkaConsumerGroup: two kgo consumers of one group share a topic's
// partitions (cooperative-sticky), commit, and a consumer that joins
// later resumes from the committed offsets; the group's offsets are
// Pulsar subscriptions of the same name.
func TestKafkaConsumerGroup(t *testing.T) {
	c := startKafkaNode(t)
	prod := c.kafkaClient(kgo.DefaultProduceTopic("grouped"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createKafkaTopic(t, prod, "grouped", 4)
	ctx := ctxFor(t, 90*time.Second)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i), Partition: int32(i % 4)}, func(r *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 400)
	member := func() *kgo.Client {
		return c.kafkaClient(kgo.ConsumeTopics("grouped"), kgo.ConsumerGroup("g1"), kgo.DisableAutoCommit(),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	a, b := member(), member()
	seen := map[string]int{}
	var mu sync.Mutex
	all := make(chan struct{})
	poll := func(cl *kgo.Client, stop <-chan struct{}) {
		for {
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cl.PollFetches(pctx)
			cancel()
			mu.Lock()
			for _, r := range fs.Records() {
				seen[string(r.Value)]++
			}
			if len(seen) == 400 && fs.NumRecords() > 0 {
				close(all)
			}
			mu.Unlock()
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("commit: %v", err)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, cl := range []*kgo.Client{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); poll(cl, stop) }()
	}
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("the group read %d of 400 records", len(seen))
	}
	// The group settles with both members holding partitions.
	adm := c.kafkaClient()
	for {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"g1"}
		resp, err := req.RequestWith(ctx, adm)
		if err != nil {
			t.Fatal(err)
		}
		g := resp.Groups[0]
		held := 0
		for _, m := range g.Members {
			var as kmsg.ConsumerMemberAssignment
			if as.ReadFrom(m.MemberAssignment) == nil && len(as.Topics) > 0 && len(as.Topics[0].Partitions) > 0 {
				held++
			}
		}
		if g.State == "Stable" && held == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group %s with %d members holding partitions", g.State, held)
		}
	}
	close(stop)
	wg.Wait()
	a.Close()
	b.Close()
	for v, n := range seen {
		if n != 1 {
			t.Errorf("record %s read %d times", v, n)
		}
	}
	// The committed offsets are the group's subscription on each partition.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "g1"
	resp, err := req.RequestWith(ctx, adm)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			total += rp.Offset
		}
	}
	if total != 400 {
		t.Fatalf("committed offsets sum to %d, want 400: %+v", total, resp.Topics)
	}
	// A new member resumes after the committed offsets: only new records.
	produce(400, 420)
	late := member()
	var after []string
	for len(after) < 20 {
		fs := late.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("late member read %v", after)
		}
		for _, r := range fs.Records() {
			after = append(after, string(r.Value))
		}
	}
	for _, v := range after {
		var i int
		fmt.Sscan(v, &i)
		if i < 400 {
			t.Fatalf("late member re-read committed record %d", i)
		}
	}
	// The group is a Pulsar subscription: a Pulsar consumer of "g1" starts
	// at the committed offsets (the late member committed nothing).
	cons, err := c.client().Subscribe(pulsar.ConsumerOptions{Topic: "persistent://public/default/grouped", SubscriptionName: "g1", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]bool{}
	for len(got) < 20 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var i int
		fmt.Sscan(string(m.Payload()), &i)
		if i < 400 {
			t.Fatalf("the Pulsar subscription of the group delivered committed record %d", i)
		}
		got[string(m.Payload())] = true
	}
}

// TestKafkaTopicAdmin: CreateTopics, Metadata, CreatePartitions,
// ListOffsets (earliest, latest, by time), DeleteTopics — and a Pulsar
// client sees the same topics.
func TestKafkaTopicAdmin(t *testing.T) {
	c := startKafkaNode(t)
	cl := c.kafkaClient(kgo.DefaultProduceTopic("adm"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxFor(t, 60*time.Second)
	createKafkaTopic(t, cl, "adm", 2)
	// A second create is refused as Kafka refuses it.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "adm", 2, -1
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("second create: %v %+v", err, resp)
	}
	partitions := func() int {
		md := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("adm")
		md.Topics = append(md.Topics, mt)
		resp, err := md.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].ErrorCode; code != 0 {
			return -int(code)
		}
		return len(resp.Topics[0].Partitions)
	}
	if n := partitions(); n != 2 {
		t.Fatalf("metadata: %d partitions", n)
	}
	grow := kmsg.NewPtrCreatePartitionsRequest()
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "adm", 3
	grow.Topics = append(grow.Topics, gt)
	if resp, err := grow.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("grow: %v %+v", err, resp)
	}
	if n := partitions(); n != 3 {
		t.Fatalf("after growing: %d partitions", n)
	}
	n, err := pulsaradminTopicPartitions(c, "adm")
	if err != nil || n != 3 {
		t.Fatalf("the Pulsar side sees %d partitions (%v)", n, err)
	}
	// ListOffsets: 5 records on partition 2, produced at distinct times.
	var times []time.Time
	for i := range 5 {
		r := &kgo.Record{Value: fmt.Appendf(nil, "%d", i), Partition: 2}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		times = append(times, time.Now())
		for time.Now().UnixMilli() == times[i].UnixMilli() {
			// the next record gets a later millisecond (the by-time lookup)
		}
	}
	list := func(ts int64) int64 {
		lr := kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "adm"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = 2, ts
		lt.Partitions = append(lt.Partitions, lp)
		lr.Topics = append(lr.Topics, lt)
		resp, err := lr.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("list offsets %d: %v %+v", ts, err, resp)
		}
		return resp.Topics[0].Partitions[0].Offset
	}
	if e, l := list(-2), list(-1); e != 0 || l != 5 {
		t.Fatalf("earliest %d latest %d", e, l)
	}
	if o := list(times[2].UnixMilli() + 1); o != 3 && o != 4 {
		t.Fatalf("offset by the time after the third record: %d", o)
	}
	if o := list(time.Now().Add(time.Hour).UnixMilli()); o != -1 {
		t.Fatalf("offset by a future time: %d, want -1", o)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"adm"}
	if resp, err := del.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %v %+v", err, resp)
	}
	if n := partitions(); n != -int(kerr.UnknownTopicOrPartition.Code) {
		t.Fatalf("after delete, metadata says %d", n)
	}
}

// pulsaradminTopicPartitions is a topic's partition count as the Pulsar
// side reads it (the catalog, through the broker).
func pulsaradminTopicPartitions(c *cluster, topic string) (int, error) {
	return c.gw.Broker().Partitions(context.Background(), "persistent://public/default/"+topic, false)
}

// TestKafkaHostileRequests: bad frames close only their connection, an
// unknown ApiVersions version is answered with the versions served, a
// corrupt record batch is refused for its partition — and the node goes on
// serving.
func TestKafkaHostileRequests(t *testing.T) {
	c := startKafkaNode(t)
	addr := c.tn.Kafka.Addr().String()
	dial := func() net.Conn {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	frame := func(key, version int16, corr int32, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, uint32(corr))
		b = binary.BigEndian.AppendUint16(b, 1)
		b = append(b, 'x')
		b = append(b, body...)
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		return b
	}
	closed := func(nc net.Conn, what string) {
		t.Helper()
		if _, err := io.ReadFull(nc, make([]byte, 4)); err == nil {
			t.Fatalf("%s: the connection was answered, want it closed", what)
		}
	}
	// A size over the bound.
	nc := dial()
	nc.Write([]byte{0x7f, 0xff, 0xff, 0xff})
	closed(nc, "a 2 GiB request")
	// An unknown API key.
	nc = dial()
	nc.Write(frame(999, 0, 1, nil))
	closed(nc, "API key 999")
	// A truncated Metadata body.
	nc = dial()
	nc.Write(frame(3, 9, 2, []byte{0xff}))
	closed(nc, "a truncated Metadata request")
	// ApiVersions of a version not served: answered v0, UNSUPPORTED_VERSION.
	nc = dial()
	nc.Write(frame(18, 99, 7, nil))
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatalf("ApiVersions v99: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatal(err)
	}
	av := kmsg.NewPtrApiVersionsResponse()
	av.Version = 0
	if corr := int32(binary.BigEndian.Uint32(body)); corr != 7 {
		t.Fatalf("correlation id %d", corr)
	}
	if err := av.ReadFrom(body[4:]); err != nil || av.ErrorCode != kerr.UnsupportedVersion.Code || len(av.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v99 answered %v %+v", err, av)
	}
	// A corrupt batch: refused for its partition, the connection stays.
	cl := c.kafkaClient()
	createKafkaTopic(t, cl, "hostile", 1)
	batch := rawBatch(-1, -1, "x")
	batch[len(batch)-1] ^= 0xff // the CRC no longer matches
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "hostile"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.CorruptMessage.Code {
		t.Fatalf("corrupt batch answered %v", kerr.ErrorForCode(code))
	}
	// The node serves on.
	if off := produceRaw(t, cl, "hostile", rawBatch(-1, -1, "ok")); off != 0 {
		t.Fatalf("a good batch after the bad ones at %d", off)
	}
}

// TestKafkaTopicConfigs: retention.ms and retention.bytes are the topic's
// retention policy (created, described, altered both ways); a topic the
// listener creates gets Kafka's default retention, not Pulsar's 0/0; other
// configs are refused with the reason.
func TestKafkaTopicConfigs(t *testing.T) {
	c := startKafkaNode(t)
	cl := c.kafkaClient(kgo.DefaultProduceTopic("auto"), kgo.AllowAutoTopicCreation())
	ctx := ctxFor(t, 60*time.Second)
	describe := func(topic string) map[string]string {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe %s: %v %+v", topic, err, resp)
		}
		out := map[string]string{}
		for _, cfg := range resp.Resources[0].Configs {
			out[cfg.Name] = *cfg.Value
		}
		return out
	}
	policy := func(topic string) broker.RetentionPolicy {
		md, err := c.catalog.LoadStream(ctx, lakestream.StreamIdentifier{Namespace: "public/default", Name: topic})
		if err != nil {
			t.Fatal(err)
		}
		p, err := broker.ParseRetention(md.Properties[broker.RetentionProperty])
		if err != nil {
			t.Fatalf("%s retention property: %v", topic, err)
		}
		return *p
	}
	// Created with a retention.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "cfg", 1, -1
	rc := kmsg.NewCreateTopicsRequestTopicConfig()
	rc.Name, rc.Value = "retention.ms", kmsg.StringPtr("3600000")
	rt.Configs = append(rt.Configs, rc)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	if got := describe("cfg"); got["retention.ms"] != "3600000" || got["retention.bytes"] != "-1" {
		t.Fatalf("described %v", got)
	}
	if p := policy("cfg"); p != (broker.RetentionPolicy{TimeMinutes: 60, SizeMB: -1}) {
		t.Fatalf("retention policy %+v", p)
	}
	// Altered incrementally.
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ic.Name, ic.Op, ic.Value = "retention.bytes", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("1048576")
	ir.Configs = append(ir.Configs, ic)
	inc.Resources = append(inc.Resources, ir)
	if resp, err := inc.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("incremental alter: %v %+v", err, resp)
	}
	if p := policy("cfg"); p != (broker.RetentionPolicy{TimeMinutes: 60, SizeMB: 1}) {
		t.Fatalf("retention policy after the alter %+v", p)
	}
	// A config lakegate does not set is refused, naming it.
	ic.Name, ic.Value = "cleanup.policy", kmsg.StringPtr("compact")
	ir.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{ic}
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{ir}
	resp, err := inc.RequestWith(ctx, cl)
	if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code || !strings.Contains(*resp.Resources[0].ErrorMessage, "cleanup.policy") {
		t.Fatalf("cleanup.policy: %v %+v", err, resp)
	}
	// A topic created by a produce has Kafka's default retention.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if p := policy("auto"); p != (broker.RetentionPolicy{TimeMinutes: 7 * 24 * 60, SizeMB: -1}) {
		t.Fatalf("auto-created topic's retention %+v", p)
	}
}

// TestKafkaAcks: acks=0 (no answer at all) and acks=1 produce; every
// record is stored, in order.
func TestKafkaAcks(t *testing.T) {
	c := startKafkaNode(t)
	ctx := ctxFor(t, 60*time.Second)
	for name, acks := range map[string]kgo.Acks{"none": kgo.NoAck(), "leader": kgo.LeaderAck()} {
		cl := c.kafkaClient(kgo.DefaultProduceTopic("acks"), kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite())
		for i := range 100 {
			cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", name, i)}, func(r *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each producer's records are all there, in its order (the two may
	// interleave: acks=0's flush ends when the requests are written).
	got := consumeKafka(t, c, "acks", 200)
	next := map[string]int{}
	for i, r := range got {
		name, n, _ := strings.Cut(string(r.Value), "-")
		if n != fmt.Sprint(next[name]) || r.Offset != int64(i) {
			t.Fatalf("record %d: %q at offset %d, want %s-%d", i, r.Value, r.Offset, name, next[name])
		}
		next[name]++
	}
	if next["none"] != 100 || next["leader"] != 100 {
		t.Fatalf("records per producer: %v", next)
	}
}

package e2e

// The Kafka listener on three `lakegate serve` processes (one real etcd
// member, one file:// object store): the configuration a user deploys.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaSeeds are the Kafka addresses of the cluster's live nodes.
func (c *lgCluster) kafkaSeeds() []string {
	var out []string
	for _, n := range c.nodes {
		if n.kafkaAddr != "" {
			out = append(out, n.kafkaAddr)
		}
	}
	return out
}

// TestKafkaClusterKill9: an idempotent kgo producer (acks=all) writes to
// a 4-partition topic through three nodes; once 600 records are
// acknowledged, the owner of partition 0 is killed with SIGKILL, and the
// producer goes on through the others until 600 more are. Then a consumer
// reads every partition from the start: every acknowledged record is
// there, no record is there twice (the partition's deduplication judged
// the resends with the sequences persisted with it), and each partition
// holds its records in the order they were produced.
func TestKafkaClusterKill9(t *testing.T) {
	c := startLGCluster(t, 3, "file://"+t.TempDir(), append([]string{"--kafka-addr", "127.0.0.1:0"}, keepAllFlags...)...)
	ctx := ctxFor(t, 3*time.Minute)
	seeds := c.kafkaSeeds()
	if len(seeds) != 3 {
		t.Fatalf("Kafka listeners: %v", seeds)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("k9"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2*time.Millisecond), kgo.RecordRetries(1000),
		kgo.RetryTimeout(90*time.Second), kgo.MetadataMinAge(250*time.Millisecond), kgo.MaxBufferedRecords(2000))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	createKafkaTopic(t, prod, "k9", 4)

	var mu sync.Mutex
	acked := map[string]bool{}
	var failed []error
	ackedN := 0
	// killed is set at the kill; after counts partition 0's acknowledgements
	// from then on, and moved is closed at 300.
	killed, after := false, 0
	first, moved := make(chan struct{}), make(chan struct{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &kgo.Record{Partition: int32(i % 4), Value: fmt.Appendf(nil, "%d", i)}
			prod.Produce(ctx, r, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				acked[string(r.Value)] = true
				ackedN++
				if ackedN == 600 {
					close(first)
				}
				if killed && r.Partition == 0 {
					if after++; after == 300 {
						close(moved)
					}
				}
			})
		}
	}()
	select {
	case <-first:
	case <-ctx.Done():
		t.Fatal("600 records not acknowledged")
	}
	// The owner of partition 0, as Metadata names it.
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("k9")
	req.Topics = append(req.Topics, mt)
	md, err := req.RequestWith(ctx, prod)
	if err != nil {
		t.Fatal(err)
	}
	leader := md.Topics[0].Partitions[0].Leader
	var victim *lakegateProc
	for _, b := range md.Brokers {
		if b.NodeID == leader {
			for _, n := range c.nodes {
				if strings.HasSuffix(n.kafkaAddr, ":"+strconv.Itoa(int(b.Port))) {
					victim = n
				}
			}
		}
	}
	if victim == nil {
		t.Fatalf("no node serves partition 0 (leader %d, brokers %+v)", leader, md.Brokers)
	}
	t.Logf("killing %s, the owner of k9/0", victim.name)
	mu.Lock()
	killed = true
	mu.Unlock()
	victim.kill(t)
	select {
	case <-moved:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("%d records of partition 0 acknowledged after the kill (errors: %v)", after, failed[:min(len(failed), 5)])
	}
	close(stop)
	wg.Wait()
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(failed) > 0 {
		t.Logf("%d produces failed (not acknowledged: they may or may not be stored): %v", len(failed), failed[0])
	}
	want := len(acked)
	mu.Unlock()

	// Read everything back through the surviving nodes.
	var live []string
	for _, n := range c.nodes {
		if n != victim {
			live = append(live, n.kafkaAddr)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(live...), kgo.ConsumeTopics("k9"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	count := map[string]int{}
	last := map[int32]int{0: -1, 1: -1, 2: -1, 3: -1}
	found := 0
	for found < want {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cons.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d acknowledged records", found, want)
		}
		for _, r := range fs.Records() {
			v := string(r.Value)
			count[v]++
			if count[v] > 1 {
				t.Errorf("record %s stored %d times (partition %d offset %d)", v, count[v], r.Partition, r.Offset)
			}
			i, _ := strconv.Atoi(v)
			if i <= last[r.Partition] {
				t.Errorf("partition %d: record %d after %d", r.Partition, i, last[r.Partition])
			}
			last[r.Partition] = i
			if acked[v] && count[v] == 1 {
				found++
			}
		}
	}
	t.Logf("%d acknowledged records read back, %d records stored in all", want, len(count))
}

package e2e

// Bounds of Kafka transactions (docs/kafka.md, "Limits") under a hostile
// client, while a well-behaved transactional producer works on the same
// node: the hostile client initialises more transactional.ids than the
// node caches (kafka/txn.go maxTxnProducers: the cache starts over, and
// the ids come back from the store) and adds more groups to one
// transaction than it may (maxTxnGroups: POLICY_VIOLATION), and more
// partitions (the coordinator's bound: POLICY_VIOLATION, and the
// transaction the refused request opened is aborted); the
// well-behaved producer keeps committing, and every one of its committed
// records, and nothing else, reaches a read_committed consumer. Run:
// go test -count=1 -run TestKafkaTxnBounds ./e2e/

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/txn"
)

// Copies of kafka/txn.go's bounds (unexported there).
const (
	txnProducersMax = 10_000 // maxTxnProducers: cached transactional.id records per node
	txnGroupsMax    = 100    // maxTxnGroups: groups one transaction commits offsets of
	// txn/tc maxPartitions: partitions one transaction produces to.
	txnPartitionsMax = 1000
)

func TestKafkaTxnBounds(t *testing.T) {
	c := startKafkaNode(t)
	ctx := ctxFor(t, 2*time.Minute)
	admin := c.kafkaClient()
	createKafkaTopic(t, admin, "bounds", 2)

	// The well-behaved producer: its record is cached before the flood.
	good := txnProducer(c, "good", "bounds")
	var committed []string
	commit := func(round int) error {
		if err := good.BeginTransaction(); err != nil {
			return err
		}
		vs := []string{fmt.Sprintf("good-%d-0", round), fmt.Sprintf("good-%d-1", round)}
		for i, v := range vs {
			if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: int32(i)}).FirstErr(); err != nil {
				return fmt.Errorf("produce %s: %w", v, err)
			}
		}
		if err := good.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		committed = append(committed, vs...)
		return nil
	}
	if err := commit(0); err != nil {
		t.Fatal(err)
	}

	// The hostile client, meanwhile: txnProducersMax+500 distinct
	// transactional.ids, 32 requests in flight, every one answered (the
	// cache is a cache: it starts over, it does not refuse); then one
	// transaction with a group too many.
	hostile := c.kafkaClient()
	const ids = txnProducersMax + 500
	floodDone := make(chan struct{})
	var floodErr error
	start := time.Now()
	go func() {
		defer close(floodDone)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			next int
		)
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					i := next
					next++
					stop := i >= ids || floodErr != nil
					mu.Unlock()
					if stop {
						return
					}
					tid := fmt.Sprintf("hostile-%d", i)
					req := kmsg.NewPtrInitProducerIDRequest()
					req.TransactionalID, req.TransactionTimeoutMillis = &tid, 60_000
					resp, err := req.RequestWith(ctx, hostile)
					if err == nil {
						err = kerr.ErrorForCode(resp.ErrorCode)
					}
					if err != nil {
						mu.Lock()
						floodErr = fmt.Errorf("InitProducerId %s: %w", tid, err)
						mu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
	}()
	rounds := 1
	for flooding := true; flooding; rounds++ {
		select {
		case <-floodDone:
			flooding = false
		default:
		}
		if err := commit(rounds); err != nil {
			t.Fatalf("the well-behaved producer's transaction %d, during the flood: %v", rounds, err)
		}
	}
	if floodErr != nil {
		t.Fatal(floodErr)
	}
	t.Logf("%d transactional.ids initialised in %v; the well-behaved producer committed %d transactions meanwhile", ids, time.Since(start), rounds-1)

	// The flood's ids are records in the store, not only cache entries:
	// hostile-0, dropped from the cache, is re-initialised at the next
	// epoch of its producer id (not as a new id), and its old epoch stays
	// fenced.
	pid, epoch := rawInitTxn(t, ctx, admin, "hostile-0")
	if epoch != 1 {
		t.Fatalf("hostile-0 re-initialised after the flood: producer %d epoch %d, want epoch 1 (its record read back)", pid, epoch)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 3
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "hostile-0", pid, 0, false
	if resp, err := end.RequestWith(ctx, admin); err != nil || resp.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("EndTxn of hostile-0's first epoch: %v %v, want PRODUCER_FENCED", err, errCodeOf(resp))
	}

	// Groups: txnGroupsMax in one transaction are added, the next one is
	// POLICY_VIOLATION, and the transaction still aborts cleanly.
	pid, epoch = rawInitTxn(t, ctx, hostile, "hostile-groups")
	for g := range txnGroupsMax {
		rawAddOffsets(t, ctx, hostile, "hostile-groups", fmt.Sprintf("hg-%d", g), pid, epoch)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "hostile-groups", pid, epoch, "hg-too-many"
	resp, err := add.RequestWith(ctx, hostile)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("AddOffsetsToTxn of group %d: %v, want POLICY_VIOLATION", txnGroupsMax+1, err)
	}
	// A group already in it is still accepted (no new group).
	rawAddOffsets(t, ctx, hostile, "hostile-groups", "hg-0", pid, epoch)
	rawEndTxn(t, ctx, hostile, "hostile-groups", pid, epoch, false)

	// Partitions: more than the coordinator's txnPartitionsMax in one
	// AddPartitionsToTxn is POLICY_VIOLATION for each, and the
	// transaction the request opened does not stay open.
	createKafkaTopic(t, admin, "bounds-wide", txnPartitionsMax+1)
	pid, epoch = rawInitTxn(t, ctx, hostile, "hostile-parts")
	addp := kmsg.NewPtrAddPartitionsToTxnRequest()
	addp.TransactionalID, addp.ProducerID, addp.ProducerEpoch = "hostile-parts", pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic = "bounds-wide"
	for p := range int32(txnPartitionsMax + 1) {
		rt.Partitions = append(rt.Partitions, p)
	}
	addp.Topics = append(addp.Topics, rt)
	presp, err := addp.RequestWith(ctx, hostile)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range presp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); !errors.Is(err, kerr.PolicyViolation) {
				t.Fatalf("AddPartitionsToTxn of %d partitions, partition %d: %v, want POLICY_VIOLATION", txnPartitionsMax+1, rp.Partition, err)
			}
		}
	}
	for tc := range uint64(c.tn.Txn.Coordinators()) {
		txns, err := c.tn.Txn.List(ctx, tc)
		if err != nil {
			t.Fatal(err)
		}
		for id, rec := range txns {
			if rec.State == txn.Open {
				t.Fatalf("transaction %v is open after the refused additions (%d partitions)", id, len(rec.Partitions))
			}
		}
	}

	// The well-behaved producer after the flood (its record dropped from
	// the cache with the others: read back).
	if err := commit(rounds); err != nil {
		t.Fatalf("the well-behaved producer after the flood: %v", err)
	}
	slices.Sort(committed)
	if got := readUntilSentinels(t, c, "bounds", 2, "1"); !slices.Equal(got, committed) {
		t.Fatalf("read_committed read %d records, want the %d committed: %v", len(got), len(committed), got)
	}
}

// errCodeOf is resp's error, nil without resp.
func errCodeOf(resp *kmsg.EndTxnResponse) error {
	if resp == nil {
		return nil
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

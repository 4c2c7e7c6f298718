package e2e

// Expiry of Kafka transactional.ids (docs/kafka.md, "Transactions";
// kafka.transactionalIdExpiration) on a node with a 2 s expiration: the
// record of an id that committed and was not used since is deleted; its
// old producer's next transactional request is answered
// INVALID_PRODUCER_ID_MAPPING, a new InitProducerId starts the id over
// (a new producer id) and commits; an id with a transaction open is kept
// past the expiration until its transaction ends, then expires too
// (lakegate_kafka_transactional_ids_expired_total). Every wait polls a
// condition under a deadline. Run:
// go test -count=1 -run TestKafkaTxnIDExpiry ./e2e/

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/kafka"
	"github.com/lakegate/lakegate/node"
)

func TestKafkaTxnIDExpiry(t *testing.T) {
	const expiration = 2 * time.Second
	c := startNode(t, testnode.Config{Node: node.Config{DataDir: t.TempDir()}, Kafka: true,
		KafkaConfig: kafka.Config{TransactionalIDExpiration: expiration}})
	ctx := ctxFor(t, 30*time.Second)
	admin := c.kafkaClient()
	createKafkaTopic(t, admin, "tidexp", 1)

	// An id whose transaction is open (its timeout 60 s), last used
	// before the other id's commit.
	openPID, openEpoch := rawInitTxn(t, ctx, admin, "tidexp-open")
	rawAddOffsets(t, ctx, admin, "tidexp-open", "tidexp-g", openPID, openEpoch)

	// An id that commits a transaction, then is left alone.
	cl := txnProducer(c, "tidexp", "tidexp")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, cl, 1, "a-0")
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	var old struct {
		PID   int64
		Epoch int16
	}
	var err error
	if old.PID, old.Epoch, err = cl.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}

	waitFor(t, ctx, "the committed id's record to expire", func() bool { return !hasTxnRecord(t, ctx, c, "tidexp") })
	if !hasTxnRecord(t, ctx, c, "tidexp-open") {
		t.Fatal("the id with a transaction open expired")
	}

	// The old producer is unknown now.
	if err := rawAddPartitionsErr(ctx, admin, "tidexp", "tidexp", old.PID, old.Epoch); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("AddPartitionsToTxn of the expired producer: %v, want INVALID_PRODUCER_ID_MAPPING", err)
	}
	if err := rawEndTxnErr(ctx, admin, "tidexp", old.PID, old.Epoch); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("EndTxn of the expired producer: %v, want INVALID_PRODUCER_ID_MAPPING", err)
	}

	// A new producer of the id starts over and commits.
	next := txnProducer(c, "tidexp", "tidexp")
	if err := next.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxnRecords(t, ctx, next, 1, "b-0")
	if err := next.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit of the new producer: %v", err)
	}
	if pid, _, err := next.ProducerID(ctx); err != nil || pid == old.PID {
		t.Fatalf("the new producer's id: %d, %v; want another than the expired %d", pid, err, old.PID)
	}
	if got := readUntilSentinels(t, c, "tidexp", 1, "1"); !slices.Equal(got, []string{"a-0", "b-0"}) {
		t.Fatalf("read %v, want a-0 b-0", got)
	}

	// The open transaction commits; then its id expires too.
	if !hasTxnRecord(t, ctx, c, "tidexp-open") {
		t.Fatal("the id with a transaction open expired")
	}
	rawEndTxn(t, ctx, admin, "tidexp-open", openPID, openEpoch, true)
	waitFor(t, ctx, "the id whose transaction ended to expire", func() bool { return !hasTxnRecord(t, ctx, c, "tidexp-open") })
	// Expired: tidexp's first record, tidexp-open's, and maybe already
	// the new producer's of tidexp (unused since its commit).
	if n := kafkaCounter(t, c, "lakegate_kafka_transactional_ids_expired_total"); n < 2 || n > 3 {
		t.Fatalf("lakegate_kafka_transactional_ids_expired_total %v, want 2 or 3", n)
	}
}

// kafkaCounter is the value of a counter of the node's Kafka listener.
func kafkaCounter(t *testing.T, c *cluster, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.tn.Kafka.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

func hasTxnRecord(t *testing.T, ctx context.Context, c *cluster, tid string) bool {
	t.Helper()
	_, rev, err := c.tn.Txn.LoadProducer(ctx, tid)
	if err != nil {
		t.Fatalf("record of %s: %v", tid, err)
	}
	return rev != 0
}

// rawAddPartitionsErr adds partition 0 of topic to tid's transaction and
// returns the answer's error.
func rawAddPartitionsErr(ctx context.Context, cl *kgo.Client, tid, topic string, pid int64, epoch int16) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = tid, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

// rawEndTxnErr commits tid's transaction and returns the answer's error.
func rawEndTxnErr(ctx context.Context, cl *kgo.Client, tid string, pid int64, epoch int16) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = tid, pid, epoch, true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

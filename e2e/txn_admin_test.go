package e2e

// The transactions admin REST (/admin/v3/transactions/, admin/transactions.go)
// on a real node's HTTP port, with a transaction of the unmodified Go
// client: the coordinator's stats and the transaction's metadata while it
// is open, an abort over REST, and the client's commit refused after it.
// Run: go test -count=1 -run TestTxnAdmin ./e2e/

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/node"
)

// txnAdminMetadata is what the test reads of Pulsar's TransactionMetadata.
type txnAdminMetadata struct {
	TxnID              string `json:"txnId"`
	Status             string `json:"status"`
	OpenTimestamp      int64  `json:"openTimestamp"`
	TimeoutAt          int64  `json:"timeoutAt"`
	ProducedPartitions map[string]struct {
		Aborted bool `json:"aborted"`
	} `json:"producedPartitions"`
}

// txnAdminCoordinatorStats is Pulsar's TransactionCoordinatorStats.
type txnAdminCoordinatorStats struct {
	State          string `json:"state"`
	LeastSigBits   int64  `json:"leastSigBits"`
	LowWaterMark   int64  `json:"lowWaterMark"`
	OngoingTxnSize int64  `json:"ongoingTxnSize"`
}

func TestTxnAdminStatsMetadataAbort(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	c := startNode(t, testnode.Config{Node: node.Config{DataDir: t.TempDir()}, HTTP: true})
	base := c.tn.HTTP.URL + "/admin/v3/transactions"
	const topic = "persistent://public/default/txn-admin"
	cl := c.txnClient()
	// Batching off: see TestTxnProduceCommitAbort (pulsar-client-go issue 1498).
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	tx, err := cl.NewTransaction(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("in-tx"), Transaction: tx}); err != nil {
		t.Fatal(err)
	}
	id := txnIDOf(t, tx)

	// The coordinator that opened it counts it, wherever it is asked.
	var one txnAdminCoordinatorStats
	if code := admDo(t, "GET", fmt.Sprintf("%s/coordinatorStats?coordinatorId=%d", base, id.Most), "", "", &one); code != http.StatusOK {
		t.Fatalf("coordinatorStats: %d", code)
	}
	if one.State != "Ready" || one.OngoingTxnSize != 1 || one.LeastSigBits < int64(id.Least) || one.LowWaterMark >= int64(id.Least) {
		t.Fatalf("coordinatorStats of %d = %+v (transaction %v open)", id.Most, one, id)
	}
	var all map[string]txnAdminCoordinatorStats
	if code := admDo(t, "GET", base+"/coordinatorStats", "", "", &all); code != http.StatusOK || all[fmt.Sprint(id.Most)] != one {
		t.Fatalf("coordinatorStats (all): %d %+v, want %+v at %d", code, all, one, id.Most)
	}

	// Its metadata: open, producing to the topic. The client registered
	// the partition before its send was answered.
	metadataURL := fmt.Sprintf("%s/transactionMetadata/%d/%d", base, id.Most, id.Least)
	var md txnAdminMetadata
	if code := admDo(t, "GET", metadataURL, "", "", &md); code != http.StatusOK {
		t.Fatalf("transactionMetadata: %d", code)
	}
	if md.TxnID != id.String() || md.Status != "OPEN" || md.OpenTimestamp == 0 || md.TimeoutAt <= md.OpenTimestamp {
		t.Fatalf("transactionMetadata = %+v", md)
	}
	if p, ok := md.ProducedPartitions[topic]; !ok || p.Aborted || len(md.ProducedPartitions) != 1 {
		t.Fatalf("producedPartitions = %+v, want %s only", md.ProducedPartitions, topic)
	}

	// Abort it over REST: it is ABORTED at once (the answer waits for the
	// outcome), the client's commit is refused, and its message is never
	// read: a message sent after it is the first the topic holds.
	if code := admDo(t, "POST", fmt.Sprintf("%s/abortTransaction/%d/%d", base, id.Most, id.Least), "", "", nil); code != http.StatusNoContent {
		t.Fatalf("abortTransaction: %d", code)
	}
	md = txnAdminMetadata{}
	if code := admDo(t, "GET", metadataURL, "", "", &md); code != http.StatusOK || md.Status != "ABORTED" || !md.ProducedPartitions[topic].Aborted {
		t.Fatalf("after the abort: %d %+v", code, md)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the client committed a transaction aborted over REST")
	}
	one = txnAdminCoordinatorStats{}
	if admDo(t, "GET", fmt.Sprintf("%s/coordinatorStats?coordinatorId=%d", base, id.Most), "", "", &one); one.OngoingTxnSize != 0 || one.LowWaterMark < int64(id.Least) {
		t.Fatalf("coordinatorStats after the abort = %+v", one)
	}
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("sentinel")}); err != nil {
		t.Fatal(err)
	}
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if before := readToSentinel(t, ctx, r, "sentinel"); len(before) != 0 {
		t.Fatalf("read %q before the sentinel", payloads(before))
	}
}

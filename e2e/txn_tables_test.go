package e2e

// Transactions in the tables: every Delta version holds all of a
// transaction's records of the table or none (docs/compaction.md,
// "Transactions across partitions").
//
//	go test ./e2e -run TestTxnTablesAllOrNone -v

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/objstore"
)

// TestTxnTablesAllOrNone: three transactions over the three partitions
// of a topic, plain messages around them, on `lakegate standalone` with a
// fast materialization worker. Once the tables hold every message, each
// version of the Delta table (its files read from the node's store) holds
// each transaction's 12 messages or none of them.
func TestTxnTablesAllOrNone(t *testing.T) {
	dir := t.TempDir()
	node := startLakegate(t, lakegateBinary(t), dir, "--tables-age", "200ms", "--tables-interval", "100ms", "--tables-scan-interval", "200ms")
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "persistent://public/default/txn-table-all"
	if code := admDo(t, http.MethodPut, node.httpURL+"/admin/v2/persistent/public/default/txn-table-all/partitions", "application/json", "3", nil); code/100 != 2 {
		t.Fatalf("create: HTTP %d", code)
	}
	cl := newTxnClient(t, node.pulsarURL, 30*time.Second, 0)
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, MessageRouter: partitionRouter, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	const txns, perPartition = 3, 4
	total := 0
	for k := range txns {
		for p := range 3 {
			sendTo(t, ctx, prod, p, fmt.Sprintf("plain-%d-%d", k, p), nil)
			total++
		}
		tx, err := cl.NewTransaction(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for i := range perPartition {
			for p := range 3 {
				sendTo(t, ctx, prod, p, fmt.Sprintf("txn%d-%d-%d", k, p, i), tx)
				sendTo(t, ctx, prod, p, fmt.Sprintf("between-%d-%d-%d", k, p, i), nil)
				total += 2
			}
			// Not a wait for anything: spreads the transaction over
			// several of the worker's passes (100 ms), so that the plain
			// messages around it are materialized while it is open.
			time.Sleep(150 * time.Millisecond)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitForTable(t, ctx, node.httpURL, "public/default/txn-table-all", int64(total), "DELTA")

	store, err := objstore.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	root := "tables/public/default/txn-table-all"
	rows := map[string][]string{} // payloads by table file
	live := map[string]bool{}
	versions := 0
	for v := 0; ; v++ {
		b, err := store.Get(ctx, fmt.Sprintf("%s/_delta_log/%020d.json", root, v))
		if err != nil {
			if v == 0 {
				t.Fatal(err)
			}
			break
		}
		versions++
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var a struct {
				Add    *struct{ Path string } `json:"add"`
				Remove *struct{ Path string } `json:"remove"`
			}
			if err := json.Unmarshal(line, &a); err != nil {
				t.Fatal(err)
			}
			if a.Add != nil {
				live[a.Add.Path] = true
			}
			if a.Remove != nil {
				delete(live, a.Remove.Path)
			}
		}
		count := map[string]int{}
		for p := range live {
			if _, ok := rows[p]; !ok {
				rel, err := url.PathUnescape(p)
				if err != nil {
					t.Fatal(err)
				}
				data, err := store.Get(ctx, root+"/"+rel)
				if err != nil {
					t.Fatal(err)
				}
				ms, err := lakehouse.ReadParquet(ctx, bytes.NewReader(data), nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range ms {
					rows[p] = append(rows[p], string(m.Payload))
				}
			}
			for _, pay := range rows[p] {
				if strings.HasPrefix(pay, "txn") {
					count[pay[:len("txnK")]]++
				}
			}
		}
		for k := range txns {
			if n := count[fmt.Sprintf("txn%d", k)]; n != 0 && n != 3*perPartition {
				t.Fatalf("Delta version %d holds %d of transaction %d's %d messages", v, n, k, 3*perPartition)
			}
		}
	}
	var all []string
	for p := range live {
		all = append(all, rows[p]...)
	}
	if len(all) != total {
		t.Fatalf("the last Delta version holds %d messages, want %d", len(all), total)
	}
	slices.Sort(all)
	t.Logf("%d Delta versions, %d messages", versions, len(all))
}

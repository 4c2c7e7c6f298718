package e2e

// Transactions in the tables: every Delta version and every Iceberg
// snapshot holds all of a transaction's records of the table or none
// (docs/compaction.md, "Transactions across partitions").
//
//	go test ./e2e -run 'TestTxnTablesAllOrNone|TestClusterTxnTablesAllOrNone' -v

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/objstore"
)

// TestTxnTablesAllOrNone: three transactions over the three partitions
// of a topic, plain messages around them (sendTxnRounds), on `lakegate
// standalone` with a fast materialization worker. Once the tables hold
// every message, each version of the Delta table and each snapshot of
// the Iceberg table hold each transaction's 12 messages or none of them.
func TestTxnTablesAllOrNone(t *testing.T) {
	dir := t.TempDir()
	node := startLakegate(t, lakegateBinary(t), dir, "--tables-age", "200ms", "--tables-interval", "100ms", "--tables-scan-interval", "200ms")
	ctx := ctxFor(t, 2*time.Minute)
	if code := admDo(t, http.MethodPut, node.httpURL+"/admin/v2/persistent/public/default/txn-table-all/partitions", "application/json", "3", nil); code/100 != 2 {
		t.Fatalf("create: HTTP %d", code)
	}
	cl := newTxnClient(t, node.pulsarURL, 30*time.Second, 0)
	want, total := sendTxnRounds(t, ctx, cl, []string{node.httpURL}, "txn-table-all", 3, 3, 4, nil)

	store, err := objstore.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tt := txnTable{store: store, root: "tables/public/default/txn-table-all", catalogURL: node.httpURL + "/iceberg",
		ident: table.Identifier{"public", "default", "txn-table-all"}, txns: want}
	tt.check(t, ctx, total)
}

// sendTxnRounds writes, to the parts partitions of topic
// public/default/<name> through a client of cl, txns transactions named
// txn0, txn1, … (those abort reports true of aborted, the others
// committed), one after another: a plain message to every partition, then
// perPartition rounds over every partition of a transaction's message and a
// plain message. Between rounds it waits until the table (GET …/table at
// httpURLs, each in turn) holds every message sent outside the open
// transaction: the plain messages around it are materialized while it is
// open. At the end it waits until the table holds every message sent but
// the aborted transactions', and returns the transactions (as
// txnTable.txns) and that count.
func sendTxnRounds(t *testing.T, ctx context.Context, cl pulsar.Client, httpURLs []string, name string, parts, txns, perPartition int, abort func(k int) bool) (map[string]int, int) {
	t.Helper()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/" + name, MessageRouter: partitionRouter, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	want := map[string]int{}
	held := 0 // messages the table holds once it is materialized
	waits := 0
	for k := range txns {
		for p := range parts {
			sendTo(t, ctx, prod, p, fmt.Sprintf("plain-%d-%d", k, p), nil)
			held++
		}
		tx, err := cl.NewTransaction(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		txn := fmt.Sprintf("txn%d", k)
		for i := range perPartition {
			for p := range parts {
				sendTo(t, ctx, prod, p, fmt.Sprintf("%s-%d-%d", txn, p, i), tx)
				sendTo(t, ctx, prod, p, fmt.Sprintf("between-%d-%d-%d", k, p, i), nil)
				held++
			}
			if i < perPartition-1 {
				waitForTable(t, ctx, httpURLs[waits%len(httpURLs)], "public/default/"+name, int64(held), "DELTA", "ICEBERG")
				waits++
			}
		}
		if abort != nil && abort(k) {
			if err := tx.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			want[txn] = 0
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		want[txn] = parts * perPartition
		held += parts * perPartition
	}
	waitForTable(t, ctx, httpURLs[waits%len(httpURLs)], "public/default/"+name, int64(held), "DELTA", "ICEBERG")
	return want, held
}

// txnTable is a topic's table whose every Delta version and Iceberg
// snapshot a transaction test checks (check).
type txnTable struct {
	store      objstore.Store   // the cluster's object store
	root       string           // the table's root in store: tables/<tenant>/<ns>/<topic>
	catalogURL string           // a node's Iceberg REST catalog: <http>/iceberg
	ident      table.Identifier // the topic's Iceberg table
	// txns are the transactions to check, by name: a payload
	// "<name>-…" is one of name's messages. The value is how many
	// messages the table holds of a committed transaction, 0 for an
	// aborted one (never any). Other payloads are not counted.
	txns map[string]int

	payloads map[string][]string // by object key, read once
}

// check fails t unless every Delta version (read from version 0 up, the
// log's files from the store) and every Iceberg snapshot (in sequence
// order, through the catalog) holds, of each transaction of tt.txns,
// all of its messages or none, and the last of each holds total
// messages, every committed transaction's among them.
func (tt *txnTable) check(t *testing.T, ctx context.Context, total int) {
	t.Helper()
	tt.payloads = map[string][]string{}
	last := map[string][]string{}

	live := map[string]bool{} // object keys
	versions := 0
	for v := 0; ; v++ {
		b, err := tt.store.Get(ctx, fmt.Sprintf("%s/_delta_log/%020d.json", tt.root, v))
		if v > 0 && errors.Is(err, objstore.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatalf("Delta version %d: %v", v, err)
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
				live[tt.deltaKey(t, a.Add.Path)] = true
			}
			if a.Remove != nil {
				delete(live, tt.deltaKey(t, a.Remove.Path))
			}
		}
		last["DELTA"] = tt.allOrNone(t, ctx, fmt.Sprintf("Delta version %d", v), live)
	}

	cat, err := rest.NewCatalog(ctx, "lakegate", tt.catalogURL)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, tt.ident)
	if err != nil {
		t.Fatal(err)
	}
	snaps := slices.SortedFunc(slices.Values(tbl.Metadata().Snapshots()), func(a, b table.Snapshot) int {
		return cmp.Compare(a.SequenceNumber, b.SequenceNumber)
	})
	if len(snaps) == 0 {
		t.Fatalf("Iceberg table %v has no snapshot", tt.ident)
	}
	for _, s := range snaps {
		tasks, err := tbl.Scan(table.WithSnapshotID(s.SnapshotID)).PlanFiles(ctx)
		if err != nil {
			t.Fatalf("Iceberg snapshot %d: %v", s.SnapshotID, err)
		}
		files := map[string]bool{}
		for _, task := range tasks {
			p := task.File.FilePath()
			i := strings.Index(p, "/"+tt.root+"/")
			if i < 0 {
				t.Fatalf("Iceberg data file %s outside the table root %s", p, tt.root)
			}
			files[p[i+1:]] = true
		}
		last["ICEBERG"] = tt.allOrNone(t, ctx, fmt.Sprintf("Iceberg snapshot %d (sequence %d)", s.SnapshotID, s.SequenceNumber), files)
	}
	t.Logf("%d Delta versions, %d Iceberg snapshots; the last hold %d and %d messages", versions, len(snaps), len(last["DELTA"]), len(last["ICEBERG"]))
	for _, format := range []string{"DELTA", "ICEBERG"} {
		if n := len(last[format]); n != total {
			t.Fatalf("the last %s snapshot holds %d messages, want %d", format, n, total)
		}
		count := txnCounts(last[format])
		for _, name := range slices.Sorted(maps.Keys(tt.txns)) {
			if n, want := count[name], tt.txns[name]; n != want {
				t.Fatalf("the last %s snapshot holds %d of transaction %s's messages, want %d", format, n, name, want)
			}
		}
	}
}

// txnCounts counts payloads by the name before their first "-".
func txnCounts(payloads []string) map[string]int {
	count := map[string]int{}
	for _, p := range payloads {
		if name, _, ok := strings.Cut(p, "-"); ok {
			count[name]++
		}
	}
	return count
}

// deltaKey is the object key of a Delta log's file path (relative to
// the table's root, URL-escaped).
func (tt *txnTable) deltaKey(t *testing.T, path string) string {
	t.Helper()
	rel, err := url.PathUnescape(path)
	if err != nil {
		t.Fatal(err)
	}
	return tt.root + "/" + rel
}

// allOrNone fails t unless the table files (object keys) hold, of each
// transaction of tt.txns, all of its messages or none; where names the
// snapshot in the failure. It returns the files' payloads.
func (tt *txnTable) allOrNone(t *testing.T, ctx context.Context, where string, files map[string]bool) []string {
	t.Helper()
	var all []string
	for key := range files {
		if _, ok := tt.payloads[key]; !ok {
			data, err := tt.store.Get(ctx, key)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			ms, err := lakehouse.ReadParquet(ctx, bytes.NewReader(data), nil)
			if err != nil {
				t.Fatalf("%s: %s: %v", where, key, err)
			}
			ps := make([]string, 0, len(ms))
			for _, m := range ms {
				ps = append(ps, string(m.Payload))
			}
			tt.payloads[key] = ps
		}
		all = append(all, tt.payloads[key]...)
	}
	count := txnCounts(all)
	for _, name := range slices.Sorted(maps.Keys(tt.txns)) {
		if n, want := count[name], tt.txns[name]; n != 0 && n != want {
			t.Fatalf("%s holds %d of transaction %s's messages, want %d or none", where, n, name, want)
		}
	}
	return all
}

package e2e

// Transactions in the tables of a cluster (docs/compaction.md,
// "Transactions across partitions"; docs/cluster.md, "Compaction"): three
// `lakegate serve` processes on one etcd and one object store; a topic's
// partitions are written by two or more of them, its table materialized
// by its one compaction owner, which reads the other nodes' logs from the
// store. Every Delta version and every Iceberg snapshot holds each
// committed transaction's messages all or none, and no aborted one's.
//
//	go test ./e2e -run TestClusterTxnTablesAllOrNone -v

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/objstore"
)

func TestClusterTxnTablesAllOrNone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	dir := t.TempDir()
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(dir),
		"--tables-age", "200ms", "--tables-interval", "100ms", "--tables-scan-interval", "200ms")
	ctx := ctxFor(t, 2*time.Minute)
	const name, parts, perPartition = "txn-table-cluster", 4, 3
	const topic = "persistent://public/default/" + name
	if code := admDo(t, http.MethodPut, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/"+name+"/partitions", "application/json", fmt.Sprint(parts), nil); code/100 != 2 {
		t.Fatalf("create: HTTP %d", code)
	}
	// The partitions' owners, each asked of another node: two or more,
	// so some partition is written by a node that is not the table's
	// compaction owner.
	owners := map[string][]int{} // owner's name → partitions
	for p := range parts {
		o := c.nodeByURL(c.lookup(c.nodes[p%len(c.nodes)], fmt.Sprintf("%s-partition-%d", topic, p)))
		owners[o.name] = append(owners[o.name], p)
	}
	if len(owners) < 2 {
		t.Fatalf("every partition of %s is owned by one node: %v", topic, owners)
	}

	// Four transactions, the second and the fourth aborted; the table
	// read through every node in turn.
	urls := []string{c.nodes[0].httpURL, c.nodes[1].httpURL, c.nodes[2].httpURL}
	want, total := sendTxnRounds(t, ctx, c.txnClient(c.serviceURL()), urls, name, parts, 4, perPartition, func(k int) bool { return k%2 == 1 })

	store, err := objstore.Open(ctx, "file://"+filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tt := txnTable{store: store, root: "tables/public/default/" + name, catalogURL: c.nodes[2].httpURL + "/iceberg",
		ident: table.Identifier{"public", "default", name}, txns: want}
	tt.check(t, ctx, total)

	// The joint job did it: no node materialized a transaction's
	// partitions one by one.
	for _, n := range c.nodes {
		fams := scrape(t, n.httpURL+"/metrics")
		v, series := familyValue(fams["lakegate_materialization_joint_fallbacks_total"], nil)
		if series == 0 {
			t.Fatalf("%s: no lakegate_materialization_joint_fallbacks_total", n.name)
		}
		if v != 0 {
			t.Fatalf("%s fell back to per-partition materialization %v times", n.name, v)
		}
	}
	t.Logf("partitions by owner %v; table compaction owner %v", owners, tableOwners(t, c)["tables/public/default/"+name])
}

package iceberg

// The lakegate catalog (KindLakegate: metacat on the metadata store):
// compaction-style commits of two nodes' catalogs over one store, read
// back through the Iceberg REST API (icebergrest) with the field ids kept.

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/icebergrest"
	"github.com/lakegate/lakegate/meta"
)

func TestCommitLakegateCatalog(t *testing.T) {
	env := newEnv(t)
	ctx := ctxT(t)
	ms := meta.NewMem(meta.MemOptions{})
	defer ms.Close()
	open := func() *Catalog {
		c, err := Open(ctx, CatalogConfig{Kind: KindLakegate, StoreURL: "file://" + env.dir + "?fsync=false", Meta: ms, MetaRoot: "/lg/iceberg/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	nodes := []*Catalog{open(), open()} // two nodes, one etcd
	day := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixMilli()
	want := map[[2]int64][]byte{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	// Each node commits the ranges of its own two partitions, concurrently.
	for i, c := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, part := range []int32{int32(2 * i), int32(2*i + 1)} {
				for r := range 3 {
					first := int64(r * 10)
					mu.Lock()
					rel, ps := writeFile(t, env, part, first, 10, day)
					for k, p := range ps {
						want[[2]int64{int64(part), first + int64(k)}] = p
					}
					mu.Unlock()
					if _, err := c.Commit(ctx, CommitRequest{Ident: ident, Root: root, LogID: int64(100 + part), End: first + 10, Files: []string{rel}}); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkScan(t, nodes[1], want)

	// Through REST: the topic table is public.default.orders, with
	// lakegate's field ids, and read-only for clients.
	srv := httptest.NewServer(http.StripPrefix("/iceberg", icebergrest.Handler(icebergrest.Options{
		Catalog: nodes[0].Catalog(), ReadOnly: IsStreamTable})))
	defer srv.Close()
	rc, err := rest.NewCatalog(ctx, "lakegate", srv.URL+"/iceberg")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := rc.LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSchema(tbl.Schema()); err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Metadata().Snapshots()); n != 12 {
		t.Fatalf("%d snapshots, want 12 (one per range)", n)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	if at.NumRows() != int64(len(want)) {
		t.Fatalf("REST scan: %d rows, want %d", at.NumRows(), len(want))
	}
	txn := tbl.NewTransaction()
	_ = txn.SetProperties(map[string]string{"x": "y"})
	if _, err := txn.Commit(ctx); err == nil {
		t.Fatal("a REST client committed to a stream table")
	}
}

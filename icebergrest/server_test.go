package icebergrest

// Tests of the REST catalog: iceberg-go's catalog conformance suite
// (catalog/catalogtest) run against metacat directly and through this
// handler with iceberg-go's REST client; two REST clients appending to one
// table concurrently; OAuth2 client credentials; read-only stream tables.
// Run: go test -count=1 ./icebergrest/

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/catalogtest"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse/iceberg/metacat"
	"github.com/lakegate/lakegate/meta"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// testCatalog is a metacat catalog and its warehouse.
type testCatalog struct {
	*metacat.Catalog
	warehouse string
}

// options serves the catalog writable to every client.
func (c testCatalog) options() Options {
	return Options{Catalog: c.Catalog, Warehouse: c.warehouse, AllowWrites: true}
}

// newMetacat is a catalog on a fresh in-memory metadata store with a
// file:// warehouse in a temp dir.
func newMetacat(t testing.TB) testCatalog {
	t.Helper()
	ms := meta.NewMem(meta.MemOptions{})
	t.Cleanup(func() { ms.Close() })
	wh := "file://" + filepath.ToSlash(t.TempDir())
	c, err := metacat.Open(ms, metacat.Options{Root: "/lg/iceberg/", Warehouse: wh})
	if err != nil {
		t.Fatal(err)
	}
	return testCatalog{Catalog: c, warehouse: wh}
}

// serve serves c over REST and returns its base URI.
func serve(t testing.TB, o Options) string {
	t.Helper()
	srv := httptest.NewServer(http.StripPrefix("/iceberg", Handler(o)))
	t.Cleanup(srv.Close)
	return srv.URL + "/iceberg"
}

func restClient(t testing.TB, uri string, opts ...rest.Option) *rest.Catalog {
	t.Helper()
	c, err := rest.NewCatalog(ctxT(t), "lakegate", uri, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConformanceMetacat(t *testing.T) {
	catalogtest.RunCatalogTests(t, catalogtest.Config{
		NewCatalog:                  func(t *testing.T) catalog.Catalog { return newMetacat(t).Catalog },
		SupportsNamespaceProperties: true,
	})
}

func TestConformanceREST(t *testing.T) {
	catalogtest.RunCatalogTests(t, catalogtest.Config{
		NewCatalog: func(t *testing.T) catalog.Catalog {
			return restClient(t, serve(t, newMetacat(t).options()))
		},
		SupportsNamespaceProperties: true,
	})
}

var userSchema = ice.NewSchema(0,
	ice.NestedField{ID: 1, Name: "writer", Type: ice.PrimitiveTypes.Int32, Required: true},
	ice.NestedField{ID: 2, Name: "seq", Type: ice.PrimitiveTypes.Int64, Required: true},
)

// appendRow appends one row (writer, seq) through cat, reloading and
// retrying on a lost commit race; it returns the attempts it took.
func appendRow(ctx context.Context, cat catalog.Catalog, id table.Identifier, writer int32, seq int64) (int, error) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "writer", Type: arrow.PrimitiveTypes.Int32},
		{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	for attempt := 1; attempt <= 50; attempt++ {
		tbl, err := cat.LoadTable(ctx, id)
		if err != nil {
			return attempt, err
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		b.Field(0).(*array.Int32Builder).Append(writer)
		b.Field(1).(*array.Int64Builder).Append(seq)
		rec := b.NewRecordBatch()
		b.Release()
		at := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
		rec.Release()
		txn := tbl.NewTransaction()
		err = txn.AppendTable(ctx, at, 1, nil)
		at.Release()
		if err != nil {
			return attempt, err
		}
		if _, err = txn.Commit(ctx); err == nil {
			return attempt, nil
		}
		if !errors.Is(err, table.ErrCommitFailed) {
			return attempt, err
		}
	}
	return 50, fmt.Errorf("writer %d seq %d: too many conflicts", writer, seq)
}

// TestConcurrentCommitters has two REST clients of two handlers over one
// catalog (two nodes of a cluster over one etcd) append to one table at
// once: every append lands exactly once, the losers of a race get 409
// CommitFailedException and retry.
func TestConcurrentCommitters(t *testing.T) {
	ctx := ctxT(t)
	mc := newMetacat(t)
	clients := []*rest.Catalog{
		restClient(t, serve(t, mc.options())),
		restClient(t, serve(t, mc.options())),
	}
	id := table.Identifier{"analytics", "events"}
	if err := clients[0].CreateNamespace(ctx, id[:1], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := clients[0].CreateTable(ctx, id, userSchema, catalog.WithProperties(ice.Properties{table.CommitNumRetriesKey: "0"})); err != nil {
		t.Fatal(err)
	}
	const perWriter = 12
	var wg sync.WaitGroup
	errs := make(chan error, 2*perWriter)
	var mu sync.Mutex
	retries := 0
	for w, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				n, err := appendRow(ctx, cl, id, int32(w), int64(i))
				mu.Lock()
				retries += n - 1
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tbl, err := clients[1].LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	seen := map[[2]int64]int{}
	rdr := array.NewTableReader(at, 0)
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ws, ss := rec.Column(0).(*array.Int32), rec.Column(1).(*array.Int64)
		for i := range int(rec.NumRows()) {
			seen[[2]int64{int64(ws.Value(i)), ss.Value(i)}]++
		}
	}
	if len(seen) != 2*perWriter {
		t.Fatalf("%d distinct rows, want %d", len(seen), 2*perWriter)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("row %v seen %d times", k, n)
		}
	}
	if got := len(tbl.Metadata().Snapshots()); got != 2*perWriter {
		t.Fatalf("%d snapshots, want %d", got, 2*perWriter)
	}
	t.Logf("%d appends by two committers, %d lost races retried", 2*perWriter, retries)
}

func TestAuth(t *testing.T) {
	ctx := ctxT(t)
	auth := &Auth{Clients: map[string]string{"spark": "s3cret"}, Key: []byte("k")}
	o := newMetacat(t).options()
	o.Auth = auth
	uri := serve(t, o)

	resp, err := http.Get(uri + "/v1/config")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/config without a token: %d, want 401", resp.StatusCode)
	}
	if _, err := rest.NewCatalog(ctx, "lakegate", uri, rest.WithCredential("spark:wrong")); err == nil {
		t.Fatal("a wrong secret was accepted")
	}
	cl := restClient(t, uri, rest.WithCredential("spark:s3cret"))
	if err := cl.CreateNamespace(ctx, table.Identifier{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	// An expired token is refused.
	auth2 := *auth
	auth2.Now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	old, _ := auth2.Issue("spark")
	if _, err := auth.check(old); err == nil {
		t.Fatal("an expired token was accepted")
	}
}

// TestReadOnlyTables: a table whose properties mark it as a stream's is
// refused to REST committers (403) and cannot be dropped or renamed, but
// loads.
func TestReadOnlyTables(t *testing.T) {
	ctx := ctxT(t)
	ms := meta.NewMem(meta.MemOptions{})
	defer ms.Close()
	streamTable := func(p ice.Properties) bool { _, ok := p["lakegate.format"]; return ok }
	wh := "file://" + filepath.ToSlash(t.TempDir())
	mc, err := metacat.Open(ms, metacat.Options{Root: "/lg/iceberg/", Warehouse: wh, Protected: streamTable})
	if err != nil {
		t.Fatal(err)
	}
	id := table.Identifier{"public", "orders"}
	if err := mc.CreateNamespace(ctx, id[:1], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateTable(ctx, id, userSchema, catalog.WithProperties(ice.Properties{"lakegate.format": "1"})); err != nil {
		t.Fatal(err)
	}
	cl := restClient(t, serve(t, Options{Catalog: mc, Warehouse: wh, ReadOnly: streamTable, AllowWrites: true}))
	tbl, err := cl.LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(ice.Properties{"x": "y"}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); !errors.Is(err, rest.ErrForbidden) {
		t.Fatalf("a client's commit to a stream table: %v, want 403", err)
	}
	if err := cl.DropTable(ctx, id); !errors.Is(err, rest.ErrForbidden) {
		t.Fatalf("a stream table dropped: %v, want 403", err)
	}
	if _, err := cl.RenameTable(ctx, id, table.Identifier{"public", "x"}); !errors.Is(err, rest.ErrForbidden) {
		t.Fatalf("a stream table renamed: %v, want 403", err)
	}
}

package e2e

// lakegate's Iceberg REST catalog on a three-node cluster with real
// clients (docs/iceberg-catalog.md): pyiceberg reads a topic's table
// through every node, two pyiceberg processes on two nodes append to one
// user table at once, and so do two iceberg-go REST clients. OAuth2 client
// credentials are on; the nodes run without auth.authorization, so the
// writes are opened with tables.iceberg.allowWrites. Needs LAKEGATE_PYICEBERG (a python with pyiceberg;
// e2e/interop/iceberg-catalog/run.sh sets it).

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/internal/testservers"
)

func TestClusterIcebergCatalogInterop(t *testing.T) {
	python := os.Getenv("LAKEGATE_PYICEBERG")
	if python == "" {
		t.Skip("LAKEGATE_PYICEBERG not set (e2e/interop/iceberg-catalog/run.sh)")
	}
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "e2e", "interop", "iceberg-catalog", "check_catalog.py")
	const cred = "reader:s3cret"
	c := startLGCluster(t, 3, "file://"+filepath.ToSlash(t.TempDir()),
		"--tables-age", "200ms", "--tables-interval", "300ms", "--tables-scan-interval", "500ms",
		"--tables-iceberg-clients", cred, "--tables-iceberg-token-key", "cluster-key",
		"--tables-iceberg-allow-writes") // no auth.authorization here: writes are opened explicitly
	ctx := ctxFor(t, 5*time.Minute)

	// A topic's table, read by pyiceberg through each node.
	if code := admDo(t, http.MethodPut, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/orders/partitions", "application/json", "2", nil); code/100 != 2 {
		t.Fatalf("create topic: HTTP %d", code)
	}
	const n = 100
	p, err := c.client(c.serviceURL()).CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/orders"})
	if err != nil {
		t.Fatal(err)
	}
	var payloads [][]byte
	for i := range n {
		b := fmt.Appendf(nil, "order-%03d", i)
		payloads = append(payloads, b)
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprint(i), Payload: b}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	waitForTable(t, ctx, c.nodes[1].httpURL, "public/default/orders", n, "DELTA", "ICEBERG")
	slices.SortFunc(payloads, func(a, b []byte) int { return strings.Compare(string(a), string(b)) })
	h := sha256.New()
	for _, b := range payloads {
		h.Write(b)
	}
	want := fmt.Sprintf("rows=%d payloads_sha256=%x", n, h.Sum(nil))
	py := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, python, append([]string{script}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("check_catalog.py %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, node := range c.nodes {
		if out := py("read", "--uri", node.httpURL+"/iceberg", "--credential", cred, "--table", "public.default.orders"); !strings.Contains(out, want) {
			t.Fatalf("pyiceberg through %s: %q, want %q", node.name, out, want)
		}
	}

	// Two pyiceberg committers, on two nodes, one user table.
	const per = 10
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for w, node := range []*lakegateProc{c.nodes[0], c.nodes[2]} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := exec.CommandContext(ctx, python, script, "append", "--uri", node.httpURL+"/iceberg", "--credential", cred,
				"--table", "analytics.events", "--writer", fmt.Sprint(w), "--count", fmt.Sprint(per)).CombinedOutput()
			outs[w] = string(o)
			if err != nil {
				outs[w] += " error: " + err.Error()
			}
		}()
	}
	wg.Wait()
	for w, o := range outs {
		if !strings.Contains(o, fmt.Sprintf("appended=%d", per)) {
			t.Fatalf("pyiceberg writer %d: %s", w, o)
		}
	}
	if out := py("count", "--uri", c.nodes[1].httpURL+"/iceberg", "--credential", cred, "--table", "analytics.events"); !strings.Contains(out, fmt.Sprintf("rows=%d distinct=%d snapshots=%d", 2*per, 2*per, 2*per)) {
		t.Fatalf("after two pyiceberg committers: %s", out)
	}
	t.Logf("pyiceberg committers: %s | %s", strings.TrimSpace(outs[0]), strings.TrimSpace(outs[1]))

	// Two iceberg-go committers, on two nodes.
	cats := make([]*rest.Catalog, 2)
	for i, node := range []*lakegateProc{c.nodes[1], c.nodes[2]} {
		if cats[i], err = rest.NewCatalog(ctx, "lakegate", node.httpURL+"/iceberg", rest.WithCredential(cred)); err != nil {
			t.Fatal(err)
		}
	}
	id := table.Identifier{"analytics", "events_go"}
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "writer", Type: ice.PrimitiveTypes.Int32, Required: true},
		ice.NestedField{ID: 2, Name: "seq", Type: ice.PrimitiveTypes.Int64, Required: true})
	if _, err := cats[0].CreateTable(ctx, id, sc, catalog.WithProperties(ice.Properties{table.CommitNumRetriesKey: "0"})); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for w, cat := range cats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if err := goAppend(ctx, cat, id, int32(w), int64(i)); err != nil {
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
	tbl, err := cats[0].LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tbl.Metadata().Snapshots()); got != 2*per {
		t.Fatalf("iceberg-go committers: %d snapshots, want %d", got, 2*per)
	}
	if out := py("count", "--uri", c.nodes[0].httpURL+"/iceberg", "--credential", cred, "--table", "analytics.events_go"); !strings.Contains(out, fmt.Sprintf("rows=%d distinct=%d", 2*per, 2*per)) {
		t.Fatalf("after two iceberg-go committers, pyiceberg counts: %s", out)
	}
}

// goAppend appends one row (writer, seq) through cat, retrying lost races.
func goAppend(ctx context.Context, cat catalog.Catalog, id table.Identifier, writer int32, seq int64) error {
	sc := arrow.NewSchema([]arrow.Field{{Name: "writer", Type: arrow.PrimitiveTypes.Int32}, {Name: "seq", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for range 100 {
		tbl, err := cat.LoadTable(ctx, id)
		if err != nil {
			return err
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
			return err
		}
		if _, err = txn.Commit(ctx); err == nil {
			return nil
		} else if !errors.Is(err, table.ErrCommitFailed) {
			return err
		}
	}
	return fmt.Errorf("writer %d seq %d: too many conflicts", writer, seq)
}

package tables

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakestream"
)

// TestTableViewScanAndInfo compacts part of a log and reads the stream's
// table back through lakestream.Table: Scan returns exactly the compacted
// records in offset order, Info reports the rows and how far the log is
// ahead of the table.
func TestTableViewScanAndInfo(t *testing.T) {
	env := newMemEnv(t)
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e := env.engine(t, Options{Now: clk.now, CompactMaxBytes: 8 << 10, Logger: quietLogger})
	ctx := ctxT(t)
	const id = 9
	md := lakestream.StreamMetadata{
		ID:     lakestream.StreamIdentifier{Namespace: "public/default", Name: "orders"},
		LogIDs: []lakestream.LogID{id}, Partitioning: lakestream.Partitioning{NumPartitions: 4},
	}
	tv := e.tables.View(md, "mem://bucket?x=y")
	if _, err := tv.Scan(ctx); !errors.Is(err, lakestream.ErrNotMaterialized) {
		t.Fatalf("Scan before compaction: %v, want ErrNotMaterialized", err)
	}
	if _, err := tv.Info(ctx); !errors.Is(err, lakestream.ErrNotMaterialized) {
		t.Fatalf("Info before compaction: %v, want ErrNotMaterialized", err)
	}

	r := rand.New(rand.NewPCG(3, 4))
	compacted := appendPulsar(t, e, id, r, 40, clk.now().UnixMilli())
	clk.advance(time.Minute)
	young := appendPulsar(t, e, id, r, 5, clk.now().UnixMilli())
	if compactAll(t, e, id) == 0 {
		t.Fatal("nothing compacted")
	}

	batches, err := tv.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	next := int64(0)
	for _, b := range batches {
		rd, err := ipc.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for rd.Next() {
			rec := rd.RecordBatch()
			offs := rec.Column(rec.Schema().FieldIndices(lakehouse.ColOffset)[0]).(*array.Int64)
			for i := 0; i < offs.Len(); i++ {
				// Batched entries give several rows one offset each; the
				// offsets are the records' own, consecutive.
				if offs.Value(i) != next {
					t.Fatalf("row %d has offset %d, want %d", rows, offs.Value(i), next)
				}
				next++
				rows++
			}
		}
		if err := rd.Err(); err != nil {
			t.Fatal(err)
		}
		rd.Release()
	}
	if rows != compacted {
		t.Fatalf("Scan returned %d rows, want the %d compacted records", rows, compacted)
	}

	info, err := tv.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Location != "mem://bucket/tables/public/default/orders" {
		t.Fatalf("location %q", info.Location)
	}
	if len(info.Formats) != 1 || info.Formats[0].Format != lakestream.TableDelta || info.Formats[0].Rows != compacted || info.Formats[0].Files == 0 {
		t.Fatalf("formats %+v, want one DELTA with %d rows", info.Formats, compacted)
	}
	if len(info.Partitions) != 1 {
		t.Fatalf("partitions %+v", info.Partitions)
	}
	p := info.Partitions[0]
	if p.Partition != 0 || p.Log != id || p.CompactedEnd != compacted || p.LogEnd != compacted+young {
		t.Fatalf("partition %+v, want partition 0 log %d compacted to %d of %d", p, id, compacted, compacted+young)
	}
}

// scanOffsets decodes the batches Scan returned into their __offset values.
func scanOffsets(t *testing.T, batches [][]byte) []int64 {
	t.Helper()
	var out []int64
	for _, b := range batches {
		rd, err := ipc.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for rd.Next() {
			rec := rd.RecordBatch()
			offs := rec.Column(rec.Schema().FieldIndices(lakehouse.ColOffset)[0]).(*array.Int64)
			for i := 0; i < offs.Len(); i++ {
				out = append(out, offs.Value(i))
			}
		}
		if err := rd.Err(); err != nil {
			t.Fatal(err)
		}
		rd.Release()
	}
	return out
}

// TestTableViewScanIcebergOnly: a stream materialized into Iceberg only is
// scanned from its Iceberg table, rows in offset order, before and after
// bin-packing.
func TestTableViewScanIcebergOnly(t *testing.T) {
	env := newIcebergEnv(t)
	clk := &testClock{t: time.Now()}
	opts := binpackOpts(env, clk)
	e := env.engine(t, opts)
	const id = 9
	md := lakestream.StreamMetadata{
		ID:     lakestream.StreamIdentifier{Namespace: "public/default", Name: "orders"},
		LogIDs: []lakestream.LogID{id}, Partitioning: lakestream.Partitioning{NumPartitions: 4},
	}
	tv := e.tables.View(md, "file:///x")
	if _, err := tv.Scan(ctxT(t)); !errors.Is(err, lakestream.ErrNotMaterialized) {
		t.Fatalf("Scan before compaction: %v, want ErrNotMaterialized", err)
	}
	icebergOnly := ordersBoth
	icebergOnly.Delta = false
	r := rand.New(rand.NewPCG(5, 6))
	var records int64
	for round := range 3 {
		records += appendPulsar(t, e, id, r, 15, clk.now().UnixMilli()+int64(round))
	}
	clk.advance(time.Minute)
	if compactAllTo(t, e, id, icebergOnly) < 3 {
		t.Fatal("want several ranges")
	}
	check := func(when string) {
		batches, err := tv.Scan(ctxT(t))
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		offs := scanOffsets(t, batches)
		if int64(len(offs)) != records {
			t.Fatalf("%s: %d rows, want %d", when, len(offs), records)
		}
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("%s: row %d has offset %d", when, i, o)
			}
		}
	}
	check("after compaction")
	if st, err := e.tables.Binpack(ctxT(t), id, icebergOnly); err != nil || st.Groups == 0 {
		t.Fatalf("repack: %+v, %v", st, err)
	}
	check("after bin-packing")
}

// TestTableViewInfoIgnoresAnotherIcebergTable: a table at the stream's
// Iceberg identifier that is not the stream's (a client's, made before
// the REST catalog reserved those identifiers) is not reported as the
// stream's table: its metadata location would send readers elsewhere.
func TestTableViewInfoIgnoresAnotherIcebergTable(t *testing.T) {
	env := newIcebergEnv(t)
	clk := &testClock{t: time.Now()}
	e := env.engine(t, env.opts(clk))
	ctx := ctxT(t)
	md := lakestream.StreamMetadata{
		ID:     lakestream.StreamIdentifier{Namespace: "public/default", Name: "orders"},
		LogIDs: []lakestream.LogID{9}, Partitioning: lakestream.Partitioning{NumPartitions: 1},
	}
	cat, err := e.tables.IcebergCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []table.Identifier{{"public"}, {"public", "default"}} {
		if err := cat.Catalog().CreateNamespace(ctx, ns, nil); err != nil {
			t.Fatal(err)
		}
	}
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "x", Type: ice.PrimitiveTypes.Int64, Required: true})
	if _, err := cat.Catalog().CreateTable(ctx, table.Identifier(IcebergIdent(md.ID)), sc,
		catalog.WithLocation(cat.Warehouse()+"/public/default/orders")); err != nil {
		t.Fatal(err)
	}
	if info, err := e.tables.View(md, "file:///x").Info(ctx); !errors.Is(err, lakestream.ErrNotMaterialized) {
		t.Fatalf("Info with another table at the identifier: %+v %v, want ErrNotMaterialized", info, err)
	}
}

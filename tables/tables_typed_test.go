package tables

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// jsonEntry is one unbatched Pulsar entry with a JSON payload.
func jsonEntry(t *testing.T, seq uint64, publishMs int64, payload string) []byte {
	t.Helper()
	md := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(uint64(publishMs))}
	meta, err := protocol.MarshalMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := protocol.AppendEntry(nil, meta, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

// typedSums sums the int64/float64 values and counts the non-null values
// of a column over record batches that may lack it (older files).
type typedSums map[string]struct {
	nonNull int64
	sum     float64
}

func (s typedSums) add(rec arrow.RecordBatch) {
	for i, f := range rec.Schema().Fields() {
		c := rec.Column(i)
		e := s[f.Name]
		e.nonNull += int64(c.Len() - c.NullN())
		for k := range c.Len() {
			if c.IsNull(k) {
				continue
			}
			switch v := c.(type) {
			case *array.Int64:
				e.sum += float64(v.Value(k))
			case *array.Float64:
				e.sum += v.Value(k)
			}
		}
		s[f.Name] = e
	}
}

// TestCompactToTableTypedColumns compacts JSON-schema entries into Delta
// and Iceberg, then evolves the schema (a new field) and compacts more:
// both tables get the typed columns with the same field ids, the new
// column is added to both schemas, and the values decode.
func TestCompactToTableTypedColumns(t *testing.T) {
	env := newIcebergEnv(t)
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e := env.engine(t, env.opts(clk))
	const id = 9
	v1 := `{"type":"record","name":"P","fields":[{"name":"id","type":"long"},{"name":"name","type":["null","string"]}]}`
	v2 := `{"type":"record","name":"P","fields":[{"name":"id","type":"long"},{"name":"name","type":["null","string"]},{"name":"price","type":"double"}]}`
	target := Target{Root: "tables/public/default/prices", Partition: -1, Delta: true, Iceberg: true,
		Ident: []string{"public", "default", "prices"}, Schema: lakestream.SchemaConfig{Type: lakestream.SchemaJSON, Definition: []byte(v1)}}
	ctx := ctxT(t)
	for i := range 20 {
		p := fmt.Sprintf(`{"id":%d,"name":"n%d"}`, i, i)
		if _, err := e.Append(ctx, id, 1, jsonEntry(t, uint64(i), clk.now().UnixMilli(), p)); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(time.Minute)
	compactAllTo(t, e, id, target)
	target.Schema.Definition = []byte(v2)
	for i := 20; i < 40; i++ {
		p := fmt.Sprintf(`{"id":%d,"name":null,"price":%d.5}`, i, i)
		if _, err := e.Append(ctx, id, 1, jsonEntry(t, uint64(i), clk.now().UnixMilli(), p)); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(time.Minute)
	compactAllTo(t, e, id, target)

	var idSum, priceSum float64
	for i := range 40 {
		idSum += float64(i)
		if i >= 20 {
			priceSum += float64(i) + 0.5
		}
	}
	check := func(reader string, s typedSums, rows int64) {
		t.Helper()
		if rows != 40 || s["id"].nonNull != 40 || s["id"].sum != idSum || s["name"].nonNull != 20 ||
			s["price"].nonNull != 20 || s["price"].sum != priceSum {
			t.Fatalf("%s: rows %d, typed %+v; want 40 rows, id sum %v, 20 names, 20 prices summing to %v", reader, rows, s, idSum, priceSum)
		}
	}

	// Delta: the schema has the three columns with their ids; the rows decode.
	tbl, err := delta.Open(ctx, env.store, target.Root)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := typedFromDelta(snap.Schema)
	if err != nil {
		t.Fatal(err)
	}
	if ts == nil || len(ts.Fields) != 3 || ts.Fields[0].Name != "id" || ts.Fields[0].ID != 1000 || ts.Fields[2].Name != "price" || ts.Fields[2].ID != 1002 {
		t.Fatalf("Delta typed columns: %+v", ts)
	}
	sums := typedSums{}
	var rows int64
	if err := ScanTable(ctx, env.store, target.Root, func(rec arrow.RecordBatch) error {
		sums.add(rec)
		rows += rec.NumRows()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("delta", sums, rows)

	// Iceberg: the same ids, the same values (old files read price as null).
	cat, err := iceberg.Open(ctx, env.catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	itbl, err := cat.Catalog().LoadTable(ctx, table.Identifier(target.Ident))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ts.Fields {
		got, ok := itbl.Schema().FindFieldByName(f.Name)
		if !ok || got.ID != int(f.ID) || got.Required {
			t.Fatalf("Iceberg column %s: %+v (found %v), want optional id %d", f.Name, got, ok, f.ID)
		}
	}
	_, recs, err := itbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	isums := typedSums{}
	rows = 0
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		isums.add(rec)
		rows += rec.NumRows()
		rec.Release()
	}
	check("iceberg", isums, rows)
}

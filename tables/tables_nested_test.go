package tables

// Nested typed columns in compacted tables (docs/table-schema.md, "Nested
// columns"): a stream with an Avro or JSON record schema holding a nested
// record, an array of ints, an array of records, a map<string,long> and an
// optional nested record is compacted into Delta and Iceberg, the schema
// then gains a nested field, more is compacted, and every reader gets the
// values back as structs, lists and maps: lakegate's own ScanTable (before
// and after bin-packing) and table view Scan, iceberg-go, and, when their pythons are given, delta-rs and pyiceberg:
//
//	LAKEGATE_PYTHON=$(e2e/interop/delta/setup.sh | tail -1) \
//	LAKEGATE_PYICEBERG=$(e2e/interop/iceberg/setup.sh | tail -1) \
//	go test -p 1 -run Nested ./tables/
//
// Without them those two readers are skipped (logged; a skip is not a pass).
// TestSparkReadsNestedTable has Spark 3.5 + delta-spark read the same Delta
// tables (needs LAKEGATE_SPARK_PYTHON and LAKEGATE_SPARK_JARS, skipped
// without them; e2e/interop/spark/run.sh sets them and fails on a skip).

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/iceberg-go/table"
	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakehouse/lakehousetest"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// nestedV1 has the five nested shapes; nestedV2 adds country to Address
// (lakehousetest).
var nestedV1, nestedV2 = lakehousetest.NestedOrderV1, lakehousetest.NestedOrderV2

var nestedColumns = []string{"id", "customer", "qty", "lines", "counts", "ship"}

type tAddress struct {
	City    string  `avro:"city" json:"city"`
	Country *string `avro:"country" json:"country,omitempty"`
	Zip     *int32  `avro:"zip" json:"zip"`
}

type tLine struct {
	Sku   string  `avro:"sku" json:"sku"`
	Price float64 `avro:"price" json:"price"`
}

type tOrder struct {
	ID       int64 `avro:"id" json:"id"`
	Customer struct {
		Name    string   `avro:"name" json:"name"`
		Address tAddress `avro:"address" json:"address"`
	} `avro:"customer" json:"customer"`
	Qty    []int32          `avro:"qty" json:"qty"`
	Lines  []tLine          `avro:"lines" json:"lines"`
	Counts map[string]int64 `avro:"counts" json:"counts"`
	Ship   *tAddress        `avro:"ship" json:"ship"`
}

func randTOrder(r *rand.Rand, id int64, v2 bool) tOrder {
	str := func() string { return fmt.Sprintf("s%d", r.IntN(1000)) }
	addr := func() tAddress {
		a := tAddress{City: str()}
		if r.IntN(2) == 0 {
			z := r.Int32()
			a.Zip = &z
		}
		if v2 && r.IntN(3) > 0 {
			c := str()
			a.Country = &c
		}
		return a
	}
	var o tOrder
	o.ID = id
	o.Customer.Name, o.Customer.Address = str(), addr()
	o.Qty, o.Lines, o.Counts = []int32{}, []tLine{}, map[string]int64{}
	for range r.IntN(4) {
		o.Qty = append(o.Qty, int32(r.Uint32()))
	}
	for range r.IntN(3) {
		o.Lines = append(o.Lines, tLine{str(), r.NormFloat64()*100 + 0.25})
	}
	for range r.IntN(4) {
		o.Counts[str()] = int64(r.Uint64())
	}
	if r.IntN(2) == 0 {
		a := addr()
		o.Ship = &a
	}
	return o
}

// want is the row as every reader must return it, in canonical form
// (canonJSON): after the evolution every Address has a country.
func (o tOrder) want(t *testing.T) map[string]any {
	addr := func(a tAddress) map[string]any {
		return map[string]any{"city": a.City, "country": a.Country, "zip": a.Zip}
	}
	lines := []any{}
	for _, l := range o.Lines {
		lines = append(lines, map[string]any{"sku": l.Sku, "price": l.Price})
	}
	var ship any
	if o.Ship != nil {
		ship = addr(*o.Ship)
	}
	return canonJSON(t, map[string]any{
		"id": o.ID, "customer": map[string]any{"name": o.Customer.Name, "address": addr(o.Customer.Address)},
		"qty": o.Qty, "lines": lines, "counts": o.Counts, "ship": ship,
	}).(map[string]any)
}

// canonJSON returns v as JSON decodes it, numbers as int64 when written
// without a fraction or exponent and float64 otherwise, so values from Go
// and from Python's json compare equal.
func canonJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return canonNumbers(out)
}

func canonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if !strings.ContainsAny(x.String(), ".eE") {
			if n, err := x.Int64(); err == nil {
				return n
			}
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = canonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonNumbers(e)
		}
	}
	return v
}

// arrowGo is row i of col as lakehousetest.ArrowValue returns it.
func arrowGo(t *testing.T, col arrow.Array, i int) any {
	t.Helper()
	v, err := lakehousetest.ArrowValue(col, i)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// nestedRows collects the nested columns of record batches by id.
func nestedRows(t *testing.T, got map[int64]map[string]any, rec arrow.RecordBatch) {
	t.Helper()
	for i := range int(rec.NumRows()) {
		row := map[string]any{}
		for _, c := range nestedColumns {
			idx := rec.Schema().FieldIndices(c)
			if len(idx) == 0 {
				t.Fatalf("no column %s in %s", c, rec.Schema())
			}
			row[c] = arrowGo(t, rec.Column(idx[0]), i)
		}
		id := row["id"].(int64)
		if _, dup := got[id]; dup {
			t.Fatalf("row %d twice", id)
		}
		got[id] = canonJSON(t, row).(map[string]any)
	}
}

func sameRows(t *testing.T, reader string, got map[int64]map[string]any, want map[int64]map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", reader, len(got), len(want))
	}
	for id, w := range want {
		if !reflect.DeepEqual(got[id], w) {
			t.Fatalf("%s: row %d:\n got %v\nwant %v", reader, id, got[id], w)
		}
	}
}

func deltaFileCount(t *testing.T, env icebergEnv, root string) int {
	t.Helper()
	tbl, err := delta.Open(ctxT(t), env.store, root)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return len(snap.Files)
}

// withCountry adds the country ScanTable does not find in files written
// before it existed (ScanTable reads each file with its own schema).
func withCountry(rows map[int64]map[string]any) map[int64]map[string]any {
	for _, r := range rows {
		for _, a := range []any{r["customer"].(map[string]any)["address"], r["ship"]} {
			if a, ok := a.(map[string]any); ok {
				if _, has := a["country"]; !has {
					a["country"] = nil
				}
			}
		}
	}
	return rows
}

func TestCompactToTableNested(t *testing.T) {
	for _, kind := range []lakestream.SchemaType{lakestream.SchemaAvro, lakestream.SchemaJSON} {
		t.Run(string(kind), func(t *testing.T) { compactNested(t, kind) })
	}
}

// nestedTable is a stream of one kind compacted into Delta and Iceberg
// with the nested columns, in two schema versions: rows 0-29 with
// nestedV1, then rows 30-59 with nestedV2 (country added to Address), so
// the files of the first compactions lack country. want holds every row
// by id as every reader must return it.
type nestedTable struct {
	env    icebergEnv
	e      testNode
	id     lakestream.LogID
	target Target
	want   map[int64]map[string]any
}

func newNestedTable(t *testing.T, kind lakestream.SchemaType) nestedTable {
	t.Helper()
	env := newIcebergEnv(t)
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e := env.engine(t, binpackOpts(env, clk)) // small files, to bin-pack
	ctx := ctxT(t)
	const id = 9
	ver := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	target := Target{Root: "tables/public/default/orders_nested", Partition: -1, Delta: true, Iceberg: true,
		Ident: []string{"public", "default", "orders_nested"}, Schema: lakestream.SchemaConfig{Type: kind, Definition: []byte(nestedV1)}}
	if kind == lakestream.SchemaAvro {
		target.Writers = map[string][]byte{string(ver(0)): []byte(nestedV1), string(ver(1)): []byte(nestedV2)}
	}
	r := rand.New(rand.NewPCG(21, 5))
	want := map[int64]map[string]any{}
	produce := func(from, to int64, version uint64, def string) {
		sc := avro.MustParse(def)
		for i := from; i < to; i++ {
			o := randTOrder(r, i, version == 1)
			want[i] = o.want(t)
			var payload []byte
			var err error
			if kind == lakestream.SchemaAvro {
				payload, err = avro.Marshal(sc, o)
			} else {
				payload, err = json.Marshal(o)
			}
			if err != nil {
				t.Fatal(err)
			}
			md := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(uint64(i)),
				PublishTime: proto.Uint64(uint64(clk.now().UnixMilli())), SchemaVersion: ver(version)}
			meta, err := protocol.MarshalMetadata(md)
			if err != nil {
				t.Fatal(err)
			}
			entry, err := protocol.AppendEntry(nil, meta, payload)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Append(ctx, id, 1, entry); err != nil {
				t.Fatal(err)
			}
		}
		clk.advance(time.Minute)
	}
	produce(0, 30, 0, nestedV1)
	compactAllTo(t, e, id, target)
	target.Schema.Definition = []byte(nestedV2)
	produce(30, 60, 1, nestedV2)
	compactAllTo(t, e, id, target)
	return nestedTable{env: env, e: e, id: id, target: target, want: want}
}

func compactNested(t *testing.T, kind lakestream.SchemaType) {
	nt := newNestedTable(t, kind)
	env, e, id, target, want := nt.env, nt.e, nt.id, nt.target, nt.want
	ctx := ctxT(t)

	// The table's typed schema: nested ids, country added to both Address uses.
	ts, err := e.tables.loadTableSchema(ctx, target.Root)
	if err != nil || ts == nil {
		t.Fatalf("typed schema: %v %v", ts, err)
	}
	ids := map[string]int32{}
	var walk func(prefix string, fs []lakehouse.TypedField)
	walk = func(prefix string, fs []lakehouse.TypedField) {
		for _, f := range fs {
			ids[prefix+f.Name] = f.ID
			walk(prefix+f.Name+".", f.Children)
		}
	}
	walk("", ts.Fields)
	if ids["customer.address.country"] != 1018 || ids["ship.country"] != 1019 || ids["counts.value"] != 1014 {
		t.Fatalf("typed ids %v", ids)
	}

	// lakegate's own reader (ScanTable, what `lakegate table scan` uses).
	got := map[int64]map[string]any{}
	if err := ScanTable(ctx, env.store, target.Root, func(rec arrow.RecordBatch) error {
		nestedRows(t, got, rec)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "ScanTable", withCountry(got), want)

	// iceberg-go: the nested field ids of the typed schema, optional.
	cat, err := iceberg.Open(ctx, env.catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	itbl, err := cat.Catalog().LoadTable(ctx, table.Identifier(target.Ident))
	if err != nil {
		t.Fatal(err)
	}
	for name, fid := range ids {
		f, ok := itbl.Schema().FindFieldByName(name)
		if !ok || f.ID != int(fid) {
			t.Fatalf("Iceberg field %s: %+v (found %v), want id %d", name, f, ok, fid)
		}
	}
	_, recs, err := itbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = map[int64]map[string]any{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		nestedRows(t, got, rec)
		rec.Release()
	}
	sameRows(t, "iceberg-go", got, want)

	// Bin-packing rewrites the small files with the current columns,
	// decoding every row again: the same values.
	before := deltaFileCount(t, env, target.Root)
	if st, err := e.tables.Binpack(ctx, id, target); err != nil || st.Groups == 0 {
		t.Fatalf("repack: %+v %v", st, err)
	}
	if after := deltaFileCount(t, env, target.Root); after >= before {
		t.Fatalf("repack: %d files → %d", before, after)
	}
	got = map[int64]map[string]any{}
	if err := ScanTable(ctx, env.store, target.Root, func(rec arrow.RecordBatch) error {
		nestedRows(t, got, rec)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "ScanTable after bin-packing", withCountry(got), want)

	// The stream's table view (Stream.Table().Scan(): Arrow IPC batches).
	md := lakestream.StreamMetadata{ID: lakestream.StreamIdentifier{Namespace: "public/default", Name: "orders_nested"}, LogIDs: []lakestream.LogID{id}}
	if TableRoot(md.ID) != target.Root {
		t.Fatalf("table root %s", TableRoot(md.ID))
	}
	batches, err := e.tables.View(md, "file:///x").Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = map[int64]map[string]any{}
	for _, b := range batches {
		rd, err := ipc.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for rd.Next() {
			nestedRows(t, got, rd.RecordBatch())
		}
		if err := rd.Err(); err != nil {
			t.Fatal(err)
		}
		rd.Release()
	}
	sameRows(t, "View.Scan", withCountry(got), want)

	script, err := filepath.Abs("../e2e/interop/nested_rows.py")
	if err != nil {
		t.Fatal(err)
	}
	readers := []struct {
		name, env string
		args      []string
	}{
		{"delta-rs", "LAKEGATE_PYTHON", []string{"--delta", filepath.Join(env.dir, target.Root)}},
		{"pyiceberg", "LAKEGATE_PYICEBERG", []string{"--iceberg-db", env.catalog.URI, "--table", strings.Join(target.Ident, ".")}},
	}
	for _, rd := range readers {
		python := os.Getenv(rd.env)
		if python == "" {
			t.Logf("%s not set: %s not checked", rd.env, rd.name)
			continue
		}
		args := append(append([]string{script}, rd.args...), "--columns", strings.Join(nestedColumns, ","))
		out, err := exec.CommandContext(ctx, python, args...).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%s: %v: %s", rd.name, err, stderr)
		}
		var doc struct {
			Types map[string]string `json:"types"`
			Rows  []map[string]any  `json:"rows"`
		}
		d := json.NewDecoder(bytes.NewReader(out))
		d.UseNumber()
		if err := d.Decode(&doc); err != nil {
			t.Fatalf("%s: %v: %s", rd.name, err, out)
		}
		t.Logf("%s types: %v", rd.name, doc.Types)
		for c, prefix := range map[string]string{"customer": "struct<", "qty": "list<", "lines": "list<element: struct<", "counts": "map<string, int64", "ship": "struct<"} {
			if !strings.HasPrefix(doc.Types[c], prefix) {
				t.Fatalf("%s: column %s is %s, want %s…", rd.name, c, doc.Types[c], prefix)
			}
		}
		got := map[int64]map[string]any{}
		for _, row := range doc.Rows {
			row := canonNumbers(row).(map[string]any)
			got[row["id"].(int64)] = row
		}
		sameRows(t, rd.name, got, want)
	}
}

// TestSparkReadsNestedTable has Spark 3.5 + delta-spark (the local
// stand-in for Databricks) read the nested columns of the Delta tables of
// newNestedTable, an Avro and a JSON stream, through
// e2e/interop/spark/check_nested.py (one Spark session for all reads):
// each table at the version before bin-packing (the files of the first
// schema version lack country: Spark must read it as null there) and at
// the latest one (after bin-packing). The columns must be Spark's
// StructType, ArrayType and MapType with the fields of the table schema,
// and every row must hold the values produced. Needs the python and jars
// of e2e/interop/spark/setup.sh:
//
//	e2e/interop/spark/run.sh
//	# or by hand:
//	out=$(e2e/interop/spark/setup.sh)
//	LAKEGATE_SPARK_PYTHON=$(tail -2 <<<"$out" | head -1) LAKEGATE_SPARK_JARS=$(tail -1 <<<"$out") \
//	  go test -p 1 -count=1 -run TestSparkReadsNestedTable -v ./tables/
//
// Without both variables the test is skipped (a skip is not a pass: run.sh
// fails on it). It starts one JVM: ~1-2 min on a busy 2-core machine.
func TestSparkReadsNestedTable(t *testing.T) {
	python, jars := os.Getenv("LAKEGATE_SPARK_PYTHON"), os.Getenv("LAKEGATE_SPARK_JARS")
	if python == "" || jars == "" {
		t.Skip("LAKEGATE_SPARK_PYTHON and LAKEGATE_SPARK_JARS not set: Spark/delta-spark nested columns not checked (run e2e/interop/spark/run.sh)")
	}
	script, err := filepath.Abs("../e2e/interop/spark/check_nested.py")
	if err != nil {
		t.Fatal(err)
	}
	// One Spark JVM reads every table: its start and jobs take well over
	// ctxT's minute on a loaded two-core machine (CI runs suites in two
	// lanes).
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	wants := map[string]map[int64]map[string]any{} // by table spec
	labels := map[string]string{}
	var specs []string
	for _, kind := range []lakestream.SchemaType{lakestream.SchemaAvro, lakestream.SchemaJSON} {
		nt := newNestedTable(t, kind)
		tbl, err := delta.Open(ctx, nt.env.store, nt.target.Root)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := nt.e.tables.Binpack(ctx, nt.id, nt.target); err != nil || st.Groups == 0 {
			t.Fatalf("%s: repack: %+v %v", kind, st, err)
		}
		dir := filepath.Join(nt.env.dir, nt.target.Root)
		before := fmt.Sprintf("%s@%d", dir, snap.Version)
		specs = append(specs, before, dir)
		wants[before], wants[dir] = nt.want, nt.want
		labels[before] = fmt.Sprintf("%s table at version %d (before bin-packing)", kind, snap.Version)
		labels[dir] = fmt.Sprintf("%s table (latest, after bin-packing)", kind)
	}

	args := append([]string{script, "--columns", strings.Join(nestedColumns, ",")}, specs...)
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = append(os.Environ(), "LAKEGATE_SPARK_JARS="+jars)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	out := bytes.TrimSpace(stdout.Bytes())
	out = out[bytes.LastIndexByte(out, '\n')+1:]
	if err != nil {
		tail := stderr.String()
		tail = tail[max(0, len(tail)-4000):]
		t.Fatalf("check_nested.py: %v: %s\nstderr (tail):\n%s", err, out, tail)
	}
	var doc struct {
		Spark  string `json:"spark"`
		Tables []struct {
			Table string           `json:"table"`
			Types map[string]any   `json:"types"`
			Rows  []map[string]any `json:"rows"`
		} `json:"tables"`
	}
	d := json.NewDecoder(bytes.NewReader(out))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		t.Fatalf("check_nested.py output: %v: %s", err, out)
	}
	if len(doc.Tables) != len(specs) {
		t.Fatalf("Spark %s read %d tables, want %d", doc.Spark, len(doc.Tables), len(specs))
	}
	// Spark's types, struct fields sorted by name (Delta appends a field
	// added by evolution at the end; readers match fields by name).
	wantTypes := map[string]string{
		"id":       "long",
		"customer": "struct<address:struct<city:string,country:string,zip:integer>,name:string>",
		"qty":      "array<integer>",
		"lines":    "array<struct<price:double,sku:string>>",
		"counts":   "map<string,long>",
		"ship":     "struct<city:string,country:string,zip:integer>",
	}
	for _, tb := range doc.Tables {
		name := "Spark " + doc.Spark + ", " + labels[tb.Table]
		for c, w := range wantTypes {
			if got := sparkTypeString(tb.Types[c]); got != w {
				t.Fatalf("%s: column %s is %s (%v), want %s", name, c, got, tb.Types[c], w)
			}
		}
		got := map[int64]map[string]any{}
		for _, row := range tb.Rows {
			row := canonNumbers(row).(map[string]any)
			got[row["id"].(int64)] = row
		}
		sameRows(t, name, got, wants[tb.Table])
	}
}

// sparkTypeString renders a Spark type as DataType.jsonValue() gives it
// (check_nested.py) like simpleString, with struct fields sorted by name:
// "long", "array<integer>", "map<string,long>", "struct<a:string,b:long>".
func sparkTypeString(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprint(v)
	}
	switch m["type"] {
	case "struct":
		fs, _ := m["fields"].([]any)
		var parts []string
		for _, f := range fs {
			f, _ := f.(map[string]any)
			parts = append(parts, fmt.Sprintf("%v:%s", f["name"], sparkTypeString(f["type"])))
		}
		slices.Sort(parts)
		return "struct<" + strings.Join(parts, ",") + ">"
	case "array":
		return "array<" + sparkTypeString(m["elementType"]) + ">"
	case "map":
		return "map<" + sparkTypeString(m["keyType"]) + "," + sparkTypeString(m["valueType"]) + ">"
	}
	return fmt.Sprint(m)
}

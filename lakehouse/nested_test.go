package lakehouse

// Nested typed columns (docs/table-schema.md, "Nested columns"): the
// mapping of records, arrays and maps with their field ids, evolution, and
// values decoded from JSON and Avro payloads written to Parquet and read
// back. Run: go test -run 'Nested' ./lakehouse/
// Fuzz: go test -run '^$' -fuzz FuzzNestedDecode ./lakehouse/

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hamba/avro/v2"

	"github.com/lakegate/lakegate/lakehouse/lakehousetest"
)

// nestedDef: the five nested shapes (lakehousetest.NestedOrderV1).
const nestedDef = lakehousetest.NestedOrderV1

type nAddress struct {
	City string `avro:"city" json:"city"`
	Zip  *int32 `avro:"zip" json:"zip"`
}

type nCustomer struct {
	Name    string   `avro:"name" json:"name"`
	Address nAddress `avro:"address" json:"address"`
}

type nLine struct {
	Sku   string  `avro:"sku" json:"sku"`
	Price float64 `avro:"price" json:"price"`
}

type nOrder struct {
	ID       int64            `avro:"id" json:"id"`
	Customer nCustomer        `avro:"customer" json:"customer"`
	Qty      []int32          `avro:"qty" json:"qty"`
	Lines    []nLine          `avro:"lines" json:"lines"`
	Counts   map[string]int64 `avro:"counts" json:"counts"`
	Ship     *nAddress        `avro:"ship" json:"ship"`
}

// want is the row arrowValue reads back for o.
func (o nOrder) want() []any {
	addr := func(a nAddress) map[string]any {
		var zip any
		if a.Zip != nil {
			zip = *a.Zip
		}
		return map[string]any{"city": a.City, "zip": zip}
	}
	qty := []any{}
	for _, q := range o.Qty {
		qty = append(qty, q)
	}
	lines := []any{}
	for _, l := range o.Lines {
		lines = append(lines, map[string]any{"sku": l.Sku, "price": l.Price})
	}
	counts := map[string]any{}
	for k, v := range o.Counts {
		counts[k] = v
	}
	var ship any
	if o.Ship != nil {
		ship = addr(*o.Ship)
	}
	return []any{o.ID, map[string]any{"name": o.Customer.Name, "address": addr(o.Customer.Address)}, qty, lines, counts, ship}
}

func randOrder(r *rand.Rand, id int64) nOrder {
	str := func() string { return fmt.Sprintf("s%d", r.IntN(1000)) }
	addr := func() nAddress {
		a := nAddress{City: str()}
		if r.IntN(2) == 0 {
			z := r.Int32()
			a.Zip = &z
		}
		return a
	}
	o := nOrder{ID: id, Customer: nCustomer{Name: str(), Address: addr()}, Qty: []int32{}, Lines: []nLine{}, Counts: map[string]int64{}}
	for range r.IntN(4) {
		o.Qty = append(o.Qty, int32(r.Uint32()))
	}
	for range r.IntN(3) {
		o.Lines = append(o.Lines, nLine{Sku: str(), Price: r.NormFloat64() * 100})
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

// shape renders a field tree as "name:type#id(children)".
func shape(fs []TypedField) string {
	var parts []string
	for _, f := range fs {
		s := fmt.Sprintf("%s:%s#%d", f.Name, f.Type, f.ID)
		if f.Retired {
			s += "!"
		}
		if len(f.Children) > 0 {
			s += "(" + shape(f.Children) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestNestedMapping(t *testing.T) {
	for _, kind := range []SchemaKind{KindJSON, KindAvro} {
		ts, err := NewRecordSchema(kind, []byte(nestedDef), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := "id:int64#1000 customer:struct#1001(name:string#1002 address:struct#1003(city:string#1004 zip:int32#1005)) " +
			"qty:list#1006(element:int32#1007) lines:list#1008(element:struct#1009(sku:string#1010 price:float64#1011)) " +
			"counts:map#1012(key:string#1013 value:int64#1014) ship:struct#1015(city:string#1016 zip:int32#1017)"
		if got := shape(ts.Fields); got != want || ts.NextFieldID != 1018 {
			t.Fatalf("%s mapping:\n got %s (next %d)\nwant %s (next 1018)", kind, got, ts.NextFieldID, want)
		}
	}

	// A recursive reference and a union of two types stay JSON text.
	rec := `{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},
		{"name":"next","type":["null","Node"]},
		{"name":"kids","type":{"type":"array","items":"Node"}},
		{"name":"either","type":["null","int",{"type":"record","name":"X","fields":[{"name":"a","type":"int"}]}]}]}`
	ts, err := NewRecordSchema(KindJSON, []byte(rec), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := shape(ts.Fields), "v:int32#1000 next:json#1001 kids:list#1002(element:json#1003) either:json#1004"; got != want {
		t.Fatalf("recursive:\n got %s\nwant %s", got, want)
	}

	// Nesting deeper than MaxNestedDepth levels is JSON text.
	def := `"int"`
	for i := 20; i > 0; i-- {
		def = fmt.Sprintf(`{"type":"record","name":"L%d","fields":[{"name":"f","type":%s}]}`, i, def)
	}
	ts, err = NewRecordSchema(KindAvro, []byte(`{"type":"record","name":"Top","fields":[{"name":"deep","type":`+def+`}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := ts.Fields[0]
	for level := 1; level <= MaxNestedDepth; level++ {
		if f.Type != TypeStruct {
			t.Fatalf("level %d: %s, want struct", level, f.Type)
		}
		f = f.Children[0]
	}
	if f.Type != TypeJSON {
		t.Fatalf("level %d: %s, want json", MaxNestedDepth+1, f.Type)
	}
}

func TestNestedEvolution(t *testing.T) {
	v1, err := NewRecordSchema(KindAvro, []byte(nestedDef), nil)
	if err != nil {
		t.Fatal(err)
	}
	// v2 adds country to Address (both uses), drops Line.price, adds a
	// top-level note.
	v2def := strings.Replace(nestedDef, `{"name":"zip","type":["null","int"],"default":null}`,
		`{"name":"zip","type":["null","int"],"default":null},{"name":"country","type":["null","string"],"default":null}`, 1)
	v2def = strings.Replace(v2def, `,
		{"name":"price","type":"double"}`, ``, 1)
	v2def = strings.Replace(v2def, `{"name":"id","type":"long"},`, `{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null},`, 1)
	v2, err := NewRecordSchema(KindAvro, []byte(v2def), v1)
	if err != nil {
		t.Fatal(err)
	}
	want := "id:int64#1000 note:string#1018 customer:struct#1001(name:string#1002 address:struct#1003(city:string#1004 zip:int32#1005 country:string#1019)) " +
		"qty:list#1006(element:int32#1007) lines:list#1008(element:struct#1009(sku:string#1010 price:float64#1011!)) " +
		"counts:map#1012(key:string#1013 value:int64#1014) ship:struct#1015(city:string#1016 zip:int32#1017 country:string#1020)"
	if got := shape(v2.Fields); got != want || v2.NextFieldID != 1021 {
		t.Fatalf("evolved:\n got %s (next %d)\nwant %s", got, v2.NextFieldID, want)
	}
	// Mapping v2 again over itself changes nothing.
	again, err := NewRecordSchema(KindAvro, []byte(v2def), v2)
	if err != nil || !SameFields(again.Fields, v2.Fields) || again.NextFieldID != v2.NextFieldID {
		t.Fatalf("v2 over v2: %v\n%s", err, shape(again.Fields))
	}
	// A nested type change is incompatible.
	bad := strings.Replace(nestedDef, `{"name":"sku","type":"string"}`, `{"name":"sku","type":"long"}`, 1)
	if _, err := NewRecordSchema(KindAvro, []byte(bad), v1); !errors.Is(err, ErrIncompatibleSchema) {
		t.Fatalf("nested type change: %v", err)
	}
	// A column that was JSON text (a table from before nested columns)
	// stays JSON text.
	old := &TypedSchema{Kind: KindJSON, NextFieldID: 1002, Fields: []TypedField{{Name: "id", ID: 1000, Type: TypeInt64}, {Name: "qty", ID: 1001, Type: TypeJSON}}}
	kept, err := NewRecordSchema(KindJSON, []byte(nestedDef), old)
	if err != nil {
		t.Fatal(err)
	}
	if kept.Fields[2].Name != "qty" || kept.Fields[2].Type != TypeJSON || kept.Fields[2].ID != 1001 || kept.Fields[1].ID != 1002 {
		t.Fatalf("JSON column kept: %s", shape(kept.Fields))
	}
	got := typedRoundTrip(t, kept, [][]byte{[]byte(`{"id":1,"qty":[1, 2]}`)})
	if got[0][2] != "[1,2]" {
		t.Fatalf("JSON column value %#v", got[0][2])
	}
}

func TestNestedValues(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 4))
	sc := avro.MustParse(nestedDef)
	for _, kind := range []SchemaKind{KindJSON, KindAvro} {
		ts, err := NewRecordSchema(kind, []byte(nestedDef), nil)
		if err != nil {
			t.Fatal(err)
		}
		var payloads [][]byte
		var want [][]any
		// Random nested values round-trip.
		for i := range 300 {
			o := randOrder(r, int64(i))
			var b []byte
			if kind == KindAvro {
				b, err = avro.Marshal(sc, o)
			} else {
				b, err = json.Marshal(o)
			}
			if err != nil {
				t.Fatal(err)
			}
			payloads = append(payloads, b)
			want = append(want, o.want())
		}
		// Bad input: a payload that does not decode is a row of nulls.
		payloads = append(payloads, payloads[0][:len(payloads[0])/2], []byte{0xff})
		want = append(want, make([]any, 6), make([]any, 6))
		if kind == KindJSON {
			// Values that do not match their type are null, the rest stays.
			payloads = append(payloads, []byte(`{"id":1,"customer":{"name":5,"address":"x"},"qty":[1,"a",null,3000000000],"lines":{},"counts":{"a":"b","c":2},"ship":null}`),
				[]byte(`{"id":2,"customer":null,"qty":null,"lines":[null,{"sku":"k"}],"counts":[],"ship":{"city":"c","zip":7,"extra":true}}`))
			want = append(want,
				[]any{int64(1), map[string]any{"name": nil, "address": nil}, []any{int32(1), nil, nil, nil}, nil, map[string]any{"a": nil, "c": int64(2)}, nil},
				[]any{int64(2), nil, nil, []any{nil, map[string]any{"sku": "k", "price": nil}}, nil, map[string]any{"city": "c", "zip": int32(7)}})
		}
		got := typedRoundTrip(t, ts, payloads)
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("%s row %d:\n got %#v\nwant %#v", kind, i, got[i], want[i])
			}
		}
	}
}

// TestNestedSchemaVersions: an Avro payload of an older version (without
// a nested field added since) decodes with its own definition; the new
// nested field is null in its row.
func TestNestedSchemaVersions(t *testing.T) {
	v2def := lakehousetest.NestedOrderV2
	v1, err := NewRecordSchema(KindAvro, []byte(nestedDef), nil)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := NewRecordSchema(KindAvro, []byte(v2def), v1)
	if err != nil {
		t.Fatal(err)
	}
	ver := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	ts := v2.WithWriters(map[string][]byte{string(ver(0)): []byte(nestedDef), string(ver(1)): []byte(v2def)})
	r := rand.New(rand.NewPCG(1, 2))
	o := randOrder(r, 5)
	o.Ship = &nAddress{City: "c"}
	b, err := avro.Marshal(avro.MustParse(nestedDef), o)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	msgs := []Message{{BatchIndex: -1, BatchSize: 1, Payload: b, SchemaVersion: ver(0), PublishTimeMs: baseTime.UnixMilli()}}
	out := make([]any, len(ts.Fields))
	ts.decodeValues(msgs[0].Payload, msgs[0].SchemaVersion, out)
	ship, ok := out[5].(structValue)
	if !ok || len(ship) != 3 || ship[0] != "c" || ship[1] != nil || ship[2] != nil {
		t.Fatalf("version-0 ship decoded with its definition: %#v", out[5])
	}
	data, _ := writeFile(t, mem, ts, msgs, RecordLimits{}, WriteOptions{})
	if len(data) == 0 {
		t.Fatal("no file")
	}
}

// FuzzNestedDecode: no payload makes decoding or appending nested values
// panic, whatever the kind.
func FuzzNestedDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 3))
	sc := avro.MustParse(nestedDef)
	for i := range 4 {
		o := randOrder(r, int64(i))
		b, _ := avro.Marshal(sc, o)
		f.Add(b, false)
		f.Add(b[:len(b)/2], false)
		j, _ := json.Marshal(o)
		f.Add(j, true)
		f.Add(j[:len(j)/2], true)
	}
	jts, err := NewRecordSchema(KindJSON, []byte(nestedDef), nil)
	if err != nil {
		f.Fatal(err)
	}
	ats, err := NewRecordSchema(KindAvro, []byte(nestedDef), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte, isJSON bool) {
		ts := ats
		if isJSON {
			ts = jts
		}
		rb := NewRecordBuilder(nil, ts, RecordLimits{})
		defer rb.Release()
		rb.Append(&Message{BatchIndex: -1, BatchSize: 1, Payload: payload})
		rec := rb.NewRecord()
		if rec.NumRows() != 1 {
			t.Fatalf("%d rows", rec.NumRows())
		}
		rec.Release()
	})
}

// TestNestedFieldBound: named types can make a short definition expand to
// an exponential number of fields; past MaxTypedFields it is refused.
func TestNestedFieldBound(t *testing.T) {
	def := `{"type":"record","name":"T0","fields":[{"name":"a","type":"int"},{"name":"b","type":"int"}]}`
	for i := 1; i <= 14; i++ { // 2^15 leaves
		def = fmt.Sprintf(`{"type":"record","name":"T%d","fields":[{"name":"a","type":%s},{"name":"b","type":"T%d"}]}`, i, def, i-1)
	}
	top := `{"type":"record","name":"Top","fields":[{"name":"x","type":` + def + `}]}`
	if _, err := NewRecordSchema(KindAvro, []byte(top), nil); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("2^15 fields: %v", err)
	}
	def = `{"type":"record","name":"T0","fields":[{"name":"a","type":"int"},{"name":"b","type":"int"}]}`
	for i := 1; i <= 8; i++ { // 2^9 leaves: fine
		def = fmt.Sprintf(`{"type":"record","name":"T%d","fields":[{"name":"a","type":%s},{"name":"b","type":"T%d"}]}`, i, def, i-1)
	}
	ts, err := NewRecordSchema(KindAvro, []byte(`{"type":"record","name":"Top","fields":[{"name":"x","type":`+def+`}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := ts.NextFieldID - FirstTypedFieldID; n < 1000 || n > MaxTypedFields {
		t.Fatalf("%d fields", n)
	}
}

// TestNestedAvroLeaves: enum and fixed inside nested columns (string and
// binary), a timestamp-millis in a list.
func TestNestedAvroLeaves(t *testing.T) {
	def := `{"type":"record","name":"R","fields":[{"name":"s","type":{"type":"record","name":"S","fields":[
		{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
		{"name":"f","type":["null",{"type":"fixed","name":"F","size":2}]},
		{"name":"ts","type":{"type":"array","items":{"type":"long","logicalType":"timestamp-millis"}}}]}}]}`
	ts, err := NewRecordSchema(KindAvro, []byte(def), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := shape(ts.Fields), "s:struct#1000(e:string#1001 f:binary#1002 ts:list#1003(element:timestamp#1004))"; got != want {
		t.Fatalf("mapping %s, want %s", got, want)
	}
	// e = B (1), f = present (union index 1) [7 8], ts = [1 ms, 2 ms].
	payload := []byte{2, 2, 7, 8, 4, 2, 4, 0}
	got := typedRoundTrip(t, ts, [][]byte{payload})
	want := map[string]any{"e": "B", "f": []byte{7, 8}, "ts": []any{int64(1000), int64(2000)}}
	if !reflect.DeepEqual(got[0][0], want) {
		t.Fatalf("got %#v, want %#v", got[0][0], want)
	}
}

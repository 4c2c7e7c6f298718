package delta

import (
	"errors"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestSchemaJSON(t *testing.T) {
	s := Schema{Fields: []Field{
		{Name: "__offset", Type: Primitive(TypeLong)},
		{Name: "__key", Type: Primitive(TypeString), Nullable: true},
		{Name: "__payload", Type: Primitive(TypeBinary), Nullable: true},
		{Name: "__props", Type: MapOf(Primitive(TypeString), Primitive(TypeString), true), Nullable: true},
		{Name: "__publish", Type: Primitive(TypeTimestamp), Nullable: true},
		{Name: "tags", Type: ArrayOf(Primitive(TypeString), true), Nullable: true},
		{Name: "amount", Type: Primitive("decimal(10,2)"), Nullable: true, Metadata: map[string]any{"comment": "eur"}},
		{Name: "addr", Type: StructOf(Field{Name: "zip", Type: Primitive(TypeInteger), Nullable: true}), Nullable: true},
	}}
	want := `{"type":"struct","fields":[` +
		`{"name":"__offset","type":"long","nullable":false,"metadata":{}},` +
		`{"name":"__key","type":"string","nullable":true,"metadata":{}},` +
		`{"name":"__payload","type":"binary","nullable":true,"metadata":{}},` +
		`{"name":"__props","type":{"type":"map","keyType":"string","valueType":"string","valueContainsNull":true},"nullable":true,"metadata":{}},` +
		`{"name":"__publish","type":"timestamp","nullable":true,"metadata":{}},` +
		`{"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},` +
		`{"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{"comment":"eur"}},` +
		`{"name":"addr","type":{"type":"struct","fields":[{"name":"zip","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`
	if got := s.JSON(); got != want {
		t.Fatalf("JSON:\n got %s\nwant %s", got, want)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	back, err := ParseSchema(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip:\n%+v\n%+v", back, s)
	}
	for _, bad := range []Schema{
		{},
		{Fields: []Field{{Name: "a", Type: Primitive("uuid")}}},
		{Fields: []Field{{Name: "a", Type: Primitive(TypeLong)}, {Name: "a", Type: Primitive(TypeLong)}}},
		{Fields: []Field{{Name: "m", Type: DataType{Name: "map"}}}},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v) = %v", bad, err)
		}
	}
}

func TestFromArrow(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "l", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "t", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "d", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String), Nullable: true},
		{Name: "li", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32}), Nullable: true},
	}, nil)
	got, err := FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	want := Schema{Fields: []Field{
		{Name: "l", Type: Primitive(TypeLong)},
		{Name: "i", Type: Primitive(TypeInteger), Nullable: true},
		{Name: "s", Type: Primitive(TypeString), Nullable: true},
		{Name: "b", Type: Primitive(TypeBinary), Nullable: true},
		{Name: "t", Type: Primitive(TypeBoolean), Nullable: true},
		{Name: "d", Type: Primitive(TypeDouble), Nullable: true},
		{Name: "ts", Type: Primitive(TypeTimestamp), Nullable: true},
		{Name: "m", Type: MapOf(Primitive(TypeString), Primitive(TypeString), true), Nullable: true},
		{Name: "li", Type: ArrayOf(Primitive(TypeLong), true), Nullable: true},
		{Name: "st", Type: StructOf(Field{Name: "x", Type: Primitive(TypeInteger)}), Nullable: true},
	}}
	if got.JSON() != want.JSON() {
		t.Fatalf("FromArrow:\n got %s\nwant %s", got.JSON(), want.JSON())
	}
	for _, bad := range []arrow.DataType{
		arrow.PrimitiveTypes.Uint64,
		&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"},
		&arrow.TimestampType{Unit: arrow.Microsecond},
		arrow.ListOf(arrow.PrimitiveTypes.Uint8),
	} {
		_, err := FromArrow(arrow.NewSchema([]arrow.Field{{Name: "x", Type: bad}}, nil))
		if !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("FromArrow(%s) = %v", bad, err)
		}
	}
}

func TestFormatStatsTimestamp(t *testing.T) {
	ts := baseTime.Add(1500 * 1000) // +1.5 ms
	if got := FormatStatsTimestamp(ts, false); got != "2026-11-30T01:00:00.001Z" {
		t.Errorf("min %s", got)
	}
	if got := FormatStatsTimestamp(ts, true); got != "2026-11-30T01:00:00.002Z" {
		t.Errorf("max %s", got)
	}
	if got := FormatStatsTimestamp(baseTime, true); got != "2026-11-30T01:00:00.000Z" {
		t.Errorf("exact max %s", got)
	}
}

// FuzzParseCommit: the commit decoder never panics, and whatever it accepts
// replays without panicking.
func FuzzParseCommit(f *testing.F) {
	f.Add([]byte(`{"commitInfo":{"timestamp":1}}` + "\n" + `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}` + "\n"))
	f.Add([]byte(`{"metaData":{"id":"x","format":{"provider":"parquet"},"schemaString":"{\"type\":\"struct\",\"fields\":[]}","partitionColumns":[]}}`))
	f.Add([]byte(`{"add":{"path":"a%20b.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}` + "\n" + `{"remove":{"path":"a%20b.parquet"}}`))
	f.Add([]byte(`{"txn":{"appId":"a","version":3}}` + "\n" + `{"add":{"path":`))
	f.Add([]byte(`{"add":{"path":"%zz"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		acts, err := parseCommit("k", data)
		if err != nil {
			if !errors.Is(err, ErrCorruptLog) {
				t.Fatalf("error not ErrCorruptLog: %v", err)
			}
			return
		}
		s := newState()
		for i := range acts {
			_ = s.apply(&acts[i])
		}
	})
}

// TestMergeType: struct fields missing at any depth (through arrays and
// maps) are added; existing fields are never dropped or retyped.
func TestMergeType(t *testing.T) {
	f := func(name string, dt DataType) Field { return Field{Name: name, Type: dt, Nullable: true} }
	addr := func(fs ...Field) DataType {
		return StructOf(append([]Field{f("city", Primitive(TypeString))}, fs...)...)
	}
	cur := StructOf(f("a", addr()), f("l", ArrayOf(addr(), true)), f("m", MapOf(Primitive(TypeString), addr(), true)))
	add := StructOf(f("a", addr(f("zip", Primitive(TypeInteger)))), f("l", ArrayOf(addr(f("zip", Primitive(TypeInteger))), true)),
		f("m", MapOf(Primitive(TypeString), addr(f("zip", Primitive(TypeInteger))), true)))
	got, grown := mergeType(cur, add)
	if !grown {
		t.Fatal("nothing added")
	}
	if s, w := (Schema{Fields: got.Fields}).JSON(), (Schema{Fields: add.Fields}).JSON(); s != w {
		t.Fatalf("merged\n %s\nwant\n %s", s, w)
	}
	// Merging the older type into the newer adds nothing.
	if _, grown := mergeType(add, cur); grown {
		t.Fatal("older type grew the newer")
	}
	// A type conflict keeps the current type.
	if got, grown := mergeType(Primitive(TypeLong), Primitive(TypeString)); grown || got.Name != TypeLong {
		t.Fatalf("conflict: %+v %v", got, grown)
	}
}

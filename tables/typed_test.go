package tables

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakestream"
)

const (
	priceV1 = `{"type":"record","name":"Price","fields":[{"name":"id","type":"long"},{"name":"name","type":["null","string"]}]}`
	// v2 drops name and adds price.
	priceV2 = `{"type":"record","name":"Price","fields":[{"name":"id","type":"long"},{"name":"price","type":"double"}]}`
	// v3 changes id's type.
	priceV3 = `{"type":"record","name":"Price","fields":[{"name":"id","type":"string"}]}`
)

// roundTrip stores ts in a Delta schema, as the JSON the log holds, and
// reads it back.
func roundTrip(t *testing.T, ts *lakehouse.TypedSchema) *lakehouse.TypedSchema {
	t.Helper()
	ds, err := deltaSchemaOf(ts)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := delta.ParseSchema(ds.JSON())
	if err != nil {
		t.Fatal(err)
	}
	back, err := typedFromDelta(parsed)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func TestTypedSchemaEvolvesThroughTheDeltaSchema(t *testing.T) {
	v1, err := nextTypedSchema(nil, lakestream.SchemaConfig{Type: lakestream.SchemaAvro, Definition: []byte(priceV1)})
	if err != nil || v1 == nil {
		t.Fatalf("v1: %v %v", v1, err)
	}
	got := roundTrip(t, v1)
	if !sameColumns(got, v1) || got.Kind != lakehouse.KindAvro || got.NextFieldID != v1.NextFieldID {
		t.Fatalf("round trip: %+v, want %+v", got, v1)
	}
	v2, err := nextTypedSchema(got, lakestream.SchemaConfig{Type: lakestream.SchemaAvro, Definition: []byte(priceV2)})
	if err != nil {
		t.Fatal(err)
	}
	want := []lakehouse.TypedField{
		{Name: "id", ID: 1000, Type: lakehouse.TypeInt64},
		{Name: "name", ID: 1001, Type: lakehouse.TypeString, Retired: true},
		{Name: "price", ID: 1002, Type: lakehouse.TypeFloat64},
	}
	back := roundTrip(t, v2)
	if len(back.Fields) != len(want) {
		t.Fatalf("v2 fields %+v, want %+v", back.Fields, want)
	}
	for _, w := range want {
		found := false
		for _, f := range back.Fields {
			if f.Name == w.Name {
				found = true
				if f.ID != w.ID || f.Type != w.Type || f.Retired != w.Retired {
					t.Fatalf("v2 field %s = %+v, want %+v", w.Name, f, w)
				}
			}
		}
		if !found {
			t.Fatalf("v2 has no field %s: %+v", w.Name, back.Fields)
		}
	}
	// A type change keeps the table's schema and says why.
	kept, err := nextTypedSchema(back, lakestream.SchemaConfig{Type: lakestream.SchemaAvro, Definition: []byte(priceV3)})
	if !errors.Is(err, lakehouse.ErrIncompatibleSchema) || kept != back {
		t.Fatalf("v3: kept %p (want %p), err %v", kept, back, err)
	}
	// No typed schema on the stream: columns stay.
	if s, err := nextTypedSchema(back, lakestream.SchemaConfig{Type: lakestream.SchemaNone}); err != nil || s != back {
		t.Fatalf("NONE: %v %v", s, err)
	}
	// A record table cannot become a primitive one.
	if _, err := nextTypedSchema(back, lakestream.SchemaConfig{Type: lakestream.SchemaString}); !errors.Is(err, lakehouse.ErrIncompatibleSchema) {
		t.Fatalf("STRING after AVRO: %v", err)
	}
	// A primitive schema: one "value" column, stable across compactions.
	p1, err := nextTypedSchema(nil, lakestream.SchemaConfig{Type: lakestream.SchemaInt64})
	if err != nil || len(p1.Fields) != 1 || p1.Fields[0].Type != lakehouse.TypeInt64 {
		t.Fatalf("INT64: %+v %v", p1, err)
	}
	if p2, err := nextTypedSchema(roundTrip(t, p1), lakestream.SchemaConfig{Type: lakestream.SchemaInt64}); err != nil || !sameColumns(p1, p2) {
		t.Fatalf("INT64 again: %+v %v", p2, err)
	}
	// The system-only schema has no typed metadata.
	if s := roundTrip(t, nil); s != nil {
		t.Fatalf("nil round trip: %+v", s)
	}
}

// TestNestedTypedSchemaThroughDeltaAndState: the ids of nested fields
// (list elements and map keys and values included) survive the Delta
// schema metadata and the etcd state, and evolve from there.
func TestNestedTypedSchemaThroughDeltaAndState(t *testing.T) {
	v1, err := nextTypedSchema(nil, lakestream.SchemaConfig{Type: lakestream.SchemaAvro, Definition: []byte(nestedV1)})
	if err != nil {
		t.Fatal(err)
	}
	if got := roundTrip(t, v1); !sameColumns(got, v1) || got.NextFieldID != v1.NextFieldID {
		t.Fatalf("Delta round trip: %+v, want %+v", got, v1)
	}
	st := stateOf(v1, []byte(nestedV1))
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back typedState
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !sameColumns(back.schema(), v1) {
		t.Fatalf("state round trip: %s", b)
	}
	dec, err := back.decoder()
	if err != nil || !sameColumns(dec, v1) {
		t.Fatalf("decoder from state: %v", err)
	}
	v2, err := nextTypedSchema(back.schema(), lakestream.SchemaConfig{Type: lakestream.SchemaAvro, Definition: []byte(nestedV2)})
	if err != nil {
		t.Fatal(err)
	}
	if v2.NextFieldID != v1.NextFieldID+2 || sameColumns(v1, v2) {
		t.Fatalf("v2 next id %d (v1 %d)", v2.NextFieldID, v1.NextFieldID)
	}
	for i, f := range v1.Fields {
		if v2.Fields[i].ID != f.ID {
			t.Fatalf("v2 field %s id %d, was %d", f.Name, v2.Fields[i].ID, f.ID)
		}
	}
}

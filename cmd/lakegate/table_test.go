package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/lakehouse"
)

// TestTableScanSinksNested: the csv and json formats of `lakegate table
// scan` print nested typed columns (docs/table-schema.md, "Nested
// columns") as JSON.
func TestTableScanSinksNested(t *testing.T) {
	def := `{"type":"record","name":"R","fields":[{"name":"c","type":{"type":"record","name":"C","fields":[{"name":"n","type":"string"}]}},
		{"name":"q","type":{"type":"array","items":"int"}},{"name":"m","type":{"type":"map","values":"long"}}]}`
	ts, err := lakehouse.NewRecordSchema(lakehouse.KindJSON, []byte(def), nil)
	if err != nil {
		t.Fatal(err)
	}
	rb := lakehouse.NewRecordBuilder(nil, ts, lakehouse.RecordLimits{})
	defer rb.Release()
	rb.Append(&lakehouse.Message{BatchIndex: -1, BatchSize: 1, Payload: []byte(`{"c":{"n":"x"},"q":[1,2],"m":{"k":3}}`)})
	rec := rb.NewRecord()
	defer rec.Release()
	for format, want := range map[string][]string{
		"json": {`"c":{"n":"x"}`, `"q":[1,2]`, `"m":[{"key":"k","value":3}]`},
		"csv":  {`{""n"":""x""}`, `[1,2]`, `k`},
	} {
		var out bytes.Buffer
		sink, err := newRowSink(format, &out)
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.write(rec); err != nil {
			t.Fatal(err)
		}
		if err := sink.close(); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Fatalf("%s output lacks %s:\n%s", format, w, out.String())
			}
		}
	}
}

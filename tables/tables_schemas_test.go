package tables

// Each row decoded with the schema version it was written with
// (docs/table-schema.md, "Schema versions"): Avro payloads of two versions
// of a record schema in one log, compacted with the latest as the table's
// schema. Run: go test -count=1 -run SchemaVersions ./tables/

import (
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

func TestCompactToTableSchemaVersions(t *testing.T) {
	v0 := `{"type":"record","name":"P","fields":[{"name":"id","type":"long"},{"name":"name","type":["null","string"]}]}`
	// Version 1 adds a field before an existing one: decoding a version-0
	// payload with it reads name's bytes as the new field.
	v1 := `{"type":"record","name":"P","fields":[{"name":"id","type":"long"},{"name":"price","type":["null","double"],"default":null},{"name":"name","type":["null","string"]}]}`
	// The stream properties as the gateway's registry writes them.
	props := map[string]string{"lakegate.schema.count": "2"}
	for v, def := range []string{v0, v1} {
		b, _ := json.Marshal(struct {
			Type pb.Schema_Type `json:"type"`
			Data []byte         `json:"data"`
		}{pb.Schema_Avro, []byte(def)})
		props["lakegate.schema."+string(rune('0'+v))] = string(b)
	}
	writers := lakehouse.SchemaHistory(props)
	if len(writers) != 2 {
		t.Fatalf("schema history: %d versions", len(writers))
	}
	type p0 struct {
		ID   int64   `avro:"id"`
		Name *string `avro:"name"`
	}
	type p1 struct {
		ID    int64    `avro:"id"`
		Price *float64 `avro:"price"`
		Name  *string  `avro:"name"`
	}
	s0, s1 := avro.MustParse(v0), avro.MustParse(v1)
	entry := func(seq uint64, version int, payload []byte, publishMs int64) []byte {
		md := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(uint64(publishMs)),
			SchemaVersion: binary.BigEndian.AppendUint64(nil, uint64(version))}
		meta, err := protocol.MarshalMetadata(md)
		if err != nil {
			t.Fatal(err)
		}
		e, err := protocol.AppendEntry(nil, meta, payload)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	for _, withWriters := range []bool{true, false} {
		env := newIcebergEnv(t)
		clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
		e := env.engine(t, env.opts(clk))
		ctx := ctxT(t)
		const id = 9
		target := Target{Root: "tables/public/default/prices", Partition: -1, Delta: true,
			Schema: lakestream.SchemaConfig{Type: lakestream.SchemaAvro, Definition: []byte(v1)}}
		if withWriters {
			target.Writers = writers
		}
		var idSum, priceSum float64
		for i := range 20 {
			name := "n"
			var b []byte
			var err error
			if i < 10 { // version 0
				b, err = avro.Marshal(s0, p0{ID: int64(i), Name: &name})
			} else {
				price := float64(i) + 0.5
				priceSum += price
				b, err = avro.Marshal(s1, p1{ID: int64(i), Name: &name, Price: &price})
			}
			if err != nil {
				t.Fatal(err)
			}
			idSum += float64(i)
			if _, err := e.Append(ctx, id, 1, entry(uint64(i), min(i/10, 1), b, clk.now().UnixMilli())); err != nil {
				t.Fatal(err)
			}
		}
		clk.advance(time.Minute)
		compactAllTo(t, e, id, target)
		sums := typedSums{}
		if err := ScanTable(ctx, env.store, target.Root, func(rec arrow.RecordBatch) error { sums.add(rec); return nil }); err != nil {
			t.Fatal(err)
		}
		right := sums["id"].nonNull == 20 && sums["id"].sum == idSum && sums["name"].nonNull == 20 && sums["price"].nonNull == 10 && sums["price"].sum == priceSum
		if withWriters && !right {
			t.Fatalf("with the schema history: id %+v name %+v price %+v; want 20 ids summing to %v, 20 names, 10 prices summing to %v",
				sums["id"], sums["name"], sums["price"], idSum, priceSum)
		}
		if !withWriters && right {
			t.Fatal("version-0 payloads decoded right with version 1: the test shows nothing")
		}
	}
}

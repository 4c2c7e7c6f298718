package e2e

// Schemas with pulsar-client-go v0.19.0: JSON, AVRO and STRING round trips
// (the client decodes each message with the schema GET_SCHEMA returns for
// the message's schema_version), versioning and compatibility over
// GET_OR_CREATE_SCHEMA.
//
//	go test -p 1 -run 'TestSchema|TestWireSchema' ./e2e/

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

type schemaRecord struct {
	ID   int    `json:"id" avro:"id"`
	Name string `json:"name" avro:"name"`
}

const (
	recordDef = `{"type":"record","name":"Rec","namespace":"test","fields":[{"name":"id","type":"int"},{"name":"name","type":"string"}]}`
	// recordDefV2 adds a field: compatible.
	recordDefV2 = `{"type":"record","name":"Rec","namespace":"test","fields":[{"name":"id","type":"int"},{"name":"name","type":"string"},{"name":"extra","type":["null","string"],"default":null}]}`
	// recordDefBad changes a field's type: incompatible.
	recordDefBad = `{"type":"record","name":"Rec","namespace":"test","fields":[{"name":"id","type":"string"},{"name":"name","type":"string"}]}`
)

func version(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func TestSchemaRoundTrip(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		schema func() pulsar.Schema
		value  func(i int) any
		decode func(t *testing.T, m pulsar.Message, i int)
	}{
		{"json", func() pulsar.Schema { return pulsar.NewJSONSchema(recordDef, nil) },
			func(i int) any { return &schemaRecord{ID: i, Name: "n"} },
			func(t *testing.T, m pulsar.Message, i int) {
				var r schemaRecord
				if err := m.GetSchemaValue(&r); err != nil || r.ID != i || r.Name != "n" {
					t.Fatalf("json value %+v err %v, want id %d", r, err, i)
				}
			}},
		{"avro", func() pulsar.Schema { return pulsar.NewAvroSchema(recordDef, nil) },
			func(i int) any { return &schemaRecord{ID: i, Name: "n"} },
			func(t *testing.T, m pulsar.Message, i int) {
				var r schemaRecord
				if err := m.GetSchemaValue(&r); err != nil || r.ID != i || r.Name != "n" {
					t.Fatalf("avro value %+v err %v, want id %d", r, err, i)
				}
			}},
		{"string", func() pulsar.Schema { return pulsar.NewStringSchema(nil) },
			func(i int) any { return "s" + string(rune('a'+i)) },
			func(t *testing.T, m pulsar.Message, i int) {
				var s *string // the Go client's StringSchema decodes into a *string
				if err := m.GetSchemaValue(&s); err != nil || s == nil || *s != "s"+string(rune('a'+i)) {
					t.Fatalf("string value %v err %v", s, err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "persistent://public/default/schema-" + tc.name
			p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: tc.schema()})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			cons, err := cl.Subscribe(pulsar.ConsumerOptions{
				Topic: topic, SubscriptionName: "s", Schema: tc.schema(),
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			for i := range 5 {
				if _, err := p.Send(ctx, &pulsar.ProducerMessage{Value: tc.value(i)}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 5 {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.SchemaVersion(), version(0)) {
					t.Fatalf("message schema version %x, want 0", m.SchemaVersion())
				}
				tc.decode(t, m, i)
				cons.Ack(m)
			}
			// GET_SCHEMA returns it.
			r := dialRaw(t, c)
			r.connect()
			r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: &pb.CommandGetSchema{
				RequestId: proto.Uint64(1), Topic: proto.String(topic),
			}})
			resp := r.read().GetGetSchemaResponse()
			want := tc.schema().GetSchemaInfo()
			if resp.GetErrorCode() != 0 || !bytes.Equal(resp.GetSchemaVersion(), version(0)) ||
				string(resp.GetSchema().GetSchemaData()) != want.Schema || int(resp.GetSchema().GetType()) != int(want.Type) {
				t.Fatalf("GET_SCHEMA %v", resp)
			}
		})
	}

	// An incompatible producer is refused with IncompatibleSchema.
	_, err := cl.CreateProducer(pulsar.ProducerOptions{
		Topic: "persistent://public/default/schema-json", Schema: pulsar.NewStringSchema(nil),
	})
	if err == nil {
		t.Fatal("STRING producer accepted on a JSON topic")
	}
}

// TestWireSchemaVersions: same schema → same version; an added field → a
// new version; a changed field type or schema type → IncompatibleSchema;
// GET_SCHEMA by version; a topic without schema answers TopicNotFound.
func TestWireSchemaVersions(t *testing.T) {
	c := startCluster(t)
	r := dialRaw(t, c)
	r.connect()
	const topic = "persistent://public/default/schema-versions"
	req := uint64(0)
	getOrCreate := func(typ pb.Schema_Type, def string) *pb.CommandGetOrCreateSchemaResponse {
		t.Helper()
		req++
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA.Enum(), GetOrCreateSchema: &pb.CommandGetOrCreateSchema{
			RequestId: proto.Uint64(req), Topic: proto.String(topic),
			Schema: &pb.Schema{Name: proto.String("s"), Type: typ.Enum(), SchemaData: []byte(def)},
		}})
		resp := r.read().GetGetOrCreateSchemaResponse()
		if resp.GetRequestId() != req {
			t.Fatalf("response %v to request %d", resp, req)
		}
		return resp
	}
	getSchema := func(v []byte) *pb.CommandGetSchemaResponse {
		t.Helper()
		req++
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: &pb.CommandGetSchema{
			RequestId: proto.Uint64(req), Topic: proto.String(topic), SchemaVersion: v,
		}})
		return r.read().GetGetSchemaResponse()
	}
	if resp := getSchema(nil); resp.GetErrorCode() != pb.ServerError_TopicNotFound {
		t.Fatalf("GET_SCHEMA without schema: %v", resp)
	}
	for i, step := range []struct {
		typ     pb.Schema_Type
		def     string
		version uint64
		err     pb.ServerError
	}{
		{pb.Schema_Json, recordDef, 0, 0},
		{pb.Schema_Json, recordDef, 0, 0},
		{pb.Schema_Json, recordDefV2, 1, 0},
		{pb.Schema_Json, recordDef, 0, 0}, // an old version is found again
		{pb.Schema_Json, recordDefBad, 0, pb.ServerError_IncompatibleSchema},
		{pb.Schema_Avro, recordDefV2, 0, pb.ServerError_IncompatibleSchema},
		{pb.Schema_String, "", 0, pb.ServerError_IncompatibleSchema},
	} {
		resp := getOrCreate(step.typ, step.def)
		if step.err != 0 {
			if resp.GetErrorCode() != step.err {
				t.Fatalf("step %d: %v, want %s", i, resp, step.err)
			}
			continue
		}
		if resp.ErrorCode != nil || !bytes.Equal(resp.GetSchemaVersion(), version(step.version)) {
			t.Fatalf("step %d: %v, want version %d", i, resp, step.version)
		}
	}
	if resp := getSchema(version(0)); string(resp.GetSchema().GetSchemaData()) != recordDef {
		t.Fatalf("GET_SCHEMA v0: %v", resp)
	}
	if resp := getSchema(nil); string(resp.GetSchema().GetSchemaData()) != recordDefV2 || !bytes.Equal(resp.GetSchemaVersion(), version(1)) {
		t.Fatalf("GET_SCHEMA latest: %v", resp)
	}
	if resp := getSchema(version(7)); resp.GetErrorCode() != pb.ServerError_TopicNotFound {
		t.Fatalf("GET_SCHEMA v7: %v", resp)
	}
	// The latest is the stream's schema for the lakehouse layer.
	md, err := c.catalog.LoadStream(context.Background(), mustStreamID(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	if md.Schema.Type != "JSON" || string(md.Schema.Definition) != recordDefV2 {
		t.Fatalf("stream schema %+v", md.Schema)
	}
}

package e2e

// Regression tests for what the Apache Pulsar Java client (4.0.8, run by
// e2e/interop/java/run.sh) needs from the gateway and pulsar-client-go did
// not: schema_version always present in PRODUCER_SUCCESS and
// GET_OR_CREATE_SCHEMA_RESPONSE, GET_OR_CREATE_SCHEMA for BYTES (the Java
// dead-letter and retry-letter producers), producers refused on a
// terminated topic, REACHED_END_OF_TOPIC, and the schemas admin REST. Run:
//
//	go test -p 1 -count=1 -run 'TestJavaClient|TestAdminSchemas' ./e2e/

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

func TestJavaClientWireExpectations(t *testing.T) {
	c := startCluster(t)
	srv := admServer(t, c)
	const topic = "persistent://public/default/java-wire"
	r := dialRaw(t, c)
	r.connect()

	// PRODUCER without a schema: schema_version present and empty (the Java
	// client's handleProducerSuccess reads it unconditionally).
	r.cmd(producerCmd(topic, "p1", 1, 1, pb.ProducerAccessMode_Shared, nil))
	got := r.read()
	ps := got.GetProducerSuccess()
	if got.GetType() != pb.BaseCommand_PRODUCER_SUCCESS || ps.SchemaVersion == nil || len(ps.SchemaVersion) != 0 {
		t.Fatalf("PRODUCER: %v; want PRODUCER_SUCCESS with an empty schema_version", got)
	}

	// GET_OR_CREATE_SCHEMA for BYTES (type None): accepted, empty version.
	r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA.Enum(), GetOrCreateSchema: &pb.CommandGetOrCreateSchema{
		RequestId: proto.Uint64(2), Topic: proto.String(topic),
		Schema: &pb.Schema{Name: proto.String("bytes"), SchemaData: []byte{}, Type: pb.Schema_None.Enum()},
	}})
	got = r.read()
	gs := got.GetGetOrCreateSchemaResponse()
	if got.GetType() != pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE || gs.ErrorCode != nil || gs.SchemaVersion == nil || len(gs.SchemaVersion) != 0 {
		t.Fatalf("GET_OR_CREATE_SCHEMA(BYTES): %v; want a response with an empty schema_version", got)
	}

	// After an admin terminate, a new producer gets TopicTerminatedError.
	if code := admDo(t, http.MethodPost, srv.URL+"/admin/v2/persistent/public/default/java-wire/terminate", "", "", nil); code != http.StatusOK {
		t.Fatalf("terminate: HTTP %d", code)
	}
	r.cmd(producerCmd(topic, "p2", 2, 3, pb.ProducerAccessMode_Shared, nil))
	r.expectError(3, pb.ServerError_TopicTerminatedError)
}

func TestAdminSchemas(t *testing.T) {
	c := startCluster(t)
	srv := admServer(t, c)
	cl := c.client()
	const topic = "persistent://public/default/admin-schemas"
	schema := pulsar.NewAvroSchema(recordDef, nil)
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Value: map[string]any{"id": 1, "name": "a"}}); err != nil {
		t.Fatal(err)
	}

	type schemaResp struct {
		Version    int64             `json:"version"`
		Type       string            `json:"type"`
		Data       string            `json:"data"`
		Properties map[string]string `json:"properties"`
	}
	base := srv.URL + "/admin/v2/schemas/public/default/admin-schemas"
	for _, path := range []string{"/schema", "/schema/0"} {
		var got schemaResp
		if code := admDo(t, http.MethodGet, base+path, "", "", &got); code != http.StatusOK {
			t.Fatalf("GET %s: HTTP %d", path, code)
		}
		// data: the definition exactly as the client registered it.
		if got.Version != 0 || got.Type != "AVRO" || got.Data != schema.GetSchemaInfo().Schema || got.Properties == nil {
			t.Fatalf("GET %s: %+v", path, got)
		}
	}
	var all struct {
		GetSchemaResponses []schemaResp `json:"getSchemaResponses"`
	}
	if code := admDo(t, http.MethodGet, base+"/schemas", "", "", &all); code != http.StatusOK || len(all.GetSchemaResponses) != 1 {
		t.Fatalf("GET /schemas: HTTP %d %+v", code, all)
	}
	var e map[string]any
	if code := admDo(t, http.MethodGet, base+"/schema/7", "", "", &e); code != http.StatusNotFound {
		t.Fatalf("GET a missing version: HTTP %d %v", code, e)
	}
	if code := admDo(t, http.MethodGet, base+"/schema/x", "", "", &e); code != http.StatusBadRequest {
		t.Fatalf("GET a bad version: HTTP %d %v", code, e)
	}

	// A topic without schema, and a missing topic: 404.
	np, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/admin-no-schema"})
	if err != nil {
		t.Fatal(err)
	}
	np.Close()
	for _, name := range []string{"admin-no-schema", "admin-missing"} {
		if code := admDo(t, http.MethodGet, srv.URL+"/admin/v2/schemas/public/default/"+name+"/schema", "", "", &e); code != http.StatusNotFound {
			t.Fatalf("%s: HTTP %d %v", name, code, e)
		}
	}
}

// TestJavaClientReachedEndOfTopic: after an admin terminate, a consumer
// that has read everything is sent REACHED_END_OF_TOPIC at once (the Java
// client's hasReachedEndOfTopic()), and one subscribing afterwards gets it
// once the remaining messages were delivered.
func TestJavaClientReachedEndOfTopic(t *testing.T) {
	c := startCluster(t)
	srv := admServer(t, c)
	cl := c.client()
	const topic = "persistent://public/default/java-end"
	produce(t, cl, topic, false, 2)
	r := dialRaw(t, c)
	r.connect()
	subscribe := func(consumerID uint64, sub string) {
		t.Helper()
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
			Topic: proto.String(topic), Subscription: proto.String(sub), SubType: pb.CommandSubscribe_Exclusive.Enum(),
			ConsumerId: proto.Uint64(consumerID), RequestId: proto.Uint64(consumerID),
			InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
		}})
		if got := r.read(); got.GetType() != pb.BaseCommand_SUCCESS {
			t.Fatalf("subscribe %s: %v", sub, got)
		}
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{
			ConsumerId: proto.Uint64(consumerID), MessagePermits: proto.Uint32(100),
		}})
	}
	// next returns the next command for consumerID other than an active
	// consumer change.
	next := func() *pb.BaseCommand {
		t.Helper()
		for {
			got := r.read()
			if got.GetType() != pb.BaseCommand_ACTIVE_CONSUMER_CHANGE {
				return got
			}
		}
	}
	expectMessages := func(consumerID uint64, n int) {
		t.Helper()
		for i := range n {
			if got := next(); got.GetType() != pb.BaseCommand_MESSAGE || got.GetMessage().GetConsumerId() != consumerID {
				t.Fatalf("message %d for consumer %d: got %v", i, consumerID, got)
			}
		}
	}
	expectEnd := func(consumerID uint64) {
		t.Helper()
		if got := next(); got.GetType() != pb.BaseCommand_REACHED_END_OF_TOPIC || got.GetReachedEndOfTopic().GetConsumerId() != consumerID {
			t.Fatalf("got %v, want REACHED_END_OF_TOPIC for consumer %d", got, consumerID)
		}
	}

	subscribe(1, "before")
	expectMessages(1, 2)
	if code := admDo(t, http.MethodPost, srv.URL+"/admin/v2/persistent/public/default/java-end/terminate", "", "", nil); code != http.StatusOK {
		t.Fatalf("terminate: HTTP %d", code)
	}
	expectEnd(1)

	subscribe(2, "after")
	expectMessages(2, 2)
	expectEnd(2)
}

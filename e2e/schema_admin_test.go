package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestAdminSchemaUploadDeleteStrategy: schemas uploaded, tested and
// deleted through the admin API (pulsaradmin), the compatibility strategy
// set on the namespace and on the topic, and real producers meeting the
// result: an incompatible producer refused, a producer of another type
// accepted once the schema is deleted.
func TestAdminSchemaUploadDeleteStrategy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startCluster(t)
	srv := admServer(t, c)
	a := admClient(t, srv)
	const topic = "persistent://public/default/schema-admin"
	const (
		v1      = `{"type":"record","name":"Rec","namespace":"t","fields":[{"name":"id","type":"int"}]}`
		addNoDf = `{"type":"record","name":"Rec","namespace":"t","fields":[{"name":"id","type":"int"},{"name":"x","type":"string"}]}`
		addDf   = `{"type":"record","name":"Rec","namespace":"t","fields":[{"name":"id","type":"int"},{"name":"x","type":"string"},{"name":"y","type":["null","string"],"default":null}]}`
	)
	avro := func(def string) utils.PostSchemaPayload {
		return utils.PostSchemaPayload{SchemaType: "AVRO", Schema: def, Properties: map[string]string{"owner": "test"}}
	}
	// Upload to a topic that does not exist yet: it is created.
	if err := a.Schemas().CreateSchemaByPayload(topic, avro(v1)); err != nil {
		t.Fatal(err)
	}
	info, err := a.Schemas().GetSchemaInfoWithVersion(topic)
	if err != nil || info.Version != 0 || info.SchemaInfo.Type != "AVRO" || info.SchemaInfo.Properties["owner"] != "test" {
		t.Fatalf("after upload: %+v, %v", info, err)
	}
	// The same schema again: the same version.
	if v, err := a.Schemas().GetVersionByPayload(topic, avro(v1)); err != nil || v != 0 {
		t.Fatalf("version of v1: %d, %v", v, err)
	}
	// FULL (the default): a field without default is refused.
	ic, err := a.Schemas().TestCompatibilityWithPostSchemaPayload(topic, avro(addNoDf))
	if err != nil || ic.IsCompatibility || ic.SchemaCompatibilityStrategy != "FULL" {
		t.Fatalf("compatibility of addNoDf: %+v, %v", ic, err)
	}
	admWantCode(t, a.Schemas().CreateSchemaByPayload(topic, avro(addNoDf)), http.StatusConflict)

	// FORWARD on the namespace: accepted.
	ns, _ := utils.GetNamespaceName("public/default")
	if err := a.Namespaces().SetSchemaCompatibilityStrategy(*ns, utils.SchemaCompatibilityStrategyForward); err != nil {
		t.Fatal(err)
	}
	if s, err := a.Namespaces().GetSchemaCompatibilityStrategy(*ns); err != nil || s != utils.SchemaCompatibilityStrategyForward {
		t.Fatalf("namespace strategy %q, %v", s, err)
	}
	if err := a.Schemas().CreateSchemaByPayload(topic, avro(addNoDf)); err != nil {
		t.Fatal(err)
	}
	// ALWAYS_INCOMPATIBLE on the topic overrides the namespace.
	base := srv.URL + "/admin/v2/persistent/public/default/schema-admin/schemaCompatibilityStrategy"
	if code := admDo(t, http.MethodPut, base, "application/json", `"ALWAYS_INCOMPATIBLE"`, nil); code != http.StatusNoContent {
		t.Fatalf("PUT topic strategy: %d", code)
	}
	var got string
	if code := admDo(t, http.MethodGet, base+"?applied=true", "", "", &got); code != http.StatusOK || got != "ALWAYS_INCOMPATIBLE" {
		t.Fatalf("GET topic strategy: %d %q", code, got)
	}
	admWantCode(t, a.Schemas().CreateSchemaByPayload(topic, avro(addDf)), http.StatusConflict)
	// A producer with an incompatible schema is refused too.
	type rec struct {
		ID int32   `avro:"id"`
		X  string  `avro:"x"`
		Y  *string `avro:"y"`
	}
	cl := c.client()
	if p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewAvroSchema(addDf, nil)}); err == nil {
		p.Close()
		t.Fatal("a producer with a schema the strategy forbids was accepted")
	}
	if code := admDo(t, http.MethodPut, base, "application/json", `"NOT_A_STRATEGY"`, nil); code != http.StatusBadRequest {
		t.Fatalf("PUT of an unknown strategy: %d, want 400", code)
	}
	if code := admDo(t, http.MethodDelete, base, "", "", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE topic strategy: %d", code)
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewAvroSchema(addDf, nil)})
	if err != nil {
		t.Fatalf("producer under FORWARD: %v", err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Value: rec{ID: 1, X: "b"}}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	all, err := a.Schemas().GetAllSchemas(topic)
	if err != nil || len(all) != 3 {
		t.Fatalf("all schemas: %d, %v", len(all), err)
	}

	// Delete: no schema any more, old versions still readable, a producer
	// of another type is accepted.
	if err := a.Schemas().DeleteSchema(topic); err != nil {
		t.Fatal(err)
	}
	_, err = a.Schemas().GetSchemaInfo(topic)
	admWantCode(t, err, http.StatusNotFound)
	if old, err := a.Schemas().GetSchemaInfoByVersion(topic, 0); err != nil || old.Type != "AVRO" {
		t.Fatalf("version 0 after deletion: %+v, %v", old, err)
	}
	sp, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewStringSchema(nil)})
	if err != nil {
		t.Fatalf("a STRING producer after deletion: %v", err)
	}
	sp.Close()
	if info, err := a.Schemas().GetSchemaInfoWithVersion(topic); err != nil || info.SchemaInfo.Type != "STRING" || info.Version != 4 {
		t.Fatalf("after deletion and a STRING producer: %+v, %v (want STRING at version 4: 3 versions and the marker)", info, err)
	}
	if all, err := a.Schemas().GetAllSchemas(topic); err != nil || len(all) != 1 {
		t.Fatalf("versions since the deletion: %d, %v", len(all), err)
	}
	// A forced deletion removes every version.
	if err := a.Schemas().ForceDeleteSchema(topic); err != nil {
		t.Fatal(err)
	}
	_, err = a.Schemas().GetSchemaInfoByVersion(topic, 0)
	admWantCode(t, err, http.StatusNotFound)
	admWantCode(t, a.Schemas().DeleteSchema(topic), http.StatusNotFound)
	admWantCode(t, a.Schemas().CreateSchemaByPayload(topic, utils.PostSchemaPayload{SchemaType: "NOPE"}), http.StatusBadRequest)
}

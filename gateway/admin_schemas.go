package gateway

// The schemas admin REST (Pulsar's /admin/v2/schemas/...), read-only: the
// versions the schema registry (schema.go) holds, as Pulsar's
// GetSchemaResponse JSON:
//
//	GET /admin/v2/schemas/{tenant}/{ns}/{topic}/schema            latest version
//	GET /admin/v2/schemas/{tenant}/{ns}/{topic}/schema/{version}  one version
//	GET /admin/v2/schemas/{tenant}/{ns}/{topic}/schemas           every version
//
// "data" is the schema definition as text (what pulsar-client-admin turns
// back into SchemaInfo bytes); "timestamp" is 0 (registration times are not
// kept). A topic without schema answers 404. Uploading and deleting schemas
// (POST/DELETE) are not supported (404 from the admin fallback).

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"

	"github.com/lakegate/lakegate/protocol/pb"
)

// adminSchemaTypeNames maps wire schema types to Pulsar's SchemaType names.
var adminSchemaTypeNames = map[pb.Schema_Type]string{
	pb.Schema_None: "BYTES", pb.Schema_String: "STRING", pb.Schema_Json: "JSON",
	pb.Schema_Protobuf: "PROTOBUF", pb.Schema_Avro: "AVRO", pb.Schema_Bool: "BOOLEAN",
	pb.Schema_Int8: "INT8", pb.Schema_Int16: "INT16", pb.Schema_Int32: "INT32", pb.Schema_Int64: "INT64",
	pb.Schema_Float: "FLOAT", pb.Schema_Double: "DOUBLE", pb.Schema_Date: "DATE", pb.Schema_Time: "TIME",
	pb.Schema_Timestamp: "TIMESTAMP", pb.Schema_KeyValue: "KEY_VALUE", pb.Schema_Instant: "INSTANT",
	pb.Schema_LocalDate: "LOCAL_DATE", pb.Schema_LocalTime: "LOCAL_TIME",
	pb.Schema_LocalDateTime: "LOCAL_DATE_TIME", pb.Schema_ProtobufNative: "PROTOBUF_NATIVE",
}

// adminSchemaResponse is Pulsar's GetSchemaResponse.
type adminSchemaResponse struct {
	Version    int64             `json:"version"`
	Type       string            `json:"type"`
	Timestamp  int64             `json:"timestamp"`
	Data       string            `json:"data"`
	Properties map[string]string `json:"properties"`
}

func adminSchemaOf(st storedSchema, version int) adminSchemaResponse {
	name, ok := adminSchemaTypeNames[st.Type]
	if !ok {
		name = st.Type.String()
	}
	props := st.Props
	if props == nil {
		props = map[string]string{}
	}
	return adminSchemaResponse{Version: int64(version), Type: name, Data: string(st.Data), Properties: props}
}

// schemaOf serves GET .../schema and .../schema/{version}.
func (a *admin) schemaOf(w http.ResponseWriter, r *http.Request) {
	var version []byte
	if v := r.PathValue("version"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			writeAdminError(w, fmt.Errorf("%w: schema version %q is not a number", errAdminBadRequest, v))
			return
		}
		version = binary.BigEndian.AppendUint64(nil, n)
	}
	ref, err := a.refOf(r)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	st, v, err := a.srv.getSchema(r.Context(), ref.md.ID, version)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, adminSchemaOf(st, v))
}

// allSchemas serves GET .../schemas.
func (a *admin) allSchemas(w http.ResponseWriter, r *http.Request) {
	ref, err := a.refOf(r)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	list, err := loadSchemas(ref.md)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	out := make([]adminSchemaResponse, 0, len(list))
	for v, st := range list {
		out = append(out, adminSchemaOf(st, v))
	}
	writeJSON(w, http.StatusOK, map[string][]adminSchemaResponse{"getSchemaResponses": out})
}

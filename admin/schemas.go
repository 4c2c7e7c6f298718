package admin

// The schemas admin REST (Pulsar's /admin/v2/schemas/...) over the schema
// registry (broker/schema.go):
//
//	GET    /admin/v2/schemas/{tenant}/{ns}/{topic}/schema            latest version (GetSchemaResponse)
//	GET    /admin/v2/schemas/{tenant}/{ns}/{topic}/schema/{version}  one version
//	GET    /admin/v2/schemas/{tenant}/{ns}/{topic}/schemas           the versions since the last deletion
//	POST   /admin/v2/schemas/{tenant}/{ns}/{topic}/schema            upload (PostSchemaPayload) → {"version":{"version":N}}
//	DELETE /admin/v2/schemas/{tenant}/{ns}/{topic}/schema[?force=true] delete → {"version":N}
//	POST   /admin/v2/schemas/{tenant}/{ns}/{topic}/compatibility     would the payload be accepted? (IsCompatibilityResponse)
//	POST   /admin/v2/schemas/{tenant}/{ns}/{topic}/version           the version of the payload's schema (LongSchemaVersion)
//
// and the compatibility strategy policies (stored as the property
// broker.SchemaStrategyProperty of the stream or namespace, docs/policies.md):
//
//	GET|PUT|DELETE /admin/v2/persistent/{tenant}/{ns}/{topic}/schemaCompatibilityStrategy   body "FULL" (JSON string)
//	GET|PUT        /admin/v2/namespaces/{tenant}/{ns}/schemaCompatibilityStrategy
//
// "data" is the schema definition as text (what pulsar-client-admin turns
// back into SchemaInfo bytes); "timestamp" is 0 (registration times are not
// kept). A topic without schema (or whose schema was deleted) answers 404.
// An upload to a topic that does not exist creates it (non-partitioned), as
// a producer would; an incompatible upload answers 409 with the reason.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
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

func adminSchemaOf(st broker.Schema, version int) adminSchemaResponse {
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
func (a *admin) schemaOf(r *http.Request) (any, error) {
	var version []byte
	if v := r.PathValue("version"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return nil, fmt.Errorf("%w: schema version %q is not a number", errAdminBadRequest, v)
		}
		version = binary.BigEndian.AppendUint64(nil, n)
	}
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	st, v, err := a.brk.GetSchema(r.Context(), ref.md.ID, version)
	if err != nil {
		return nil, err
	}
	return adminSchemaOf(st, v), nil
}

// allSchemas serves GET .../schemas.
func (a *admin) allSchemas(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	list, err := broker.LoadSchemas(ref.md)
	if err != nil {
		return nil, err
	}
	out := make([]adminSchemaResponse, 0, len(list))
	for v := broker.LiveFrom(list); v < len(list); v++ {
		out = append(out, adminSchemaOf(list[v], v))
	}
	return map[string][]adminSchemaResponse{"getSchemaResponses": out}, nil
}

// adminSchemaPayload is Pulsar's PostSchemaPayload (what `pulsar-admin
// schemas upload -f` reads from its file).
type adminSchemaPayload struct {
	Type       string            `json:"type"`
	Schema     string            `json:"schema"`
	Properties map[string]string `json:"properties"`
}

// schemaOfPayload reads and checks a PostSchemaPayload body.
func schemaOfPayload(r *http.Request) (*pb.Schema, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("%w: the body must be a schema payload {\"type\", \"schema\", \"properties\"}", errAdminBadRequest)
	}
	var p adminSchemaPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%w: schema payload: %v", errAdminBadRequest, err)
	}
	var typ pb.Schema_Type
	found := false
	for t, name := range adminSchemaTypeNames {
		if strings.EqualFold(name, p.Type) && t != pb.Schema_None {
			typ, found = t, true
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: schema type %q: want one of AVRO, JSON, PROTOBUF, PROTOBUF_NATIVE, STRING, KEY_VALUE or a primitive type (BYTES is no schema)", errAdminBadRequest, p.Type)
	}
	if len(p.Schema) > broker.SchemaDataMaxBytes {
		return nil, fmt.Errorf("%w: schema of %d bytes (max %d)", errAdminBadRequest, len(p.Schema), broker.SchemaDataMaxBytes)
	}
	sc := &pb.Schema{Type: typ.Enum(), SchemaData: []byte(p.Schema)}
	for _, k := range slices.Sorted(maps.Keys(p.Properties)) {
		sc.Properties = append(sc.Properties, &pb.KeyValue{Key: proto.String(k), Value: proto.String(p.Properties[k])})
	}
	return sc, nil
}

// schemaStream is the stream of the request's topic; create makes a topic
// that does not exist (non-partitioned, when auto-creation is allowed).
func (a *admin) schemaStream(r *http.Request, create bool) (lakestream.StreamMetadata, error) {
	ref, err := a.refOf(r)
	if err == nil || !create || !errors.Is(err, errAdminNotFound) {
		return ref.md, err
	}
	tn, perr := pathTopic(r)
	if perr != nil {
		return lakestream.StreamMetadata{}, perr
	}
	pr, rerr := a.brk.Resolve(r.Context(), tn.String(), true)
	if rerr != nil {
		if errors.Is(rerr, lakestream.ErrNoSuchStream) {
			return lakestream.StreamMetadata{}, err // auto-creation is off
		}
		return lakestream.StreamMetadata{}, rerr
	}
	return a.cat.LoadStream(r.Context(), pr.Stream)
}

// postSchema serves POST .../schema: registers the payload's schema as
// a producer would (a new version when new and compatible).
func (a *admin) postSchema(r *http.Request) (any, error) {
	sc, err := schemaOfPayload(r)
	var md lakestream.StreamMetadata
	if err == nil {
		md, err = a.schemaStream(r, true)
	}
	var version []byte
	if err == nil {
		version, err = a.brk.GetOrCreateSchema(r.Context(), md.ID, sc, true)
	}
	if errors.Is(err, broker.ErrIncompatibleSchema) {
		err = fmt.Errorf("%w: %w", errAdminConflict, err)
	}
	if err != nil {
		return nil, err
	}
	v := binary.BigEndian.Uint64(version)
	return map[string]map[string]uint64{"version": {"version": v}}, nil
}

// deleteSchema serves DELETE .../schema[?force=true].
func (a *admin) deleteSchema(r *http.Request) (any, error) {
	md, err := a.schemaStream(r, false)
	var v int
	if err == nil {
		v, err = a.brk.DeleteSchema(r.Context(), md.ID, queryBool(r, "force"))
	}
	if err != nil {
		return nil, err
	}
	return map[string]int{"version": v}, nil
}

// testSchemaCompatibility serves POST .../compatibility: whether the
// payload's schema would be accepted, under which strategy (nothing is
// registered).
func (a *admin) testSchemaCompatibility(r *http.Request) (any, error) {
	sc, err := schemaOfPayload(r)
	var md lakestream.StreamMetadata
	if err == nil {
		md, err = a.schemaStream(r, false)
	}
	var strategy string
	if err == nil {
		strategy, err = a.brk.SchemaStrategy(r.Context(), md)
	}
	var list []broker.Schema
	if err == nil {
		list, err = broker.LoadSchemas(md)
	}
	if err != nil {
		return nil, err
	}
	want := broker.SchemaOf(sc)
	ok := true
	if _, same := broker.SchemaVersionOf(list, want); !same {
		if live := list[broker.LiveFrom(list):]; len(live) > 0 {
			ok = broker.SchemaCompatibleWith(strategy, live, want) == nil
		}
	}
	return map[string]any{"isCompatibility": ok, "schemaCompatibilityStrategy": strategy}, nil
}

// schemaVersionOfPayload serves POST .../version: the version of the
// payload's schema, 404 when it is not registered (since the last
// deletion).
func (a *admin) schemaVersionOfPayload(r *http.Request) (any, error) {
	sc, err := schemaOfPayload(r)
	var md lakestream.StreamMetadata
	if err == nil {
		md, err = a.schemaStream(r, false)
	}
	var list []broker.Schema
	if err == nil {
		list, err = broker.LoadSchemas(md)
	}
	if err != nil {
		return nil, err
	}
	v, ok := broker.SchemaVersionOf(list, broker.SchemaOf(sc))
	if !ok {
		return nil, fmt.Errorf("%w: %s has no such schema version", broker.ErrNoSchema, md.ID)
	}
	return map[string]int{"version": v}, nil
}

// parseStrategy reads a strategy body: a JSON string (or a bare name).
func parseStrategy(r *http.Request) (string, error) {
	b, err := readBody(r)
	if err != nil {
		return "", err
	}
	var name string
	if b != nil {
		if jerr := json.Unmarshal(b, &name); jerr != nil {
			name = strings.TrimSpace(string(b))
		}
	}
	name = strings.ToUpper(name)
	if !slices.Contains(broker.SchemaStrategies, name) {
		return "", fmt.Errorf("%w: schema compatibility strategy %q: want one of %s", errAdminBadRequest, name, strings.Join(broker.SchemaStrategies, ", "))
	}
	return name, nil
}

// getTopicSchemaStrategy serves GET .../{topic}/schemaCompatibilityStrategy:
// the topic's policy (null when none), or with ?applied=true the strategy
// that applies.
func (a *admin) getTopicSchemaStrategy(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	if queryBool(r, "applied") {
		s, err := a.brk.SchemaStrategy(r.Context(), ref.md)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if v := ref.md.Properties[broker.SchemaStrategyProperty]; v != "" {
		return v, nil
	}
	return nil, nil
}

func (a *admin) setTopicSchemaStrategy(r *http.Request) (any, error) {
	name, err := parseStrategy(r)
	if err != nil {
		return nil, err
	}
	return a.changeTopicProperty(r, broker.SchemaStrategyProperty, &name, false)
}

func (a *admin) removeTopicSchemaStrategy(r *http.Request) (any, error) {
	return a.changeTopicProperty(r, broker.SchemaStrategyProperty, nil, false)
}

// getNamespaceSchemaStrategy serves GET
// /admin/v2/namespaces/{t}/{ns}/schemaCompatibilityStrategy (UNDEFINED
// when not set, as Pulsar answers).
func (a *admin) getNamespaceSchemaStrategy(r *http.Request) (any, error) {
	name, err := a.namespaceOf(r)
	var nsmd lakestream.Namespace
	if err == nil {
		nsmd, err = a.cat.LoadNamespace(r.Context(), name)
	}
	if err != nil {
		return nil, err
	}
	v := nsmd.Properties[broker.SchemaStrategyProperty]
	if v == "" {
		v = broker.StrategyUndefined
	}
	return v, nil
}

func (a *admin) setNamespaceSchemaStrategy(r *http.Request) (any, error) {
	value, err := parseStrategy(r)
	var name string
	if err == nil {
		name, err = a.namespaceOf(r)
	}
	if err == nil {
		err = a.setNamespaceProperty(r.Context(), name, broker.SchemaStrategyProperty, value)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// setNamespaceProperty sets (value != "") or removes a namespace property.
func (a *admin) setNamespaceProperty(ctx context.Context, name, key, value string) error {
	if value == "" {
		return a.cat.RemoveNamespaceProperties(ctx, name, []string{key})
	}
	return a.cat.SetNamespaceProperties(ctx, name, map[string]string{key: value})
}

package gateway

// Schema registry: Pulsar's per-topic schemas with versions, kept behind
// the lakestream catalog API.
//
// Storage. A topic's schemas belong to its stream (all partitions share
// them). Version v (0, 1, ...) is the stream property
// "lakegate.schema.<v>" holding JSON {"type": <pb.Schema_Type>, "name",
// "data": <base64 schema_data>, "props": {...}}, and
// "lakegate.schema.count" the number of versions. New versions are added
// with ReplaceStreamProperties (optimistic concurrency on the stream's
// MetadataVersion, retried), so two gateways registering at once get
// distinct, dense versions. The latest version is then also written with
// StreamCatalog.SetStreamSchema for the lakehouse layer; that second write
// is best effort (the properties are the source of truth) and may lag
// under concurrent registrations.
//
// Versions on the wire are 8-byte big-endian integers, as Pulsar's
// LongSchemaVersion; producers put them in every message's metadata
// (schema_version), and entries are stored byte-exact, so consumers read
// the version each message was written with.
//
// Compatibility, decided cheaply against the latest version:
//   - the same type and schema_data as an existing version → that version;
//   - a different type → IncompatibleSchema;
//   - AVRO/JSON record schemas: every field of the latest version must
//     still exist with the same type (fields may be added, in any form) →
//     a new version, else IncompatibleSchema; a definition that does not
//     parse as a record is accepted as a new version;
//   - other types (PROTOBUF, KEY_VALUE, primitives with different data...)
//     → a new version, unchecked.
// A producer's schema (PRODUCER or GET_OR_CREATE_SCHEMA) is registered
// when new; a consumer's (SUBSCRIBE) is registered only when the topic has
// no schema yet, and otherwise only checked. Producers and consumers
// without a schema (BYTES) are always accepted.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

const (
	schemaPropPrefix   = "lakegate.schema."
	schemaCountProp    = schemaPropPrefix + "count"
	schemaDataMaxBytes = 256 << 10 // largest schema_data accepted, in bytes
	// schemaUpdateAttempts bounds the optimistic retries of a registration.
	schemaUpdateAttempts = 16
)

// storedSchema is one version as kept in the stream properties.
type storedSchema struct {
	Type  pb.Schema_Type    `json:"type"`
	Name  string            `json:"name,omitempty"`
	Data  []byte            `json:"data"`
	Props map[string]string `json:"props,omitempty"`
}

func schemaVersionBytes(v int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func storedSchemaOf(sc *pb.Schema) storedSchema {
	st := storedSchema{Type: sc.GetType(), Name: sc.GetName(), Data: sc.GetSchemaData()}
	for _, kv := range sc.GetProperties() {
		if st.Props == nil {
			st.Props = map[string]string{}
		}
		st.Props[kv.GetKey()] = kv.GetValue()
	}
	return st
}

func (st storedSchema) pb() *pb.Schema {
	out := &pb.Schema{Name: proto.String(st.Name), SchemaData: st.Data, Type: st.Type.Enum()}
	if out.SchemaData == nil {
		out.SchemaData = []byte{}
	}
	for _, k := range sortedKeys(st.Props) {
		out.Properties = append(out.Properties, &pb.KeyValue{Key: proto.String(k), Value: proto.String(st.Props[k])})
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// registrableSchema: a schema that names a real type (not NONE, not
// AUTO_CONSUME, not the clients' BYTES = no schema).
func registrableSchema(sc *pb.Schema) bool {
	if sc == nil {
		return false
	}
	t := sc.GetType()
	return t > pb.Schema_None && t < pb.Schema_AutoConsume
}

// lakestreamSchemaType names a Pulsar schema type for SetStreamSchema.
func lakestreamSchemaType(t pb.Schema_Type) lakestream.SchemaType {
	switch t {
	case pb.Schema_String:
		return lakestream.SchemaString
	case pb.Schema_Json:
		return lakestream.SchemaJSON
	case pb.Schema_Protobuf, pb.Schema_ProtobufNative:
		return lakestream.SchemaProtobuf
	case pb.Schema_Avro:
		return lakestream.SchemaAvro
	case pb.Schema_Bool:
		return lakestream.SchemaBoolean
	case pb.Schema_Int8:
		return lakestream.SchemaInt8
	case pb.Schema_Int16:
		return lakestream.SchemaInt16
	case pb.Schema_Int32:
		return lakestream.SchemaInt32
	case pb.Schema_Int64:
		return lakestream.SchemaInt64
	case pb.Schema_Float:
		return lakestream.SchemaFloat
	case pb.Schema_Double:
		return lakestream.SchemaDouble
	case pb.Schema_KeyValue:
		return lakestream.SchemaKeyValue
	case pb.Schema_Timestamp:
		return lakestream.SchemaTimestamp
	case pb.Schema_None:
		return lakestream.SchemaNone
	}
	return lakestream.SchemaType(strings.ToUpper(t.String()))
}

// loadSchemas returns the stream's schema versions, oldest first.
func loadSchemas(md lakestream.StreamMetadata) ([]storedSchema, error) {
	n, _ := strconv.Atoi(md.Properties[schemaCountProp])
	out := make([]storedSchema, 0, n)
	for v := range n {
		var st storedSchema
		if err := json.Unmarshal([]byte(md.Properties[schemaPropPrefix+strconv.Itoa(v)]), &st); err != nil {
			return nil, fmt.Errorf("gateway: stream %s: schema version %d: %w", md.ID, v, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// getSchema returns version (nil/empty: the latest) of the stream's schema.
// ErrNoSchema when there is none.
func (s *Server) getSchema(ctx context.Context, id lakestream.StreamIdentifier, version []byte) (storedSchema, int, error) {
	md, err := s.cfg.Catalog.LoadStream(ctx, id)
	if err != nil {
		return storedSchema{}, 0, err
	}
	list, err := loadSchemas(md)
	if err != nil {
		return storedSchema{}, 0, err
	}
	if len(list) == 0 {
		return storedSchema{}, 0, fmt.Errorf("%w: %s has no schema", ErrNoSchema, id)
	}
	v := len(list) - 1
	if len(version) > 0 {
		if len(version) != 8 {
			return storedSchema{}, 0, fmt.Errorf("%w: schema version %x", ErrNoSchema, version)
		}
		u := binary.BigEndian.Uint64(version)
		if u >= uint64(len(list)) {
			return storedSchema{}, 0, fmt.Errorf("%w: %s has no schema version %d", ErrNoSchema, id, u)
		}
		v = int(u)
	}
	return list[v], v, nil
}

// getOrCreateSchema returns the version of sc on the stream, registering
// it as a new version when it is new and compatible. With register false
// (consumers) a new compatible schema is only checked, and its version is
// nil, unless the stream has no schema at all.
func (s *Server) getOrCreateSchema(ctx context.Context, id lakestream.StreamIdentifier, sc *pb.Schema, register bool) ([]byte, error) {
	if len(sc.GetSchemaData()) > schemaDataMaxBytes {
		return nil, fmt.Errorf("%w: schema of %d bytes (max %d)", ErrNotAllowed, len(sc.GetSchemaData()), schemaDataMaxBytes)
	}
	want := storedSchemaOf(sc)
	for range schemaUpdateAttempts {
		md, err := s.cfg.Catalog.LoadStream(ctx, id)
		if err != nil {
			return nil, err
		}
		list, err := loadSchemas(md)
		if err != nil {
			return nil, err
		}
		for v, st := range list {
			if st.Type == want.Type && bytes.Equal(st.Data, want.Data) {
				return schemaVersionBytes(v), nil
			}
		}
		if len(list) > 0 {
			if err := schemaCompatible(list[len(list)-1], want); err != nil {
				return nil, err
			}
			if !register {
				return nil, nil
			}
		}
		raw, err := json.Marshal(want)
		if err != nil {
			return nil, err
		}
		props := maps.Clone(md.Properties)
		if props == nil {
			props = map[string]string{}
		}
		v := len(list)
		props[schemaPropPrefix+strconv.Itoa(v)] = string(raw)
		props[schemaCountProp] = strconv.Itoa(v + 1)
		_, ok, err := s.cfg.Catalog.ReplaceStreamProperties(ctx, id, props, md.MetadataVersion)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // raced with another change: read again
		}
		if _, err := s.cfg.Catalog.SetStreamSchema(ctx, id, lakestream.SchemaConfig{
			Type: lakestreamSchemaType(want.Type), Definition: want.Data, Properties: want.Props,
		}); err != nil {
			s.cfg.Logger.Warn("schema registered but SetStreamSchema failed", "stream", id.String(), "version", v, "err", err)
		}
		return schemaVersionBytes(v), nil
	}
	return nil, fmt.Errorf("%w: schema registration of %s kept conflicting", lakestream.ErrConflict, id)
}

// schemaCompatible decides whether next may follow prev (see the file
// comment for the rules).
func schemaCompatible(prev, next storedSchema) error {
	if prev.Type != next.Type {
		return fmt.Errorf("%w: schema type %s, topic has %s", ErrIncompatibleSchema, next.Type, prev.Type)
	}
	if next.Type != pb.Schema_Avro && next.Type != pb.Schema_Json {
		return nil
	}
	oldFields, ok1 := recordFields(prev.Data)
	newFields, ok2 := recordFields(next.Data)
	if !ok1 || !ok2 {
		return nil // cannot decide cheaply: accept
	}
	for name, typ := range oldFields {
		nt, found := newFields[name]
		if !found {
			return fmt.Errorf("%w: field %q was removed", ErrIncompatibleSchema, name)
		}
		if !bytes.Equal(nt, typ) {
			return fmt.Errorf("%w: field %q changed type from %s to %s", ErrIncompatibleSchema, name, typ, nt)
		}
	}
	return nil
}

// recordFields parses an Avro-style record schema (what AVRO and JSON
// schemas carry) into field name → compacted type JSON.
func recordFields(def []byte) (map[string][]byte, bool) {
	var rec struct {
		Type   json.RawMessage `json:"type"`
		Fields []struct {
			Name string          `json:"name"`
			Type json.RawMessage `json:"type"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(def, &rec); err != nil || !bytes.Equal(bytes.TrimSpace(rec.Type), []byte(`"record"`)) {
		return nil, false
	}
	out := make(map[string][]byte, len(rec.Fields))
	for _, f := range rec.Fields {
		var b bytes.Buffer
		if err := json.Compact(&b, f.Type); err != nil {
			return nil, false
		}
		out[f.Name] = b.Bytes()
	}
	return out, true
}

func (s *session) handleGetSchema(c *pb.CommandGetSchema) {
	req := c.GetRequestId()
	ctx, cancel := s.ctx()
	defer cancel()
	t, err := s.srv.resolveName(ctx, c.GetTopic(), false)
	if err == nil {
		err = s.checkTopicName(ctx, c.GetTopic(), actionLookup)
	}
	if err != nil {
		s.send(protocol.GetSchemaError(req, serverError(err), err.Error()))
		return
	}
	st, v, err := s.srv.getSchema(ctx, t.stream, c.GetSchemaVersion())
	if err != nil {
		s.send(protocol.GetSchemaError(req, serverError(err), err.Error()))
		return
	}
	if st.Name == "" {
		st.Name = t.name.Base().Local
	}
	s.send(protocol.GetSchemaResponse(req, st.pb(), schemaVersionBytes(v)))
}

func (s *session) handleGetOrCreateSchema(c *pb.CommandGetOrCreateSchema) {
	req := c.GetRequestId()
	ctx, cancel := s.ctx()
	defer cancel()
	err := s.checkTopicName(ctx, c.GetTopic(), actionProduce)
	var t partRef
	if err == nil {
		t, err = s.srv.resolveName(ctx, c.GetTopic(), true)
	}
	if err == nil && c.GetSchema().GetType() == pb.Schema_None {
		// BYTES: what the Java client's multi-schema producers (its
		// dead-letter and retry-letter producers) register for untyped
		// messages. Accepted like a producer without schema, with no
		// version (Pulsar's SchemaVersion.Empty).
		s.send(protocol.GetOrCreateSchemaResponse(req, nil))
		return
	}
	if err == nil && !registrableSchema(c.GetSchema()) {
		err = fmt.Errorf("%w: GET_OR_CREATE_SCHEMA without a typed schema", ErrNotAllowed)
	}
	var version []byte
	if err == nil {
		version, err = s.srv.getOrCreateSchema(ctx, t.stream, c.GetSchema(), true)
	}
	if err != nil {
		s.send(protocol.GetOrCreateSchemaError(req, serverError(err), err.Error()))
		return
	}
	s.send(protocol.GetOrCreateSchemaResponse(req, version))
}

package broker

// Schema registry: Pulsar's per-topic schemas with versions, kept behind
// the lakestream catalog API.
//
// Storage (docs/policies.md). A topic's schemas belong to its stream (all
// partitions share them). Version v (0, 1, ...) is the stream property
// "lakegate.schema.<v>" holding JSON {"type": <pb.Schema_Type>, "name",
// "data": <base64 schema_data>, "props": {...}} — or {"deleted": true}, a
// deletion marker — and "lakegate.schema.count" the number of versions.
// New versions are added with ReplaceStreamProperties (optimistic
// concurrency on the stream's MetadataVersion, retried), so two gateways
// registering at once get distinct, dense versions. The latest version is
// then also written with StreamCatalog.SetStreamSchema for the lakehouse
// layer; that second write is best effort (the properties are the source
// of truth) and may lag under concurrent registrations.
//
// Deletion (admin DELETE .../schema), as Pulsar's: a deletion marker is
// added as a new version. The versions before it stay readable by number
// (stored messages name them), but the topic has no schema: the latest
// version is "not found", the version list shows only what was registered
// after the last marker, and the next schema registered is checked against
// nothing. A forced deletion (?force=true) removes every version: numbering
// starts again at 0.
//
// Versions on the wire are 8-byte big-endian integers, as Pulsar's
// LongSchemaVersion; producers put them in every message's metadata
// (schema_version), and entries are stored byte-exact, so consumers read
// the version each message was written with.
//
// Compatibility is Pulsar's schema compatibility strategy, the topic's
// (stream property "lakegate.schemaCompatibility") or else its
// namespace's (namespace property of the same name), FULL when neither
// is set (Pulsar's broker default):
//   - the same type and schema_data as a version registered since the last
//     deletion → that version, whatever the strategy;
//   - ALWAYS_COMPATIBLE → a new version, unchecked (a different type too);
//   - ALWAYS_INCOMPATIBLE → IncompatibleSchema;
//   - a different type than the latest version → IncompatibleSchema;
//   - AVRO/JSON record schemas (Avro definitions) are checked field by
//     field (schemaReadable): BACKWARD — the new schema reads data of the
//     latest version (fields it adds have defaults, common fields keep
//     their type or widen it as Avro promotes: int → long → float →
//     double, string ↔ bytes); FORWARD — the latest version reads data of
//     the new one; FULL — both; *_TRANSITIVE — the same against every
//     version since the last deletion. A definition that does not parse as
//     a record is accepted as a new version;
//   - other types (PROTOBUF, KEY_VALUE, primitives with different data...)
//     → a new version, unchecked.
// A producer's schema (PRODUCER or GET_OR_CREATE_SCHEMA) and an admin
// upload are registered when new; a consumer's (SUBSCRIBE) is registered
// only when the topic has no schema yet, and otherwise only checked.
// Producers and consumers without a schema (BYTES) are always accepted.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol/pb"
)

const (
	schemaPropPrefix   = "lakegate.schema."
	schemaCountProp    = schemaPropPrefix + "count"
	SchemaDataMaxBytes = 256 << 10 // largest schema_data accepted, in bytes
	// schemaUpdateAttempts bounds the optimistic retries of a registration.
	schemaUpdateAttempts = 16
)

// Schema is one version as kept in the stream properties.
type Schema struct {
	Type  pb.Schema_Type    `json:"type"`
	Name  string            `json:"name,omitempty"`
	Data  []byte            `json:"data"`
	Props map[string]string `json:"props,omitempty"`
	// Deleted marks a deletion: the versions before it are no longer the
	// topic's schema (see the file comment).
	Deleted bool `json:"deleted,omitempty"`
}

// SchemaVersionBytes is a version on the wire: 8 bytes, big-endian (Pulsar's
// LongSchemaVersion).
func SchemaVersionBytes(v int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// SchemaOf is the version a protocol schema would be stored as.
func SchemaOf(sc *pb.Schema) Schema {
	st := Schema{Type: sc.GetType(), Name: sc.GetName(), Data: sc.GetSchemaData()}
	for _, kv := range sc.GetProperties() {
		if st.Props == nil {
			st.Props = map[string]string{}
		}
		st.Props[kv.GetKey()] = kv.GetValue()
	}
	return st
}

// PB is the protocol schema of a stored version.
func (st Schema) PB() *pb.Schema {
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

// RegistrableSchema: a schema that names a real type (not NONE, not
// AUTO_CONSUME, not the clients' BYTES = no schema).
func RegistrableSchema(sc *pb.Schema) bool {
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

// LoadSchemas returns the stream's schema versions, oldest first,
// deletion markers included.
func LoadSchemas(md lakestream.StreamMetadata) ([]Schema, error) {
	n, _ := strconv.Atoi(md.Properties[schemaCountProp])
	out := make([]Schema, 0, n)
	for v := range n {
		var st Schema
		if err := json.Unmarshal([]byte(md.Properties[schemaPropPrefix+strconv.Itoa(v)]), &st); err != nil {
			return nil, fmt.Errorf("gateway: stream %s: schema version %d: %w", md.ID, v, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// LiveFrom is the first version registered after the last deletion
// marker of list (0 when there is none): the versions [LiveFrom, len) are
// the topic's schema history.
func LiveFrom(list []Schema) int {
	for v := len(list) - 1; v >= 0; v-- {
		if list[v].Deleted {
			return v + 1
		}
	}
	return 0
}

// GetSchema returns version (nil/empty: the latest) of the stream's schema.
// ErrNoSchema when there is none (or it was deleted, or the version is a
// deletion marker).
func (b *Broker) GetSchema(ctx context.Context, id lakestream.StreamIdentifier, version []byte) (Schema, int, error) {
	md, err := b.cfg.Catalog.LoadStream(ctx, id)
	if err != nil {
		return Schema{}, 0, err
	}
	list, err := LoadSchemas(md)
	if err != nil {
		return Schema{}, 0, err
	}
	if len(list) == 0 {
		return Schema{}, 0, fmt.Errorf("%w: %s has no schema", ErrNoSchema, id)
	}
	v := len(list) - 1
	if len(version) > 0 {
		if len(version) != 8 {
			return Schema{}, 0, fmt.Errorf("%w: schema version %x", ErrNoSchema, version)
		}
		u := binary.BigEndian.Uint64(version)
		if u >= uint64(len(list)) {
			return Schema{}, 0, fmt.Errorf("%w: %s has no schema version %d", ErrNoSchema, id, u)
		}
		v = int(u)
	}
	if list[v].Deleted {
		return Schema{}, 0, fmt.Errorf("%w: the schema of %s was deleted (version %d)", ErrNoSchema, id, v)
	}
	return list[v], v, nil
}

// SchemaVersionOf returns the version of the live schema equal to want.
func SchemaVersionOf(list []Schema, want Schema) (int, bool) {
	for v := LiveFrom(list); v < len(list); v++ {
		if st := list[v]; st.Type == want.Type && bytes.Equal(st.Data, want.Data) {
			return v, true
		}
	}
	return 0, false
}

// GetOrCreateSchema returns the version of sc on the stream, registering
// it as a new version when it is new and compatible. With register false
// (consumers) a new compatible schema is only checked, and its version is
// nil, unless the stream has no schema at all.
func (b *Broker) GetOrCreateSchema(ctx context.Context, id lakestream.StreamIdentifier, sc *pb.Schema, register bool) ([]byte, error) {
	if len(sc.GetSchemaData()) > SchemaDataMaxBytes {
		return nil, fmt.Errorf("%w: schema of %d bytes (max %d)", ErrNotAllowed, len(sc.GetSchemaData()), SchemaDataMaxBytes)
	}
	want := SchemaOf(sc)
	for range schemaUpdateAttempts {
		md, err := b.cfg.Catalog.LoadStream(ctx, id)
		if err != nil {
			return nil, err
		}
		list, err := LoadSchemas(md)
		if err != nil {
			return nil, err
		}
		if v, ok := SchemaVersionOf(list, want); ok {
			return SchemaVersionBytes(v), nil
		}
		if live := list[LiveFrom(list):]; len(live) > 0 {
			strategy, err := b.SchemaStrategy(ctx, md)
			if err != nil {
				return nil, err
			}
			if err := SchemaCompatibleWith(strategy, live, want); err != nil {
				return nil, err
			}
			if !register {
				return nil, nil
			}
		}
		v, ok, err := b.appendSchemaVersion(ctx, md, list, want)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // raced with another change: read again
		}
		return SchemaVersionBytes(v), nil
	}
	return nil, fmt.Errorf("%w: schema registration of %s kept conflicting", lakestream.ErrConflict, id)
}

// appendSchemaVersion stores st as the next version of md's stream; ok is
// false when the stream changed since md was read (nothing written).
func (b *Broker) appendSchemaVersion(ctx context.Context, md lakestream.StreamMetadata, list []Schema, st Schema) (int, bool, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return 0, false, err
	}
	props := maps.Clone(md.Properties)
	if props == nil {
		props = map[string]string{}
	}
	v := len(list)
	props[schemaPropPrefix+strconv.Itoa(v)] = string(raw)
	props[schemaCountProp] = strconv.Itoa(v + 1)
	_, ok, err := b.cfg.Catalog.ReplaceStreamProperties(ctx, md.ID, props, md.MetadataVersion)
	if err != nil || !ok || st.Deleted {
		return v, ok, err
	}
	if _, err := b.cfg.Catalog.SetStreamSchema(ctx, md.ID, lakestream.SchemaConfig{
		Type: lakestreamSchemaType(st.Type), Definition: st.Data, Properties: st.Props,
	}); err != nil {
		b.cfg.Logger.Warn("schema registered but SetStreamSchema failed", "stream", md.ID.String(), "version", v, "err", err)
	}
	return v, true, nil
}

// DeleteSchema deletes the stream's schema (see the file comment): with
// force every version is removed, else a deletion marker is added. It
// returns the version of the marker (force: the last version removed);
// ErrNoSchema when there is no schema to delete.
func (b *Broker) DeleteSchema(ctx context.Context, id lakestream.StreamIdentifier, force bool) (int, error) {
	for range schemaUpdateAttempts {
		md, err := b.cfg.Catalog.LoadStream(ctx, id)
		if err != nil {
			return 0, err
		}
		list, err := LoadSchemas(md)
		if err != nil {
			return 0, err
		}
		if !force {
			if len(list) == 0 || list[len(list)-1].Deleted {
				return 0, fmt.Errorf("%w: %s has no schema to delete", ErrNoSchema, id)
			}
			v, ok, err := b.appendSchemaVersion(ctx, md, list, Schema{Deleted: true})
			if err != nil {
				return 0, err
			}
			if ok {
				return v, nil
			}
			continue
		}
		if len(list) == 0 {
			return 0, fmt.Errorf("%w: %s has no schema to delete", ErrNoSchema, id)
		}
		props := maps.Clone(md.Properties)
		maps.DeleteFunc(props, func(k, _ string) bool { return strings.HasPrefix(k, schemaPropPrefix) })
		_, ok, err := b.cfg.Catalog.ReplaceStreamProperties(ctx, id, props, md.MetadataVersion)
		if err != nil {
			return 0, err
		}
		if ok {
			return len(list) - 1, nil
		}
	}
	return 0, fmt.Errorf("%w: schema deletion of %s kept conflicting", lakestream.ErrConflict, id)
}

// Schema compatibility strategies (Pulsar's SchemaCompatibilityStrategy).
const (
	StrategyUndefined          = "UNDEFINED"
	strategyAlwaysIncompatible = "ALWAYS_INCOMPATIBLE"
	strategyAlwaysCompatible   = "ALWAYS_COMPATIBLE"
	strategyBackward           = "BACKWARD"
	strategyForward            = "FORWARD"
	strategyFull               = "FULL"
	strategyBackwardTransitive = "BACKWARD_TRANSITIVE"
	strategyForwardTransitive  = "FORWARD_TRANSITIVE"
	strategyFullTransitive     = "FULL_TRANSITIVE"
	// SchemaStrategyProperty is the stream and namespace property holding
	// a strategy name (docs/policies.md).
	SchemaStrategyProperty = "lakegate.schemaCompatibility"
	// defaultSchemaStrategy applies when neither the topic nor its
	// namespace names one (Pulsar's broker default).
	defaultSchemaStrategy = strategyFull
)

// SchemaStrategies are the strategy names a policy may hold.
var SchemaStrategies = []string{StrategyUndefined, strategyAlwaysIncompatible, strategyAlwaysCompatible,
	strategyBackward, strategyForward, strategyFull, strategyBackwardTransitive, strategyForwardTransitive, strategyFullTransitive}

// SchemaStrategy is the strategy that applies to md's stream: its own,
// else its namespace's, else defaultSchemaStrategy (UNDEFINED counts as
// not set).
func (b *Broker) SchemaStrategy(ctx context.Context, md lakestream.StreamMetadata) (string, error) {
	if v := md.Properties[SchemaStrategyProperty]; v != "" && v != StrategyUndefined {
		return v, nil
	}
	ns, err := b.cfg.Catalog.LoadNamespace(ctx, md.ID.Namespace)
	if err != nil && !errors.Is(err, lakestream.ErrNoSuchNamespace) {
		return "", err
	}
	if v := ns.Properties[SchemaStrategyProperty]; v != "" && v != StrategyUndefined {
		return v, nil
	}
	return defaultSchemaStrategy, nil
}

// SchemaCompatibleWith decides whether next may follow the live versions
// (oldest first, at least one) under strategy (see the file comment).
func SchemaCompatibleWith(strategy string, live []Schema, next Schema) error {
	switch strategy {
	case strategyAlwaysCompatible:
		return nil
	case strategyAlwaysIncompatible:
		return fmt.Errorf("%w: the topic's schema compatibility strategy is %s", ErrIncompatibleSchema, strategy)
	}
	against := live[len(live)-1:]
	switch strategy {
	case strategyBackwardTransitive, strategyForwardTransitive, strategyFullTransitive:
		against = live
	}
	backward := strategy != strategyForward && strategy != strategyForwardTransitive
	forward := strategy != strategyBackward && strategy != strategyBackwardTransitive
	for i := len(against) - 1; i >= 0; i-- {
		prev := against[i]
		if prev.Type != next.Type {
			return fmt.Errorf("%w: schema type %s, topic has %s", ErrIncompatibleSchema, next.Type, prev.Type)
		}
		if next.Type != pb.Schema_Avro && next.Type != pb.Schema_Json {
			continue
		}
		oldRec, ok1 := parseRecord(prev.Data)
		newRec, ok2 := parseRecord(next.Data)
		if !ok1 || !ok2 {
			continue // cannot decide cheaply: accept
		}
		if backward {
			if err := schemaReadable(newRec, oldRec); err != nil {
				return fmt.Errorf("%w: %s: the new schema cannot read data written with the existing one: %v", ErrIncompatibleSchema, strategy, err)
			}
		}
		if forward {
			if err := schemaReadable(oldRec, newRec); err != nil {
				return fmt.Errorf("%w: %s: the existing schema cannot read data written with the new one: %v", ErrIncompatibleSchema, strategy, err)
			}
		}
	}
	return nil
}

// recordField is one field of a parsed record schema.
type recordField struct {
	typ        string // compacted type JSON
	hasDefault bool
}

// parseRecord parses an Avro-style record schema (what AVRO and JSON
// schemas carry) into field name → field.
func parseRecord(def []byte) (map[string]recordField, bool) {
	var rec struct {
		Type   json.RawMessage              `json:"type"`
		Fields []map[string]json.RawMessage `json:"fields"`
	}
	if err := json.Unmarshal(def, &rec); err != nil || !bytes.Equal(bytes.TrimSpace(rec.Type), []byte(`"record"`)) {
		return nil, false
	}
	out := make(map[string]recordField, len(rec.Fields))
	for _, f := range rec.Fields {
		var name string
		if err := json.Unmarshal(f["name"], &name); err != nil {
			return nil, false
		}
		var b bytes.Buffer
		if err := json.Compact(&b, f["type"]); err != nil {
			return nil, false
		}
		_, hasDefault := f["default"] // "default": null is a default
		out[name] = recordField{typ: b.String(), hasDefault: hasDefault}
	}
	return out, true
}

// avroPromotions lists, per writer type, the reader types Avro resolves
// it to besides itself.
var avroPromotions = map[string][]string{
	`"int"`:    {`"long"`, `"float"`, `"double"`},
	`"long"`:   {`"float"`, `"double"`},
	`"float"`:  {`"double"`},
	`"string"`: {`"bytes"`},
	`"bytes"`:  {`"string"`},
}

// schemaReadable reports whether a reader with schema reader can read data
// written with schema writer: every reader field the writer lacks has a
// default, and every common field's writer type is the reader's or
// promotes to it.
func schemaReadable(reader, writer map[string]recordField) error {
	for _, name := range slices.Sorted(maps.Keys(reader)) {
		rf := reader[name]
		wf, ok := writer[name]
		switch {
		case !ok && !rf.hasDefault:
			return fmt.Errorf("field %q has no default", name)
		case ok && rf.typ != wf.typ && !slices.Contains(avroPromotions[wf.typ], rf.typ):
			return fmt.Errorf("field %q changed type from %s to %s", name, wf.typ, rf.typ)
		}
	}
	return nil
}

package tables

// Typed value columns of compacted tables (docs/table-schema.md, "Typed
// value columns"): which typed schema the next table files get, and how it
// is kept in the Delta schema so the next materialization — on any node, after
// any crash — evolves it with the same field ids.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// Delta field metadata keys of a typed column: its lakehouse.ValueType,
// Parquet field id, and whether it was removed from the topic's schema.
const (
	typedMetaType    = "lakegate.valueType"
	typedMetaID      = "lakegate.fieldId"
	typedMetaRetired = "lakegate.retired"
	typedMetaKind    = "lakegate.schemaKind"
	// typedMetaNested is a nested column's children (names, ids, types) as
	// JSON text: the ids of list elements and map keys and values have no
	// other place in a Delta schema.
	typedMetaNested = "lakegate.nested"
)

// schemaKind maps a stream's schema type to the typed-column kind; ok is
// false for types without typed columns (NONE, PROTOBUF, KEY_VALUE, ...).
func schemaKind(t lakestream.SchemaType) (lakehouse.SchemaKind, bool) {
	switch t {
	case lakestream.SchemaString, lakestream.SchemaInt8, lakestream.SchemaInt16, lakestream.SchemaInt32,
		lakestream.SchemaInt64, lakestream.SchemaFloat, lakestream.SchemaDouble, lakestream.SchemaBoolean,
		lakestream.SchemaJSON, lakestream.SchemaAvro:
		return lakehouse.SchemaKind(t), true
	}
	return "", false
}

// typedFromDelta recovers the typed schema recorded in a table's Delta
// schema (nil: none).
func typedFromDelta(s delta.Schema) (*lakehouse.TypedSchema, error) {
	var ts *lakehouse.TypedSchema
	for _, f := range s.Fields {
		vt, ok := f.Metadata[typedMetaType].(string)
		if !ok {
			continue
		}
		if ts == nil {
			kind, _ := f.Metadata[typedMetaKind].(string)
			ts = &lakehouse.TypedSchema{Kind: lakehouse.SchemaKind(kind), NextFieldID: lakehouse.FirstTypedFieldID}
		}
		id, err := metaInt(f.Metadata[typedMetaID])
		if err != nil {
			return nil, fmt.Errorf("tables: typed column %s: field id: %w", f.Name, err)
		}
		retired, _ := f.Metadata[typedMetaRetired].(bool)
		var children []typedField
		if nested, ok := f.Metadata[typedMetaNested].(string); ok {
			if err := json.Unmarshal([]byte(nested), &children); err != nil {
				return nil, fmt.Errorf("tables: typed column %s: nested fields: %w", f.Name, err)
			}
		}
		tf := fieldOf(typedField{Name: f.Name, ID: int32(id), Type: lakehouse.ValueType(vt), Retired: retired, Children: children})
		ts.Fields = append(ts.Fields, tf)
		ts.NextFieldID = max(ts.NextFieldID, maxID(tf)+1)
	}
	return ts, nil
}

func metaInt(v any) (int64, error) {
	switch x := v.(type) {
	case float64:
		return int64(x), nil
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("%v (%T) is not a number", v, v)
}

// nextTypedSchema returns the typed schema of the next files of a table
// that has prev (nil: none yet) for a stream whose latest schema is sc. A
// stream without a typed schema keeps prev (its columns stay, null in new
// rows); a schema that cannot be mapped or changes a column's type also
// keeps prev and reports why in warn, so materialization never stops on a schema.
func nextTypedSchema(prev *lakehouse.TypedSchema, sc lakestream.SchemaConfig) (next *lakehouse.TypedSchema, warn error) {
	kind, ok := schemaKind(sc.Type)
	if !ok {
		return prev, nil
	}
	var ts *lakehouse.TypedSchema
	var err error
	switch kind {
	case lakehouse.KindJSON, lakehouse.KindAvro:
		ts, err = lakehouse.NewRecordSchema(kind, sc.Definition, prev)
	default:
		ts, err = lakehouse.NewPrimitiveSchema(kind)
		if err == nil && prev != nil && !sameColumns(prev, ts) {
			err = fmt.Errorf("%w: table has typed columns of a %s schema, stream now %s", lakehouse.ErrIncompatibleSchema, prev.Kind, kind)
		}
		if err == nil && prev != nil {
			ts = prev // the same single column
		}
	}
	if err != nil {
		return prev, err
	}
	return ts, nil
}

// sameColumns reports whether two typed schemas have the same columns.
func sameColumns(a, b *lakehouse.TypedSchema) bool {
	if len(a.Fields) != len(b.Fields) {
		return false
	}
	for i := range a.Fields {
		x, y := a.Fields[i], b.Fields[i]
		if x.Name != y.Name || x.ID != y.ID || x.Type != y.Type || x.Retired != y.Retired {
			return false
		}
	}
	return lakehouse.SameFields(a.Fields, b.Fields)
}

// deltaSchemaOf is the Delta schema of table files with typed columns ts,
// with the typed-column metadata typedFromDelta reads back.
func deltaSchemaOf(ts *lakehouse.TypedSchema) (delta.Schema, error) {
	s, err := delta.FromArrow(lakehouse.Schema(ts))
	if err != nil {
		return s, err
	}
	if ts == nil {
		return s, nil
	}
	byName := map[string]lakehouse.TypedField{}
	for _, f := range ts.Fields {
		byName[f.Name] = f
	}
	for i, f := range s.Fields {
		tf, ok := byName[f.Name]
		if !ok {
			continue
		}
		s.Fields[i].Metadata = map[string]any{
			typedMetaType: string(tf.Type), typedMetaID: int64(tf.ID), typedMetaRetired: tf.Retired, typedMetaKind: string(ts.Kind),
		}
		if len(tf.Children) > 0 {
			nested, err := json.Marshal(typedFieldOf(tf).Children)
			if err != nil {
				return s, fmt.Errorf("tables: typed column %s: %w", tf.Name, err)
			}
			s.Fields[i].Metadata[typedMetaNested] = string(nested)
		}
	}
	return s, nil
}

// tableSchemaKey is the key of a table's typed-schema state: the one source
// of truth for typed column ids of every log (partition) of the stream and
// of both formats (docs/table-schema.md, "Typed columns in compacted
// tables"). It lives under the engine's root, outside the engine's
// prefixes (docs/index-format.md).
func (t *Tables) tableSchemaKey(root string) string { return t.st.Root + "table-schemas/" + root }

// typedState is the value of tableSchemaKey.
type typedState struct {
	Kind lakehouse.SchemaKind `json:"kind"`
	// Definition is the schema text the columns were last derived from
	// (kept to decode with when a newer one cannot be applied).
	Definition []byte       `json:"definition,omitempty"`
	Fields     []typedField `json:"fields"`
	Next       int32        `json:"next"`
}

// typedField is a column, or a nested field (Children: a struct's fields,
// a list's element, a map's key and value; docs/table-schema.md).
type typedField struct {
	Name     string              `json:"name"`
	ID       int32               `json:"id"`
	Type     lakehouse.ValueType `json:"type"`
	Retired  bool                `json:"retired,omitempty"`
	Children []typedField        `json:"children,omitempty"`
}

func fieldOf(f typedField) lakehouse.TypedField {
	out := lakehouse.TypedField{Name: f.Name, ID: f.ID, Type: f.Type, Retired: f.Retired}
	for _, c := range f.Children {
		out.Children = append(out.Children, fieldOf(c))
	}
	return out
}

func typedFieldOf(f lakehouse.TypedField) typedField {
	out := typedField{Name: f.Name, ID: f.ID, Type: f.Type, Retired: f.Retired}
	for _, c := range f.Children {
		out.Children = append(out.Children, typedFieldOf(c))
	}
	return out
}

// maxID is the largest field id of f and its children.
func maxID(f lakehouse.TypedField) int32 {
	id := f.ID
	for _, c := range f.Children {
		id = max(id, maxID(c))
	}
	return id
}

func (s *typedState) schema() *lakehouse.TypedSchema {
	ts := &lakehouse.TypedSchema{Kind: s.Kind, NextFieldID: s.Next}
	for _, f := range s.Fields {
		ts.Fields = append(ts.Fields, fieldOf(f))
	}
	return ts
}

func stateOf(ts *lakehouse.TypedSchema, def []byte) typedState {
	s := typedState{Kind: ts.Kind, Definition: def, Next: ts.NextFieldID}
	for _, f := range ts.Fields {
		s.Fields = append(s.Fields, typedFieldOf(f))
	}
	return s
}

// decoder rebuilds a usable TypedSchema (with its Avro decoder) from a
// stored state: the stored columns, decoding with the stored definition.
func (s *typedState) decoder() (*lakehouse.TypedSchema, error) {
	cols := s.schema()
	switch s.Kind {
	case lakehouse.KindJSON, lakehouse.KindAvro:
		ts, err := lakehouse.NewRecordSchema(s.Kind, s.Definition, cols)
		if err != nil {
			return nil, err
		}
		if !sameColumns(ts, cols) {
			return nil, fmt.Errorf("tables: stored typed schema does not match its definition")
		}
		return ts, nil
	}
	return cols, nil
}

// typedStateAttempts bounds the compare-and-swap retries of an evolution.
const typedStateAttempts = 16

// loadTableDecoder returns a table's typed columns (nil: none yet) ready to
// decode payloads with the definition they were derived from (Avro schema,
// timestamp units); when that definition no longer maps to them, the bare
// columns (Avro payloads then decode only through the writers' versions).
func (t *Tables) loadTableDecoder(ctx context.Context, root string) (*lakehouse.TypedSchema, error) {
	kv, found, err := t.st.Meta.Get(ctx, t.tableSchemaKey(root))
	if err != nil {
		return nil, fmt.Errorf("%w: table schema: %w", lakestream.ErrUnavailable, err)
	}
	if !found {
		return nil, nil
	}
	var st typedState
	if err := json.Unmarshal(kv.Value, &st); err != nil {
		return nil, fmt.Errorf("%w: table schema of %s: %v", index.ErrCorrupt, root, err)
	}
	if ts, err := st.decoder(); err == nil {
		return ts, nil
	}
	return st.schema(), nil
}

// loadTableSchema returns a table's typed columns (nil: none yet).
func (t *Tables) loadTableSchema(ctx context.Context, root string) (*lakehouse.TypedSchema, error) {
	kv, found, err := t.st.Meta.Get(ctx, t.tableSchemaKey(root))
	if err != nil {
		return nil, fmt.Errorf("%w: table schema: %w", lakestream.ErrUnavailable, err)
	}
	if !found {
		return nil, nil
	}
	var st typedState
	if err := json.Unmarshal(kv.Value, &st); err != nil {
		return nil, fmt.Errorf("%w: table schema of %s: %v", index.ErrCorrupt, root, err)
	}
	return st.schema(), nil
}

// tableSchema returns the typed schema the next files of the table at root
// are written with, for a stream whose latest schema is sc: the stored
// columns evolved by sc (stored with a compare-and-swap, so every log and
// node agrees on the ids). A schema that cannot be applied is logged and
// the stored one kept; materialization never stops on a schema.
func (t *Tables) tableSchema(ctx context.Context, root string, sc lakestream.SchemaConfig) (*lakehouse.TypedSchema, error) {
	key := t.tableSchemaKey(root)
	for range typedStateAttempts {
		kv, found, err := t.st.Meta.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("%w: table schema: %w", lakestream.ErrUnavailable, err)
		}
		var prev *lakehouse.TypedSchema
		var st typedState
		if found {
			if err := json.Unmarshal(kv.Value, &st); err != nil {
				return nil, fmt.Errorf("%w: table schema of %s: %v", index.ErrCorrupt, root, err)
			}
			prev = st.schema()
		}
		next, warn := nextTypedSchema(prev, sc)
		if warn != nil {
			t.opts.Logger.Warn("tables: stream schema not applied to its table; columns kept", "table", root, "err", warn)
		}
		if next == nil {
			return nil, nil
		}
		if prev != nil && (next == prev || sameColumns(prev, next)) {
			if next == prev { // kept: decode with the stored definition
				return st.decoder()
			}
			return next, nil
		}
		value, err := json.Marshal(stateOf(next, sc.Definition))
		if err != nil {
			return nil, fmt.Errorf("tables: table schema: %w", err)
		}
		cmp := meta.Cmp{Key: key, ModRevision: 0}
		if found {
			cmp.ModRevision = kv.ModRevision
		}
		ok, _, err := t.st.Meta.Txn(ctx, []meta.Cmp{cmp}, []meta.Op{meta.Put(key, value)})
		if err != nil {
			return nil, fmt.Errorf("%w: table schema: %w", lakestream.ErrUnavailable, err)
		}
		if ok {
			return next, nil
		}
	}
	return nil, fmt.Errorf("%w: table schema of %s kept changing", lakestream.ErrConflict, root)
}

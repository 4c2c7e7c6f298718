package lakehouse

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
)

// ErrIncompatibleSchema is returned by NewRecordSchema when a schema change
// would change the type of an existing column; the schema registry must
// refuse such a change (docs/table-schema.md, "Evolution").
var ErrIncompatibleSchema = errors.New("lakehouse: incompatible schema change")

// ErrInvalidSchema is returned for a schema definition lakehouse cannot map.
var ErrInvalidSchema = errors.New("lakehouse: invalid schema")

// SchemaKind is a Pulsar schema type that gets typed columns.
type SchemaKind string

// Pulsar schema kinds with typed columns.
const (
	KindString  SchemaKind = "STRING"
	KindInt8    SchemaKind = "INT8"
	KindInt16   SchemaKind = "INT16"
	KindInt32   SchemaKind = "INT32"
	KindInt64   SchemaKind = "INT64"
	KindFloat   SchemaKind = "FLOAT"
	KindDouble  SchemaKind = "DOUBLE"
	KindBoolean SchemaKind = "BOOLEAN"
	KindBytes   SchemaKind = "BYTES"
	KindJSON    SchemaKind = "JSON"
	KindAvro    SchemaKind = "AVRO"
)

// ValueType is the column type of one typed field.
type ValueType string

// Column types of typed fields.
const (
	TypeString    ValueType = "string"
	TypeInt8      ValueType = "int8"
	TypeInt16     ValueType = "int16"
	TypeInt32     ValueType = "int32"
	TypeInt64     ValueType = "int64"
	TypeFloat32   ValueType = "float32"
	TypeFloat64   ValueType = "float64"
	TypeBool      ValueType = "bool"
	TypeBinary    ValueType = "binary"
	TypeTimestamp ValueType = "timestamp" // µs, UTC
	TypeDate      ValueType = "date"      // days since the epoch
	TypeJSON      ValueType = "json"      // nested value as JSON text (string column)
	TypeStruct    ValueType = "struct"    // an Avro record: Children are its fields
	TypeList      ValueType = "list"      // an Avro array: Children is its element
	TypeMap       ValueType = "map"       // an Avro map: Children are its string key and its value
)

// FirstTypedFieldID is the field id of the first typed column.
const FirstTypedFieldID = 1000

// TypedField is one typed column, or a field nested in one. All typed
// columns and nested fields are nullable (map keys excepted).
type TypedField struct {
	Name string
	ID   int32
	Type ValueType
	// timeUnit scales Avro/JSON timestamp values to µs (1000 for millis).
	timeScale int64
	// Retired fields were removed from the schema; they stay as columns
	// (always null in new rows) so older files keep one table schema.
	Retired bool
	// Children of a TypeStruct are its fields in definition order, then
	// the retired ones; of a TypeList its element (ListElementName); of a
	// TypeMap its key (MapKeyName, TypeString) and value (MapValueName).
	// Each has its own id from the schema's NextFieldID.
	Children []TypedField
}

// TypedSchema describes the typed columns of a topic (docs/table-schema.md,
// "Typed value columns"). A nil *TypedSchema means system columns only.
// Immutable once built; safe for concurrent use.
type TypedSchema struct {
	Kind   SchemaKind
	Fields []TypedField
	// NextFieldID is the id the next new field gets; ids are never reused.
	NextFieldID int32

	avro avro.Schema // KindAvro only
	// writers are the Avro schemas payloads were written with, by their
	// schema_version bytes (WithWriters); KindAvro only.
	writers map[string]avro.Schema
}

// WithWriters returns a copy of s that decodes an Avro payload with the
// schema of the version it was written with: writers maps a message's
// schema_version bytes to that version's Avro definition (the topic's
// schema history, SchemaHistory). A payload whose version is not in it is
// decoded with s's own schema. Fields are matched to columns by name, so a
// row of an older version gets nulls in the columns added since (Avro's
// schema resolution for additive evolution). A definition that does not
// parse is left out (its rows decode with s's schema, as before). Other
// kinds decode by field name whatever the version: s itself is returned.
func (s *TypedSchema) WithWriters(writers map[string][]byte) *TypedSchema {
	if s == nil || s.Kind != KindAvro || len(writers) == 0 {
		return s
	}
	c := *s
	c.writers = make(map[string]avro.Schema, len(writers))
	for v, def := range writers {
		if sc, err := avro.Parse(string(def)); err == nil {
			c.writers[v] = sc
		}
	}
	return &c
}

// avroSliceElemsMax bounds the elements of one Avro array a payload may
// claim: items that take no bytes (nulls, empty records) let a few bytes
// claim any count, and the decoder allocates the count up front. A payload
// with a longer array does not decode (its typed columns are null).
const avroSliceElemsMax = 1 << 20

// avroDecoding is hamba/avro's default configuration with arrays bounded
// (avroSliceElemsMax); strings and bytes keep its default bound (1 MiB).
var avroDecoding = avro.Config{MaxSliceAllocSize: avroSliceElemsMax}.Freeze()

// NewPrimitiveSchema returns the one-column ("value") schema of a primitive
// Pulsar schema kind.
func NewPrimitiveSchema(kind SchemaKind) (*TypedSchema, error) {
	t, ok := map[SchemaKind]ValueType{
		KindString: TypeString, KindInt8: TypeInt8, KindInt16: TypeInt16,
		KindInt32: TypeInt32, KindInt64: TypeInt64, KindFloat: TypeFloat32,
		KindDouble: TypeFloat64, KindBoolean: TypeBool, KindBytes: TypeBinary,
	}[kind]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a primitive schema", ErrInvalidSchema, kind)
	}
	return &TypedSchema{
		Kind:        kind,
		Fields:      []TypedField{{Name: "value", ID: FirstTypedFieldID, Type: t}},
		NextFieldID: FirstTypedFieldID + 1,
	}, nil
}

// NewRecordSchema maps a JSON or AVRO schema definition (an Avro record
// schema, as Pulsar's registry stores both) to typed columns. prev is the
// topic's previous TypedSchema (nil for the first): fields keep their ids
// by name, new fields get new ids, removed fields are kept as retired
// columns. A type change is ErrIncompatibleSchema.
func NewRecordSchema(kind SchemaKind, definition []byte, prev *TypedSchema) (*TypedSchema, error) {
	if kind != KindJSON && kind != KindAvro {
		return nil, fmt.Errorf("%w: %q is not a record schema", ErrInvalidSchema, kind)
	}
	var def struct {
		Type   any `json:"type"`
		Fields []struct {
			Name string          `json:"name"`
			Type json.RawMessage `json:"type"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(definition, &def); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	if def.Type != "record" {
		return nil, fmt.Errorf("%w: definition type %v, want record", ErrInvalidSchema, def.Type)
	}
	s := &TypedSchema{Kind: kind, NextFieldID: FirstTypedFieldID}
	m := newTypeMapper(definition)
	var top avroTypeObj
	_ = json.Unmarshal(definition, &top)
	topName, topNS := fullName(&top, "")
	m.expanding[topName] = true
	m.fields = len(def.Fields)
	if kind == KindAvro {
		sc, err := avro.Parse(string(definition))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
		}
		s.avro = sc
	}
	byName := map[string]TypedField{}
	if prev != nil {
		if prev.Kind != KindJSON && prev.Kind != KindAvro {
			return nil, fmt.Errorf("%w: %s to %s", ErrIncompatibleSchema, prev.Kind, kind)
		}
		for _, f := range prev.Fields {
			byName[f.Name] = f
		}
		s.NextFieldID = prev.NextFieldID
	}
	seen := map[string]bool{}
	for _, fd := range def.Fields {
		if fd.Name == "" || strings.HasPrefix(fd.Name, "__") {
			return nil, fmt.Errorf("%w: field name %q (names starting with __ are reserved)", ErrInvalidSchema, fd.Name)
		}
		if seen[fd.Name] {
			return nil, fmt.Errorf("%w: duplicate field %q", ErrInvalidSchema, fd.Name)
		}
		seen[fd.Name] = true
		f := m.column(fd.Type, topNS, 0)
		f.Name = fd.Name
		var old *TypedField
		if o, ok := byName[fd.Name]; ok {
			old = &o
		}
		if err := evolve(&f, old, &s.NextFieldID, fd.Name); err != nil {
			return nil, err
		}
		s.Fields = append(s.Fields, f)
	}
	if m.fields > MaxTypedFields {
		return nil, fmt.Errorf("%w: maps to more than %d columns and nested fields", ErrInvalidSchema, MaxTypedFields)
	}
	if prev != nil {
		for _, f := range prev.Fields {
			if !seen[f.Name] {
				f.Retired = true
				s.Fields = append(s.Fields, f)
			}
		}
	}
	return s, nil
}

func avroPrimitive(name string) ValueType {
	switch name {
	case "string":
		return TypeString
	case "int":
		return TypeInt32
	case "long":
		return TypeInt64
	case "float":
		return TypeFloat32
	case "double":
		return TypeFloat64
	case "boolean":
		return TypeBool
	case "bytes":
		return TypeBinary
	}
	return TypeJSON // a named type reference or something nested
}

// decodeValues decodes one payload, written with schema version (nil:
// none), into one value per field (nil = null). Values have the Go type of
// their column: string, int8…int64, float32, float64, bool, []byte;
// TypeTimestamp is int64 µs, TypeDate int32 days, TypeJSON a string,
// TypeStruct a structValue, TypeList a listValue, TypeMap a mapValue. A
// payload that does not decode yields all nil; a value (or nested value)
// that does not match its field's type is nil.
func (s *TypedSchema) decodeValues(payload, version []byte, out []any) {
	clear(out)
	switch s.Kind {
	case KindJSON:
		var obj map[string]json.RawMessage
		d := json.NewDecoder(bytes.NewReader(payload))
		d.UseNumber()
		if d.Decode(&obj) != nil {
			return
		}
		for i, f := range s.Fields {
			if raw, ok := obj[f.Name]; ok && !f.Retired {
				out[i] = jsonValue(f, raw)
			}
		}
	case KindAvro:
		var obj map[string]any
		sc := s.avro
		if w, ok := s.writers[string(version)]; ok {
			sc = w
		}
		if sc == nil {
			return
		}
		// Not avro.Unmarshal: it takes running out of bytes for success,
		// and a truncated payload is one that does not decode.
		r := avro.NewReader(nil, 0, avro.WithReaderConfig(avroDecoding)).Reset(payload)
		if r.ReadVal(sc, &obj); r.Error != nil {
			return
		}
		for i, f := range s.Fields {
			v, ok := obj[f.Name]
			switch {
			case !ok || f.Retired:
			case IsNested(f.Type):
				if ws := writerField(sc, f.Name); ws != nil {
					out[i] = avroTree(&s.Fields[i], ws, v)
				}
			default:
				out[i] = avroValue(f, v)
			}
		}
	default:
		out[0] = primitiveValue(s.Fields[0].Type, payload)
	}
}

func primitiveValue(t ValueType, p []byte) any {
	switch t {
	case TypeString:
		return string(p)
	case TypeBinary:
		return p
	case TypeBool:
		if len(p) == 1 {
			return p[0] != 0
		}
	case TypeInt8:
		if len(p) == 1 {
			return int8(p[0])
		}
	case TypeInt16:
		if len(p) == 2 {
			return int16(binary.BigEndian.Uint16(p))
		}
	case TypeInt32:
		if len(p) == 4 {
			return int32(binary.BigEndian.Uint32(p))
		}
	case TypeInt64:
		if len(p) == 8 {
			return int64(binary.BigEndian.Uint64(p))
		}
	case TypeFloat32:
		if len(p) == 4 {
			return math.Float32frombits(binary.BigEndian.Uint32(p))
		}
	case TypeFloat64:
		if len(p) == 8 {
			return math.Float64frombits(binary.BigEndian.Uint64(p))
		}
	}
	return nil
}

func jsonValue(f TypedField, raw json.RawMessage) any {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if f.Type == TypeJSON {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) != nil {
			return nil
		}
		return buf.String()
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return nil
	}
	return jsonTree(&f, v) // Jackson writes bytes as base64
}

func numberValue(f TypedField, n json.Number) any {
	switch f.Type {
	case TypeFloat32:
		if x, err := strconv.ParseFloat(n.String(), 32); err == nil {
			return float32(x)
		}
	case TypeFloat64:
		if x, err := n.Float64(); err == nil {
			return x
		}
	default:
		x, err := n.Int64()
		if err != nil {
			return nil
		}
		return intValue(f, x)
	}
	return nil
}

// intValue range-checks an integer for an integer, timestamp or date column.
func intValue(f TypedField, x int64) any {
	switch f.Type {
	case TypeInt8:
		if x == int64(int8(x)) {
			return int8(x)
		}
	case TypeInt16:
		if x == int64(int16(x)) {
			return int16(x)
		}
	case TypeInt32:
		if x == int64(int32(x)) {
			return int32(x)
		}
	case TypeInt64:
		return x
	case TypeDate:
		if x == int64(int32(x)) {
			return int32(x)
		}
	case TypeTimestamp:
		if f.timeScale > 1 && (x > math.MaxInt64/f.timeScale || x < math.MinInt64/f.timeScale) {
			return nil
		}
		return x * max(f.timeScale, 1)
	}
	return nil
}

func avroValue(f TypedField, v any) any {
	if v == nil {
		return nil
	}
	if m, ok := v.(map[string]any); ok && f.Type != TypeJSON && len(m) == 1 {
		for _, inner := range m { // a union decoded as {"type": value}
			v = inner
		}
	}
	switch x := v.(type) {
	case string:
		if f.Type == TypeString {
			return x
		}
	case []byte:
		if f.Type == TypeBinary {
			return x
		}
	case bool:
		if f.Type == TypeBool {
			return x
		}
	case int:
		return intValue(f, int64(x))
	case int32:
		return intValue(f, int64(x))
	case int64:
		return intValue(f, x)
	case float32:
		switch f.Type {
		case TypeFloat32:
			return x
		case TypeFloat64:
			return float64(x)
		}
	case float64:
		if f.Type == TypeFloat64 {
			return x
		}
	case time.Time:
		switch f.Type {
		case TypeTimestamp:
			return x.UnixMicro()
		case TypeDate:
			return int32(x.Unix() / 86400)
		}
	}
	if f.Type == TypeBinary { // an Avro fixed decodes to a [size]byte
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return b
		}
	}
	if f.Type == TypeJSON {
		if b, err := json.Marshal(v); err == nil {
			return string(b)
		}
	}
	return nil
}

func decodeBase64(s string) any {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b
	}
	return nil
}

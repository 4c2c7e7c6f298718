package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/apache/arrow-go/v18/arrow"
)

// Primitive Spark type names accepted in a Schema (decimal is written
// "decimal(p,s)").
const (
	TypeLong      = "long"
	TypeInteger   = "integer"
	TypeShort     = "short"
	TypeByte      = "byte"
	TypeString    = "string"
	TypeBinary    = "binary"
	TypeBoolean   = "boolean"
	TypeDouble    = "double"
	TypeFloat     = "float"
	TypeDate      = "date"
	TypeTimestamp = "timestamp"
)

var decimalRe = regexp.MustCompile(`^decimal\(\s*\d+\s*,\s*\d+\s*\)$`)

// Schema is a Spark StructType: the table schema written as
// metaData.schemaString. Partition columns are fields of the schema too.
type Schema struct {
	Fields []Field
}

// Field is a StructField. Metadata is written as is (nil → {}).
type Field struct {
	Name     string
	Type     DataType
	Nullable bool
	Metadata map[string]any
}

// DataType is a Spark data type: a primitive Name (see the Type* constants),
// or Name "struct" with Fields, "array" with Element/ContainsNull, or "map"
// with Key/Value/ValueContainsNull.
type DataType struct {
	Name              string
	Fields            []Field   // struct
	Element           *DataType // array
	ContainsNull      bool      // array
	Key, Value        *DataType // map
	ValueContainsNull bool      // map
}

// Primitive returns the primitive type name.
func Primitive(name string) DataType { return DataType{Name: name} }

// StructOf returns a struct type.
func StructOf(fields ...Field) DataType { return DataType{Name: "struct", Fields: fields} }

// ArrayOf returns an array type.
func ArrayOf(elem DataType, containsNull bool) DataType {
	return DataType{Name: "array", Element: &elem, ContainsNull: containsNull}
}

// MapOf returns a map type.
func MapOf(key, value DataType, valueContainsNull bool) DataType {
	return DataType{Name: "map", Key: &key, Value: &value, ValueContainsNull: valueContainsNull}
}

// Field looks up a top-level field by name.
func (s Schema) Field(name string) (Field, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Validate checks names are non-empty and unique per struct and every type
// is known.
func (s Schema) Validate() error {
	if len(s.Fields) == 0 {
		return fmt.Errorf("%w: schema has no fields", ErrInvalid)
	}
	return validateFields(s.Fields, "")
}

func validateFields(fs []Field, path string) error {
	seen := map[string]bool{}
	for _, f := range fs {
		if f.Name == "" {
			return fmt.Errorf("%w: empty field name in %q", ErrInvalid, path)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: duplicate field %q", ErrInvalid, path+f.Name)
		}
		seen[f.Name] = true
		if err := validateType(f.Type, path+f.Name); err != nil {
			return err
		}
	}
	return nil
}

func validateType(t DataType, path string) error {
	switch t.Name {
	case TypeLong, TypeInteger, TypeShort, TypeByte, TypeString, TypeBinary,
		TypeBoolean, TypeDouble, TypeFloat, TypeDate, TypeTimestamp:
		return nil
	case "struct":
		if len(t.Fields) == 0 {
			return fmt.Errorf("%w: empty struct %q", ErrInvalid, path)
		}
		return validateFields(t.Fields, path+".")
	case "array":
		if t.Element == nil {
			return fmt.Errorf("%w: array %q without element type", ErrInvalid, path)
		}
		return validateType(*t.Element, path+".element")
	case "map":
		if t.Key == nil || t.Value == nil {
			return fmt.Errorf("%w: map %q without key or value type", ErrInvalid, path)
		}
		if err := validateType(*t.Key, path+".key"); err != nil {
			return err
		}
		return validateType(*t.Value, path+".value")
	}
	if decimalRe.MatchString(t.Name) {
		return nil
	}
	return fmt.Errorf("%w: unknown type %q of %q", ErrInvalid, t.Name, path)
}

// JSON returns the Spark StructType JSON (metaData.schemaString). The output
// is deterministic: equal schemas give equal strings.
func (s Schema) JSON() string {
	b, err := json.Marshal(s)
	if err != nil { // only unmarshalable Metadata values
		panic(fmt.Sprintf("delta: schema JSON: %v", err))
	}
	return string(b)
}

// ParseSchema parses a Spark StructType JSON string.
func ParseSchema(s string) (Schema, error) {
	var sc Schema
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		return Schema{}, fmt.Errorf("%w: schemaString: %v", ErrInvalid, err)
	}
	return sc, nil
}

type jsonStruct struct {
	Type   string  `json:"type"`
	Fields []Field `json:"fields"`
}

type jsonField struct {
	Name     string         `json:"name"`
	Type     DataType       `json:"type"`
	Nullable bool           `json:"nullable"`
	Metadata map[string]any `json:"metadata"`
}

// MarshalJSON writes {"type":"struct","fields":[...]}.
func (s Schema) MarshalJSON() ([]byte, error) {
	fs := s.Fields
	if fs == nil {
		fs = []Field{}
	}
	return json.Marshal(jsonStruct{Type: "struct", Fields: fs})
}

// UnmarshalJSON reads a StructType.
func (s *Schema) UnmarshalJSON(b []byte) error {
	var t DataType
	if err := t.UnmarshalJSON(b); err != nil {
		return err
	}
	if t.Name != "struct" {
		return fmt.Errorf("schema is %q, not a struct", t.Name)
	}
	s.Fields = t.Fields
	return nil
}

// MarshalJSON writes a StructField.
func (f Field) MarshalJSON() ([]byte, error) {
	md := f.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return json.Marshal(jsonField{Name: f.Name, Type: f.Type, Nullable: f.Nullable, Metadata: md})
}

// UnmarshalJSON reads a StructField.
func (f *Field) UnmarshalJSON(b []byte) error {
	var j jsonField
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*f = Field{Name: j.Name, Type: j.Type, Nullable: j.Nullable, Metadata: j.Metadata}
	if len(f.Metadata) == 0 {
		f.Metadata = nil
	}
	return nil
}

// MarshalJSON writes a primitive as a JSON string, complex types as objects.
func (t DataType) MarshalJSON() ([]byte, error) {
	switch t.Name {
	case "struct":
		fs := t.Fields
		if fs == nil {
			fs = []Field{}
		}
		return json.Marshal(jsonStruct{Type: "struct", Fields: fs})
	case "array":
		if t.Element == nil {
			return nil, fmt.Errorf("array without element type")
		}
		return json.Marshal(struct {
			Type         string   `json:"type"`
			ElementType  DataType `json:"elementType"`
			ContainsNull bool     `json:"containsNull"`
		}{"array", *t.Element, t.ContainsNull})
	case "map":
		if t.Key == nil || t.Value == nil {
			return nil, fmt.Errorf("map without key or value type")
		}
		return json.Marshal(struct {
			Type              string   `json:"type"`
			KeyType           DataType `json:"keyType"`
			ValueType         DataType `json:"valueType"`
			ValueContainsNull bool     `json:"valueContainsNull"`
		}{"map", *t.Key, *t.Value, t.ValueContainsNull})
	}
	return json.Marshal(t.Name)
}

// UnmarshalJSON reads a primitive name or a complex type object.
func (t *DataType) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return err
		}
		*t = DataType{Name: name}
		return nil
	}
	var j struct {
		Type              string    `json:"type"`
		Fields            []Field   `json:"fields"`
		ElementType       *DataType `json:"elementType"`
		ContainsNull      bool      `json:"containsNull"`
		KeyType           *DataType `json:"keyType"`
		ValueType         *DataType `json:"valueType"`
		ValueContainsNull bool      `json:"valueContainsNull"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	switch j.Type {
	case "struct":
		*t = DataType{Name: "struct", Fields: j.Fields}
	case "array":
		*t = DataType{Name: "array", Element: j.ElementType, ContainsNull: j.ContainsNull}
	case "map":
		*t = DataType{Name: "map", Key: j.KeyType, Value: j.ValueType, ValueContainsNull: j.ValueContainsNull}
	default:
		return fmt.Errorf("unknown complex type %q", j.Type)
	}
	return nil
}

// FromArrow maps an Arrow schema to a Delta schema (see docs/delta.md for
// the table of types). Arrow field metadata is not carried over.
func FromArrow(s *arrow.Schema) (Schema, error) {
	fs, err := fieldsFromArrow(s.Fields(), "")
	if err != nil {
		return Schema{}, err
	}
	return Schema{Fields: fs}, nil
}

func fieldsFromArrow(afs []arrow.Field, path string) ([]Field, error) {
	out := make([]Field, 0, len(afs))
	for _, af := range afs {
		t, err := typeFromArrow(af.Type, path+af.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, Field{Name: af.Name, Type: t, Nullable: af.Nullable})
	}
	return out, nil
}

func typeFromArrow(at arrow.DataType, path string) (DataType, error) {
	switch t := at.(type) {
	case *arrow.Int64Type:
		return Primitive(TypeLong), nil
	case *arrow.Int32Type:
		return Primitive(TypeInteger), nil
	case *arrow.Int16Type:
		return Primitive(TypeShort), nil
	case *arrow.Int8Type:
		return Primitive(TypeByte), nil
	case *arrow.Float64Type:
		return Primitive(TypeDouble), nil
	case *arrow.Float32Type:
		return Primitive(TypeFloat), nil
	case *arrow.BooleanType:
		return Primitive(TypeBoolean), nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return Primitive(TypeString), nil
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType, *arrow.FixedSizeBinaryType:
		return Primitive(TypeBinary), nil
	case *arrow.Date32Type:
		return Primitive(TypeDate), nil
	case *arrow.Decimal128Type:
		return Primitive(fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)), nil
	case *arrow.TimestampType:
		if t.Unit == arrow.Nanosecond {
			return DataType{}, fmt.Errorf("%w: %s: nanosecond timestamp (Spark cannot read it; use µs)", ErrUnsupportedType, path)
		}
		if t.TimeZone == "" {
			return DataType{}, fmt.Errorf("%w: %s: timestamp without time zone (needs timestamp_ntz, reader 3/writer 7)", ErrUnsupportedType, path)
		}
		return Primitive(TypeTimestamp), nil
	case *arrow.StructType:
		fs, err := fieldsFromArrow(t.Fields(), path+".")
		if err != nil {
			return DataType{}, err
		}
		return StructOf(fs...), nil
	case *arrow.MapType: // before ListType: MapType embeds ListType
		k, err := typeFromArrow(t.KeyType(), path+".key")
		if err != nil {
			return DataType{}, err
		}
		v, err := typeFromArrow(t.ItemType(), path+".value")
		if err != nil {
			return DataType{}, err
		}
		return MapOf(k, v, t.ItemField().Nullable), nil
	case *arrow.ListType:
		e, err := typeFromArrow(t.Elem(), path+".element")
		if err != nil {
			return DataType{}, err
		}
		return ArrayOf(e, t.ElemField().Nullable), nil
	case *arrow.LargeListType:
		e, err := typeFromArrow(t.Elem(), path+".element")
		if err != nil {
			return DataType{}, err
		}
		return ArrayOf(e, t.ElemField().Nullable), nil
	}
	return DataType{}, fmt.Errorf("%w: %s: arrow type %s", ErrUnsupportedType, path, at)
}

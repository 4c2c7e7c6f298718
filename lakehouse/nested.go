package lakehouse

// Nested typed columns (docs/table-schema.md, "Nested columns"): Avro
// records, arrays and maps of JSON and AVRO schemas as Parquet structs,
// lists and maps, to MaxNestedDepth levels.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
)

// MaxNestedDepth bounds the nesting of a typed column: a record, array or
// map nested deeper than this many levels (the top-level column is level
// 1) is a TypeJSON string field holding its value as JSON text.
const MaxNestedDepth = 16

// MaxTypedFields bounds the columns and nested fields one record schema
// maps to: references to named types let a short definition expand to any
// number of fields (a record with two fields of a record with two fields
// of …). A definition that maps to more is ErrInvalidSchema (compaction
// then keeps the table's columns, docs/compaction.md "Typed columns").
const MaxTypedFields = 10_000

// Names of the children of list and map fields.
const (
	ListElementName = "element"
	MapKeyName      = "key"
	MapValueName    = "value"
)

// IsNested reports whether t is a struct, list or map type.
func IsNested(t ValueType) bool { return t == TypeStruct || t == TypeList || t == TypeMap }

// Decoded values of nested fields (what decodeValues hands appendTyped):
// a struct has one value per child (nil = null), a list its elements, a
// map its entries in key order.
type (
	structValue []any
	listValue   []any
	mapValue    []mapEntry
	mapEntry    struct {
		key   string
		value any
	}
)

// namedDef is a named Avro type (record, enum, fixed) of a definition.
type namedDef struct {
	raw  json.RawMessage
	ns   string // the namespace names inside it resolve against
	full string
}

// typeMapper maps Avro type JSON to column types, resolving references to
// named types. A reference to a record being mapped (a recursive type) is
// a TypeJSON field.
type typeMapper struct {
	names     map[string]namedDef // by full name, and by short name when unambiguous
	short     map[string]int      // short name → definitions with it
	expanding map[string]bool     // full names of the records being mapped
	fields    int                 // fields mapped so far, bounded by MaxTypedFields
}

func newTypeMapper(definition []byte) *typeMapper {
	m := &typeMapper{names: map[string]namedDef{}, short: map[string]int{}, expanding: map[string]bool{}}
	m.collect(definition, "")
	for k := range m.names {
		if d := m.names[k]; d.full != k && m.short[k] > 1 {
			delete(m.names, k)
		}
	}
	return m
}

type avroTypeObj struct {
	Type        json.RawMessage `json:"type"`
	Name        string          `json:"name"`
	Namespace   *string         `json:"namespace"`
	LogicalType string          `json:"logicalType"`
	Fields      []struct {
		Name string          `json:"name"`
		Type json.RawMessage `json:"type"`
	} `json:"fields"`
	Items  json.RawMessage `json:"items"`
	Values json.RawMessage `json:"values"`
}

// fullName returns a named type's full name and the namespace of the
// names inside it.
func fullName(o *avroTypeObj, ns string) (full, inner string) {
	if o.Namespace != nil {
		ns = *o.Namespace
	}
	if i := strings.LastIndexByte(o.Name, '.'); i >= 0 {
		return o.Name, o.Name[:i]
	}
	if ns == "" {
		return o.Name, ""
	}
	return ns + "." + o.Name, ns
}

// collect registers the named types defined anywhere in raw.
func (m *typeMapper) collect(raw json.RawMessage, ns string) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) > 0 && raw[0] == '[':
		var union []json.RawMessage
		if json.Unmarshal(raw, &union) == nil {
			for _, u := range union {
				m.collect(u, ns)
			}
		}
	case len(raw) > 0 && raw[0] == '{':
		var o avroTypeObj
		if json.Unmarshal(raw, &o) != nil {
			return
		}
		var kind string
		if json.Unmarshal(o.Type, &kind) != nil {
			m.collect(o.Type, ns)
			return
		}
		inner := ns
		if (kind == "record" || kind == "error" || kind == "enum" || kind == "fixed") && o.Name != "" {
			var full string
			full, inner = fullName(&o, ns)
			if _, dup := m.names[full]; !dup {
				d := namedDef{raw: raw, ns: inner, full: full}
				m.names[full] = d
				short := full[strings.LastIndexByte(full, '.')+1:]
				m.short[short]++
				if short != full {
					m.names[short] = d
				}
			}
		}
		for _, f := range o.Fields {
			m.collect(f.Type, inner)
		}
		m.collect(o.Items, inner)
		m.collect(o.Values, inner)
	}
}

// lookup resolves a type name used in namespace ns.
func (m *typeMapper) lookup(name, ns string) (namedDef, bool) {
	if !strings.Contains(name, ".") && ns != "" {
		if d, ok := m.names[ns+"."+name]; ok {
			return d, true
		}
	}
	d, ok := m.names[name]
	return d, ok
}

// column maps one Avro type, used in namespace ns at nesting level depth
// (0 for a top-level field's type), to a field without name or ids.
func (m *typeMapper) column(raw json.RawMessage, ns string, depth int) TypedField {
	if m.fields > MaxTypedFields {
		return TypedField{Type: TypeJSON} // NewRecordSchema refuses the schema
	}
	raw = bytes.TrimSpace(raw)
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if t := avroPrimitive(name); t != TypeJSON {
			return TypedField{Type: t}
		}
		d, ok := m.lookup(name, ns)
		if !ok || m.expanding[d.full] {
			return TypedField{Type: TypeJSON}
		}
		return m.column(d.raw, d.ns, depth)
	}
	var union []json.RawMessage
	if json.Unmarshal(raw, &union) == nil {
		var rest []json.RawMessage
		for _, u := range union {
			if string(bytes.TrimSpace(u)) != `"null"` {
				rest = append(rest, u)
			}
		}
		if len(rest) == 1 {
			return m.column(rest[0], ns, depth)
		}
		return TypedField{Type: TypeJSON}
	}
	var o avroTypeObj
	if json.Unmarshal(raw, &o) != nil {
		return TypedField{Type: TypeJSON}
	}
	var kind string
	if json.Unmarshal(o.Type, &kind) != nil {
		if len(o.Type) > 0 { // {"type": {...}}: the inner type
			return m.column(o.Type, ns, depth)
		}
		return TypedField{Type: TypeJSON}
	}
	switch {
	case o.LogicalType == "timestamp-millis" && kind == "long":
		return TypedField{Type: TypeTimestamp, timeScale: 1000}
	case o.LogicalType == "timestamp-micros" && kind == "long":
		return TypedField{Type: TypeTimestamp, timeScale: 1}
	case o.LogicalType == "date" && kind == "int":
		return TypedField{Type: TypeDate}
	case kind == "enum":
		return TypedField{Type: TypeString}
	case kind == "fixed":
		return TypedField{Type: TypeBinary}
	case kind == "record" || kind == "error":
		if depth >= MaxNestedDepth || len(o.Fields) == 0 {
			return TypedField{Type: TypeJSON}
		}
		full, inner := fullName(&o, ns)
		if m.expanding[full] {
			return TypedField{Type: TypeJSON}
		}
		m.expanding[full] = true
		defer delete(m.expanding, full)
		m.fields += len(o.Fields)
		f := TypedField{Type: TypeStruct}
		for _, fd := range o.Fields {
			c := m.column(fd.Type, inner, depth+1)
			c.Name = fd.Name
			f.Children = append(f.Children, c)
		}
		return f
	case kind == "array":
		if depth >= MaxNestedDepth || len(o.Items) == 0 {
			return TypedField{Type: TypeJSON}
		}
		m.fields++
		e := m.column(o.Items, ns, depth+1)
		e.Name = ListElementName
		return TypedField{Type: TypeList, Children: []TypedField{e}}
	case kind == "map":
		if depth >= MaxNestedDepth || len(o.Values) == 0 {
			return TypedField{Type: TypeJSON}
		}
		m.fields += 2
		v := m.column(o.Values, ns, depth+1)
		v.Name = MapValueName
		return TypedField{Type: TypeMap, Children: []TypedField{{Name: MapKeyName, Type: TypeString}, v}}
	case o.LogicalType == "":
		if t := avroPrimitive(kind); t != TypeJSON {
			return TypedField{Type: t}
		}
		d, ok := m.lookup(kind, ns)
		if !ok || m.expanding[d.full] {
			return TypedField{Type: TypeJSON}
		}
		return m.column(d.raw, d.ns, depth)
	}
	return TypedField{Type: TypeJSON}
}

// evolve gives f (a freshly mapped field, children included) the ids of
// old (the same field in the previous schema; nil: new), new ids from
// *next for what old lacks, and keeps old's children that f lacks as
// retired. A column that was JSON text stays JSON text; any other type
// change is ErrIncompatibleSchema.
func evolve(f *TypedField, old *TypedField, next *int32, path string) error {
	if old != nil {
		if old.Type == TypeJSON && IsNested(f.Type) {
			f.Type, f.Children, f.timeScale = TypeJSON, nil, 0
		}
		if old.Type != f.Type {
			return fmt.Errorf("%w: field %q changes from %s to %s", ErrIncompatibleSchema, path, old.Type, f.Type)
		}
		f.ID = old.ID
	} else {
		f.ID = *next
		*next++
	}
	switch f.Type {
	case TypeStruct:
		seen := map[string]bool{}
		for i := range f.Children {
			c := &f.Children[i]
			if c.Name == "" || seen[c.Name] {
				return fmt.Errorf("%w: field %q: empty or duplicate name %q", ErrInvalidSchema, path, c.Name)
			}
			seen[c.Name] = true
			var oc *TypedField
			if old != nil {
				oc = old.child(c.Name)
			}
			if err := evolve(c, oc, next, path+"."+c.Name); err != nil {
				return err
			}
		}
		if old != nil {
			for _, oc := range old.Children {
				if !seen[oc.Name] {
					oc.Retired = true
					f.Children = append(f.Children, oc)
				}
			}
		}
	case TypeList, TypeMap:
		for i := range f.Children {
			var oc *TypedField
			if old != nil && i < len(old.Children) {
				oc = &old.Children[i]
			}
			if err := evolve(&f.Children[i], oc, next, path+"."+f.Children[i].Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// child returns f's child named name, or nil.
func (f *TypedField) child(name string) *TypedField {
	for i := range f.Children {
		if f.Children[i].Name == name {
			return &f.Children[i]
		}
	}
	return nil
}

// SameFields reports whether two field lists have the same names, ids,
// types and retired flags, children included.
func SameFields(a, b []TypedField) bool {
	return slices.EqualFunc(a, b, func(x, y TypedField) bool {
		return x.Name == y.Name && x.ID == y.ID && x.Type == y.Type && x.Retired == y.Retired && SameFields(x.Children, y.Children)
	})
}

// jsonTree converts a JSON value (decoded with UseNumber) to the value of
// field f: nil where it does not match f's type.
func jsonTree(f *TypedField, v any) any {
	if v == nil {
		return nil
	}
	switch f.Type {
	case TypeJSON:
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		return string(b)
	case TypeStruct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		out := make(structValue, len(f.Children))
		for i := range f.Children {
			if c := &f.Children[i]; !c.Retired {
				out[i] = jsonTree(c, obj[c.Name])
			}
		}
		return out
	case TypeList:
		arr, ok := v.([]any)
		if !ok {
			return nil
		}
		out := make(listValue, len(arr))
		for i, e := range arr {
			out[i] = jsonTree(&f.Children[0], e)
		}
		return out
	case TypeMap:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		return mapOf(obj, func(e any) any { return jsonTree(&f.Children[1], e) })
	}
	switch x := v.(type) {
	case string:
		switch f.Type {
		case TypeString:
			return x
		case TypeBinary:
			return decodeBase64(x)
		}
	case bool:
		if f.Type == TypeBool {
			return x
		}
	case json.Number:
		return numberValue(*f, x)
	}
	return nil
}

// mapOf returns a map's entries in key order.
func mapOf(obj map[string]any, conv func(any) any) mapValue {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(mapValue, len(keys))
	for i, k := range keys {
		out[i] = mapEntry{key: k, value: conv(obj[k])}
	}
	return out
}

// avroTree converts a value hamba/avro decoded generically with writer
// schema sch to the value of field f: nil where it does not match. Unions
// of one non-null type arrive as the value or as {"<type name>": value}.
func avroTree(f *TypedField, sch avro.Schema, v any) any {
	if v == nil {
		return nil
	}
	if f.Type == TypeJSON {
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		return string(b)
	}
	if !IsNested(f.Type) {
		return avroValue(*f, v)
	}
	sch = derefAvro(sch)
	if u, ok := sch.(*avro.UnionSchema); ok {
		var member avro.Schema
		for _, t := range u.Types() {
			if t.Type() != avro.Null {
				if member != nil {
					return nil // a union of several types is never nested
				}
				member = derefAvro(t)
			}
		}
		if member == nil {
			return nil
		}
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			if inner, ok := m[avroTypeName(member)]; ok {
				v = inner
			}
		}
		if v == nil {
			return nil
		}
		sch = member
	}
	switch f.Type {
	case TypeStruct:
		rs, ok := sch.(*avro.RecordSchema)
		obj, ok2 := v.(map[string]any)
		if !ok || !ok2 {
			return nil
		}
		out := make(structValue, len(f.Children))
		for _, wf := range rs.Fields() {
			for i := range f.Children {
				if c := &f.Children[i]; c.Name == wf.Name() && !c.Retired {
					out[i] = avroTree(c, wf.Type(), obj[wf.Name()])
				}
			}
		}
		return out
	case TypeList:
		as, ok := sch.(*avro.ArraySchema)
		arr, ok2 := v.([]any)
		if !ok || !ok2 {
			return nil
		}
		out := make(listValue, len(arr))
		for i, e := range arr {
			out[i] = avroTree(&f.Children[0], as.Items(), e)
		}
		return out
	case TypeMap:
		ms, ok := sch.(*avro.MapSchema)
		obj, ok2 := v.(map[string]any)
		if !ok || !ok2 {
			return nil
		}
		return mapOf(obj, func(e any) any { return avroTree(&f.Children[1], ms.Values(), e) })
	}
	return nil
}

func derefAvro(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// avroTypeName is the key hamba/avro wraps a union's value in.
func avroTypeName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

// writerField returns the type of the field named name of a record schema
// (nil: none).
func writerField(sc avro.Schema, name string) avro.Schema {
	rs, ok := derefAvro(sc).(*avro.RecordSchema)
	if !ok {
		return nil
	}
	for _, f := range rs.Fields() {
		if f.Name() == name {
			return f.Type()
		}
	}
	return nil
}

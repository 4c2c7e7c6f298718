package lakehousetest

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// NestedOrderV1 is an Avro record definition with every nested shape a
// typed column can take: a nested record (customer), an array of ints
// (qty), an array of records (lines), a map<string,long> (counts) and an
// optional nested record (ship, a reference to the named type Address
// defined inside customer).
const NestedOrderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"long"},
	{"name":"customer","type":{"type":"record","name":"Customer","fields":[
		{"name":"name","type":"string"},
		{"name":"address","type":{"type":"record","name":"Address","fields":[
			{"name":"city","type":"string"},
			{"name":"zip","type":["null","int"],"default":null}]}}]}},
	{"name":"qty","type":{"type":"array","items":"int"}},
	{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
		{"name":"sku","type":"string"},
		{"name":"price","type":"double"}]}}},
	{"name":"counts","type":{"type":"map","values":"long"}},
	{"name":"ship","type":["null","Address"],"default":null}]}`

// NestedOrderV2 is NestedOrderV1 with an optional country added to
// Address before zip (Avro binary is positional: version-1 payloads only
// decode right with their own definition).
var NestedOrderV2 = strings.Replace(NestedOrderV1, `{"name":"zip","type":["null","int"],"default":null}`,
	`{"name":"country","type":["null","string"],"default":null},{"name":"zip","type":["null","int"],"default":null}`, 1)

// ArrowValue is row i of col as a Go value: nil for null; a struct as
// map[string]any by field name, a list as []any, a map (string keys) as
// map[string]any; binary as a copy; timestamps as int64 and dates as int32
// in their unit; other primitives as their Go type. A column type it does
// not know is an error.
func ArrowValue(col arrow.Array, i int) (any, error) {
	if col.IsNull(i) {
		return nil, nil
	}
	switch a := col.(type) {
	case *array.String:
		return a.Value(i), nil
	case *array.Binary:
		return bytes.Clone(a.Value(i)), nil
	case *array.Int8:
		return a.Value(i), nil
	case *array.Int16:
		return a.Value(i), nil
	case *array.Int32:
		return a.Value(i), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Float32:
		return a.Value(i), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Timestamp:
		return int64(a.Value(i)), nil
	case *array.Date32:
		return int32(a.Value(i)), nil
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		m := map[string]any{}
		for k := range a.NumField() {
			v, err := ArrowValue(a.Field(k), i)
			if err != nil {
				return nil, err
			}
			m[st.Field(k).Name] = v
		}
		return m, nil
	case *array.Map:
		keys, ok := a.Keys().(*array.String)
		if !ok {
			return nil, fmt.Errorf("map keys of type %s", a.Keys().DataType())
		}
		start, end := a.ValueOffsets(i)
		m := map[string]any{}
		for k := start; k < end; k++ {
			v, err := ArrowValue(a.Items(), int(k))
			if err != nil {
				return nil, err
			}
			m[keys.Value(int(k))] = v
		}
		return m, nil
	case *array.List:
		start, end := a.ValueOffsets(i)
		l := []any{}
		for k := start; k < end; k++ {
			v, err := ArrowValue(a.ListValues(), int(k))
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	}
	return nil, fmt.Errorf("column type %s", col.DataType())
}

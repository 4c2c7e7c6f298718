package gateway

import (
	"errors"
	"testing"

	"github.com/lakegate/lakegate/protocol/pb"
)

func TestSchemaCompatible(t *testing.T) {
	const (
		v1     = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
		v2     = `{"type":"record","name":"R","fields":[{"name":"a","type": "int"},{"name":"b","type":"string"}]}`
		retype = `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`
		drop   = `{"type":"record","name":"R","fields":[{"name":"b","type":"string"}]}`
	)
	js := func(def string) storedSchema { return storedSchema{Type: pb.Schema_Json, Data: []byte(def)} }
	for _, c := range []struct {
		name       string
		prev, next storedSchema
		ok         bool
	}{
		{"add field", js(v1), js(v2), true},
		{"whitespace in types", js(v2), js(v2), true},
		{"change type", js(v1), js(retype), false},
		{"drop field", js(v1), js(drop), false},
		{"other type", js(v1), storedSchema{Type: pb.Schema_String}, false},
		{"unparseable accepted", js("not json"), js(v1), true},
		{"protobuf unchecked", storedSchema{Type: pb.Schema_Protobuf, Data: []byte("x")}, storedSchema{Type: pb.Schema_Protobuf, Data: []byte("y")}, true},
	} {
		err := schemaCompatible(c.prev, c.next)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrIncompatibleSchema)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

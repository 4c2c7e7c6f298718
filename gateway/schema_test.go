package gateway

import (
	"errors"
	"testing"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/protocol/pb"
)

func TestSchemaCompatibleWith(t *testing.T) {
	const (
		v1        = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
		addNoDef  = `{"type":"record","name":"R","fields":[{"name":"a","type": "int"},{"name":"b","type":"string"}]}`
		addDef    = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":["null","string"],"default":null}]}`
		retype    = `{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}`
		widen     = `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`
		drop      = `{"type":"record","name":"R","fields":[]}`
		v1Default = `{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":0}]}`
	)
	js := func(def string) storedSchema { return storedSchema{Type: pb.Schema_Json, Data: []byte(def)} }
	for _, c := range []struct {
		name     string
		strategy string
		live     []storedSchema
		next     storedSchema
		ok       bool
	}{
		{"FULL: add a field with a default", strategyFull, []storedSchema{js(v1)}, js(addDef), true},
		{"FULL: add a field without default", strategyFull, []storedSchema{js(v1)}, js(addNoDef), false},
		{"FORWARD: add a field without default", strategyForward, []storedSchema{js(v1)}, js(addNoDef), true},
		{"BACKWARD: add a field without default", strategyBackward, []storedSchema{js(v1)}, js(addNoDef), false},
		{"BACKWARD: drop a field", strategyBackward, []storedSchema{js(v1)}, js(drop), true},
		{"FORWARD: drop a field without default", strategyForward, []storedSchema{js(v1)}, js(drop), false},
		{"FORWARD: drop a field with a default", strategyForward, []storedSchema{js(v1Default)}, js(drop), true},
		{"FULL: change a field's type", strategyFull, []storedSchema{js(v1)}, js(retype), false},
		{"BACKWARD: widen int to long", strategyBackward, []storedSchema{js(v1)}, js(widen), true},
		{"FORWARD: widen int to long", strategyForward, []storedSchema{js(v1)}, js(widen), false},
		{"whitespace in types", strategyFull, []storedSchema{js(addNoDef)}, js(addNoDef), true},
		{"other type", strategyFull, []storedSchema{js(v1)}, storedSchema{Type: pb.Schema_String}, false},
		{"ALWAYS_COMPATIBLE: other type", strategyAlwaysCompatible, []storedSchema{js(v1)}, storedSchema{Type: pb.Schema_String}, true},
		{"ALWAYS_INCOMPATIBLE: compatible change", strategyAlwaysIncompatible, []storedSchema{js(v1)}, js(addDef), false},
		{"unparseable accepted", strategyFull, []storedSchema{js("not json")}, js(v1), true},
		{"protobuf unchecked", strategyFull, []storedSchema{{Type: pb.Schema_Protobuf, Data: []byte("x")}}, storedSchema{Type: pb.Schema_Protobuf, Data: []byte("y")}, true},
		// Transitive strategies check every live version, the others the latest.
		{"BACKWARD: only the latest", strategyBackward, []storedSchema{js(v1), js(drop)}, js(drop), true},
		{"FORWARD_TRANSITIVE: every version", strategyForwardTransitive, []storedSchema{js(v1), js(v1Default)}, js(drop), false},
		{"FORWARD: only the latest", strategyForward, []storedSchema{js(v1), js(v1Default)}, js(drop), true},
	} {
		err := schemaCompatibleWith(c.strategy, c.live, c.next)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, broker.ErrIncompatibleSchema)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestLiveSchemaVersions(t *testing.T) {
	a := storedSchema{Type: pb.Schema_String}
	del := storedSchema{Deleted: true}
	if got := liveFrom([]storedSchema{a, a, del, a}); got != 3 {
		t.Fatalf("liveFrom = %d, want 3", got)
	}
	if got := liveFrom([]storedSchema{a, del}); got != 2 {
		t.Fatalf("liveFrom after a final deletion = %d, want 2", got)
	}
	if _, ok := schemaVersionOf([]storedSchema{a, del}, a); ok {
		t.Fatal("a deleted version still matched")
	}
}

package broker

import (
	"errors"
	"testing"

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
	js := func(def string) Schema { return Schema{Type: pb.Schema_Json, Data: []byte(def)} }
	for _, c := range []struct {
		name     string
		strategy string
		live     []Schema
		next     Schema
		ok       bool
	}{
		{"FULL: add a field with a default", strategyFull, []Schema{js(v1)}, js(addDef), true},
		{"FULL: add a field without default", strategyFull, []Schema{js(v1)}, js(addNoDef), false},
		{"FORWARD: add a field without default", strategyForward, []Schema{js(v1)}, js(addNoDef), true},
		{"BACKWARD: add a field without default", strategyBackward, []Schema{js(v1)}, js(addNoDef), false},
		{"BACKWARD: drop a field", strategyBackward, []Schema{js(v1)}, js(drop), true},
		{"FORWARD: drop a field without default", strategyForward, []Schema{js(v1)}, js(drop), false},
		{"FORWARD: drop a field with a default", strategyForward, []Schema{js(v1Default)}, js(drop), true},
		{"FULL: change a field's type", strategyFull, []Schema{js(v1)}, js(retype), false},
		{"BACKWARD: widen int to long", strategyBackward, []Schema{js(v1)}, js(widen), true},
		{"FORWARD: widen int to long", strategyForward, []Schema{js(v1)}, js(widen), false},
		{"whitespace in types", strategyFull, []Schema{js(addNoDef)}, js(addNoDef), true},
		{"other type", strategyFull, []Schema{js(v1)}, Schema{Type: pb.Schema_String}, false},
		{"ALWAYS_COMPATIBLE: other type", strategyAlwaysCompatible, []Schema{js(v1)}, Schema{Type: pb.Schema_String}, true},
		{"ALWAYS_INCOMPATIBLE: compatible change", strategyAlwaysIncompatible, []Schema{js(v1)}, js(addDef), false},
		{"unparseable accepted", strategyFull, []Schema{js("not json")}, js(v1), true},
		{"protobuf unchecked", strategyFull, []Schema{{Type: pb.Schema_Protobuf, Data: []byte("x")}}, Schema{Type: pb.Schema_Protobuf, Data: []byte("y")}, true},
		// Transitive strategies check every live version, the others the latest.
		{"BACKWARD: only the latest", strategyBackward, []Schema{js(v1), js(drop)}, js(drop), true},
		{"FORWARD_TRANSITIVE: every version", strategyForwardTransitive, []Schema{js(v1), js(v1Default)}, js(drop), false},
		{"FORWARD: only the latest", strategyForward, []Schema{js(v1), js(v1Default)}, js(drop), true},
	} {
		err := SchemaCompatibleWith(c.strategy, c.live, c.next)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrIncompatibleSchema)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestLiveSchemaVersions(t *testing.T) {
	a := Schema{Type: pb.Schema_String}
	del := Schema{Deleted: true}
	if got := LiveFrom([]Schema{a, a, del, a}); got != 3 {
		t.Fatalf("LiveFrom = %d, want 3", got)
	}
	if got := LiveFrom([]Schema{a, del}); got != 2 {
		t.Fatalf("LiveFrom after a final deletion = %d, want 2", got)
	}
	if _, ok := SchemaVersionOf([]Schema{a, del}, a); ok {
		t.Fatal("a deleted version still matched")
	}
}

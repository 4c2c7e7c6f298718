package engine

import (
	"testing"
)

// TestLogRevisionNeverGoesBack: a log's revision grows with each record
// naming it, stays put across records of other logs and across the fold
// that removes its record (a revision going back to an earlier answer
// would make a caller take new data for none: table materialization skips
// logs by it).
func TestLogRevisionNeverGoesBack(t *testing.T) {
	env := newMemEnv(t)
	e := env.engine(t, Options{Logger: quietLogger})
	ctx := ctxT(t)
	r0 := e.LogRevision(1)
	if _, err := e.Append(ctx, 1, 1, []byte("a")); err != nil {
		t.Fatal(err)
	}
	r1 := e.LogRevision(1)
	if r1 <= r0 {
		t.Fatalf("revision %d after an append, %d before", r1, r0)
	}
	if _, err := e.Append(ctx, 2, 1, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if r := e.LogRevision(1); r != r1 {
		t.Fatalf("revision %d after another log's append, want %d", r, r1)
	}
	if err := e.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.LogRevision(1); r != r1 {
		t.Fatalf("revision %d after the fold, want %d", r, r1)
	}
	if _, err := e.Append(ctx, 1, 1, []byte("c")); err != nil {
		t.Fatal(err)
	}
	if r := e.LogRevision(1); r <= r1 {
		t.Fatalf("revision %d after a second append, want > %d", r, r1)
	}
}

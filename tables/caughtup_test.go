package tables

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakestream"
)

// TestCaughtUpLogsAreSkipped: once the table holds the whole log, the
// worker's calls skip it (no metadata read) until a commit record names
// the log again, or until caughtUpRecheck passes.
func TestCaughtUpLogsAreSkipped(t *testing.T) {
	env := newMemEnv(t)
	clk := &testClock{t: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	e := env.engine(t, Options{Now: clk.now, Logger: quietLogger})
	const id = 7
	r := rand.New(rand.NewPCG(3, 4))
	appendPulsar(t, e, id, r, 5, clk.now().UnixMilli())
	clk.advance(time.Minute)
	job := lakestream.MaterializationJob{Stream: lakestream.MustParseStreamID("public/default/orders"), Partition: 3, Log: id, Delta: true}
	mat := e.tables.Materializer()
	ctx := ctxT(t)
	// runs materializes until nothing is left and reports how many calls
	// reached Materialize (the runs counted by the engine's metrics).
	runs := func() int64 {
		before := e.tables.materializeCalls.Load()
		for {
			res, err := mat.MaterializeLog(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			if !res.More {
				return e.tables.materializeCalls.Load() - before
			}
		}
	}
	if n := runs(); n < 2 {
		t.Fatalf("%d calls materialized the log, want a range then the caught-up call", n)
	}
	if _, skip := e.tables.unchanged(id); !skip {
		t.Fatal("a caught-up log is not skipped")
	}
	if n := runs(); n != 0 {
		t.Fatalf("%d calls reached Materialize on a caught-up log", n)
	}
	// The worker need not even make the call (lakestream.IdleMaterializer);
	// not for the first partition while the table's maintenance is due.
	idle := mat.(lakestream.IdleMaterializer)
	if !idle.Idle(job) {
		t.Fatal("Idle is false for a caught-up log")
	}
	first := job
	first.Partition = 0
	if idle.Idle(first) {
		t.Fatal("Idle is true for the first partition of a table whose maintenance is due")
	}

	// A new entry changes the log's revision: the next call runs.
	appendPulsar(t, e, id, r, 1, clk.now().UnixMilli())
	if idle.Idle(job) {
		t.Fatal("Idle is true after an append")
	}
	if n := runs(); n != 1 {
		t.Fatalf("%d calls after an append, want 1 (too young to materialize)", n)
	}
	clk.advance(time.Minute)
	if n := runs(); n < 2 {
		t.Fatalf("%d calls once the entry is old enough", n)
	}
	if _, err := e.Materialize(ctx, id, orders); !errors.Is(err, engine.ErrNothingToCompact) {
		t.Fatalf("after the runs: %v, want nothing to compact", err)
	}

	// Without any change, a caught-up log is called again after
	// caughtUpRecheck.
	runs()
	if n := runs(); n != 0 {
		t.Fatalf("%d calls on a caught-up log", n)
	}
	clk.advance(caughtUpRecheck)
	if idle.Idle(job) {
		t.Fatal("Idle is true after caughtUpRecheck")
	}
	if n := runs(); n != 1 {
		t.Fatalf("%d calls after caughtUpRecheck, want 1", n)
	}
}

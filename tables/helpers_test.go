package tables

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// testEnv is a metadata store and a bucket shared by any number of engines.
type testEnv struct {
	meta  meta.Store
	store objstore.Store
}

func newMemEnv(t testing.TB) *testEnv {
	t.Helper()
	st, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{})
	t.Cleanup(func() { st.Close(); ms.Close() })
	return &testEnv{meta: ms, store: st}
}

// testNode is an engine with its table layer, wired as node.Start wires
// them; the engine's methods are promoted.
type testNode struct {
	*engine.Engine
	tables *Tables
}

func (n testNode) Materialize(ctx context.Context, id lakestream.LogID, t Target) (engine.CompactStats, error) {
	return n.tables.Materialize(ctx, id, t)
}

// engine starts an engine and its table layer on env's stores, with
// opts (its Now and Logger serve both); both close at the end of the test.
func (env *testEnv) engine(t testing.TB, opts Options) testNode {
	t.Helper()
	e, err := engine.New(env.store, env.meta, EngineOptions(engine.Options{Now: opts.Now, Logger: opts.Logger}))
	if err != nil {
		t.Fatal(err)
	}
	tb := New(e, Stores{Objects: e.Store(), Meta: e.Meta(), Root: e.MetaRoot()}, opts)
	t.Cleanup(func() {
		tb.Close()
		e.Close()
	})
	return testNode{Engine: e, tables: tb}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// prefixEnd is the smallest key greater than every key with prefix p.
func prefixEnd(p string) string { return p[:len(p)-1] + string(p[len(p)-1]+1) }

// crashOnceAfter makes opts' compaction "crash" (fail as if the process
// died) the first time it finishes step; *crashed tells whether it did.
func crashOnceAfter(opts *Options, step string) (crashed *bool) {
	crashed = new(bool)
	opts.hooks.materializeStep = func(_ int64, s string) error {
		if s == step && !*crashed {
			*crashed = true
			return errors.New("injected crash after " + s)
		}
		return nil
	}
	return crashed
}

// raceCompactions runs Materialize on every engine at once until none
// finds anything eligible; conflicts between them are expected, any other
// error fails the test. Afterwards the log has no WAL index entry left.
func raceCompactions(t *testing.T, engines []testNode, id lakestream.LogID, target Target) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(engines))
	for i, e := range engines {
		wg.Go(func() {
			for {
				_, err := e.Materialize(ctxT(t), id, target)
				if errors.Is(err, engine.ErrNothingToCompact) {
					return
				}
				if err != nil && !errors.Is(err, lakestream.ErrConflict) {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if k := kinds(t, engines[0], id); k["wal"] != 0 {
		t.Fatalf("index: %v", k)
	}
}

// icebergCrashResume is the crash scenario of both Iceberg catalogs (sqlite
// and REST): 40 Pulsar entries over two publish days, a compaction into
// Delta and Iceberg that crashes after step, the log still readable from a
// cold engine, then a restarted engine that resumes and finishes in
// several ranges: every row in both tables exactly once, no WAL index
// entry left, reads unchanged. It returns the log's end and the Delta
// table's rows.
func icebergCrashResume(t *testing.T, env icebergEnv, target Target, step string, seed uint64) (end int64, rows map[int64][]byte) {
	t.Helper()
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	opts := env.opts(clk)
	crashed := crashOnceAfter(&opts, step)
	e := env.engine(t, opts)
	const id = 9
	r := rand.New(rand.NewPCG(seed, seed+1))
	day2 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixMilli()
	appendPulsar(t, e, id, r, 20, day2-15)
	appendPulsar(t, e, id, r, 20, day2+3600_000)
	clk.advance(time.Minute)
	want := readAll(t, e, id)
	end = want[len(want)-1].End()

	if _, err := e.Materialize(ctxT(t), id, target); err == nil || !*crashed {
		t.Fatalf("no crash: %v", err)
	}
	sameEntries(t, readAll(t, env.engine(t, Options{Logger: quietLogger}), id), want)

	// A restarted engine (a new catalog client) resumes and finishes both
	// tables.
	e2 := env.engine(t, env.opts(clk))
	if n := compactAllTo(t, e2, id, target); n < 2 {
		t.Fatalf("%d ranges after the crash, want several", n)
	}
	if k := kinds(t, e2, id); k["wal"] != 0 {
		t.Fatalf("index: %v", k)
	}
	checkTable(t, env.store, target.Root, end)
	rows = deltaRows(t, env.store, target.Root)
	checkIceberg(t, env, target.Ident, end, rows)
	sameEntries(t, readAll(t, env.engine(t, Options{Logger: quietLogger}), id), want)
	return end, rows
}

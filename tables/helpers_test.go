package tables

import (
	"context"
	"io"
	"log/slog"
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

func (n testNode) CompactToTable(ctx context.Context, id lakestream.LogID, t Target) (engine.CompactStats, error) {
	return n.tables.CompactToTable(ctx, id, t)
}

// engine starts an engine and its table layer on env's stores, with
// opts (its Now and Logger serve both); both close at the end of the test.
func (env *testEnv) engine(t testing.TB, opts Options) testNode {
	t.Helper()
	e, err := engine.New(env.store, env.meta, EngineOptions(engine.Options{Now: opts.Now, Logger: opts.Logger}))
	if err != nil {
		t.Fatal(err)
	}
	tb := New(e, opts)
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

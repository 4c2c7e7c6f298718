package tables

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// tableFiles lists the Parquet files under the test table.
func tableFiles(t *testing.T, store objstore.Store) []string {
	t.Helper()
	var out []string
	if err := store.List(ctxT(t), orders.Root+"/data/", func(oi objstore.ObjectInfo) error {
		out = append(out, oi.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompactToTableGCOrphans: files of a compaction that died before its
// claim are collected once their intent is dead — and only those; files of
// a claim whose intents a crash left behind are protected until the next
// claim deletes those intents, and are never collected.
func TestCompactToTableGCOrphans(t *testing.T) {
	env := newMemEnv(t)
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	opts := Options{Now: clk.now, CompactMaxBytes: 1 << 30, Logger: quietLogger}
	crashOnceAfter(&opts, "put")
	e := env.engine(t, opts)
	const id = 9
	r := rand.New(rand.NewPCG(5, 6))
	appendPulsar(t, e, id, r, 30, clk.now().UnixMilli())
	clk.advance(time.Minute)
	if _, err := e.Materialize(ctxT(t), id, orders); err == nil {
		t.Fatal("no crash after put")
	}
	orphans := tableFiles(t, env.store)
	if len(orphans) == 0 {
		t.Fatal("the crashed compaction wrote no file")
	}
	// A restarted engine compacts the same range into new files.
	e2 := env.engine(t, Options{Now: clk.now, CompactMaxBytes: 1 << 30, Logger: quietLogger})
	compactAll(t, e2, id)
	want := readAll(t, e2, id)
	end := want[len(want)-1].End()
	checkTable(t, env.store, orders.Root, end)

	// Young intents protect the orphans.
	st, err := e2.CollectGarbage(ctxT(t))
	if err != nil || st.TableOrphans != 0 {
		t.Fatalf("gc with live intents: %+v %v", st, err)
	}
	clk.advance(11 * time.Minute) // past PendingIntentTTL
	st, err = e2.CollectGarbage(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.TableOrphans != len(orphans) {
		t.Fatalf("gc removed %d table orphans, want %d", st.TableOrphans, len(orphans))
	}
	left := tableFiles(t, env.store)
	for _, o := range orphans {
		if slices.Contains(left, o) {
			t.Fatalf("orphan %s not collected", o)
		}
	}
	checkTable(t, env.store, orders.Root, end)
	sameEntries(t, readAll(t, env.engine(t, Options{Logger: quietLogger}), id), want)

	// A crash after the cursor step leaves the claim's intents; the next
	// claim deletes them, so GC never takes that claim's (committed) files.
	crashOnceAfter(&opts, "cursor")
	e3 := env.engine(t, opts)
	appendPulsar(t, e3, id, r, 10, clk.now().UnixMilli())
	clk.advance(time.Minute)
	if _, err := e3.Materialize(ctxT(t), id, orders); err == nil || !strings.Contains(err.Error(), "cursor") {
		t.Fatalf("no crash after cursor: %v", err)
	}
	appendPulsar(t, e3, id, r, 10, clk.now().UnixMilli())
	clk.advance(time.Minute)
	compactAll(t, e3, id)
	pp := e3.MetaRoot() + "wal-pending/"
	kvs, err := env.meta.Range(ctxT(t), pp, prefixEnd(pp), 0)
	kvs = slices.DeleteFunc(kvs, func(kv meta.KV) bool { return strings.Contains(kv.Key, "/window-") }) // the WAL writer's window intents
	if err != nil || len(kvs) != 0 {
		t.Fatalf("intents left after the next claim: %d (%v)", len(kvs), err)
	}
	clk.advance(11 * time.Minute)
	st, err = e3.CollectGarbage(ctxT(t))
	if err != nil || st.TableOrphans != 0 {
		t.Fatalf("gc after a crash between cursor and intents: %+v %v", st, err)
	}
	want = readAll(t, e3, id)
	checkTable(t, env.store, orders.Root, want[len(want)-1].End())
	sameEntries(t, readAll(t, env.engine(t, Options{Logger: quietLogger}), id), want)
}

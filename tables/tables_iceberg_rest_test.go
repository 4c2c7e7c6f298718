package tables

// Materialize's Iceberg commit through a real Iceberg REST catalog
// server (docs/iceberg.md, "REST catalog"): the same crash/resume checks as
// TestCompactToTableIcebergCrash, with the catalog kind "rest". The server
// (Apache Iceberg's REST catalog fixture) is started by
// e2e/interop/iceberg-rest/run.sh, which passes its URL in
// LAKEGATE_ICEBERG_REST_URI; without it the test is skipped (a skip is not a
// pass). With LAKEGATE_PYICEBERG set too, pyiceberg's RestCatalog reads the
// table back.
// Run: e2e/interop/iceberg-rest/run.sh

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakehouse/iceberg"
)

// newRESTIcebergEnv is newIcebergEnv with the catalog at
// LAKEGATE_ICEBERG_REST_URI (skips when unset), plus a target whose
// namespace is new on that server: one server outlives every test of a run.
func newRESTIcebergEnv(t *testing.T) (icebergEnv, Target) {
	t.Helper()
	uri := os.Getenv("LAKEGATE_ICEBERG_REST_URI")
	if uri == "" {
		t.Skip("LAKEGATE_ICEBERG_REST_URI not set: REST catalog not checked (e2e/interop/iceberg-rest/run.sh sets it)")
	}
	env := newIcebergEnv(t)
	env.catalog.Kind = iceberg.KindREST
	env.catalog.URI = uri
	target := ordersBoth
	target.Ident = []string{"public", fmt.Sprintf("rest%x", time.Now().UnixNano()), "orders"}
	return env, target
}

func TestCompactToTableIcebergREST(t *testing.T) {
	if os.Getenv("LAKEGATE_ICEBERG_REST_URI") == "" {
		t.Skip("LAKEGATE_ICEBERG_REST_URI not set: REST catalog not checked (e2e/interop/iceberg-rest/run.sh sets it)")
	}
	for _, step := range []string{"claim", "iceberg", "cursor"} {
		t.Run(step, func(t *testing.T) {
			env, target := newRESTIcebergEnv(t)
			end, rows := icebergCrashResume(t, env, target, step, 21)
			// The table's metadata is where lakegate put it, beside
			// _delta_log, not in the server's warehouse.
			meta, err := filepath.Glob(filepath.Join(env.dir, filepath.FromSlash(orders.Root), "metadata", "*.metadata.json"))
			if err != nil || len(meta) == 0 {
				t.Fatalf("no Iceberg metadata beside the Delta log: %v, %v", meta, err)
			}
			if step == "cursor" {
				checkPyIcebergREST(t, env, target, end, rows)
			}
		})
	}
}

// TestCompactToTableIcebergRESTConcurrent: two engines (two REST clients)
// compact one log into one new table at once: they race to create the
// namespaces and the table and then to append, and the server's
// compare-and-swap refusals (409) must become retries or ErrConflict,
// never a duplicate row.
func TestCompactToTableIcebergRESTConcurrent(t *testing.T) {
	env, target := newRESTIcebergEnv(t)
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	opts := env.opts(clk)
	opts.CompactMaxBytes = 4 << 10
	engines := []testNode{env.engine(t, opts), env.engine(t, opts)}
	const id = 9
	r := rand.New(rand.NewPCG(23, 24))
	appendPulsar(t, engines[0], id, r, 40, clk.now().UnixMilli()-3600_000)
	clk.advance(time.Minute)
	want := readAll(t, engines[0], id)
	end := want[len(want)-1].End()

	raceCompactions(t, engines, id, target)
	checkTable(t, env.store, orders.Root, end)
	checkIceberg(t, env, target.Ident, end, deltaRows(t, env.store, orders.Root))
}

// checkPyIcebergREST has pyiceberg's RestCatalog load the table and compare
// row count and payload checksum (skipped without LAKEGATE_PYICEBERG).
func checkPyIcebergREST(t *testing.T, env icebergEnv, target Target, end int64, rows map[int64][]byte) {
	t.Helper()
	python := os.Getenv("LAKEGATE_PYICEBERG")
	if python == "" {
		t.Log("LAKEGATE_PYICEBERG not set: pyiceberg RestCatalog read not checked")
		return
	}
	script, err := filepath.Abs("../e2e/interop/iceberg-rest/check_table_rest.py")
	if err != nil {
		t.Fatal(err)
	}
	runPyIceberg(t, python, script, []string{"--uri", env.catalog.URI}, target.Ident, end, rows)
}

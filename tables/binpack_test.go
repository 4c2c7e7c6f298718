package tables

// Bin-packing (docs/compaction.md, "Bin-packing"): a log compacted in many
// small ranges into Delta and Iceberg is bin-packed into files of several
// spans; both tables keep every row once, a cold engine reads the same
// entries, and a crash after each step is finished by the next call; orphan
// removal then takes exactly the replaced files. Run:
//
//	go test -count=1 -run 'Binpack|Orphan' ./tables/

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/objstore"
)

// binpackOpts are options for small files and small spans.
func binpackOpts(env icebergEnv, clk *testClock) Options {
	opts := env.opts(clk)
	opts.CompactMaxBytes = 2 << 10 // many small ranges
	opts.BinpackTargetBytes = 96 << 10
	opts.BinpackSpanBytes = 6 << 10 // several spans per new file
	opts.BinpackMaxGroups = 100
	return opts
}

// smallTable appends two days of Pulsar entries to log 9, rounds × 15 a
// day, and compacts them in many small ranges into both tables; it returns
// the entries.
func smallTable(t *testing.T, env icebergEnv, e testNode, clk *testClock, rounds int) []lakestream.Entry {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	day2 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixMilli()
	for round := range rounds {
		appendPulsar(t, e, 9, r, 15, day2-3600_000+int64(round)*1000)
	}
	for round := range rounds {
		appendPulsar(t, e, 9, r, 15, day2+3600_000+int64(round)*1000)
	}
	clk.advance(time.Minute)
	if n := compactAllTo(t, e, 9, ordersBoth); n < 5*rounds/2 {
		t.Fatalf("%d ranges, want many small ones", n)
	}
	return readAll(t, e, 9)
}

// tableFileCount counts the data files live in the Delta table.
func tableFileCount(t *testing.T, env icebergEnv) int {
	t.Helper()
	tbl, err := delta.Open(ctxT(t), env.store, ordersBoth.Root)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return len(snap.Files)
}

// checkPacked checks both tables row by row and reads from a cold engine.
func checkPacked(t *testing.T, env icebergEnv, want []lakestream.Entry) {
	t.Helper()
	end := want[len(want)-1].End()
	checkTable(t, env.store, ordersBoth.Root, end)
	checkIceberg(t, env, ordersBoth.Ident, end, deltaRows(t, env.store, ordersBoth.Root))
	sameEntries(t, readAll(t, env.engine(t, Options{Logger: quietLogger}), 9), want)
}

func TestBinpack(t *testing.T) {
	env := newIcebergEnv(t)
	clk := &testClock{t: time.Now()}
	opts := binpackOpts(env, clk)
	e := env.engine(t, opts)
	want := smallTable(t, env, e, clk, 4)
	before := tableFileCount(t, env)

	st, err := e.tables.Binpack(ctxT(t), 9, ordersBoth)
	if err != nil {
		t.Fatal(err)
	}
	after := tableFileCount(t, env)
	if st.Groups < 2 || st.FilesIn-st.Groups != before-after || 4*after > before {
		t.Fatalf("repack %+v: %d files → %d", st, before, after)
	}
	// Spans: index entries naming row groups of the new files.
	cs, err := e.Chunks(ctxT(t), 9, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	spans := 0
	for _, c := range cs {
		if c.Kind != index.KindParquet {
			t.Fatalf("index entry %+v", c.Entry)
		}
		if c.Offset > 0 {
			spans++
		}
	}
	t.Logf("repack %+v: %d files → %d, %d spans", st, before, after, spans)
	if spans < 2*after {
		t.Fatalf("%d spans for %d files, want several per file", spans, after)
	}
	checkPacked(t, env, want)

	// Nothing left to do: a second call writes nothing.
	if st, err := e.tables.Binpack(ctxT(t), 9, ordersBoth); err != nil || st.Groups != 0 {
		t.Fatalf("second repack: %+v, %v", st, err)
	}

	// Orphan removal: nothing goes inside the window; after it, exactly
	// the replaced files (no table, index or claim holds them).
	inTables := deltaFilePaths(t, env)
	ost, err := e.tables.RemoveOrphans(ctxT(t), ordersBoth, []lakestream.LogID{9})
	if err != nil || ost.Deleted != 0 {
		t.Fatalf("orphans inside the window: %+v, %v", ost, err)
	}
	clk.advance(8 * 24 * time.Hour)
	stored := storedDataFiles(t, env)
	ost, err = e.tables.RemoveOrphans(ctxT(t), ordersBoth, []lakestream.LogID{9})
	if err != nil {
		t.Fatal(err)
	}
	left := storedDataFiles(t, env)
	// The Iceberg table still has snapshots referencing the old files: they
	// stay until snapshot expiry.
	if ost.Deleted != 0 || len(left) != len(stored) {
		t.Fatalf("orphans with Iceberg snapshots kept: %+v", ost)
	}
	opts2 := opts
	opts2.SnapshotRetention, opts2.SnapshotsRetainLast = time.Millisecond, 1
	e2 := env.engine(t, opts2)
	if _, err := e2.tables.Maintain(ctxT(t), ordersBoth); err != nil {
		t.Fatal(err)
	}
	ost, err = e2.tables.RemoveOrphans(ctxT(t), ordersBoth, []lakestream.LogID{9})
	if err != nil {
		t.Fatal(err)
	}
	left = storedDataFiles(t, env)
	if ost.Deleted != st.FilesIn || !slices.Equal(left, inTables) {
		t.Fatalf("orphans: %+v; left %d files, tables hold %d", ost, len(left), len(inTables))
	}
	checkPacked(t, env, want)
}

// deltaFilePaths are the Delta table's live files, as store keys, sorted.
func deltaFilePaths(t *testing.T, env icebergEnv) []string {
	t.Helper()
	tbl, _ := delta.Open(ctxT(t), env.store, ordersBoth.Root)
	snap, err := tbl.Snapshot(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range snap.Files {
		out = append(out, ordersBoth.Root+"/"+f.Path)
	}
	slices.Sort(out)
	return out
}

// storedDataFiles are the objects under the table's data/, sorted.
func storedDataFiles(t *testing.T, env icebergEnv) []string {
	t.Helper()
	var out []string
	err := env.store.List(ctxT(t), ordersBoth.Root+"/data/", func(oi objstore.ObjectInfo) error {
		out = append(out, oi.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBinpackCrash: a bin-packing that dies after each step leaves both
// tables and the log readable, every row once; the next call finishes it.
func TestBinpackCrash(t *testing.T) {
	for _, step := range []string{"put", "claim", "delta", "iceberg", "index"} {
		t.Run(step, func(t *testing.T) {
			env := newIcebergEnv(t)
			clk := &testClock{t: time.Now()}
			opts := binpackOpts(env, clk)
			opts.BinpackMaxGroups = 2 // each call bounded (-race on 2 cores)
			crashed := false
			opts.hooks.binpackStep = func(_ int64, s string) error {
				if s == step && !crashed {
					crashed = true
					return errors.New("injected crash after " + s)
				}
				return nil
			}
			e := env.engine(t, opts)
			want := smallTable(t, env, e, clk, 2)
			if _, err := e.tables.Binpack(ctxT(t), 9, ordersBoth); err == nil || !crashed {
				t.Fatalf("no crash: %v", err)
			}
			checkPacked(t, env, want)

			opts2 := binpackOpts(env, clk)
			opts2.BinpackMaxGroups = 2
			e2 := env.engine(t, opts2)
			for {
				st, err := e2.tables.Binpack(ctxT(t), 9, ordersBoth)
				if err != nil {
					t.Fatal(err)
				}
				if !st.Unfinished {
					break
				}
			}
			if n := tableFileCount(t, env); n > 8 {
				t.Fatalf("%d files after the resumed bin-packing", n)
			}
			checkPacked(t, env, want)
			// The resumed claim is done and holds no intent.
			kv, ok, err := env.meta.Get(ctxT(t), e2.AttachmentKey(9, binpackClaimName))
			if err != nil || !ok || !strings.Contains(string(kv.Value), `"indexed":true`) {
				t.Fatalf("claim %s %v %v", kv.Value, ok, err)
			}
		})
	}
}

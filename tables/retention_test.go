package tables

// Tests of table retention (docs/compaction.md, "Table retention"):
// TestTableRetention runs ApplyRetention on a file:// store, embedded etcd
// and each Iceberg catalog a node commits to in process — "sql" (sqlite)
// and "lakegate" (metacat in the same etcd, the cluster default, also read
// back through the Iceberg REST API it is served with: the live data files
// equal the Delta table's, the current snapshot is retention's overwrite) —
// over a log compacted in four batches of known publish
// times — held by a durable subscription, by time, after a crash between
// the table commits and the trim, by size — checking after each step both
// tables row by row, the log's first offset, the trimmed error below it,
// that no index entry names a file the tables dropped, and at the end
// orphan removal and (with LAKEGATE_PYTHON / LAKEGATE_PYICEBERG) delta-rs
// and pyiceberg. TestTableRetentionPartitions: two partitions' logs in one
// table, one held by a subscription. TestPlanRetention is the pure
// planner's table test.
//
// Run: go test -race -count=1 -run 'TableRetention|PlanRetention' ./tables/
// With readers: LAKEGATE_PYTHON=$(e2e/interop/delta/setup.sh | tail -1) \
//   LAKEGATE_PYICEBERG=$(e2e/interop/iceberg/setup.sh | tail -1) go test -run TableRetention ./tables/

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/icebergrest"
	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakehouse/delta"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta/metatest"
	"github.com/lakegate/lakegate/objstore"
)

// metricsBoth is a non-partitioned topic's tables in both formats.
var metricsBoth = Target{Root: "tables/public/default/metrics", Partition: -1, Delta: true, Iceberg: true,
	Ident: []string{"public", "default", "metrics"}}

func TestTableRetention(t *testing.T) {
	for _, kind := range []string{iceberg.KindSQL, iceberg.KindLakegate} {
		t.Run(kind, func(t *testing.T) { testTableRetention(t, kind) })
	}
}

func testTableRetention(t *testing.T, kind string) {
	env := newIcebergEnv(t)
	env.meta = metatest.NewEtcdStore(t, metatest.Embedded(t)) // the metadata store of a node
	if kind == iceberg.KindLakegate {
		env = withLakegateCatalog(t, env)
	}
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	opts := env.opts(clk)
	opts.SnapshotsRetainLast, opts.SnapshotRetention = 1, time.Nanosecond // iceberg-go expires by the real clock
	e := env.engine(t, opts)
	ctx := ctxT(t)
	const id = 9
	logs := []lakestream.LogID{id}
	tg := metricsBoth
	r := rand.New(rand.NewPCG(21, 22))
	t0 := clk.now().UnixMilli()

	// Four batches published 5 h, 3 h, 1 h and 10 min before t0, each
	// compacted on its own into several files (8 KiB ranges).
	var ends []int64
	for _, age := range []time.Duration{5 * time.Hour, 3 * time.Hour, time.Hour, 10 * time.Minute} {
		appendPulsar(t, e, id, r, 24, t0-age.Milliseconds())
		clk.advance(time.Minute)
		compactAllTo(t, e, id, tg)
		all := readAll(t, e, id)
		ends = append(ends, all[len(all)-1].End())
	}
	want := readAll(t, e, id)
	end := ends[3]
	payloads := deltaRows(t, env.store, tg.Root)
	if int64(len(payloads)) != end {
		t.Fatalf("table has %d rows, want %d", len(payloads), end)
	}
	files := func() []*retFile {
		fs, _, err := e.tables.retentionFiles(ctx, tg)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	countFiles := func(below int64) (n int) { // live files of rows below offset
		for _, f := range files() {
			if f.minOff < below {
				n++
			}
		}
		return n
	}
	filesA, filesB := countFiles(ends[0]), countFiles(ends[1])-countFiles(ends[0])
	if filesA < 2 || filesB < 2 || !slices.ContainsFunc(files(), func(f *retFile) bool { return f.known && f.delta && f.iceberg }) {
		t.Fatalf("%d files for batch A, %d for B; want several, known, in both tables", filesA, filesB)
	}
	check := func(step string, first int64) {
		t.Helper()
		checkRetained(t, env, e, tg, id, first, end, payloads, want)
	}
	check("compacted", 0)

	// A durable subscription that acknowledged nothing holds every file.
	lg, err := e.Log(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := lg.OpenCursor(ctx, "sub", -1)
	if err != nil {
		t.Fatal(err)
	}
	byTime := Retention{Ms: (2 * time.Hour).Milliseconds()}
	st, err := e.tables.ApplyRetention(ctx, tg, logs, byTime)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 0 || st.Held != filesA+filesB || st.Trimmed != nil {
		t.Fatalf("held by the subscription: %+v, want %d held", st, filesA+filesB)
	}
	check("held", 0)

	// Once it acknowledged batch A, A's files go and the log is trimmed
	// behind them; B's files are still held.
	if err := sub.MarkDelete(ctx, ends[0]-1, nil); err != nil {
		t.Fatal(err)
	}
	st, err = e.tables.ApplyRetention(ctx, tg, logs, byTime)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != filesA || st.Held != filesB || st.Trimmed[id] != ends[0] {
		t.Fatalf("after the ack of A: %+v; want %d removed, %d held, trimmed below %d", st, filesA, filesB, ends[0])
	}
	check("time A", ends[0])
	checkReaders(t, env, tg, ends[0], end, payloads)

	// The subscription goes. A run that "crashes" after its Iceberg commit
	// leaves the tables without B and the log untrimmed but readable (the
	// files are still stored); the next run only trims.
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lg.DeleteCursor(ctx, "sub"); err != nil {
		t.Fatal(err)
	}
	crashOpts := opts
	crashOpts.hooks.retentionStep = func(step string) error {
		if step == "iceberg" {
			return errors.New("injected crash after iceberg")
		}
		return nil
	}
	if _, err := env.engine(t, crashOpts).tables.ApplyRetention(ctx, tg, logs, byTime); err == nil {
		t.Fatal("no crash")
	}
	if got := deltaRows(t, env.store, tg.Root); int64(len(got)) != end-ends[1] {
		t.Fatalf("after the crash the Delta table has %d rows, want %d", len(got), end-ends[1])
	}
	cold := env.engine(t, Options{Logger: quietLogger})
	if first, err := cold.FirstOffset(ctx, id); err != nil || first != ends[0] {
		t.Fatalf("after the crash: first %d, %v", first, err)
	}
	got, err := cold.ReadEntries(ctx, id, ends[0], math.MaxInt32, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, entriesFrom(want, ends[0]))
	st, err = e.tables.ApplyRetention(ctx, tg, logs, byTime)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 0 || st.Held != 0 || st.Trimmed[id] != ends[1] {
		t.Fatalf("after the crash: %+v; want only a trim below %d", st, ends[1])
	}
	check("time B", ends[1])

	// By size: the table keeps the newest files that fit; then, with 1
	// byte, only its newest file (size never empties a table).
	var sizeD int64
	for _, f := range files() {
		if f.minOff >= ends[2] {
			sizeD += f.size
		}
	}
	st, err = e.tables.ApplyRetention(ctx, tg, logs, Retention{Bytes: sizeD})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files == 0 || st.LiveBytes != sizeD || st.Trimmed[id] != ends[2] {
		t.Fatalf("by size %d: %+v; want C removed, trimmed below %d", sizeD, st, ends[2])
	}
	check("size C", ends[2])
	checkReaders(t, env, tg, ends[2], end, payloads)
	st, err = e.tables.ApplyRetention(ctx, tg, logs, Retention{Bytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	left := files()
	if len(left) != 1 || st.Trimmed[id] != left[0].minOff || left[0].minOff <= ends[2] {
		t.Fatalf("by size 1: %+v, %d files left", st, len(left))
	}
	first := left[0].minOff
	check("size 1", first)

	// Idempotent: nothing more to do.
	st, err = e.tables.ApplyRetention(ctx, tg, logs, Retention{Ms: byTime.Ms, Bytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 0 || st.Trimmed != nil {
		t.Fatalf("again: %+v", st)
	}

	// The removed files stay for the orphan window, then orphan removal
	// (after snapshot expiry) deletes them; reads are unchanged.
	removed := 0
	if err := env.store.List(ctx, tg.Root+"/data/", func(objstore.ObjectInfo) error { removed++; return nil }); err != nil {
		t.Fatal(err)
	}
	removed-- // the live file
	if ost, err := e.tables.RemoveOrphans(ctx, tg, logs); err != nil || ost.Deleted != 0 {
		t.Fatalf("orphans inside the window: %+v, %v", ost, err)
	}
	clk.mu.Lock()
	clk.t = time.Now().Add(9 * 24 * time.Hour) // past the window, also for the files' real mtimes
	clk.mu.Unlock()
	if _, err := e.tables.Maintain(ctx, tg); err != nil {
		t.Fatal(err)
	}
	ost, err := e.tables.RemoveOrphans(ctx, tg, logs)
	if err != nil || ost.Deleted != removed || removed < 5 {
		t.Fatalf("orphans after the window: %+v, %v; want %d", ost, err, removed)
	}
	check("orphans", first)

	checkReaders(t, env, tg, first, end, payloads)
	t.Logf("%d rows in 4 batches; files: A %d, B %d; %d files removed in all, %d rows left in 1 file", end, filesA, filesB, removed, end-first)

	// Time may empty the tables: the log is then trimmed to its head.
	st, err = e.tables.ApplyRetention(ctx, tg, logs, Retention{Ms: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 1 || st.LiveBytes != 0 || st.Trimmed[id] != end {
		t.Fatalf("emptied by time: %+v; want the last file removed, trimmed to %d", st, end)
	}
	check("empty", end)
	checkReaders(t, env, tg, end, end, payloads)
}

// checkReaders has delta-rs (LAKEGATE_PYTHON) and pyiceberg
// (LAKEGATE_PYICEBERG) read the tables: exactly the rows [first, end),
// each once, with the payloads of all.
func checkReaders(t *testing.T, env icebergEnv, tg Target, first, end int64, all map[int64][]byte) {
	t.Helper()
	ctx := ctxT(t)
	rows := end - first
	if python := os.Getenv("LAKEGATE_PYTHON"); python != "" {
		script, _ := filepath.Abs("../e2e/interop/delta/check_table.py")
		out, err := exec.CommandContext(ctx, python, script, filepath.Join(env.dir, tg.Root), fmt.Sprint(rows), "--unique", lakehouse.ColOffset).CombinedOutput()
		t.Logf("delta-rs: %s", out)
		if err != nil {
			t.Fatalf("delta-rs: %v", err)
		}
	} else {
		t.Log("LAKEGATE_PYTHON not set: delta-rs read not checked")
	}
	if python := os.Getenv("LAKEGATE_PYICEBERG"); python != "" {
		script, _ := filepath.Abs("../e2e/interop/iceberg/check_table.py")
		catalogArgs := []string{"--catalog-db", env.catalog.URI}
		if env.rest != "" { // the lakegate catalog, through its REST API
			script, _ = filepath.Abs("../e2e/interop/iceberg-rest/check_table_rest.py")
			catalogArgs = []string{"--uri", env.rest}
		}
		h := sha256.New()
		for o := first; o < end; o++ {
			h.Write(all[o])
		}
		wantLine := fmt.Sprintf("rows=%d payload_sha256=%x", rows, h.Sum(nil))
		out, err := exec.CommandContext(ctx, python, append(append([]string{script}, catalogArgs...), "--table", strings.Join(tg.Ident, "."))...).CombinedOutput()
		t.Logf("pyiceberg: %s", out)
		if err != nil || !strings.Contains(string(out), wantLine) {
			t.Fatalf("pyiceberg: %v; want %q", err, wantLine)
		}
	} else {
		t.Log("LAKEGATE_PYICEBERG not set: pyiceberg read not checked")
	}
}

// entriesFrom returns the entries of want from offset first on.
func entriesFrom(want []lakestream.Entry, first int64) []lakestream.Entry {
	i := slices.IndexFunc(want, func(e lakestream.Entry) bool { return e.Offset >= first })
	if i < 0 {
		return nil
	}
	return want[i:]
}

// checkRetained checks a stream after retention: both tables hold exactly
// the rows [first, end) with the payloads of all, each once; the log
// starts at first, reading below it is ErrOffsetTrimmed, a cold engine
// reads want from first on, and every Parquet index entry names a file
// live in the Delta table.
func checkRetained(t *testing.T, env icebergEnv, e testNode, tg Target, id lakestream.LogID, first, end int64, all map[int64][]byte, want []lakestream.Entry) {
	t.Helper()
	ctx := ctxT(t)
	rows := deltaRows(t, env.store, tg.Root)
	if int64(len(rows)) != end-first {
		t.Fatalf("Delta table has %d rows, want %d (from %d)", len(rows), end-first, first)
	}
	for o := first; o < end; o++ {
		if !bytes.Equal(rows[o], all[o]) {
			t.Fatalf("Delta row %d differs or is missing", o)
		}
	}
	ice := icebergOffsets(t, env, tg.Ident)
	if int64(len(ice)) != end-first {
		t.Fatalf("Iceberg table has %d offsets, want %d", len(ice), end-first)
	}
	for o := first; o < end; o++ {
		if ice[o] != 1 {
			t.Fatalf("offset %d %d times in the Iceberg table", o, ice[o])
		}
	}
	cold := env.engine(t, Options{Logger: quietLogger})
	if f, err := cold.FirstOffset(ctx, id); err != nil || f != first {
		t.Fatalf("first offset %d, %v; want %d", f, err, first)
	}
	if first > 0 {
		if _, err := cold.ReadEntries(ctx, id, first-1, 1, 1<<20); !errors.Is(err, lakestream.ErrOffsetTrimmed) {
			t.Fatalf("read below first: %v", err)
		}
	}
	got, err := cold.ReadEntries(ctx, id, first, math.MaxInt32, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, entriesFrom(want, first))
	tbl, err := delta.Open(ctx, env.store, tg.Root)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, f := range snap.Files {
		live[tg.Root+"/"+f.Path] = true
	}
	if env.rest != "" {
		checkIcebergREST(t, env, tg, live, first, end)
	}
	cs, err := cold.Chunks(ctx, id, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Kind == index.KindParquet && !live[c.Object] {
			t.Fatalf("the index names %s, which the table no longer has", c.Object)
		}
	}
}

// withLakegateCatalog points env at the cluster's Iceberg catalog: metacat
// in env.meta under the key root a node gives it (KindLakegate), served over
// the Iceberg REST API in process (env.rest) as a node serves it at
// /iceberg.
func withLakegateCatalog(t *testing.T, env icebergEnv) icebergEnv {
	t.Helper()
	env.catalog = iceberg.CatalogConfig{Kind: iceberg.KindLakegate, StoreURL: env.catalog.StoreURL,
		Meta: env.meta, MetaRoot: "/lakegate/iceberg/"}
	cat, err := iceberg.Open(ctxT(t), env.catalog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	srv := httptest.NewServer(http.StripPrefix("/iceberg", icebergrest.Handler(icebergrest.Options{
		Catalog: cat.Catalog(), ReadOnly: iceberg.IsStreamTable})))
	t.Cleanup(srv.Close)
	env.rest = srv.URL + "/iceberg"
	return env
}

// checkIcebergREST loads the table through the REST API at env.rest
// (iceberg-go's REST client): its current snapshot's data files are
// exactly the Delta table's live files (paths relative to the store),
// its rows exactly the offsets [first, end), each once, and, once
// retention removed something (first > 0 or nothing left), the current
// snapshot is retention's overwrite.
func checkIcebergREST(t *testing.T, env icebergEnv, tg Target, deltaLive map[string]bool, first, end int64) {
	t.Helper()
	ctx := ctxT(t)
	rc, err := rest.NewCatalog(ctx, "lakegate", env.rest)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := rc.LoadTable(ctx, table.Identifier(tg.Ident))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var iceLive []string
	for _, task := range tasks {
		p := task.File.FilePath()
		i := strings.Index(p, "/"+tg.Root+"/")
		if i < 0 {
			t.Fatalf("Iceberg data file %s outside the table root %s", p, tg.Root)
		}
		iceLive = append(iceLive, p[i+1:])
	}
	slices.Sort(iceLive)
	want := slices.Sorted(maps.Keys(deltaLive))
	if !slices.Equal(iceLive, want) {
		t.Fatalf("REST: Iceberg live files %v, Delta live files %v", iceLive, want)
	}
	if first > 0 || first == end {
		snap := tbl.CurrentSnapshot()
		if snap == nil || snap.Summary == nil || snap.Summary.Operation != table.OpOverwrite || snap.Summary.Properties["lakegate.retention"] == "" {
			t.Fatalf("REST: current snapshot %+v, want retention's overwrite", snap)
		}
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		offs := rec.Column(rec.Schema().FieldIndices(lakehouse.ColOffset)[0]).(*array.Int64)
		for i := range int(rec.NumRows()) {
			seen[offs.Value(i)]++
		}
		rec.Release()
	}
	if int64(len(seen)) != end-first {
		t.Fatalf("REST: Iceberg table has %d offsets, want %d", len(seen), end-first)
	}
	for o := first; o < end; o++ {
		if seen[o] != 1 {
			t.Fatalf("REST: offset %d %d times", o, seen[o])
		}
	}
}

// icebergOffsets scans the Iceberg table (iceberg-go, a catalog of its
// own) and counts each __offset.
func icebergOffsets(t *testing.T, env icebergEnv, ident []string) map[int64]int {
	t.Helper()
	ctx := ctxT(t)
	cat, err := iceberg.Open(ctx, env.catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.Catalog().LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]int{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := rec.Schema().FieldIndices(lakehouse.ColOffset)[0]
		offs := rec.Column(col).(*array.Int64)
		for i := range int(rec.NumRows()) {
			out[offs.Value(i)]++
		}
		rec.Release()
	}
	return out
}

// TestPlanRetention: the planner (planRetention) on hand-made logs. Each
// file is "minOff:ageMs:size"; a log's table end is the offset after its
// last file; the result lists, per log, the removed files' minOffs.
func TestPlanRetention(t *testing.T) {
	const now = 1_000_000
	type logSpec struct {
		files   []string // "minOff:age:size"
		end     int64
		floor   int64 // 0: none
		held    []int64
		unknown bool
	}
	for _, tc := range []struct {
		name     string
		logs     []logSpec
		r        Retention
		want     [][]int64
		wantHeld int
	}{
		{name: "time prefix", r: Retention{Ms: 100},
			logs: []logSpec{{files: []string{"0:500:10", "10:300:10", "20:50:10", "30:400:10"}, end: 40}},
			want: [][]int64{{0, 10}}},
		{name: "time held by a subscription", r: Retention{Ms: 100},
			logs: []logSpec{{files: []string{"0:500:10", "10:300:10", "20:200:10"}, end: 30, floor: 15}},
			want: [][]int64{{0}}, wantHeld: 2},
		{name: "time held by a claim", r: Retention{Ms: 100},
			logs: []logSpec{{files: []string{"0:500:10", "10:300:10"}, end: 20, held: []int64{0}}},
			want: [][]int64{nil}, wantHeld: 2},
		{name: "time may empty a table", r: Retention{Ms: 100},
			logs: []logSpec{{files: []string{"0:500:10", "10:300:10"}, end: 20}},
			want: [][]int64{{0, 10}}},
		{name: "size oldest first across logs, never the newest", r: Retention{Bytes: 1},
			logs: []logSpec{
				{files: []string{"0:500:10", "10:200:10", "20:10:10"}, end: 30},
				{files: []string{"0:400:10", "10:100:10"}, end: 20},
			},
			want: [][]int64{{0, 10}, {0, 10}}},
		{name: "size stops when it fits", r: Retention{Bytes: 25},
			logs: []logSpec{
				{files: []string{"0:500:10", "10:200:10", "20:10:10"}, end: 30},
				{files: []string{"0:400:10", "10:100:10"}, end: 20},
			},
			want: [][]int64{{0, 10}, {0}}},
		{name: "size after time", r: Retention{Ms: 450, Bytes: 20},
			logs: []logSpec{{files: []string{"0:500:10", "10:300:10", "20:200:10", "30:10:10"}, end: 40}},
			want: [][]int64{{0, 10}}},
		{name: "size held by a subscription skips that log", r: Retention{Bytes: 10},
			logs: []logSpec{
				{files: []string{"0:500:10", "10:200:10"}, end: 20, floor: 5},
				{files: []string{"0:400:10", "10:100:10"}, end: 20},
			},
			want: [][]int64{nil, {0}}, wantHeld: 1},
		{name: "unknown stats leave the log alone", r: Retention{Ms: 1},
			logs: []logSpec{{files: []string{"0:500:10"}, end: 10, unknown: true}},
			want: [][]int64{nil}},
		{name: "no claim: the last file's end is unknown", r: Retention{Ms: 1},
			logs: []logSpec{{files: []string{"0:500:10", "10:400:10"}, end: -1, floor: 1 << 40}},
			want: [][]int64{{0}}, wantHeld: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lgs []*retLog
			var total int64
			for i, ls := range tc.logs {
				lg := &retLog{id: lakestream.LogID(i), floor: math.MaxInt64, end: ls.end, unknown: ls.unknown, held: map[string]bool{}}
				if ls.floor > 0 {
					lg.floor = ls.floor
				}
				for _, s := range ls.files {
					var off, age, size int64
					if _, err := fmt.Sscanf(s, "%d:%d:%d", &off, &age, &size); err != nil {
						t.Fatal(err)
					}
					f := &retFile{path: fmt.Sprintf("%d/%d", i, off), size: size, minOff: off, maxPubMs: now - age, known: true}
					if slices.Contains(ls.held, off) {
						lg.held[f.path] = true
					}
					lg.files = append(lg.files, f)
					total += size
				}
				lgs = append(lgs, lg)
			}
			held := planRetention(lgs, now, tc.r, total)
			for i, lg := range lgs {
				var got []int64
				for _, f := range lg.files {
					if f.remove {
						got = append(got, f.minOff)
					}
				}
				if !slices.Equal(got, tc.want[i]) {
					t.Errorf("log %d: removed %v, want %v", i, got, tc.want[i])
				}
			}
			if held != tc.wantHeld {
				t.Errorf("held %d, want %d", held, tc.wantHeld)
			}
		})
	}
}

// TestTableRetentionPartitions: two partitions (logs 5 and 6) of one table
// in both formats. By size, a durable subscription on partition 1 that
// acknowledged nothing holds all its files while partition 0 loses its
// oldest; once it is gone, only the table's newest file stays: partition
// 0's log is trimmed to its head, partition 1's to that file.
func TestTableRetentionPartitions(t *testing.T) {
	env := newIcebergEnv(t)
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e := env.engine(t, env.opts(clk))
	ctx := ctxT(t)
	logs := []lakestream.LogID{5, 6}
	tg := metricsBoth
	r := rand.New(rand.NewPCG(31, 32))
	t0 := clk.now().UnixMilli()
	for i, age := range []time.Duration{4 * time.Hour, 3 * time.Hour, 2 * time.Hour, time.Hour} {
		p := i % 2
		appendPulsar(t, e, logs[p], r, 16, t0-age.Milliseconds())
		clk.advance(time.Minute)
		ptg := tg
		ptg.Partition = int32(p)
		compactAllTo(t, e, logs[p], ptg)
	}
	ends := make([]int64, 2)
	for p, id := range logs {
		all := readAll(t, e, id)
		ends[p] = all[len(all)-1].End()
	}
	counts := func() [2]int64 {
		var n [2]int64
		for part, offs := range tablePartitionOffsets(t, env, tg) {
			n[part] = int64(len(offs))
		}
		return n
	}
	if got := counts(); got != [2]int64{ends[0], ends[1]} {
		t.Fatalf("table rows by partition %v, want %v", got, ends)
	}
	lg, err := e.Log(ctx, logs[1])
	if err != nil {
		t.Fatal(err)
	}
	sub, err := lg.OpenCursor(ctx, "sub", -1)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.tables.ApplyRetention(ctx, tg, logs, Retention{Bytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	first1, err := e.FirstOffset(ctx, logs[1])
	if err != nil {
		t.Fatal(err)
	}
	if st.Files == 0 || st.Held == 0 || st.Trimmed[logs[0]] == 0 || first1 != 0 || counts()[1] != ends[1] || counts()[0] == ends[0] {
		t.Fatalf("with partition 1 held: %+v, partition 1 first %d, rows %v", st, first1, counts())
	}
	sub.Close(ctx)
	if err := lg.DeleteCursor(ctx, "sub"); err != nil {
		t.Fatal(err)
	}
	// A run that "crashes" after its Delta commit: the Iceberg table and
	// the log still have the files; the next run removes them from Iceberg
	// and trims.
	crashOpts := env.opts(clk)
	crashOpts.hooks.retentionStep = func(step string) error {
		if step == "delta" {
			return errors.New("injected crash after delta")
		}
		return nil
	}
	if _, err := env.engine(t, crashOpts).tables.ApplyRetention(ctx, tg, logs, Retention{Bytes: 1}); err == nil {
		t.Fatal("no crash")
	}
	if f, err := e.FirstOffset(ctx, logs[1]); err != nil || f != 0 {
		t.Fatalf("after the crash partition 1 starts at %d, %v", f, err)
	}
	st, err = e.tables.ApplyRetention(ctx, tg, logs, Retention{Bytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	left, _, err := e.tables.retentionFiles(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].part != 1 || st.Files == 0 || st.Trimmed[logs[1]] != left[0].minOff { // Files: those Iceberg still had
		t.Fatalf("after: %+v, %d files left", st, len(left))
	}
	if got := counts(); got != [2]int64{0, ends[1] - left[0].minOff} {
		t.Fatalf("table rows by partition %v", got)
	}
	for p, id := range logs {
		cold := env.engine(t, Options{Logger: quietLogger})
		want := ends[0]
		if p == 1 {
			want = left[0].minOff
		}
		if f, err := cold.FirstOffset(ctx, id); err != nil || f != want {
			t.Fatalf("partition %d: first %d, %v; want %d", p, f, err, want)
		}
	}
}

// tablePartitionOffsets reads both tables and returns, per partition, the
// offsets they hold; it fails the test unless they hold the same rows,
// each once.
func tablePartitionOffsets(t *testing.T, env icebergEnv, tg Target) map[int32]map[int64]bool {
	t.Helper()
	ctx := ctxT(t)
	out := map[int32]map[int64]bool{}
	tbl, err := delta.Open(ctx, env.store, tg.Root)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range snap.Files {
		b, err := env.store.Get(ctx, tg.Root+"/"+f.Path)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := lakehouse.ReadParquet(ctx, bytes.NewReader(b), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rows {
			if out[m.Partition] == nil {
				out[m.Partition] = map[int64]bool{}
			}
			if out[m.Partition][m.Offset] {
				t.Fatalf("partition %d offset %d twice in Delta", m.Partition, m.Offset)
			}
			out[m.Partition][m.Offset] = true
		}
	}
	cat, err := iceberg.Open(ctx, env.catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	it, err := cat.Catalog().LoadTable(ctx, table.Identifier(tg.Ident))
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := it.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		offs := rec.Column(rec.Schema().FieldIndices(lakehouse.ColOffset)[0]).(*array.Int64)
		parts := rec.Column(rec.Schema().FieldIndices(lakehouse.ColPartition)[0]).(*array.Int32)
		for i := range int(rec.NumRows()) {
			if !out[parts.Value(i)][offs.Value(i)] {
				t.Fatalf("Iceberg row %d/%d not in Delta", parts.Value(i), offs.Value(i))
			}
			n++
		}
		rec.Release()
	}
	total := 0
	for _, m := range out {
		total += len(m)
	}
	if n != total {
		t.Fatalf("Iceberg has %d rows, Delta %d", n, total)
	}
	return out
}

// TestTableRetentionMissingTable: a table the target names does not exist
// (here the Iceberg one: the log was compacted into Delta only), so what
// the tables hold says nothing about what retention removed: nothing is
// removed and no log is trimmed until it exists.
func TestTableRetentionMissingTable(t *testing.T) {
	env := newIcebergEnv(t)
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e := env.engine(t, env.opts(clk))
	const id = 9
	deltaOnly := metricsBoth
	deltaOnly.Iceberg = false
	r := rand.New(rand.NewPCG(41, 42))
	for _, age := range []time.Duration{2 * time.Hour, time.Hour} {
		appendPulsar(t, e, id, r, 16, clk.now().UnixMilli()-age.Milliseconds())
		clk.advance(time.Minute)
		compactAllTo(t, e, id, deltaOnly)
	}
	st, err := e.tables.ApplyRetention(ctxT(t), metricsBoth, []lakestream.LogID{id}, Retention{Bytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := e.FirstOffset(ctxT(t), id); err != nil || first != 0 || st.Files != 0 || st.Trimmed != nil {
		t.Fatalf("%+v, first %d, %v; want nothing done", st, first, err)
	}
	// With the target's formats as compacted, the same policy applies.
	st, err = e.tables.ApplyRetention(ctxT(t), deltaOnly, []lakestream.LogID{id}, Retention{Bytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := e.FirstOffset(ctxT(t), id); err != nil || first == 0 || st.Files == 0 || st.Trimmed[id] != first {
		t.Fatalf("%+v, first %d, %v; want files removed and a trim", st, first, err)
	}
}

package tables

// Table maintenance (docs/compaction.md, "Maintenance"): a log compacted
// in many small ranges, maintained as the job runner does, keeps bounded
// tables — Iceberg snapshots and manifest files, Delta log files — with
// every row still in both tables exactly once and every offset readable.
// Run: go test -count=1 -run Maintain ./tables/

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/objstore"
)

func TestMaintainBoundsTables(t *testing.T) {
	env := newIcebergEnv(t)
	ctx := ctxT(t)
	clk := &testClock{t: time.Now()}
	opts := env.opts(clk)
	opts.CompactMaxBytes = 2 << 10 // many small ranges
	opts.SnapshotRetention = time.Millisecond
	opts.SnapshotsRetainLast = 3
	opts.DeltaLogRetention = time.Millisecond
	e := env.engine(t, opts)
	const id = 9
	r := rand.New(rand.NewPCG(5, 6))
	day := time.Now().UnixMilli()
	var ranges, expired, deltaDeleted int
	for round := range 6 {
		appendPulsar(t, e, id, r, 12, day+int64(round))
		clk.advance(time.Minute)
		ranges += compactAllTo(t, e, id, ordersBoth)
		ms, err := e.tables.Maintain(ctx, ordersBoth)
		if err != nil {
			t.Fatal(err)
		}
		expired += ms.SnapshotsExpired
		deltaDeleted += ms.DeltaCommitsDeleted
		if ms.SnapshotsKept > opts.SnapshotsRetainLast {
			t.Fatalf("round %d: %d snapshots kept, want ≤ %d", round, ms.SnapshotsKept, opts.SnapshotsRetainLast)
		}
	}
	want := readAll(t, e, id)
	end := want[len(want)-1].End()
	if ranges < 20 {
		t.Fatalf("%d ranges: want many small ones", ranges)
	}

	// Both tables still hold every row once; reads from a cold engine
	// are unchanged.
	checkTable(t, env.store, ordersBoth.Root, end)
	rows := deltaRows(t, env.store, ordersBoth.Root)
	checkIceberg(t, env, ordersBoth.Ident, end, rows)
	sameEntries(t, readAll(t, env.engine(t, Options{Logger: quietLogger}), id), want)

	// Bounded: Delta keeps the newest checkpoint and the commits after it
	// (< 10); Iceberg keeps 3 snapshots and only their manifest lists.
	counts := map[string]int{}
	err := env.store.List(ctx, ordersBoth.Root+"/", func(oi objstore.ObjectInfo) error {
		rel := strings.TrimPrefix(oi.Key, ordersBoth.Root+"/")
		switch {
		case strings.HasPrefix(rel, "_delta_log/") && strings.HasSuffix(rel, ".json"):
			counts["delta commits"]++
		case strings.HasSuffix(rel, ".checkpoint.parquet"):
			counts["delta checkpoints"]++
		case strings.HasPrefix(rel, "metadata/snap-"):
			counts["manifest lists"]++
		case strings.HasPrefix(rel, "metadata/") && strings.HasSuffix(rel, ".avro"):
			counts["manifests"]++
		case strings.HasPrefix(rel, "data/"):
			counts["data files"]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts["delta commits"] > 10 || counts["delta checkpoints"] != 1 {
		t.Fatalf("delta log not bounded: %v", counts)
	}
	cat, err := iceberg.Open(ctx, env.catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.Catalog().LoadTable(ctx, table.Identifier(ordersBoth.Ident))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		ms, err := s.Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			referenced[m.FilePath()] = true
		}
	}
	cur, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) > 16+1 || counts["manifests"] != len(referenced) {
		t.Fatalf("current snapshot has %d manifests (rewritten beyond 16?); %d on disk, %d referenced (%v)", len(cur), counts["manifests"], len(referenced), counts)
	}
	if n := len(tbl.Metadata().Snapshots()); n != 3 || counts["manifest lists"] != 3 {
		t.Fatalf("%d snapshots, %d manifest lists on disk; want 3 and 3 (%v)", n, counts["manifest lists"], counts)
	}
	if counts["data files"] != ranges {
		t.Fatalf("%d data files for %d ranges: maintenance must not delete data", counts["data files"], ranges)
	}
	t.Logf("%d ranges: %d snapshots expired, %d delta commits deleted; left %v", ranges, expired, deltaDeleted, counts)

	// Idempotent: again, nothing to do, nothing breaks.
	ms, err := e.tables.Maintain(ctx, ordersBoth)
	if err != nil || ms.SnapshotsExpired != 0 || ms.DeltaCommitsDeleted != 0 {
		t.Fatalf("second maintenance: %+v, %v", ms, err)
	}
	_ = filepath.Join
}

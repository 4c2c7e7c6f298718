package delta

// Interop with delta-rs (the `deltalake` Python package): lakegate writes a
// table on file:// and delta-rs must read it. Needs a python with deltalake:
//
//	LAKEGATE_PYTHON=$(e2e/interop/delta/setup.sh | tail -1) go test -p 1 -run DeltaRS ./lakehouse/delta/
//
// Without LAKEGATE_PYTHON the test is skipped (a skip is not a pass).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/objstore"
)

func TestDeltaRSReadsOurTable(t *testing.T) {
	python := os.Getenv("LAKEGATE_PYTHON")
	if python == "" {
		t.Skip("LAKEGATE_PYTHON not set: delta-rs interop not checked (run e2e/interop/delta/setup.sh and set LAKEGATE_PYTHON to the python it prints)")
	}
	script, err := filepath.Abs("../../e2e/interop/delta/check_table.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store, err := objstore.Open(ctxT(t), "file://"+dir+"?fsync=false")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// 12 commits of 10 rows each after the create (checkpoint at 10); the
	// schema gains a nullable column "extra" at version 11.
	const root = "tables/public/default/orders"
	tb := mustOpen(t, store, root)
	mustCreate(t, tb)
	evolved := Schema{Fields: append(append([]Field{}, testSchema.Fields...), Field{Name: "extra", Type: Primitive(TypeString), Nullable: true})}
	for i := 1; i <= 12; i++ {
		req := CommitRequest{AppID: "log-0", TxnVersion: int64(i * 10)}
		extra := i >= 11
		if i == 11 {
			req.NewSchema = &evolved
		}
		part := []string{"a", "b b"}[i%2] // a partition value with a space
		req.Adds = []AddFile{putDataFile(t, store, root, part, fmt.Sprintf("part-%05d", i), int64(i*100), 10, extra)}
		mustCommit(t, tb, req)
	}
	if _, err := os.Stat(filepath.Join(dir, root, "_delta_log", fmt.Sprintf("%020d.checkpoint.parquet", 10))); err != nil {
		t.Fatal(err)
	}
	tableDir := filepath.Join(dir, root)
	run := func(t *testing.T, tableDir string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), python, append([]string{script, tableDir}, args...)...)
		out, err := cmd.CombinedOutput()
		t.Logf("delta-rs: %s", strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("check_table.py %v: %v", args, err)
		}
	}
	checks := []string{"120", "12", "--unique", "id", "--nulls", "extra=100", "--columns", "id,name,ts,part,extra"}
	t.Run("full log", func(t *testing.T) { run(t, tableDir, checks...) })

	// The same table with commits 0..10 gone (as after log cleanup): delta-rs
	// must build the state from our checkpoint.
	t.Run("from checkpoint", func(t *testing.T) {
		cp := filepath.Join(t.TempDir(), "orders")
		if err := os.CopyFS(cp, os.DirFS(tableDir)); err != nil {
			t.Fatal(err)
		}
		for v := 0; v <= 10; v++ {
			if err := os.Remove(filepath.Join(cp, "_delta_log", fmt.Sprintf("%020d.json", v))); err != nil {
				t.Fatal(err)
			}
		}
		run(t, cp, checks...)
	})

	// delta-rs appends (commit 13) and writes its own checkpoint; our reader
	// replays it and our writer commits on top (14); delta-rs reads it all.
	t.Run("delta-rs appends, we read and append", func(t *testing.T) {
		appendScript := filepath.Join(filepath.Dir(script), "append_deltars.py")
		out, err := exec.CommandContext(t.Context(), python, appendScript, tableDir, "5000", "7", "a").CombinedOutput()
		t.Logf("delta-rs append: %s", strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		s := mustSnapshot(t, mustOpen(t, store, root))
		if n, ok := s.NumRecords(); s.Version != 13 || s.CheckpointVersion != 13 || len(s.Files) != 13 || !ok || n != 127 {
			t.Fatalf("after delta-rs append: version %d checkpoint %d files %d records %d/%v",
				s.Version, s.CheckpointVersion, len(s.Files), n, ok)
		}
		if s.Txns["log-0"] != 120 || s.Schema.JSON() != evolved.JSON() {
			t.Fatalf("txns %v schema %s", s.Txns, s.Schema.JSON())
		}
		tb2 := mustOpen(t, store, root)
		if _, skipped, err := tb2.Commit(t.Context(), CommitRequest{AppID: "log-0", TxnVersion: 120}); err != nil || !skipped {
			t.Fatalf("replayed txn after delta-rs checkpoint: skipped=%v err=%v", skipped, err)
		}
		add := putDataFile(t, store, root, "a", "part-00014", 6000, 10, true)
		if v := mustCommit(t, tb2, CommitRequest{AppID: "log-0", TxnVersion: 130, Adds: []AddFile{add}}); v != 14 {
			t.Fatalf("version %d", v)
		}
		run(t, tableDir, "137", "14", "--unique", "id", "--nulls", "extra=100")
	})
}

package delta

// Interop with Apache Spark 3.5 + delta-spark (the local stand-in for
// Databricks): lakegate writes a table on file:// and Spark must read it —
// from the full log, from the JSON commits alone and from our checkpoint
// alone. Needs a python with pyspark
// and the Delta jars (both made by e2e/interop/spark/setup.sh):
//
//	e2e/interop/spark/run.sh
//	# or by hand:
//	LAKEGATE_SPARK_PYTHON=.cache/venv-spark/bin/python \
//	LAKEGATE_SPARK_JARS=.cache/jars/delta-spark_2.12-3.3.2.jar,.cache/jars/delta-storage-3.3.2.jar \
//	  go test -p 1 -run TestSparkReadsOurTable -v ./lakehouse/delta/
//
// Without both variables the test is skipped (a skip is not a pass). Each
// check starts a JVM (5-20 s) and runs ~10 queries (30-90 s on a busy 2-core
// machine): the whole test takes ~2-4 min.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/objstore"
)

// sparkCheck is the JSON line printed by check_delta.py.
type sparkCheck struct {
	Spark             string            `json:"spark"`
	Version           int64             `json:"version"`
	History           [][]any           `json:"history"`
	Rows              int64             `json:"rows"`
	Files             int64             `json:"files"`
	Columns           []string          `json:"columns"`
	Schema            string            `json:"schema"`
	PartitionColumns  []string          `json:"partition_columns"`
	Protocol          []int             `json:"protocol"`
	CheckpointVersion json.RawMessage   `json:"checkpoint_version"`
	FilesRead         map[string]*int64 `json:"files_read"`
	Problems          []string          `json:"problems"`
	Error             string            `json:"error"`
}

func TestSparkReadsOurTable(t *testing.T) {
	python, jars := os.Getenv("LAKEGATE_SPARK_PYTHON"), os.Getenv("LAKEGATE_SPARK_JARS")
	if python == "" || jars == "" {
		t.Skip("LAKEGATE_SPARK_PYTHON and LAKEGATE_SPARK_JARS not set: Spark/delta-spark interop not checked (run e2e/interop/spark/run.sh)")
	}
	script, err := filepath.Abs("../../e2e/interop/spark/check_delta.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store, err := objstore.Open(ctxT(t), "file://"+dir+"?fsync=false")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// As in TestDeltaRSReadsOurTable: 12 commits of 10 rows each after the
	// create (checkpoint at 10); the schema gains a nullable column "extra" at
	// version 11. File i holds ids i*100 … i*100+9 in partition "a" (i even) or
	// "b b" (i odd, a value with a space: URI-encoded path).
	const root = "tables/public/default/orders"
	tb := mustOpen(t, store, root)
	mustCreate(t, tb)
	evolved := Schema{Fields: append(append([]Field{}, testSchema.Fields...), Field{Name: "extra", Type: Primitive(TypeString), Nullable: true})}
	for i := 1; i <= 12; i++ {
		req := CommitRequest{AppID: "log-0", TxnVersion: int64(i * 10)}
		if i == 11 {
			req.NewSchema = &evolved
		}
		part := []string{"a", "b b"}[i%2]
		req.Adds = []AddFile{putDataFile(t, store, root, part, fmt.Sprintf("part-%05d", i), int64(i*100), 10, i >= 11)}
		mustCommit(t, tb, req)
	}
	if _, err := os.Stat(filepath.Join(dir, root, "_delta_log", fmt.Sprintf("%020d.checkpoint.parquet", 10))); err != nil {
		t.Fatal(err)
	}
	tableDir := filepath.Join(dir, root)

	// run checks every table dir with the same checks in one Spark session
	// (check_delta.py, tables separated by "++"): one result per dir.
	run := func(t *testing.T, dirs []string, checks ...string) []sparkCheck {
		t.Helper()
		var args []string
		for i, d := range dirs {
			if i > 0 {
				args = append(args, "++")
			}
			args = append(append(args, d), checks...)
		}
		cmd := exec.CommandContext(t.Context(), python, append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "LAKEGATE_SPARK_JARS="+jars)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		out := strings.TrimSpace(stdout.String())
		t.Logf("spark: %s", out)
		if err != nil {
			t.Logf("spark stderr (tail):\n%s", sparkTail(stderr.String(), 4000))
			t.Fatalf("check_delta.py: %v", err)
		}
		lines := strings.Split(out, "\n")
		if len(lines) < len(dirs) {
			t.Fatalf("check_delta.py printed %d lines for %d tables", len(lines), len(dirs))
		}
		var cs []sparkCheck
		for _, line := range lines[len(lines)-len(dirs):] {
			var c sparkCheck
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatalf("check_delta.py output: %v", err)
			}
			cs = append(cs, c)
		}
		return cs
	}
	checks := []string{"120", "--version", "12", "--unique", "id", "--nulls", "extra=100",
		"--columns", "id,name,ts,part,extra",
		// Filters Delta answers with data skipping on our stats: each bound
		// must be a true bound (ts stats are ms: min truncated, max rounded up).
		"--where", "id >= 1100=20",
		"--where", "part = 'b b'=60",
		"--where", "ts = TIMESTAMP'2026-11-30 01:00:01.100001'=1",
		"--where", "ts > TIMESTAMP'2026-11-30 01:00:01.209'=1",
		"--where", "extra = 'x1205'=1",
	}
	// checkpoint: the version Spark's snapshot started from (-1: none).
	assert := func(t *testing.T, c sparkCheck, history int, checkpoint string) {
		t.Helper()
		if c.Rows != 120 || c.Version != 12 || c.Files != 12 || len(c.History) != history ||
			!slices.Equal(c.Columns, []string{"id", "name", "ts", "part", "extra"}) ||
			!slices.Equal(c.PartitionColumns, []string{"part"}) || !slices.Equal(c.Protocol, []int{1, 2}) {
			t.Fatalf("spark read %+v", c)
		}
		if string(c.CheckpointVersion) != checkpoint {
			t.Fatalf("spark used checkpoint %s, want %s", c.CheckpointVersion, checkpoint)
		}
		// Data skipping really used our stats (and partition values): each
		// filter read only the files that can hold matches.
		for expr, want := range map[string]int64{
			"id >= 1100": 2, "part = 'b b'": 6,
			"ts = TIMESTAMP'2026-11-30 01:00:01.100001'": 1, "ts > TIMESTAMP'2026-11-30 01:00:01.209'": 1,
		} {
			if got := c.FilesRead[expr]; got == nil || *got != want {
				t.Errorf("where %s: spark read %v files, want %d (data skipping on our stats)", expr, got, want)
			}
		}
	}
	copyTable := func(t *testing.T) string {
		t.Helper()
		cp := filepath.Join(t.TempDir(), "orders")
		if err := os.CopyFS(cp, os.DirFS(tableDir)); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	// Three forms of the table, read in one Spark session:
	//   - full log: with _last_checkpoint present Spark starts from our
	//     checkpoint at 10 and replays 11 and 12 (reading commits 0..12 only
	//     for the history);
	//   - json only: without the checkpoint Spark must replay our JSON
	//     commits 0..12;
	//   - from checkpoint: commits 0..10 gone (as after log cleanup), Spark
	//     must build the state from our checkpoint parquet.
	jsonOnly := copyTable(t)
	for _, name := range []string{fmt.Sprintf("%020d.checkpoint.parquet", 10), "_last_checkpoint"} {
		if err := os.Remove(filepath.Join(jsonOnly, "_delta_log", name)); err != nil {
			t.Fatal(err)
		}
	}
	fromCheckpoint := copyTable(t)
	for v := 0; v <= 10; v++ {
		if err := os.Remove(filepath.Join(fromCheckpoint, "_delta_log", fmt.Sprintf("%020d.json", v))); err != nil {
			t.Fatal(err)
		}
	}
	got := run(t, []string{tableDir, jsonOnly, fromCheckpoint}, checks...)
	t.Run("full log", func(t *testing.T) { assert(t, got[0], 13, "10") })
	t.Run("json only", func(t *testing.T) { assert(t, got[1], 13, "-1") })
	t.Run("from checkpoint", func(t *testing.T) { assert(t, got[2], 2, "10") })
}

func sparkTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

package tables

// The joint job (joint.go, docs/compaction.md "Transactions across
// partitions"): a transaction's records in several logs of one table
// enter the table in one Delta commit, whatever order the logs are
// materialized in and wherever a materialization crashes; every Delta
// version holds all of a transaction's records or none.
//
//	go test ./tables -run 'TestJoint' -v

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// jointLogIDs are the logs of the test table's partitions 0, 1, 2.
var jointLogIDs = []lakestream.LogID{21, 22, 23}

// jointRange is one log's records of one transaction: [from, end).
type jointRange struct{ from, end int64 }

// jointScenario appends to the three logs of a table: plain entries, a
// transaction over all three staged between plain appends, one over the
// first two, and plain entries after them. It returns the transactions'
// ranges per log (by the marks of their chunks) and every log's entries.
func jointScenario(t *testing.T, e testNode, clk *testClock) (txns map[int64]map[lakestream.LogID]jointRange, want map[lakestream.LogID][]lakestream.Entry) {
	t.Helper()
	ctx := ctxT(t)
	r := rand.New(rand.NewPCG(7, 8))
	pub := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixMilli()
	staged := func(id lakestream.LogID, set string, n int) {
		for i := range n {
			entry, records := pulsarEntry(t, r, tableCodecs[i%len(tableCodecs)], i%2 == 0, uint64(1000+i), pub)
			if _, err := e.Append(ctx, id, records, entry, lakestream.WithPublishTime(pub), lakestream.WithStage(set)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, id := range jointLogIDs {
		appendPulsar(t, e, id, r, 3+int(id%3), pub)
	}
	for _, id := range jointLogIDs {
		staged(id, "txn-a", 2)
		appendPulsar(t, e, id, r, 2, pub)
		staged(id, "txn-a", 1)
	}
	staged(jointLogIDs[0], "txn-b", 2)
	staged(jointLogIDs[1], "txn-b", 1)
	if err := e.CommitStaged(ctx, "txn-a"); err != nil {
		t.Fatal(err)
	}
	for _, id := range jointLogIDs {
		appendPulsar(t, e, id, r, 2, pub)
	}
	if err := e.CommitStaged(ctx, "txn-b"); err != nil {
		t.Fatal(err)
	}
	for _, id := range jointLogIDs {
		appendPulsar(t, e, id, r, 3, pub)
	}
	clk.advance(time.Minute)
	txns = map[int64]map[lakestream.LogID]jointRange{}
	want = map[lakestream.LogID][]lakestream.Entry{}
	for _, id := range jointLogIDs {
		cs, err := e.Chunks(ctx, id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Joint == nil {
				continue
			}
			if txns[c.Joint.Rev] == nil {
				txns[c.Joint.Rev] = map[lakestream.LogID]jointRange{}
			}
			jr, ok := txns[c.Joint.Rev][id]
			if !ok {
				jr.from = c.First
			}
			jr.end = c.End()
			txns[c.Joint.Rev][id] = jr
		}
		want[id] = readAll(t, e, id)
	}
	if len(txns) != 2 {
		t.Fatalf("%d marked transactions, want 2: %v", len(txns), txns)
	}
	return txns, want
}

// jointTarget is the test table's target over jointLogIDs (Delta).
func jointTarget(id lakestream.LogID) Target {
	tg := Target{Root: "tables/public/default/orders", Delta: true, Logs: jointLogIDs}
	for p, l := range jointLogIDs {
		if l == id {
			tg.Partition = int32(p)
		}
	}
	return tg
}

// deltaEnds returns, for every version of the Delta table at root, each
// log's recorded end (its lakegate-log-<id> txn), from the commit files.
func deltaEnds(t *testing.T, store objstore.Store, root string) []map[lakestream.LogID]int64 {
	t.Helper()
	ctx := ctxT(t)
	var out []map[lakestream.LogID]int64
	ends := map[lakestream.LogID]int64{}
	for v := 0; ; v++ {
		b, err := store.Get(ctx, fmt.Sprintf("%s/_delta_log/%020d.json", root, v))
		if errors.Is(err, objstore.ErrNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var a struct {
				Txn *struct {
					AppID   string `json:"appId"`
					Version int64  `json:"version"`
				} `json:"txn"`
			}
			if err := json.Unmarshal(line, &a); err != nil {
				t.Fatal(err)
			}
			if a.Txn == nil {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimPrefix(a.Txn.AppID, "lakegate-log-"), 10, 64)
			if err != nil {
				t.Fatalf("txn app id %q", a.Txn.AppID)
			}
			ends[lakestream.LogID(n)] = a.Txn.Version
		}
		snap := map[lakestream.LogID]int64{}
		for k, v := range ends {
			snap[k] = v
		}
		out = append(out, snap)
	}
}

// checkAllOrNone checks that every Delta version holds each transaction's
// records of all its logs or of none (a log's files hold [0, its end)).
func checkAllOrNone(t *testing.T, store objstore.Store, txns map[int64]map[lakestream.LogID]jointRange) {
	t.Helper()
	for v, ends := range deltaEnds(t, store, jointTarget(0).Root) {
		for rev, logs := range txns {
			all, none := true, true
			for id, jr := range logs {
				all = all && ends[id] >= jr.end
				none = none && ends[id] <= jr.from
			}
			if !all && !none {
				t.Fatalf("Delta version %d holds part of transaction %d: ends %v, its ranges %v", v, rev, ends, logs)
			}
		}
	}
}

// jointTargetIceberg is jointTarget with Iceberg too.
func jointTargetIceberg(id lakestream.LogID) Target {
	tg := jointTarget(id)
	tg.Iceberg, tg.Ident = true, []string{"public", "default", "orders"}
	return tg
}

// drainJoint materializes the logs in order, each until it has nothing
// eligible, over and over until none moves; conflicts are retried.
func drainJoint(t *testing.T, e testNode, order []lakestream.LogID) {
	t.Helper()
	drainJointTo(t, e, order, jointTarget)
}

// drainJointTo is drainJoint with the targets of tgOf.
func drainJointTo(t *testing.T, e testNode, order []lakestream.LogID, tgOf func(lakestream.LogID) Target) {
	t.Helper()
	for round := 0; ; round++ {
		if round > 50 {
			t.Fatal("materialization does not settle")
		}
		moved := false
		for _, id := range order {
			for {
				st, err := e.Materialize(ctxT(t), id, tgOf(id))
				if errors.Is(err, engine.ErrNothingToCompact) || errors.Is(err, lakestream.ErrConflict) {
					break
				}
				if err != nil {
					t.Fatalf("log %d: %v", id, err)
				}
				moved = moved || st.Records > 0
			}
		}
		if !moved {
			return
		}
	}
}

// checkJointDone checks the table holds every log whole (its ends, its
// rows' count), no WAL chunk is left, and reads are unchanged.
func checkJointDone(t *testing.T, env *testEnv, e testNode, want map[lakestream.LogID][]lakestream.Entry) {
	t.Helper()
	vs := deltaEnds(t, env.store, jointTarget(0).Root)
	last := vs[len(vs)-1]
	for _, id := range jointLogIDs {
		end := want[id][len(want[id])-1].End()
		if last[id] != end {
			t.Fatalf("log %d: table end %d, want %d", id, last[id], end)
		}
		cs, err := e.Chunks(ctxT(t), id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Kind != index.KindParquet {
				t.Fatalf("log %d: WAL chunk %d..%d left", id, c.First, c.Last())
			}
		}
		sameEntries(t, readAll(t, env.engine(t, Options{Logger: quietLogger}), id), want[id])
	}
}

// TestJointEveryOrder: in every order of the three logs, materializing
// each until it stops leaves every Delta version all-or-none for both
// transactions, and the whole table at the end.
func TestJointEveryOrder(t *testing.T) {
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, o := range orders {
		order := []lakestream.LogID{jointLogIDs[o[0]], jointLogIDs[o[1]], jointLogIDs[o[2]]}
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			env := newMemEnv(t)
			clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
			e := env.engine(t, Options{Now: clk.now, Logger: quietLogger})
			txns, want := jointScenario(t, e, clk)
			drainJoint(t, e, order)
			checkAllOrNone(t, env.store, txns)
			checkJointDone(t, env, e, want)
		})
	}
}

// TestJointOneByOne: one call at a time, round-robin in each order: a log
// that reached a transaction waits (ErrNothingToCompact) until the last
// of its siblings gets there, which commits them all.
func TestJointOneByOne(t *testing.T) {
	for _, first := range jointLogIDs {
		t.Run(fmt.Sprint(first), func(t *testing.T) {
			env := newMemEnv(t)
			clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
			e := env.engine(t, Options{Now: clk.now, Logger: quietLogger})
			txns, want := jointScenario(t, e, clk)
			order := []lakestream.LogID{first}
			for _, id := range jointLogIDs {
				if id != first {
					order = append(order, id)
				}
			}
			for idle := 0; idle < len(order); {
				idle = 0
				for _, id := range order {
					st, err := e.Materialize(ctxT(t), id, jointTarget(id))
					switch {
					case errors.Is(err, engine.ErrNothingToCompact) || errors.Is(err, errCaughtUp):
						idle++
					case err != nil:
						t.Fatalf("log %d: %v", id, err)
					case st.Records == 0:
						idle++
					}
				}
			}
			checkAllOrNone(t, env.store, txns)
			checkJointDone(t, env, e, want)
		})
	}
}

// TestJointCrash: the joint job crashes after each of its steps; a
// restarted node resumes it, and every Delta version is all-or-none, the
// table whole at the end.
func TestJointCrash(t *testing.T) {
	for _, step := range []string{"put", "claim", "commit", "iceberg", "replace", "cursor"} {
		t.Run(step, func(t *testing.T) {
			env := newMemEnv(t)
			clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
			var armed atomic.Bool
			var crashed atomic.Bool
			opts := Options{Now: clk.now, Logger: quietLogger}
			opts.hooks.materializeStep = func(_ int64, s string) error {
				if s == step && armed.Load() && !crashed.Swap(true) {
					return errors.New("injected crash after " + s)
				}
				return nil
			}
			e := env.engine(t, opts)
			txns, want := jointScenario(t, e, clk)
			// The first two logs up to the first transaction (they wait
			// there), the last one's range before it (one call).
			for _, id := range jointLogIDs[:2] {
				for {
					st, err := e.Materialize(ctxT(t), id, jointTarget(id))
					if err != nil || st.Records == 0 {
						break
					}
				}
			}
			if st, err := e.Materialize(ctxT(t), jointLogIDs[2], jointTarget(jointLogIDs[2])); err != nil || st.Records == 0 {
				t.Fatalf("log %d: %+v %v", jointLogIDs[2], st, err)
			}
			// The last log's next call runs the joint job: crash it.
			armed.Store(true)
			if _, err := e.Materialize(ctxT(t), jointLogIDs[2], jointTarget(jointLogIDs[2])); err == nil || !crashed.Load() {
				t.Fatalf("no crash after %s: %v", step, err)
			}
			checkAllOrNone(t, env.store, txns)
			// A restarted node resumes, the logs in another order.
			e2 := env.engine(t, Options{Now: clk.now, Logger: quietLogger})
			drainJoint(t, e2, []lakestream.LogID{jointLogIDs[1], jointLogIDs[0], jointLogIDs[2]})
			checkAllOrNone(t, env.store, txns)
			checkJointDone(t, env, e2, want)
		})
	}
}

// TestJointWait: a log of the transaction that is never materialized
// stalls its siblings for JointWait only; then they take their chunks of
// it alone. Without Target.Logs, marks are ignored.
func TestJointWait(t *testing.T) {
	env := newMemEnv(t)
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e := env.engine(t, Options{Now: clk.now, Logger: quietLogger, JointWait: 10 * time.Minute})
	txns, want := jointScenario(t, e, clk)
	two := jointLogIDs[:2]
	drainJoint(t, e, two)
	for _, id := range two {
		cs, err := e.Chunks(ctxT(t), id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if c := cs[len(cs)-1]; c.Kind != index.KindWAL {
			t.Fatalf("log %d went past the transaction without its sibling", id)
		}
	}
	checkAllOrNone(t, env.store, txns)
	clk.advance(11 * time.Minute)
	drainJoint(t, e, two)
	vs := deltaEnds(t, env.store, jointTarget(0).Root)
	for _, id := range two {
		if end := want[id][len(want[id])-1].End(); vs[len(vs)-1][id] != end {
			t.Fatalf("log %d: table end %d after the wait, want %d", id, vs[len(vs)-1][id], end)
		}
	}
	// Without Logs: the third log alone, straight through.
	id := jointLogIDs[2]
	tg := jointTarget(id)
	tg.Logs = nil
	for {
		st, err := e.Materialize(ctxT(t), id, tg)
		if err != nil || st.Records == 0 {
			break
		}
	}
	vs = deltaEnds(t, env.store, jointTarget(0).Root)
	if end := want[id][len(want[id])-1].End(); vs[len(vs)-1][id] != end {
		t.Fatalf("log %d: table end %d, want %d", id, vs[len(vs)-1][id], end)
	}
}

// TestJointIceberg: with Delta and Iceberg, one Iceberg commit per Delta
// commit (the joint ones setting every log's end), every log's end
// recorded in both at the end — also when the first joint job stops
// between its Delta and its Iceberg commit (resumed by the next call).
func TestJointIceberg(t *testing.T) {
	env := newIcebergEnv(t)
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	opts := env.opts(clk)
	opts.CompactMaxBytes = 0 // the default
	var e testNode
	var crashed atomic.Bool
	opts.hooks.materializeStep = func(id int64, s string) error {
		if s != "commit" || crashed.Load() {
			return nil
		}
		kv, _, err := env.meta.Get(ctxT(t), e.tables.claimKey(lakestream.LogID(id)))
		if err != nil || !bytes.Contains(kv.Value, []byte(`"joint"`)) {
			return err
		}
		crashed.Store(true)
		return fmt.Errorf("%w: injected crash after the joint Delta commit", lakestream.ErrConflict)
	}
	e = env.engine(t, opts)
	txns, want := jointScenario(t, e, clk)
	drainJointTo(t, e, []lakestream.LogID{jointLogIDs[2], jointLogIDs[0], jointLogIDs[1]}, jointTargetIceberg)
	if !crashed.Load() {
		t.Fatal("no joint job crashed")
	}
	checkAllOrNone(t, env.store, txns)
	checkJointDone(t, env.testEnv, e, want)
	ctx := ctxT(t)
	cat, err := iceberg.Open(ctx, env.catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	ident := jointTargetIceberg(0).Ident
	for _, id := range jointLogIDs {
		if got, err := cat.RecordedEnd(ctx, ident, int64(id)); err != nil || got != want[id][len(want[id])-1].End() {
			t.Fatalf("iceberg end of log %d: %d, %v", id, got, err)
		}
	}
	tbl, err := cat.Catalog().LoadTable(ctx, table.Identifier(ident))
	if err != nil {
		t.Fatal(err)
	}
	// Delta version 0 creates the table (no files); every later version
	// has its Iceberg snapshot.
	if n, dv := len(tbl.Metadata().Snapshots()), len(deltaEnds(t, env.store, jointTarget(0).Root)); n != dv-1 {
		t.Fatalf("%d Iceberg snapshots, %d Delta versions", n, dv)
	}
}

// TestJointTooLarge: when the joint job's claims do not fit one metadata
// transaction (MaxTxnOps 5: three compares, three puts and the previous
// claims' leftover intents), the logs give up on it and take their
// chunks of the transaction alone: every log ends whole in the table.
func TestJointTooLarge(t *testing.T) {
	st, err := objstore.Open(ctxT(t), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{MaxTxnOps: 5})
	t.Cleanup(func() { st.Close(); ms.Close() })
	env := &testEnv{meta: ms, store: st}
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	var logs lockedBuffer
	e := env.engine(t, Options{Now: clk.now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := ctxT(t)
	r := rand.New(rand.NewPCG(3, 4))
	pub := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixMilli()
	for _, id := range jointLogIDs {
		appendPulsar(t, e, id, r, 1, pub)
		entry, records := pulsarEntry(t, r, tableCodecs[0], false, 7, pub)
		if _, err := e.Append(ctx, id, records, entry, lakestream.WithPublishTime(pub), lakestream.WithStage("t")); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.CommitStaged(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	want := map[lakestream.LogID][]lakestream.Entry{}
	for _, id := range jointLogIDs {
		appendPulsar(t, e, id, r, 1, pub)
		want[id] = readAll(t, e, id)
	}
	clk.advance(time.Minute)
	drainJoint(t, e, jointLogIDs)
	checkJointDone(t, env, e, want)
	if !strings.Contains(logs.String(), "the claims do not fit one metadata transaction") {
		t.Fatalf("no joint job gave up:\n%s", logs.String())
	}
}

// lockedBuffer is a bytes.Buffer for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestJointDeltaRS reads every Delta version with delta-rs
// (e2e/interop/delta/versions_all_or_none.py): each holds each
// transaction's rows of all its partitions or none, counted row by row,
// and the last holds them all. Skipped without LAKEGATE_PYTHON (a skip is
// not a pass: `make interop` runs it, e2e/interop/delta/run.sh):
//
//	LAKEGATE_PYTHON=$(e2e/interop/delta/setup.sh | tail -1) go test -p 1 -run TestJointDeltaRS ./tables/
func TestJointDeltaRS(t *testing.T) {
	python := os.Getenv("LAKEGATE_PYTHON")
	if python == "" {
		t.Skip("LAKEGATE_PYTHON not set: delta-rs interop not checked")
	}
	script, err := filepath.Abs("../e2e/interop/delta/versions_all_or_none.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store, err := objstore.Open(ctxT(t), "file://"+dir+"?fsync=false")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	env := newMemEnv(t)
	env.store = store
	clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e := env.engine(t, Options{Now: clk.now, Logger: quietLogger})
	txns, want := jointScenario(t, e, clk)
	// The last partition first: the others' plain records before the
	// transactions enter the table in versions of their own.
	drainJoint(t, e, []lakestream.LogID{jointLogIDs[2], jointLogIDs[1], jointLogIDs[0]})
	checkJointDone(t, env, e, want)
	spec := map[string]map[string][2]int64{}
	for rev, logs := range txns {
		parts := map[string][2]int64{}
		for id, jr := range logs {
			parts[strconv.Itoa(int(jointTarget(id).Partition))] = [2]int64{jr.from, jr.end}
		}
		spec[strconv.FormatInt(rev, 10)] = parts
	}
	arg, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), python, script, filepath.Join(dir, jointTarget(0).Root), string(arg)).CombinedOutput()
	t.Logf("versions_all_or_none.py: %s", out)
	if err != nil {
		t.Fatalf("delta-rs: %v", err)
	}
	if n := bytes.Count(out, []byte(`"version"`)); n < 3 {
		t.Fatalf("delta-rs read %d versions, want the plain ones and the joint one", n)
	}
}

package delta

// Tests of the log writer and reader. Run: go test -p 1 ./lakehouse/delta/
// The delta-rs interop test (deltars_test.go) needs LAKEGATE_PYTHON.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/objstore"
)

const root = "tables/public/default/orders"

func TestCreateCommitReplay(t *testing.T) {
	for _, kind := range []string{"mem", "file"} {
		t.Run(kind, func(t *testing.T) {
			store := openStore(t, kind)
			tb := mustOpen(t, store, root)
			if _, err := tb.Snapshot(ctxT(t)); !errors.Is(err, ErrNoTable) {
				t.Fatalf("snapshot of missing table: %v, want ErrNoTable", err)
			}
			mustCreate(t, tb)
			var want []AddFile
			for i := range 3 {
				part := []string{"a", "b"}[i%2]
				add := putDataFile(t, store, root, part, fmt.Sprintf("f%d", i), int64(i*10), 10, false)
				want = append(want, add)
				if v := mustCommit(t, tb, CommitRequest{AppID: "log-1", TxnVersion: int64(i+1) * 10, Adds: []AddFile{add}}); v != int64(i+1) {
					t.Fatalf("commit %d got version %d", i, v)
				}
			}
			for _, fresh := range []bool{false, true} {
				r := tb
				if fresh {
					r = mustOpen(t, store, root)
				}
				s := mustSnapshot(t, r)
				if s.Version != 3 || len(s.Files) != 3 || s.Txns["log-1"] != 30 {
					t.Fatalf("fresh=%v: version %d files %d txns %v", fresh, s.Version, len(s.Files), s.Txns)
				}
				if s.Protocol.MinReaderVersion != 1 || s.Protocol.MinWriterVersion != 2 {
					t.Fatalf("protocol %+v", s.Protocol)
				}
				if !reflect.DeepEqual(s.Schema, testSchema) || !reflect.DeepEqual(s.Metadata.PartitionColumns, []string{"part"}) ||
					s.Metadata.Configuration["delta.appendOnly"] != "true" || s.Metadata.Format.Provider != "parquet" {
					t.Fatalf("metadata %+v", s.Metadata)
				}
				if n, ok := s.NumRecords(); !ok || n != 30 {
					t.Fatalf("records %d %v", n, ok)
				}
				slices.SortFunc(want, func(a, b AddFile) int { return strings.Compare(a.Path, b.Path) })
				for i, f := range s.Files {
					if f.Path != want[i].Path || f.Size != want[i].Size || f.DataChange || f.PartitionValues["part"] != want[i].PartitionValues["part"] {
						t.Fatalf("file %d: %+v want %+v", i, f, want[i])
					}
				}
			}
			// The commit object is newline-delimited JSON, commitInfo first.
			data, err := store.Get(ctxT(t), root+"/_delta_log/00000000000000000001.json")
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], `{"commitInfo"`) || !strings.HasPrefix(lines[1], `{"txn"`) || !strings.HasPrefix(lines[2], `{"add"`) {
				t.Fatalf("commit 1:\n%s", data)
			}
			var a struct{ Add map[string]any }
			if err := json.Unmarshal([]byte(lines[2]), &a); err != nil {
				t.Fatal(err)
			}
			stats, _ := a.Add["stats"].(string)
			if !strings.Contains(stats, `"numRecords":10`) || !strings.Contains(stats, `"ts":"2026-11-30T01:00:00.000Z"`) ||
				!strings.Contains(stats, `"ts":"2026-11-30T01:00:00.010Z"`) {
				t.Fatalf("stats %s", stats) // min truncated, max (…009.001) rounded up
			}
		})
	}
}

func TestCreateIdempotent(t *testing.T) {
	store := openStore(t, "mem")
	mustCreate(t, mustOpen(t, store, root))
	mustCreate(t, mustOpen(t, store, root)) // same definition: no error
	other := Schema{Fields: []Field{{Name: "x", Type: Primitive(TypeLong), Nullable: true}}}
	err := mustOpen(t, store, root).Create(ctxT(t), other, nil, nil)
	if !errors.Is(err, ErrTableExists) {
		t.Fatalf("create with another schema: %v", err)
	}
	if s := mustSnapshot(t, mustOpen(t, store, root)); s.Version != 0 {
		t.Fatalf("version %d", s.Version)
	}
	if err := mustOpen(t, store, "t2").Create(ctxT(t), testSchema, []string{"nope"}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad partition column: %v", err)
	}
}

func TestTxnIdempotent(t *testing.T) {
	store := openStore(t, "mem")
	tb := mustOpen(t, store, root)
	mustCreate(t, tb)
	add := putDataFile(t, store, root, "a", "f1", 0, 5, false)
	if v := mustCommit(t, tb, CommitRequest{AppID: "log-7", TxnVersion: 100, Adds: []AddFile{add}}); v != 1 {
		t.Fatalf("version %d", v)
	}
	for _, r := range []*Table{tb, mustOpen(t, store, root)} {
		for _, tv := range []int64{100, 99} {
			v, skipped, err := r.Commit(ctxT(t), CommitRequest{AppID: "log-7", TxnVersion: tv, Adds: []AddFile{add}})
			if err != nil || !skipped || v != 1 {
				t.Fatalf("replay txn %d: v=%d skipped=%v err=%v", tv, v, skipped, err)
			}
		}
	}
	// Another app id is independent.
	add2 := putDataFile(t, store, root, "a", "f2", 5, 5, false)
	if v := mustCommit(t, tb, CommitRequest{AppID: "log-8", TxnVersion: 1, Adds: []AddFile{add2}}); v != 2 {
		t.Fatalf("version %d", v)
	}
	s := mustSnapshot(t, mustOpen(t, store, root))
	if len(s.Files) != 2 || s.Txns["log-7"] != 100 || s.Txns["log-8"] != 1 {
		t.Fatalf("snapshot %+v", s)
	}
}

// TestMoreTxns: one commit records several app ids' txns (one txn action
// each, in the commit object, in the snapshot and through a checkpoint);
// replayed it is skipped, a commit whose txns are partly recorded fails
// ErrConflict, and malformed ones ErrInvalid — nothing written by either.
func TestMoreTxns(t *testing.T) {
	store := openStore(t, "mem")
	tb := mustOpen(t, store, root, WithCheckpointInterval(2))
	mustCreate(t, tb)
	a1 := putDataFile(t, store, root, "a", "f1", 0, 5, false)
	a2 := putDataFile(t, store, root, "b", "f2", 0, 3, false)
	joint := CommitRequest{AppID: "log-1", TxnVersion: 5, MoreTxns: []TxnVersion{{AppID: "log-2", Version: 3}, {AppID: "log-3", Version: 9}},
		Adds: []AddFile{a1, a2}}
	if v := mustCommit(t, tb, joint); v != 1 {
		t.Fatalf("version %d", v)
	}
	data, err := store.Get(ctxT(t), root+"/_delta_log/00000000000000000001.json")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), `{"txn"`); n != 3 {
		t.Fatalf("%d txn actions in commit 1:\n%s", n, data)
	}
	for _, r := range []*Table{tb, mustOpen(t, store, root)} {
		v, skipped, err := r.Commit(ctxT(t), joint)
		if err != nil || !skipped || v != 1 {
			t.Fatalf("replay: v=%d skipped=%v err=%v", v, skipped, err)
		}
	}
	partly := CommitRequest{AppID: "log-4", TxnVersion: 1, MoreTxns: []TxnVersion{{AppID: "log-2", Version: 3}}, Adds: []AddFile{a1}}
	if _, _, err := tb.Commit(ctxT(t), partly); !errors.Is(err, ErrConflict) {
		t.Fatalf("partly recorded: %v, want ErrConflict", err)
	}
	for _, bad := range []CommitRequest{
		{MoreTxns: []TxnVersion{{AppID: "log-5", Version: 1}}},
		{AppID: "log-5", TxnVersion: 1, MoreTxns: []TxnVersion{{AppID: "log-5", Version: 2}}},
		{AppID: "log-5", TxnVersion: 1, MoreTxns: []TxnVersion{{Version: 2}}},
	} {
		if _, _, err := tb.Commit(ctxT(t), bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	// Version 2 is a checkpoint: the txns come back from it.
	a3 := putDataFile(t, store, root, "a", "f3", 5, 5, false)
	if v := mustCommit(t, tb, CommitRequest{AppID: "log-1", TxnVersion: 10, Adds: []AddFile{a3}}); v != 2 {
		t.Fatalf("version %d", v)
	}
	s := mustSnapshot(t, mustOpen(t, store, root))
	if s.Version != 2 || len(s.Files) != 3 || s.Txns["log-1"] != 10 || s.Txns["log-2"] != 3 || s.Txns["log-3"] != 9 || len(s.Txns) != 3 {
		t.Fatalf("snapshot version %d files %d txns %v", s.Version, len(s.Files), s.Txns)
	}
}

// A commit whose PUT reply is lost is retried by the caller with the same
// txn: it must be skipped, not duplicated.
func TestLostCommitReplyRetryIsSkipped(t *testing.T) {
	inner := openStore(t, "mem")
	store := objstore.NewFaulty(inner, 1)
	tb := mustOpen(t, store, root)
	mustCreate(t, tb)
	add := putDataFile(t, inner, root, "a", "f1", 0, 5, false)
	store.LoseReplyNext(objstore.OpPutIfAbsent, 1)
	req := CommitRequest{AppID: "log-1", TxnVersion: 5, Adds: []AddFile{add}}
	if _, _, err := tb.Commit(ctxT(t), req); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("commit with lost reply: %v", err)
	}
	v, skipped, err := tb.Commit(ctxT(t), req)
	if err != nil || !skipped || v != 1 {
		t.Fatalf("retry: v=%d skipped=%v err=%v", v, skipped, err)
	}
	if s := mustSnapshot(t, mustOpen(t, inner, root)); len(s.Files) != 1 || s.Version != 1 {
		t.Fatalf("snapshot version %d files %d", s.Version, len(s.Files))
	}
}

func TestRacingCommitters(t *testing.T) {
	for _, kind := range []string{"mem", "file"} {
		t.Run(kind, func(t *testing.T) {
			store := openStore(t, kind)
			mustCreate(t, mustOpen(t, store, root))
			const writers, perWriter = 2, 12
			adds := make([][]AddFile, writers)
			for w := range writers {
				for i := range perWriter {
					adds[w] = append(adds[w], putDataFile(t, store, root, fmt.Sprintf("p%d", w), fmt.Sprintf("w%d-%d", w, i), int64(w*1000+i*10), 10, false))
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			versions := make([][]int64, writers)
			for w := range writers {
				tb := mustOpen(t, store, root) // a Table per writer: no shared cache
				wg.Go(func() {
					for i, add := range adds[w] {
						v, skipped, err := tb.Commit(context.Background(), CommitRequest{
							AppID: fmt.Sprintf("writer-%d", w), TxnVersion: int64(i + 1), Adds: []AddFile{add}})
						if err != nil || skipped {
							errs <- fmt.Errorf("writer %d commit %d: skipped=%v err=%w", w, i, skipped, err)
							return
						}
						versions[w] = append(versions[w], v)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			seen := map[int64]bool{}
			for w := range writers {
				for i, v := range versions[w] {
					if seen[v] || (i > 0 && v <= versions[w][i-1]) {
						t.Fatalf("writer %d versions %v", w, versions[w])
					}
					seen[v] = true
				}
			}
			total := int64(writers * perWriter)
			for v := int64(1); v <= total; v++ {
				if !seen[v] {
					t.Fatalf("version %d not committed by anyone: %v", v, versions)
				}
			}
			s := mustSnapshot(t, mustOpen(t, store, root))
			if s.Version != total || len(s.Files) != int(total) || s.CheckpointVersion != 20 {
				t.Fatalf("version %d files %d checkpoint %d", s.Version, len(s.Files), s.CheckpointVersion)
			}
			for w := range writers {
				if s.Txns[fmt.Sprintf("writer-%d", w)] != perWriter {
					t.Fatalf("txns %v", s.Txns)
				}
			}
			assertReplayEqual(t, store, root)
		})
	}
}

// jsonOnlySnapshot replays the table from its JSON commits alone, by copying
// them into a fresh store.
func jsonOnlySnapshot(t *testing.T, store objstore.Store, root string) Snapshot {
	t.Helper()
	cp := openStore(t, "mem")
	err := store.List(ctxT(t), root+"/_delta_log/", func(oi objstore.ObjectInfo) error {
		if !strings.HasSuffix(oi.Key, ".json") {
			return nil
		}
		b, err := store.Get(ctxT(t), oi.Key)
		if err != nil {
			return err
		}
		return cp.Put(ctxT(t), oi.Key, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	return mustSnapshot(t, mustOpen(t, cp, root))
}

func assertReplayEqual(t *testing.T, store objstore.Store, root string) {
	t.Helper()
	fromCP := mustSnapshot(t, mustOpen(t, store, root))
	fromJSON := jsonOnlySnapshot(t, store, root)
	if fromCP.CheckpointVersion < 0 || fromJSON.CheckpointVersion != -1 {
		t.Fatalf("checkpoint versions %d %d", fromCP.CheckpointVersion, fromJSON.CheckpointVersion)
	}
	fromCP.CheckpointVersion, fromJSON.CheckpointVersion = 0, 0
	if !reflect.DeepEqual(fromCP, fromJSON) {
		t.Fatalf("replay from checkpoint differs from JSON replay:\n%+v\n%+v", fromCP, fromJSON)
	}
}

func TestCheckpoints(t *testing.T) {
	for _, kind := range []string{"mem", "file"} {
		t.Run(kind, func(t *testing.T) {
			store := openStore(t, kind)
			tb := mustOpen(t, store, root)
			mustCreate(t, tb)
			for i := 1; i <= 23; i++ {
				add := putDataFile(t, store, root, []string{"a", "b", "c"}[i%3], fmt.Sprintf("f %d", i), int64(i*10), 10, false)
				mustCommit(t, tb, CommitRequest{AppID: "log-1", TxnVersion: int64(i), Adds: []AddFile{add}})
				if i == 10 || i == 20 {
					s := mustSnapshot(t, mustOpen(t, store, root))
					if s.CheckpointVersion != int64(i) {
						t.Fatalf("after commit %d: replay started at %d", i, s.CheckpointVersion)
					}
					assertReplayEqual(t, store, root)
				}
			}
			for _, v := range []int{10, 20} {
				if _, err := store.Get(ctxT(t), fmt.Sprintf("%s/_delta_log/%020d.checkpoint.parquet", root, v)); err != nil {
					t.Fatalf("checkpoint %d: %v", v, err)
				}
			}
			b, err := store.Get(ctxT(t), root+"/_delta_log/_last_checkpoint")
			if err != nil {
				t.Fatal(err)
			}
			var lc lastCheckpoint
			if err := json.Unmarshal(b, &lc); err != nil {
				t.Fatal(err)
			}
			// rows: protocol + metaData + 1 txn + 20 adds.
			if lc.Version != 20 || lc.Size != 23 || lc.NumOfAddFiles == nil || *lc.NumOfAddFiles != 20 || lc.SizeInBytes == nil {
				t.Fatalf("_last_checkpoint %s", b)
			}
			s := mustSnapshot(t, mustOpen(t, store, root))
			if s.Version != 23 || s.CheckpointVersion != 20 || len(s.Files) != 23 {
				t.Fatalf("version %d checkpoint %d files %d", s.Version, s.CheckpointVersion, len(s.Files))
			}
			if s.Files[0].Path != "part=a/f 12.parquet" {
				t.Fatalf("decoded path %q", s.Files[0].Path)
			}
			if n, ok := s.NumRecords(); !ok || n != 230 {
				t.Fatalf("records %d", n)
			}
			assertReplayEqual(t, store, root)
			// Paths are URI-encoded in the log.
			c, _ := store.Get(ctxT(t), root+"/_delta_log/00000000000000000012.json")
			if !bytes.Contains(c, []byte(`"path":"part=a/f%2012.parquet"`)) {
				t.Fatalf("commit 12: %s", c)
			}
		})
	}
}

func TestSchemaEvolution(t *testing.T) {
	store := openStore(t, "mem")
	tb := mustOpen(t, store, root)
	mustCreate(t, tb)
	id0 := mustSnapshot(t, tb).Metadata.ID
	mustCommit(t, tb, CommitRequest{AppID: "l", TxnVersion: 1, Adds: []AddFile{putDataFile(t, store, root, "a", "f1", 0, 3, false)}})
	evolved := Schema{Fields: append(append([]Field{}, testSchema.Fields...), Field{Name: "extra", Type: Primitive(TypeString), Nullable: true})}
	v := mustCommit(t, tb, CommitRequest{AppID: "l", TxnVersion: 2, NewSchema: &evolved,
		Adds: []AddFile{putDataFile(t, store, root, "a", "f2", 3, 3, true)}, Operation: "STREAMING UPDATE"})
	for _, r := range []*Table{tb, mustOpen(t, store, root)} {
		s := mustSnapshot(t, r)
		if s.Version != v || !reflect.DeepEqual(s.Schema, evolved) || s.Metadata.ID != id0 ||
			!reflect.DeepEqual(s.Metadata.PartitionColumns, []string{"part"}) || len(s.Files) != 2 {
			t.Fatalf("after evolution: %+v", s)
		}
	}
	bad := Schema{Fields: testSchema.Fields[:3]} // drops the partition column
	if _, _, err := tb.Commit(ctxT(t), CommitRequest{NewSchema: &bad}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("schema without partition column: %v", err)
	}
	if _, _, err := tb.Commit(ctxT(t), CommitRequest{Adds: []AddFile{{Path: "x.parquet", Size: 1}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("add without partition value: %v", err)
	}
}

func TestProtocolTooNew(t *testing.T) {
	store := openStore(t, "mem")
	tb := mustOpen(t, store, root)
	mustCreate(t, tb)
	// Another writer upgrades the table (e.g. enables deletion vectors).
	upgrade := `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}}` + "\n"
	if err := store.PutIfAbsent(ctxT(t), root+"/_delta_log/00000000000000000001.json", []byte(upgrade)); err != nil {
		t.Fatal(err)
	}
	if _, err := mustOpen(t, store, root).Snapshot(ctxT(t)); !errors.Is(err, ErrUnsupportedProtocol) {
		t.Fatalf("snapshot of reader-3 table: %v", err)
	}
	if _, _, err := tb.Commit(ctxT(t), CommitRequest{}); !errors.Is(err, ErrUnsupportedProtocol) {
		t.Fatalf("commit to reader-3 table: %v", err)
	}
	// Writer-only upgrade: still readable, not writable.
	store2 := openStore(t, "mem")
	tb2 := mustOpen(t, store2, root)
	mustCreate(t, tb2)
	if err := store2.PutIfAbsent(ctxT(t), root+"/_delta_log/00000000000000000001.json",
		[]byte(`{"protocol":{"minReaderVersion":1,"minWriterVersion":4}}`+"\n")); err != nil {
		t.Fatal(err)
	}
	if s := mustSnapshot(t, mustOpen(t, store2, root)); s.Protocol.MinWriterVersion != 4 {
		t.Fatalf("protocol %+v", s.Protocol)
	}
	add := putDataFile(t, store2, root, "a", "f1", 0, 1, false)
	if _, _, err := tb2.Commit(ctxT(t), CommitRequest{Adds: []AddFile{add}}); !errors.Is(err, ErrUnsupportedProtocol) {
		t.Fatalf("commit to writer-4 table: %v", err)
	}
	if err := mustOpen(t, store2, root).Create(ctxT(t), testSchema, []string{"part"}, nil); !errors.Is(err, ErrUnsupportedProtocol) {
		t.Fatalf("create over writer-4 table: %v", err)
	}
}

func TestCorruptLog(t *testing.T) {
	store := openStore(t, "mem")
	mustCreate(t, mustOpen(t, store, root))
	key := root + "/_delta_log/00000000000000000001.json"
	if err := store.PutIfAbsent(ctxT(t), key, []byte(`{"txn":{"appId":"a","version":1}}`+"\n"+`{"add":{"path":`+"\n")); err != nil {
		t.Fatal(err)
	}
	_, err := mustOpen(t, store, root).Snapshot(ctxT(t))
	if !errors.Is(err, ErrCorruptLog) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("corrupt commit: %v", err)
	}
	// A gap in versions.
	store2 := openStore(t, "mem")
	mustCreate(t, mustOpen(t, store2, root))
	if err := store2.PutIfAbsent(ctxT(t), root+"/_delta_log/00000000000000000002.json", []byte(`{"txn":{"appId":"a","version":1}}`+"\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := mustOpen(t, store2, root).Snapshot(ctxT(t)); !errors.Is(err, ErrCorruptLog) || !strings.Contains(err.Error(), "commit 1 missing") {
		t.Fatalf("gap: %v", err)
	}
	// A corrupt checkpoint.
	store3 := openStore(t, "mem")
	mustCreate(t, mustOpen(t, store3, root))
	if err := store3.PutIfAbsent(ctxT(t), root+"/_delta_log/00000000000000000000.checkpoint.parquet", []byte("PAR1garbage")); err != nil {
		t.Fatal(err)
	}
	if _, err := mustOpen(t, store3, root).Snapshot(ctxT(t)); !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("corrupt checkpoint: %v", err)
	}
}

// A winner commits between the loser's replay and its put (injected with a
// store hook): the loser's put of that version fails, it replays the
// winner's commit and lands on the next version; when the winner carried
// the same txn (a restarted compactor racing its old self), it skips.
func TestConflictRetry(t *testing.T) {
	inner := openStore(t, "mem")
	racy := objstore.NewFaulty(inner, 1)
	winner, loser := mustOpen(t, inner, root), mustOpen(t, racy, root)
	mustCreate(t, winner)
	var before map[string]func() // commit key → the winner's commit to run first
	racy.SetHook(func(ctx context.Context, op objstore.Op, key string) error {
		if f := before[key]; op == objstore.OpPutIfAbsent && f != nil {
			delete(before, key)
			f()
		}
		return nil
	})
	commitKey := func(v int) string { return fmt.Sprintf("%s/_delta_log/%020d.json", root, v) }
	a1 := putDataFile(t, inner, root, "a", "f1", 0, 2, false)
	a2 := putDataFile(t, inner, root, "a", "f2", 2, 2, false)
	before = map[string]func(){commitKey(1): func() {
		mustCommit(t, winner, CommitRequest{AppID: "w1", TxnVersion: 1, Adds: []AddFile{a1}})
	}}
	if v := mustCommit(t, loser, CommitRequest{AppID: "w2", TxnVersion: 1, Adds: []AddFile{a2}}); v != 2 {
		t.Fatalf("loser version %d, want 2", v)
	}
	if len(before) != 0 {
		t.Fatal("no conflict was injected")
	}
	a3 := putDataFile(t, inner, root, "a", "f3", 4, 2, false)
	before = map[string]func(){commitKey(3): func() {
		mustCommit(t, winner, CommitRequest{AppID: "w1", TxnVersion: 2, Adds: []AddFile{a3}})
	}}
	v, skipped, err := loser.Commit(ctxT(t), CommitRequest{AppID: "w1", TxnVersion: 2, Adds: []AddFile{a3}})
	if err != nil || !skipped || v != 3 || len(before) != 0 {
		t.Fatalf("same txn after conflict: v=%d skipped=%v err=%v", v, skipped, err)
	}
	s := mustSnapshot(t, mustOpen(t, inner, root))
	if s.Version != 3 || len(s.Files) != 3 || s.Txns["w1"] != 2 || s.Txns["w2"] != 1 {
		t.Fatalf("version %d files %d txns %v", s.Version, len(s.Files), s.Txns)
	}
	// The winner upgrades the protocol: the loser re-checks it and refuses.
	before = map[string]func(){commitKey(4): func() {
		if err := inner.PutIfAbsent(ctxT(t), commitKey(4), []byte(`{"protocol":{"minReaderVersion":1,"minWriterVersion":3}}`+"\n")); err != nil {
			t.Error(err)
		}
	}}
	if _, _, err := loser.Commit(ctxT(t), CommitRequest{AppID: "w2", TxnVersion: 2}); !errors.Is(err, ErrUnsupportedProtocol) {
		t.Fatalf("commit after a protocol upgrade: %v", err)
	}
}

// TestAddColumnsMerges: AddColumns adds only missing fields, against the
// state the commit lands on, so a stale writer never drops a column another
// writer added.
func TestAddColumnsMerges(t *testing.T) {
	store := openStore(t, "mem")
	tb := mustOpen(t, store, root)
	mustCreate(t, tb)
	stale := mustOpen(t, store, root)
	mustSnapshot(t, stale) // caches the version without the columns
	a := Field{Name: "a", Type: Primitive(TypeString), Nullable: true}
	b := Field{Name: "b", Type: Primitive(TypeLong), Nullable: true}
	mustCommit(t, tb, CommitRequest{AddColumns: []Field{a, b}})
	// The stale handle adds only a: the commit replays b's version first.
	mustCommit(t, stale, CommitRequest{AppID: "l", TxnVersion: 1, AddColumns: []Field{a},
		Adds: []AddFile{putDataFile(t, store, root, "a", "f1", 0, 3, false)}})
	s := mustSnapshot(t, mustOpen(t, store, root))
	want := append(append([]Field{}, testSchema.Fields...), a, b)
	if !reflect.DeepEqual(s.Schema.Fields, want) {
		t.Fatalf("schema after merge: %+v, want %+v", s.Schema.Fields, want)
	}
	v := s.Version
	// Nothing new: no metaData; the commit is a blind append.
	v2 := mustCommit(t, tb, CommitRequest{AppID: "l", TxnVersion: 2, AddColumns: []Field{b},
		Adds: []AddFile{putDataFile(t, store, root, "a", "f2", 3, 3, false)}})
	data, err := store.Get(ctxT(t), fmt.Sprintf("%s/_delta_log/%020d.json", root, v2))
	if err != nil {
		t.Fatal(err)
	}
	if v2 != v+1 || strings.Contains(string(data), `"metaData"`) || !strings.Contains(string(data), `"isBlindAppend":true`) {
		t.Fatalf("commit %d adding nothing new:\n%s", v2, data)
	}
}

// TestRemovesAndTombstones: a bin-packing commit (removes + add, no data
// change) replays and checkpoints with its tombstones; a checkpoint drops
// tombstones past the retention; removing a file that is not live is
// refused and writes nothing.
func TestRemovesAndTombstones(t *testing.T) {
	store := openStore(t, "mem")
	now := baseTime
	clock := func() time.Time { return now }
	tb := mustOpen(t, store, root, WithClock(clock), WithTombstoneRetention(time.Hour))
	mustCreate(t, tb)
	var adds []AddFile
	for i := 1; i <= 3; i++ {
		add := putDataFile(t, store, root, "a", fmt.Sprintf("small %d", i), int64(i*10), 10, false)
		adds = append(adds, add)
		mustCommit(t, tb, CommitRequest{AppID: "log-1", TxnVersion: int64(i), Adds: []AddFile{add}})
	}
	merged := putDataFile(t, store, root, "a", "merged", 10, 30, false)
	req := CommitRequest{AppID: "repack-1", TxnVersion: 1, Removes: []string{adds[0].Path, adds[1].Path, adds[2].Path},
		Adds: []AddFile{merged}, NoDataChange: true, Operation: "OPTIMIZE"}
	v := mustCommit(t, tb, req)
	c, _ := store.Get(ctxT(t), fmt.Sprintf("%s/_delta_log/%020d.json", root, v))
	for _, want := range []string{`"remove":{"path":"part=a/small%201.parquet"`, `"dataChange":false`, `"extendedFileMetadata":true`, `"isBlindAppend":false`, `"operation":"OPTIMIZE"`} {
		if !bytes.Contains(c, []byte(want)) {
			t.Fatalf("commit %d lacks %s: %s", v, want, c)
		}
	}
	if bytes.Contains(c, []byte(`"dataChange":true`)) {
		t.Fatalf("commit %d changes data: %s", v, c)
	}
	s := mustSnapshot(t, mustOpen(t, store, root))
	if len(s.Files) != 1 || s.Files[0].Path != merged.Path || len(s.Tombstones) != 3 {
		t.Fatalf("files %+v tombstones %+v", s.Files, s.Tombstones)
	}
	if n, _ := s.NumRecords(); n != 30 {
		t.Fatalf("records %d", n)
	}
	// Same request again: skipped by the txn. Removing a dead file: refused.
	if _, skipped, err := tb.Commit(ctxT(t), req); err != nil || !skipped {
		t.Fatalf("replayed bin-pack: skipped %v, %v", skipped, err)
	}
	bad := req
	bad.AppID, bad.TxnVersion = "repack-2", 1
	if _, _, err := tb.Commit(ctxT(t), bad); !errors.Is(err, ErrConflict) {
		t.Fatalf("removing dead files: %v", err)
	}

	// A checkpoint now keeps the tombstones; one after the retention not.
	if _, err := tb.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	s = mustSnapshot(t, mustOpen(t, store, root))
	if s.CheckpointVersion != v || len(s.Tombstones) != 3 || s.Tombstones[0].Size == nil || s.Tombstones[0].DeletionTimestamp == nil {
		t.Fatalf("from checkpoint: %+v", s.Tombstones)
	}
	now = now.Add(2 * time.Hour)
	mustCommit(t, tb, CommitRequest{AppID: "log-1", TxnVersion: 4, Adds: []AddFile{putDataFile(t, store, root, "a", "later", 40, 10, false)}})
	if _, err := tb.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	s = mustSnapshot(t, mustOpen(t, store, root))
	if s.CheckpointVersion != v+1 || len(s.Tombstones) != 0 || len(s.Files) != 2 {
		t.Fatalf("after retention: checkpoint %d files %d tombstones %+v", s.CheckpointVersion, len(s.Files), s.Tombstones)
	}
}

package engine

// Joint marks (docs/index-format.md, "Index entry"): the chunks a kind-3
// commit record applies to two or more logs carry the record's revision
// and logs, in the tail and in the index the fold writes, as Chunks
// reports them; a one-log set and ordinary flushes carry none, and WAL
// repacking goes around marked chunks.
//
//	go test ./engine -run 'TestJoint' -v

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// jointChunks returns the Chunks of log id (all of them) and their marks.
func jointChunks(t *testing.T, ctx context.Context, e *Engine, id lakestream.LogID) []Chunk {
	t.Helper()
	cs, err := e.Chunks(ctx, id, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestJointMarks: a set committed over three logs, another over one, and
// ordinary appends around them. Every chunk of the three-log set is marked
// with its record's revision and the three logs, on the committing engine
// (tail) and after the fold (index keys, also read by a fresh engine); no
// other chunk is.
func TestJointMarks(t *testing.T) {
	env := newMemEnv(t)
	// No fold before the test asks for one: the tail is checked first.
	a := env.engine(t, Options{NodeID: "a", Logger: quietLogger, FoldDelay: time.Hour})
	ctx := ctxT(t)
	logs := []lakestream.LogID{1, 2, 3}
	normal := func(id lakestream.LogID, i int) {
		t.Helper()
		if _, err := a.Append(ctx, id, 1, payload(id, i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range logs {
		normal(id, 0)
	}
	for i := range 3 {
		for _, id := range logs {
			stageAppend(t, ctx, a, id, "multi", 1, stagedPayload(id, i))
		}
		stageAppend(t, ctx, a, 1, "single", 1, stagedPayload(1, 10+i))
		normal(2, 1+i)
	}
	if err := a.CommitStaged(ctx, "multi"); err != nil {
		t.Fatal(err)
	}
	if err := a.CommitStaged(ctx, "single"); err != nil {
		t.Fatal(err)
	}
	for _, id := range logs {
		normal(id, 100)
	}

	// check: per log, the staged payloads of "multi" are in marked chunks
	// (one revision, the three logs), every other entry in unmarked ones.
	check := func(who string, e *Engine, tail bool) {
		t.Helper()
		var rev int64
		for _, id := range logs {
			var cs []Chunk
			if tail {
				l := mustLog(t, ctx, e, id).(*logHandle)
				l.mu.Lock()
				for _, tc := range l.mu.tail {
					cs = append(cs, Chunk{Entry: tc.entry})
				}
				l.mu.Unlock()
			} else {
				cs = jointChunks(t, ctx, e, id)
			}
			marked := 0
			for _, c := range cs {
				ents, err := e.ChunkEntries(ctx, id, c.Entry)
				if err != nil {
					t.Fatal(err)
				}
				for _, en := range ents {
					multi := false
					for i := range 3 {
						multi = multi || bytes.Equal(en.Payload, stagedPayload(id, i))
					}
					if multi != (c.Joint != nil) {
						t.Fatalf("%s: log %d offset %d %q: mark %+v", who, id, en.Offset, en.Payload, c.Joint)
					}
				}
				if c.Joint == nil {
					continue
				}
				marked += int(c.Records)
				if !slices.Equal(c.Joint.Logs, []int64{1, 2, 3}) || (rev != 0 && c.Joint.Rev != rev) {
					t.Fatalf("%s: log %d chunk at %d: mark %+v (revision so far %d)", who, id, c.First, c.Joint, rev)
				}
				rev = c.Joint.Rev
			}
			if marked != 3 {
				t.Fatalf("%s: log %d: %d marked records, want 3", who, id, marked)
			}
		}
	}
	check("tail", a, true)
	if err := a.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	check("folded", a, false)
	check("fresh", env.engine(t, Options{NodeID: "b", Logger: quietLogger}), false)
}

// TestJointFoldRuns: a set over two logs holding hundreds of chunks of
// each folds into runs (version-4 entries) marked like their chunks, never
// mixed with the unmarked chunks around them; a run's chunks as Chunks
// lists them carry its mark.
func TestJointFoldRuns(t *testing.T) {
	st, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{MaxTxnOps: 5})
	t.Cleanup(func() { st.Close(); ms.Close() })
	env := &testEnv{meta: ms, store: st}
	e := env.engine(t, Options{Logger: quietLogger})
	ctx := ctxT(t)
	const n = 2*index.MaxSegments + 3
	for i := range n {
		stageAppend(t, ctx, e, 1, "big", 1, stagedPayload(1, i))
		stageAppend(t, ctx, e, 2, "big", 1, stagedPayload(2, i))
	}
	for i := range 3 {
		if _, err := e.Append(ctx, 1, 1, payload(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.CommitStaged(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Append(ctx, 1, 1, payload(1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := e.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	kvs, err := ms.Range(ctx, e.keys.idxPrefix(1), prefixEnd(e.keys.idxPrefix(1)), 0)
	if err != nil {
		t.Fatal(err)
	}
	// One run of the 3 plain chunks, 3 marked runs (64, 64, 3), the last plain chunk.
	var shape []string
	for _, kv := range kvs {
		ie, err := index.DecodeEntry(kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		s := "plain"
		if ie.Joint != nil {
			s = "joint"
			if kv.Value[0] != 3 && kv.Value[0] != 4 {
				t.Fatalf("marked entry of version %d", kv.Value[0])
			}
		}
		shape = append(shape, s)
	}
	if want := []string{"plain", "joint", "joint", "joint", "plain"}; !slices.Equal(shape, want) {
		t.Fatalf("log 1 index: %v, want %v", shape, want)
	}
	cs := jointChunks(t, ctx, e, 1)
	if len(cs) != n+4 {
		t.Fatalf("log 1: %d chunks, want %d", len(cs), n+4)
	}
	for i, c := range cs {
		if want := i >= 3 && i < 3+n; want != (c.Joint != nil) || (want && !slices.Equal(c.Joint.Logs, []int64{1, 2})) {
			t.Fatalf("log 1 chunk %d (offset %d): mark %+v", i, c.First, c.Joint)
		}
	}
	if got := readLog(t, ctx, env.engine(t, Options{NodeID: "fresh", Logger: quietLogger}), 1); len(got) != n+4 {
		t.Fatalf("log 1 reads %d entries, want %d", len(got), n+4)
	}
}

// TestJointRepack: WAL repacking merges the plain chunks on either side of
// a marked one but never the marked one, whose entry (and mark) stays; the
// compaction cursor moves past it.
func TestJointRepack(t *testing.T) {
	env := newMemEnv(t)
	e := env.engine(t, Options{Logger: quietLogger})
	ctx := ctxT(t)
	for i := range 2 {
		if _, err := e.Append(ctx, 1, 1, payload(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	stageAppend(t, ctx, e, 1, "t", 1, stagedPayload(1, 0))
	stageAppend(t, ctx, e, 2, "t", 1, stagedPayload(2, 0))
	if err := e.CommitStaged(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 4; i++ {
		if _, err := e.Append(ctx, 1, 1, payload(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	var stats []CompactStats
	for range 6 {
		st, err := e.RepackWAL(ctx, 1, 8)
		if errors.Is(err, ErrNothingToCompact) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		stats = append(stats, st)
	}
	// Each pair of plain chunks (folded as a version-2 run) is one chunk
	// now; the marked chunk between them is as it was.
	cs := jointChunks(t, ctx, e, 1)
	var shape []string
	for _, c := range cs {
		s := "plain"
		if c.Joint != nil {
			s = "joint"
		}
		shape = append(shape, s)
	}
	if want := []string{"plain", "joint", "plain"}; !slices.Equal(shape, want) {
		t.Fatalf("log 1 after repacking (%+v): %v, want %v", stats, shape, want)
	}
	if cs[1].First != 2 || cs[1].Records != 1 {
		t.Fatalf("marked chunk at %d, %d records", cs[1].First, cs[1].Records)
	}
	got := readLog(t, ctx, e, 1)
	want := [][]byte{payload(1, 0), payload(1, 1), stagedPayload(1, 0), payload(1, 2), payload(1, 3)}
	if len(got) != len(want) {
		t.Fatalf("log 1: %d entries", len(got))
	}
	for i := range want {
		if !bytes.Equal(got[i].Payload, want[i]) {
			t.Fatalf("log 1 entry %d: %q, want %q", i, got[i].Payload, want[i])
		}
	}
}

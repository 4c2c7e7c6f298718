package engine

// ReadStaged (stage.go, docs/transactions.md "Staging (engine)"): a log's
// entries of an open staging set read back in the order the set's commit
// would append them, on the mem and the file store (WAL segments).
//
//	go test ./engine -run 'TestReadStaged' -v

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/objstore"
)

// readStaged returns the entries ReadStaged gives for log id of set, their
// payloads copied.
func readStaged(t *testing.T, ctx context.Context, e *Engine, id lakestream.LogID, set string) ([]lakestream.Entry, error) {
	t.Helper()
	var out []lakestream.Entry
	err := mustLog(t, ctx, e, id).ReadStaged(ctx, set, func(en lakestream.Entry) bool {
		en.Payload = bytes.Clone(en.Payload)
		out = append(out, en)
		return true
	})
	return out, err
}

func TestReadStaged(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(testing.TB) *testEnv
	}{{"mem", newMemEnv}, {"file", newFileEnv}} {
		t.Run(tc.name, func(t *testing.T) { testReadStaged(t, tc.env(t)) })
	}
}

func testReadStaged(t *testing.T, env *testEnv) {
	ctx := ctxT(t)
	a := env.engine(t, Options{NodeID: "a", Logger: quietLogger})
	b := env.engine(t, Options{NodeID: "b", Logger: quietLogger})
	// Set t1 gets entries of logs 1 and 2 from both engines, set t2 one of
	// log 1; log 1 gets normal appends in between.
	var want [][]byte // log 1's entries of t1, in staging order
	for i := range 6 {
		e := a
		if i%2 == 1 {
			e = b
		}
		records := 1 + i%3
		stageAppend(t, ctx, e, 1, "t1", records, stagedPayload(1, i))
		want = append(want, stagedPayload(1, i))
		stageAppend(t, ctx, e, 2, "t1", 1, stagedPayload(2, i))
		if _, err := e.Append(ctx, 1, 1, payload(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	stageAppend(t, ctx, a, 1, "t2", 1, []byte("other set"))
	// A batch of staged appends that share flushes (AppendAsync).
	done := make(chan error, 10)
	l1 := mustLog(t, ctx, a, 1)
	for i := 6; i < 16; i++ {
		if err := l1.AppendAsync(ctx, 1, stagedPayload(1, i), func(_ lakestream.EntryHeader, err error) { done <- err },
			lakestream.WithStage("t1")); err != nil {
			t.Fatal(err)
		}
		want = append(want, stagedPayload(1, i))
	}
	for range 10 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	check := func(who string, e *Engine) {
		t.Helper()
		got, err := readStaged(t, ctx, e, 1, "t1")
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d staged entries of log 1, want %d", who, len(got), len(want))
		}
		for i, g := range got {
			records := int32(1)
			if i < 6 {
				records = int32(1 + i%3)
			}
			if g.Offset != -1 || g.Records != records || g.Size != int32(len(want[i])) || g.WriteTimeMs == 0 ||
				!bytes.Equal(g.Payload, want[i]) {
				t.Fatalf("%s: staged entry %d: %+v %q, want offset -1, %d records, %q", who, i, g.EntryHeader, g.Payload, records, want[i])
			}
		}
	}
	check("a", a)
	check("b", b)
	check("a new engine", env.engine(t, Options{NodeID: "c", Logger: quietLogger})) // nothing cached
	if got, err := readStaged(t, ctx, a, 2, "t1"); err != nil || len(got) != 6 || !bytes.Equal(got[5].Payload, stagedPayload(2, 5)) {
		t.Fatalf("log 2 of t1: %d entries, %v", len(got), err)
	}
	if got, err := readStaged(t, ctx, a, 1, "t2"); err != nil || len(got) != 1 || string(got[0].Payload) != "other set" {
		t.Fatalf("log 1 of t2: %+v, %v", got, err)
	}
	for _, set := range []string{"nobody", "t2"} {
		if got, err := readStaged(t, ctx, a, 3, set); err != nil || len(got) != 0 {
			t.Fatalf("log 3 of %s: %+v, %v", set, got, err)
		}
	}
	// fn returning false stops the read.
	n := 0
	if err := l1.ReadStaged(ctx, "t1", func(lakestream.Entry) bool { n++; return n < 3 }); err != nil || n != 3 {
		t.Fatalf("stopped read: %d calls, %v", n, err)
	}
	if err := l1.ReadStaged(ctx, "a/b", func(lakestream.Entry) bool { return true }); !errors.Is(err, lakestream.ErrInvalidArgument) {
		t.Fatalf("invalid set name: %v", err)
	}
	// Ended sets: committed (the entries are in the log now) or discarded.
	if err := b.CommitStaged(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := a.DiscardStaged(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"t1", "t2"} {
		if _, err := readStaged(t, ctx, a, 1, set); !errors.Is(err, lakestream.ErrStageEnded) {
			t.Fatalf("read of ended set %s: %v", set, err)
		}
	}
	if got := readLog(t, ctx, a, 1); len(got) != 6+len(want) {
		t.Fatalf("log 1 holds %d entries after the commit, want %d", len(got), 6+len(want))
	}
}

// hookStore runs before (once, when set) ahead of a GetRange.
type hookStore struct {
	objstore.Store
	before atomic.Pointer[func()]
}

func (s *hookStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if f := s.before.Swap(nil); f != nil {
		(*f)()
	}
	return s.Store.GetRange(ctx, key, offset, length)
}

// TestReadStagedSetEndsDuringRead: the set is discarded and its object
// collected between the read of its records and the read of a chunk:
// ErrStageEnded, not a missing-chunk error.
func TestReadStagedSetEndsDuringRead(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	w := env.engine(t, Options{NodeID: "w", Logger: quietLogger})
	stageAppend(t, ctx, w, 1, "s", 1, []byte("staged"))
	hs := &hookStore{Store: env.store}
	r, err := New(hs, env.meta, Options{NodeID: "r", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	gcNow := time.Now().Add(time.Hour) // every intent is dead
	gc := env.engine(t, Options{NodeID: "gc", Now: func() time.Time { return gcNow }, Logger: quietLogger})
	var hookErr error
	discard := func() {
		if hookErr = w.DiscardStaged(ctx, "s"); hookErr != nil {
			return
		}
		_, hookErr = gc.CollectGarbage(ctx)
	}
	hs.before.Store(&discard)
	_, err = readStaged(t, ctx, r, 1, "s")
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if objs := stageWALObjects(t, ctx, env.store); len(objs) != 0 {
		t.Fatalf("the discarded set's object was not collected: %v", objs)
	}
	if !errors.Is(err, lakestream.ErrStageEnded) {
		t.Fatalf("read of a set discarded during the read: %v", err)
	}
}

package engine

// Staging sets (stage.go, docs/transactions.md "Staging (engine)"): staged
// appends are durable and invisible until CommitStaged makes every one of
// them enter its log at one point of the commit order, on every engine;
// DiscardStaged drops them and GC their objects.
//
//	go test ./engine -run 'TestStag' -v

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// stagedPayload is the payload of staged entry i of log id.
func stagedPayload(id lakestream.LogID, i int) []byte {
	return fmt.Appendf(nil, "log %d staged %d", id, i)
}

// readLog returns every entry of log id as engine e reads it now (after a
// sync: it does not miss what finished before the call).
func readLog(t *testing.T, ctx context.Context, e *Engine, id lakestream.LogID) []lakestream.Entry {
	t.Helper()
	l, err := e.Log(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	next, err := l.NextOffset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == 0 {
		return nil
	}
	got, err := l.ReadEntries(ctx, 0, 1<<20, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 0 && got[len(got)-1].End() != next {
		t.Fatalf("log %d: read up to %d, head %d", id, got[len(got)-1].End(), next)
	}
	return got
}

func mustLog(t *testing.T, ctx context.Context, e *Engine, id lakestream.LogID) lakestream.Log {
	t.Helper()
	l, err := e.Log(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// stageAppend appends a staged entry and checks its answer: durable, no
// offset.
func stageAppend(t *testing.T, ctx context.Context, e *Engine, id lakestream.LogID, set string, records int, p []byte) {
	t.Helper()
	h, err := e.Append(ctx, id, records, p, lakestream.WithStage(set))
	if err != nil {
		t.Fatalf("staged append to log %d, set %s: %v", id, set, err)
	}
	if h.Offset != -1 || int(h.Records) != records || int(h.Size) != len(p) {
		t.Fatalf("staged append answered %+v, want offset -1, %d records", h, records)
	}
}

// TestStagedCommit: staged appends to three logs are invisible (reads,
// NextOffset, LastOffset) while normal appends go on around them; one
// CommitStaged makes all of them readable at once, after every entry
// committed before it, with the same offsets on a second engine and on an
// engine started after the fold.
func TestStagedCommit(t *testing.T) {
	env := newMemEnv(t)
	a := env.engine(t, Options{NodeID: "a", Logger: quietLogger})
	b := env.engine(t, Options{NodeID: "b", Logger: quietLogger})
	ctx := ctxT(t)
	logs := []lakestream.LogID{1, 2, 3}
	want := map[lakestream.LogID][][]byte{}
	normal := func(e *Engine, id lakestream.LogID, i int) {
		t.Helper()
		h, err := e.Append(ctx, id, 1, payload(id, i))
		if err != nil {
			t.Fatal(err)
		}
		if h.Offset != int64(len(want[id])) {
			t.Fatalf("log %d: normal append %d at offset %d, want %d", id, i, h.Offset, len(want[id]))
		}
		want[id] = append(want[id], payload(id, i))
	}
	for _, id := range logs {
		normal(a, id, 0)
	}
	// Staged from both engines, interleaved with normal appends.
	var staged [][2]any
	for i := range 3 {
		for _, id := range logs {
			e := a
			if i%2 == 1 {
				e = b
			}
			stageAppend(t, ctx, e, id, "txn-1", 1, stagedPayload(id, i))
			staged = append(staged, [2]any{id, stagedPayload(id, i)})
			normal(b, id, i+1)
		}
	}
	for _, e := range []*Engine{a, b} {
		for _, id := range logs {
			if got := readLog(t, ctx, e, id); len(got) != len(want[id]) {
				t.Fatalf("log %d: %d entries readable before the commit, want the %d normal ones", id, len(got), len(want[id]))
			}
			if last, err := e.LastOffset(ctx, id); err != nil || last != int64(len(want[id]))-1 {
				t.Fatalf("log %d: LastOffset %d %v before the commit", id, last, err)
			}
		}
	}
	if err := a.CommitStaged(ctx, "txn-1"); err != nil {
		t.Fatal(err)
	}
	for _, s := range staged {
		id := s[0].(lakestream.LogID)
		want[id] = append(want[id], s[1].([]byte))
	}
	check := func(who string, e *Engine) {
		t.Helper()
		for _, id := range logs {
			got := readLog(t, ctx, e, id)
			if len(got) != len(want[id]) {
				t.Fatalf("%s: log %d holds %d entries, want %d", who, id, len(got), len(want[id]))
			}
			for i, g := range got {
				if g.Offset != int64(i) || !bytes.Equal(g.Payload, want[id][i]) {
					t.Fatalf("%s: log %d entry %d: %+v %q, want %q", who, id, i, g.EntryHeader, g.Payload, want[id][i])
				}
			}
		}
	}
	// On the committing engine right after the call, without a sync: the
	// record is applied here.
	for _, id := range logs {
		l, _ := a.Log(ctx, id)
		if next := l.(*logHandle).snapshot().Next; next != int64(len(want[id])) {
			t.Fatalf("log %d: head %d right after CommitStaged, want %d", id, next, len(want[id]))
		}
	}
	check("a", a)
	check("b", b)
	// The next normal append follows the set.
	normal(b, 1, 100)
	check("b after", b)
	if err := a.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	check("restarted", env.engine(t, Options{NodeID: "c", Logger: quietLogger}))
}

// TestStagedFoldManyChunks: a kind-3 record holding hundreds of chunks of
// one log (interleaved with another log's) folds into several run entries,
// over more transactions than the store's MaxTxnOps allows in one, and
// reads back the same on an engine started after the fold.
func TestStagedFoldManyChunks(t *testing.T) {
	st, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{MaxTxnOps: 5})
	t.Cleanup(func() { st.Close(); ms.Close() })
	env := &testEnv{meta: ms, store: st}
	e := env.engine(t, Options{Logger: quietLogger})
	ctx := ctxT(t)
	const n = 4*index.MaxSegments + 10 // five runs: five entries and a head, six operations (MaxTxnOps 5)
	for i := range n {
		stageAppend(t, ctx, e, 1, "big", 1+i%2, stagedPayload(1, i))
		if i%50 == 0 {
			stageAppend(t, ctx, e, 2, "big", 1, stagedPayload(2, i))
		}
	}
	if _, err := e.Append(ctx, 1, 1, payload(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.CommitStaged(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if err := e.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	kvs, err := ms.Range(ctx, e.keys.idxPrefix(1), prefixEnd(e.keys.idxPrefix(1)), 0)
	// The normal chunk is an entry of its own, the staged ones (of a
	// record over two logs: marked, docs/index-format.md) runs of 64.
	if runs := 1 + (n+index.MaxSegments-1)/index.MaxSegments; err != nil || len(kvs) != runs {
		t.Fatalf("log 1 index: %d keys (%v), want %d runs", len(kvs), err, runs)
	}
	if rest, _ := ms.Range(ctx, e.keys.recordPrefix(), prefixEnd(e.keys.recordPrefix()), 0); len(rest) != 0 {
		t.Fatalf("%d commit records left after the fold", len(rest))
	}
	for _, r := range []*Engine{e, env.engine(t, Options{NodeID: "fresh", Logger: quietLogger})} {
		got := readLog(t, ctx, r, 1)
		if len(got) != n+1 || !bytes.Equal(got[0].Payload, payload(1, 0)) {
			t.Fatalf("log 1: %d entries, want %d", len(got), n+1)
		}
		off := int64(1)
		for i, g := range got[1:] {
			if g.Offset != off || int(g.Records) != 1+i%2 || !bytes.Equal(g.Payload, stagedPayload(1, i)) {
				t.Fatalf("log 1 staged entry %d: %+v %q", i, g.EntryHeader, g.Payload)
			}
			off = g.End()
		}
		if got := readLog(t, ctx, r, 2); len(got) != (n+49)/50 {
			t.Fatalf("log 2: %d entries", len(got))
		}
	}
}

// stageWALObjects lists the store's WAL objects.
func stageWALObjects(t *testing.T, ctx context.Context, st objstore.Store) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if err := st.List(ctx, "wal/", func(oi objstore.ObjectInfo) error { out[oi.Key] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStagedDiscardAndGC: GC keeps the objects of an open set's staged
// chunks; after DiscardStaged the entries are never readable, an object
// only they used is collected and one shared with a log's chunk stays.
func TestStagedDiscardAndGC(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	// A flush is cut when it holds 150 bytes: a 200-byte entry is one
	// object, two 100-byte ones share one.
	e := env.engine(t, Options{NodeID: "w", Linger: time.Hour, FlushBytes: 150, Logger: quietLogger})
	big := func(s string) []byte { return []byte(s + strings.Repeat(".", 200-len(s))) }
	small := func(s string) []byte { return []byte(s + strings.Repeat(".", 100-len(s))) }

	before := stageWALObjects(t, ctx, env.store)
	stageAppend(t, ctx, e, 1, "s1", 1, big("alone"))
	alone := newObjects(t, ctx, env.store, before)

	before = stageWALObjects(t, ctx, env.store)
	done := make(chan error, 2)
	l1, l2 := mustLog(t, ctx, e, 1), mustLog(t, ctx, e, 2)
	if err := l2.AppendAsync(ctx, 1, small("normal"), func(_ lakestream.EntryHeader, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := l1.AppendAsync(ctx, 1, small("shared"), func(h lakestream.EntryHeader, err error) {
		if err == nil && h.Offset != -1 {
			err = fmt.Errorf("staged append at offset %d", h.Offset)
		}
		done <- err
	}, lakestream.WithStage("s1")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	shared := newObjects(t, ctx, env.store, before)

	gcNow := time.Now().Add(time.Hour) // every intent is dead
	gc := env.engine(t, Options{NodeID: "gc", Now: func() time.Time { return gcNow }, Logger: quietLogger})
	if _, err := gc.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	objs := stageWALObjects(t, ctx, env.store)
	if !objs[alone] || !objs[shared] {
		t.Fatalf("GC of an open set: objects %v, want %s and %s kept", objs, alone, shared)
	}
	if err := e.DiscardStaged(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := e.DiscardStaged(ctx, "s1"); err != nil {
		t.Fatalf("second discard: %v", err)
	}
	if _, err := gc.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	objs = stageWALObjects(t, ctx, env.store)
	if objs[alone] || !objs[shared] {
		t.Fatalf("GC after the discard: objects %v, want %s gone and %s kept (log 2 uses it)", objs, alone, shared)
	}
	if got := readLog(t, ctx, e, 1); len(got) != 0 {
		t.Fatalf("log 1 holds %d entries of a discarded set", len(got))
	}
	if got := readLog(t, ctx, e, 2); len(got) != 1 || !bytes.Equal(got[0].Payload, small("normal")) {
		t.Fatalf("log 2: %+v", got)
	}
	if err := e.CommitStaged(ctx, "s1"); !errors.Is(err, lakestream.ErrStageEnded) {
		t.Fatalf("commit of a discarded set: %v", err)
	}
	if _, err := e.Append(ctx, 1, 1, big("late"), lakestream.WithStage("s1")); !errors.Is(err, lakestream.ErrStageEnded) {
		t.Fatalf("staged append to a discarded set: %v", err)
	}
}

// newObjects returns the one WAL object that is not in before.
func newObjects(t *testing.T, ctx context.Context, st objstore.Store, before map[string]bool) string {
	t.Helper()
	var out []string
	for o := range stageWALObjects(t, ctx, st) {
		if !before[o] {
			out = append(out, o)
		}
	}
	if len(out) != 1 {
		t.Fatalf("new WAL objects %v, want one", out)
	}
	return out[0]
}

// TestStageEndedInFlush: in one flush, the staged chunk of an ended set
// fails ErrStageEnded (and breaks its chain) while a normal append and a
// staged append to an open set commit.
func TestStageEndedInFlush(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	e := env.engine(t, Options{Linger: time.Hour, FlushBytes: 250, Logger: quietLogger})
	if err := e.CommitStaged(ctx, "ended"); err != nil { // an empty set: only its end
		t.Fatal(err)
	}
	p := func(s string) []byte { return []byte(s + strings.Repeat(".", 100-len(s))) }
	type result struct {
		what string
		h    lakestream.EntryHeader
		err  error
	}
	results := make(chan result, 3)
	l2, err := e.Log(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	chain := l2.NewAppendChain()
	for _, a := range []struct {
		what string
		id   lakestream.LogID
		opts []lakestream.AppendOption
	}{
		{"normal", 1, nil},
		{"ended", 2, []lakestream.AppendOption{lakestream.WithStage("ended"), lakestream.WithAppendChain(chain)}},
		{"open", 3, []lakestream.AppendOption{lakestream.WithStage("open")}},
	} {
		if err := mustLog(t, ctx, e, a.id).AppendAsync(ctx, 1, p(a.what), func(h lakestream.EntryHeader, err error) { results <- result{a.what, h, err} }, a.opts...); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		r := <-results
		switch r.what {
		case "normal":
			if r.err != nil || r.h.Offset != 0 {
				t.Fatalf("normal append in the flush: %+v %v", r.h, r.err)
			}
		case "ended":
			if !errors.Is(r.err, lakestream.ErrStageEnded) {
				t.Fatalf("staged append to an ended set: %+v %v", r.h, r.err)
			}
		case "open":
			if r.err != nil || r.h.Offset != -1 {
				t.Fatalf("staged append to an open set in the flush: %+v %v", r.h, r.err)
			}
		}
	}
	if _, err := l2.Append(ctx, 1, []byte("after"), lakestream.WithAppendChain(chain)); !errors.Is(err, lakestream.ErrChainBroken) {
		t.Fatalf("link after a failed staged link: %v", err)
	}
	if err := e.CommitStaged(ctx, "open"); err != nil {
		t.Fatal(err)
	}
	if got := readLog(t, ctx, e, 3); len(got) != 1 || !bytes.Equal(got[0].Payload, p("open")) {
		t.Fatalf("log 3 after the commit: %+v", got)
	}
	if got := readLog(t, ctx, e, 2); len(got) != 0 {
		t.Fatalf("log 2 holds %d entries", len(got))
	}
}

// TestStageEnds: CommitStaged is idempotent, a committed set cannot be
// discarded, ForgetStaged drops the end, and an invalid set name is
// refused.
func TestStageEnds(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	e := env.engine(t, Options{Logger: quietLogger})
	stageAppend(t, ctx, e, 1, "t", 1, []byte("x"))
	for range 2 {
		if err := e.CommitStaged(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	if got := readLog(t, ctx, e, 1); len(got) != 1 {
		t.Fatalf("log 1 holds %d entries after two commits of one set", len(got))
	}
	if err := e.DiscardStaged(ctx, "t"); !errors.Is(err, lakestream.ErrStageEnded) {
		t.Fatalf("discard of a committed set: %v", err)
	}
	if _, err := e.Append(ctx, 1, 1, []byte("late"), lakestream.WithStage("t")); !errors.Is(err, lakestream.ErrStageEnded) {
		t.Fatalf("staged append to a committed set: %v", err)
	}
	if err := e.ForgetStaged(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	kvs, err := env.meta.Range(ctx, e.keys.stagePrefix(), prefixEnd(e.keys.stagePrefix()), 0)
	if err != nil || len(kvs) != 0 {
		t.Fatalf("keys left under stage/ after the forget: %d %v", len(kvs), err)
	}
	for _, bad := range []string{"", "a/b", strings.Repeat("x", 200)} {
		if err := e.CommitStaged(ctx, bad); !errors.Is(err, lakestream.ErrInvalidArgument) {
			t.Fatalf("CommitStaged(%q): %v", bad, err)
		}
	}
	if _, err := e.Append(ctx, 1, 1, []byte("x"), lakestream.WithStage("a/b")); !errors.Is(err, lakestream.ErrInvalidArgument) {
		t.Fatalf("staged append to set a/b: %v", err)
	}
}

// TestStageTooLarge: a set over StageMaxChunks is refused whole; it stays
// open and can be discarded.
func TestStageTooLarge(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	e := env.engine(t, Options{StageMaxChunks: 3, Logger: quietLogger})
	for i := range 4 {
		stageAppend(t, ctx, e, 1, "big", 1, stagedPayload(1, i))
	}
	if err := e.CommitStaged(ctx, "big"); !errors.Is(err, lakestream.ErrStageTooLarge) {
		t.Fatalf("commit of 4 chunks with StageMaxChunks 3: %v", err)
	}
	if _, found, err := env.meta.Get(ctx, e.keys.stageEnd("big")); err != nil || found {
		t.Fatalf("end of a set too large: found %v %v", found, err)
	}
	if got := readLog(t, ctx, e, 1); len(got) != 0 {
		t.Fatalf("log 1 holds %d entries", len(got))
	}
	if err := e.DiscardStaged(ctx, "big"); err != nil {
		t.Fatal(err)
	}
}

// TestStagedLostReplies: a staging transaction (staged records only, or
// with a commit record) and a CommitStaged transaction whose replies are
// lost — applied or not — are resolved: every staged append is answered
// once, and the committed set holds each entry exactly once.
func TestStagedLostReplies(t *testing.T) {
	for name, f := range map[string]meta.Fault{"applied": meta.FaultLostReply, "not-applied": meta.FaultUnavailable} {
		t.Run(name, func(t *testing.T) { testStagedLostReplies(t, f) })
	}
}

func testStagedLostReplies(t *testing.T, fault meta.Fault) {
	// The first transaction of each kind fails with fault: staging only,
	// staging with a commit record, committing a set.
	var stagedOnly, mixed, committing atomic.Bool
	ms := meta.NewMem(meta.MemOptions{Fault: func(c meta.Call) meta.Fault {
		if c.Method != meta.MethodTxn {
			return meta.FaultNone
		}
		var staged, record bool
		for _, op := range c.Ops {
			switch {
			case op.Kind != meta.OpPut:
			case strings.Contains(op.Key, "/c/") && !index.IsVoid(op.Value):
				staged = true
			case strings.Contains(op.Key, "commits/rec/"):
				record = true
			case strings.HasSuffix(op.Key, "/end") && string(op.Value) == stageCommitted:
				if committing.CompareAndSwap(false, true) {
					return fault
				}
			}
		}
		switch {
		case staged && !record && stagedOnly.CompareAndSwap(false, true):
			return fault
		case staged && record && mixed.CompareAndSwap(false, true):
			return fault
		}
		return meta.FaultNone
	}})
	st, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); ms.Close() })
	env := &testEnv{meta: ms, store: st}
	ctx := ctxT(t)
	// 200 bytes cut a flush; two entries of 100 share one.
	e := env.engine(t, Options{Linger: time.Hour, FlushBytes: 150, Logger: quietLogger})
	sized := func(s string, n int) []byte { return []byte(s + strings.Repeat(".", n-len(s))) }

	stageAppend(t, ctx, e, 1, "t", 1, sized("only", 200))
	done := make(chan error, 2)
	if err := mustLog(t, ctx, e, 2).AppendAsync(ctx, 1, sized("normal", 100), func(h lakestream.EntryHeader, err error) {
		if err == nil && h.Offset != 0 {
			err = fmt.Errorf("normal append at offset %d", h.Offset)
		}
		done <- err
	}); err != nil {
		t.Fatal(err)
	}
	if err := mustLog(t, ctx, e, 3).AppendAsync(ctx, 1, sized("mixed", 100), func(h lakestream.EntryHeader, err error) {
		if err == nil && h.Offset != -1 {
			err = fmt.Errorf("staged append at offset %d", h.Offset)
		}
		done <- err
	}, lakestream.WithStage("t")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[lakestream.LogID]int{1: 1, 2: 0, 3: 1} {
		if sets, err := mustLog(t, ctx, e, id).OpenStagedSets(ctx, 10); err != nil || len(sets) != want {
			t.Fatalf("log %d lists %q (%v), want %d set", id, sets, err, want)
		}
	}
	if err := e.CommitStaged(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if keys := logStagedKeys(t, ctx, e); len(keys) != 0 {
		t.Fatalf("log keys left after the commit: %q", keys)
	}
	if !stagedOnly.Load() || !mixed.Load() || !committing.Load() {
		t.Fatalf("faults injected: staged only %v, mixed %v, commit %v", stagedOnly.Load(), mixed.Load(), committing.Load())
	}
	for id, want := range map[lakestream.LogID][]byte{1: sized("only", 200), 2: sized("normal", 100), 3: sized("mixed", 100)} {
		got := readLog(t, ctx, e, id)
		if len(got) != 1 || !bytes.Equal(got[0].Payload, want) {
			t.Fatalf("log %d: %d entries, want one", id, len(got))
		}
	}
}

// logStagedKeys returns the logs/<log>/staged/<set> keys in the store.
func logStagedKeys(t *testing.T, ctx context.Context, e *Engine) []string {
	t.Helper()
	kvs, err := e.meta.Range(ctx, e.keys.logsPrefix(), prefixEnd(e.keys.logsPrefix()), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range kvs {
		if strings.Contains(kv.Key, "/staged/") {
			out = append(out, strings.TrimPrefix(kv.Key, e.keys.logsPrefix()))
		}
	}
	return out
}

// TestLogStagedKeys: a flush staging one set into more logs than one
// transaction may write keys for (MaxTxnOps 5) spreads the set over
// several staged records and lists the set on every log; its commit,
// unable to delete every log's key in its own transaction, deletes the
// rest after it, and the set's entries enter every log once, in order.
// Keys left behind (the delete after an end lost, an end forgotten) are
// swept by the next listing.
func TestLogStagedKeys(t *testing.T) {
	st, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{MaxTxnOps: 5})
	t.Cleanup(func() { st.Close(); ms.Close() })
	env := &testEnv{meta: ms, store: st}
	ctx := ctxT(t)
	// 8 entries of 20 bytes cut one flush.
	e := env.engine(t, Options{Linger: time.Hour, FlushBytes: 150, Logger: quietLogger})
	const logs = 8
	done := make(chan error, logs)
	for id := lakestream.LogID(1); id <= logs; id++ {
		if err := mustLog(t, ctx, e, id).AppendAsync(ctx, 1, []byte(fmt.Sprintf("log %d: staged entry", id)), func(h lakestream.EntryHeader, err error) {
			if err == nil && h.Offset != -1 {
				err = fmt.Errorf("staged append at offset %d", h.Offset)
			}
			done <- err
		}, lakestream.WithStage("wide")); err != nil {
			t.Fatal(err)
		}
	}
	for range logs {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	records, _, err := e.readStagedKeys(ctx, "wide")
	if err != nil || len(records) < 2 {
		t.Fatalf("the flush wrote %d staged records (%v), want the set spread over several", len(records), err)
	}
	for id := lakestream.LogID(1); id <= logs; id++ {
		if sets, err := mustLog(t, ctx, e, id).OpenStagedSets(ctx, 10); err != nil || len(sets) != 1 || sets[0] != "wide" {
			t.Fatalf("log %d lists %q (%v), want [wide]", id, sets, err)
		}
	}
	if err := e.CommitStaged(ctx, "wide"); err != nil {
		t.Fatal(err)
	}
	if keys := logStagedKeys(t, ctx, e); len(keys) != 0 {
		t.Fatalf("log keys left after the commit: %q", keys)
	}
	for id := lakestream.LogID(1); id <= logs; id++ {
		got := readLog(t, ctx, e, id)
		if len(got) != 1 || string(got[0].Payload) != fmt.Sprintf("log %d: staged entry", id) {
			t.Fatalf("log %d after the commit: %d entries", id, len(got))
		}
	}

	// Left behind: a committed set's key, and a key of a set whose end
	// was forgotten since. An open set's key stays.
	e = env.engine(t, Options{NodeID: "prompt", Logger: quietLogger})
	stageAppend(t, ctx, e, 1, "open", 1, []byte("open"))
	stageAppend(t, ctx, e, 1, "forgotten", 1, []byte("forgotten"))
	if err := e.CommitStaged(ctx, "forgotten"); err != nil {
		t.Fatal(err)
	}
	if err := e.ForgetStaged(ctx, "forgotten"); err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"forgotten", "wide"} {
		if _, _, err := ms.Txn(ctx, nil, []meta.Op{meta.Put(e.keys.logStaged(1, set), []byte("left"))}); err != nil {
			t.Fatal(err)
		}
	}
	if sets, err := mustLog(t, ctx, e, 1).OpenStagedSets(ctx, 10); err != nil || len(sets) != 1 || sets[0] != "open" {
		t.Fatalf("log 1 lists %q (%v), want [open]", sets, err)
	}
	if keys := logStagedKeys(t, ctx, e); len(keys) != 1 || !strings.HasSuffix(keys[0], "/staged/open") {
		t.Fatalf("log keys after the sweep: %q, want the open set's", keys)
	}
}

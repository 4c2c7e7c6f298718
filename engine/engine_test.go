package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// testEnv is a metadata store and a bucket shared by any number of engines.
type testEnv struct {
	meta  meta.Store
	store objstore.Store
	url   string // the store's URL (file:// envs)
}

func newMemEnv(t testing.TB) *testEnv {
	t.Helper()
	st, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{})
	t.Cleanup(func() { st.Close(); ms.Close() })
	return &testEnv{meta: ms, store: st}
}

func (env *testEnv) engine(t testing.TB, opts Options) *Engine {
	t.Helper()
	e, err := New(env.store, env.meta, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func payload(log lakestream.LogID, i int) []byte { return fmt.Appendf(nil, "log %d entry %d", log, i) }

func TestAppendReadRoundTrip(t *testing.T) {
	env := newMemEnv(t)
	e := env.engine(t, Options{})
	ctx := ctxT(t)
	l, err := e.Log(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	var want []lakestream.EntryHeader
	for i := 0; i < 20; i++ {
		h, err := l.Append(ctx, i%3+1, payload(7, i), lakestream.WithPublishTime(int64(1000+i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, h)
	}
	off := int64(0)
	for i, h := range want {
		if h.Offset != off || int(h.Records) != i%3+1 || h.PublishTimeMs != int64(1000+i) {
			t.Fatalf("entry %d: header %+v, want offset %d", i, h, off)
		}
		off = h.End()
	}
	got, err := l.ReadEntries(ctx, 0, 1000, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d entries, want %d", len(got), len(want))
	}
	for i, g := range got {
		if g.EntryHeader.Offset != want[i].Offset || g.Records != want[i].Records || g.CumulativeSize != want[i].CumulativeSize || !bytes.Equal(g.Payload, payload(7, i)) {
			t.Fatalf("entry %d: got %+v %q, want %+v", i, g.EntryHeader, g.Payload, want[i])
		}
	}
	// A read starting inside an entry returns that entry.
	mid, err := l.ReadEntries(ctx, want[2].Offset+1, 1, 1<<20)
	if err != nil || len(mid) != 1 || mid[0].Offset != want[2].Offset {
		t.Fatalf("read inside entry: %v %+v", err, mid)
	}
	next, _ := l.NextOffset(ctx)
	if next != off {
		t.Fatalf("next %d want %d", next, off)
	}
	if at, err := l.FindOffsetByTime(ctx, time.UnixMilli(1005)); err != nil || at != want[5].Offset {
		t.Fatalf("find by time: %d %v want %d", at, err, want[5].Offset)
	}
	if _, err := l.ReadEntry(ctx, next); !errors.Is(err, lakestream.ErrOffsetOutOfRange) {
		t.Fatalf("read at head: %v", err)
	}
}

func TestTwoEnginesShareLogs(t *testing.T) {
	env := newMemEnv(t)
	a := env.engine(t, Options{NodeID: "a"})
	b := env.engine(t, Options{NodeID: "b"})
	ctx := ctxT(t)
	for i := 0; i < 10; i++ {
		e := a
		if i%2 == 1 {
			e = b
		}
		if _, err := e.Append(ctx, 1, 1, payload(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.ReadEntries(ctx, 1, 0, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("got %d entries", len(got))
	}
	for i, g := range got {
		if g.Offset != int64(i) || !bytes.Equal(g.Payload, payload(1, i)) {
			t.Fatalf("entry %d: %+v %q", i, g.EntryHeader, g.Payload)
		}
	}
}

func TestCursorAcksPersist(t *testing.T) {
	env := newMemEnv(t)
	e := env.engine(t, Options{})
	ctx := ctxT(t)
	l, _ := e.Log(ctx, 3)
	for i := 0; i < 5; i++ {
		if _, err := l.Append(ctx, 4, payload(3, i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := l.OpenCursor(ctx, "sub", -1)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := c.ReadEntries(ctx, 2, 1<<20)
	if err != nil || len(ents) != 2 || c.ReadOffset() != 8 {
		t.Fatalf("read: %v %d ro=%d", err, len(ents), c.ReadOffset())
	}
	if err := c.IndividualDelete(4, 4); err != nil { // whole second entry
		t.Fatal(err)
	}
	if err := c.IndividualDelete(1, 1); err != nil { // one record of the first
		t.Fatal(err)
	}
	if err := c.MarkDelete(ctx, 0, map[string]int64{"k": 1}); err != nil {
		t.Fatal(err)
	}
	if c.MarkDeleteOffset() != 1 {
		t.Fatalf("mark-delete %d, want 1 (absorbs the ack of 1)", c.MarkDeleteOffset())
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c2, err := l.LoadCursor(ctx, "sub")
	if err != nil {
		t.Fatal(err)
	}
	if c2.MarkDeleteOffset() != 1 || !c2.IsIndividuallyDeleted(5) || c2.IsIndividuallyDeleted(2) || c2.Properties()["k"] != 1 {
		t.Fatalf("restored cursor: md=%d ranges=%v props=%v", c2.MarkDeleteOffset(), c2.AckedRanges(), c2.Properties())
	}
	// Reading from the restored position skips the fully acknowledged entry.
	ents, err = c2.ReadEntries(ctx, 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, en := range ents {
		offs = append(offs, en.Offset)
	}
	if fmt.Sprint(offs) != "[0 8 12 16]" {
		t.Fatalf("offsets %v", offs)
	}
	bl, err := c2.Backlog(ctx)
	if err != nil || bl.Records != 20-2-4 {
		t.Fatalf("backlog %+v %v", bl, err)
	}
}

func TestFenceAndTrim(t *testing.T) {
	env := newMemEnv(t)
	a := env.engine(t, Options{})
	b := env.engine(t, Options{})
	ctx := ctxT(t)
	la, _ := a.Log(ctx, 9)
	for i := 0; i < 6; i++ {
		if _, err := la.Append(ctx, 2, payload(9, i)); err != nil {
			t.Fatal(err)
		}
	}
	lb, _ := b.Log(ctx, 9)
	first, err := lb.SoftTrim(ctx, 2) // inside entry [2,4): rounds up to 4
	if err != nil || first != 4 {
		t.Fatalf("soft trim: %d %v", first, err)
	}
	if _, err := lb.ReadEntries(ctx, 0, 10, 1<<20); !errors.Is(err, lakestream.ErrOffsetTrimmed) {
		t.Fatalf("read below first: %v", err)
	}
	// Engine a serves reads below the head it knows from its view of the
	// commit log; any linearizable call (NextOffset) brings that view up to
	// every record committed before it.
	if _, err := la.NextOffset(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := la.ReadEntries(ctx, 0, 10, 1<<20); !errors.Is(err, lakestream.ErrOffsetTrimmed) {
		t.Fatalf("read below first on the other engine: %v", err)
	}
	if err := lb.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := la.Append(ctx, 1, []byte("late")); !errors.Is(err, lakestream.ErrFenced) {
		t.Fatalf("append after fence on other engine: %v", err)
	}
	if err := b.HardTrim(ctx, 9, 8); err != nil {
		t.Fatal(err)
	}
	got, err := la.ReadEntries(ctx, 8, 10, 1<<20)
	if err != nil || len(got) != 2 || got[0].Offset != 8 {
		t.Fatalf("after hard trim: %v %+v", err, got)
	}
	// Bounds is FirstOffset and NextOffset in one read, on the engine
	// that did not trim too.
	if first, next, err := la.(*logHandle).Bounds(ctx); err != nil || first != 8 || next != 12 {
		t.Fatalf("Bounds after the hard trim = %d, %d, %v; want 8, 12", first, next, err)
	}
}

// A cursor deleted on one engine is never written back by a handle another
// engine still holds.
func TestDeletedCursorNotResurrected(t *testing.T) {
	env := newMemEnv(t)
	a := env.engine(t, Options{})
	b := env.engine(t, Options{})
	ctx := ctxT(t)
	if _, err := a.Append(ctx, 4, 3, []byte("x")); err != nil {
		t.Fatal(err)
	}
	la, _ := a.Log(ctx, 4)
	lb, _ := b.Log(ctx, 4)
	cb, err := lb.OpenCursor(ctx, "sub", -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := la.DeleteCursor(ctx, "sub"); err != nil {
		t.Fatal(err)
	}
	if err := cb.IndividualDelete(1, 1); err != nil {
		t.Fatal(err)
	}
	if err := cb.PersistState(ctx); !errors.Is(err, lakestream.ErrConflict) {
		t.Fatalf("persist of a cursor deleted elsewhere: %v, want ErrConflict", err)
	}
	if names, _ := la.CursorNames(ctx); len(names) != 0 {
		t.Fatalf("cursor came back: %v", names)
	}
}

package engine

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

func newFileEnv(t testing.TB) *testEnv {
	t.Helper()
	url := "file://" + filepath.ToSlash(t.TempDir())
	st, err := objstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.NewMem(meta.MemOptions{})
	t.Cleanup(func() { st.Close(); ms.Close() })
	return &testEnv{meta: ms, store: st, url: url}
}

// walObjects lists the WAL objects: key → size.
func walObjects(t *testing.T, st objstore.Store) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	if err := st.List(ctxT(t), "wal/", func(oi objstore.ObjectInfo) error { m[oi.Key] = oi.Size; return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// seqOf returns the flush seq in a WAL object name.
func seqOf(t *testing.T, key string) uint64 {
	t.Helper()
	parts := strings.Split(key[strings.LastIndexByte(key, '/')+1:], "-")
	if len(parts) != 3 {
		t.Fatalf("WAL object name %q: want <ms>-<seq>-<random>", key)
	}
	seq, err := strconv.ParseUint(parts[1], 16, 64)
	if err != nil {
		t.Fatalf("WAL object name %q: %v", key, err)
	}
	return seq
}

// segments lists the WAL segments (the objects named with segmentSeq).
func segments(t *testing.T, st objstore.Store) []string {
	t.Helper()
	var keys []string
	for k := range walObjects(t, st) {
		if seqOf(t, k) == segmentSeq {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// readAll reads log id from the start with a cold engine on env's stores.
func readAll(t *testing.T, env *testEnv, id lakestream.LogID) [][]byte {
	t.Helper()
	l, err := env.engine(t, Options{NodeID: "reader"}).Log(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.ReadEntries(ctxT(t), 0, 1000, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, g := range got {
		out = append(out, g.Payload)
	}
	return out
}

// windowIntentsLeft counts the window intents in the metadata.
func windowIntentsLeft(t *testing.T, e *Engine) int {
	t.Helper()
	n := 0
	if err := e.scan(ctxT(t), e.keys.pendingPrefix(), func(key string, _ []byte) error {
		if strings.Contains(key, "/"+windowIntentPrefix) {
			t.Logf("window intent left: %s", key)
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// On a file store the writer appends its flushes to one WAL segment
// (docs/index-format.md, "WAL segments"): one object for many flushes,
// each chunk read back at its offset by a cold engine; a segment full for
// the next flush is followed by a new one; another node's GC keeps the
// segment while the writer lives; Close leaves no window intent behind.
func TestWALSegments(t *testing.T) {
	env := newFileEnv(t)
	ctx := ctxT(t)
	e := env.engine(t, Options{WALSegmentBytes: 1 << 20})
	l, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i, n := range []int{5, 200 << 10, 10, 300 << 10, 7, 400 << 10, 1} {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		if _, err := l.Append(ctx, 1, p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	objs := walObjects(t, env.store)
	segs := segments(t, env.store)
	if len(segs) != 1 || len(objs) != 1 {
		t.Fatalf("objects after 7 flushes of 0.9 MiB in all: %v, want one segment", objs)
	}
	st, err := env.engine(t, Options{NodeID: "gc"}).CollectGarbage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted != 0 || st.Listed != 1 {
		t.Fatalf("GC while the segment is open: %+v, want it listed and kept", st)
	}
	// 0.9 MiB + 300 KiB is past 1 MiB: the next flush opens a new segment.
	p := bytes.Repeat([]byte("z"), 300<<10)
	if _, err := l.Append(ctx, 1, p); err != nil {
		t.Fatal(err)
	}
	want = append(want, p)
	if segs := segments(t, env.store); len(segs) != 2 {
		t.Fatalf("segments after the first is full: %v, want 2", segs)
	}
	if got := readAll(t, env, 1); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("cold read: %d entries, want the %d appended", len(got), len(want))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := windowIntentsLeft(t, e); n != 0 {
		t.Fatalf("%d window intents after Close, want none (a flush or segment left counted)", n)
	}
	if m := e.Metrics(); m.SegmentFallbacks != 0 {
		t.Fatalf("%d flushes fell back to their own object, want 0", m.SegmentFallbacks)
	}
}

// A segment whose chunks are all gone (the log deleted) while it still
// takes flushes is kept by GC: its name's seq is above any "done" its
// window intent publishes, so only the end of the window's intent — after
// the segment is closed and its flushes answered — leaves it to the
// references alone.
func TestWALSegmentOutlivesItsChunks(t *testing.T) {
	env := newFileEnv(t)
	ctx := ctxT(t)
	e := env.engine(t, Options{})
	one, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.Append(ctx, 1, []byte("gone soon")); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteLog(ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.writer.windows.publish(ctx) // "done" now covers the first flush
	gc := env.engine(t, Options{NodeID: "gc"})
	if st, err := gc.CollectGarbage(ctx); err != nil || st.Deleted != 0 || st.Protected != 1 {
		t.Fatalf("GC of an open segment without references: %+v, %v; want it protected", st, err)
	}
	two, err := e.Log(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := two.Append(ctx, 1, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if segs := segments(t, env.store); len(segs) != 1 {
		t.Fatalf("segments: %v, want the one both flushes went to", segs)
	}
	if got := readAll(t, env, 2); len(got) != 1 || string(got[0]) != "kept" {
		t.Fatalf("cold read of log 2: %q, want [kept]", got)
	}
}

// A segment takes flushes until its window is over; the next flush opens
// a new one, the old one is closed, its window's intent goes, and GC
// keeps the segment for its references.
func TestWALSegmentRollsWithAge(t *testing.T) {
	env := newFileEnv(t)
	ctx := ctxT(t)
	const window = 10 * time.Second
	var ms atomic.Int64
	ms.Store(1000 * window.Milliseconds())
	clock := func() time.Time { return time.UnixMilli(ms.Load()) }
	e := env.engine(t, Options{Now: clock, PendingWindow: window})
	l, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, 1, []byte("first")); err != nil {
		t.Fatal(err)
	}
	first := segments(t, env.store)
	ms.Add(window.Milliseconds() - 1) // the last millisecond of the window
	if _, err := l.Append(ctx, 1, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if segs := segments(t, env.store); len(segs) != 1 {
		t.Fatalf("segments: %v, want one while the window lasts", segs)
	}
	ms.Add(1)
	if _, err := l.Append(ctx, 1, []byte("third")); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, env.store)
	if len(first) != 1 || len(segs) != 2 {
		t.Fatalf("segments: %v then %v, want a second one in the next window", first, segs)
	}
	e.writer.windows.sweep(ctx, ms.Load()) // the first segment's window is over and answered
	e.writer.windows.mu.Lock()
	_, firstLive := e.writer.windows.mu.m[1000*window.Milliseconds()]
	e.writer.windows.mu.Unlock()
	if firstLive {
		t.Fatal("the first segment's window intent outlived its window: the segment is still counted in it")
	}
	st, err := env.engine(t, Options{NodeID: "gc", Now: clock, PendingWindow: window}).CollectGarbage(ctx)
	if err != nil || st.Deleted != 0 {
		t.Fatalf("GC after the first window: %+v, %v; want nothing deleted", st, err)
	}
	if got := readAll(t, env, 1); len(got) != 3 || string(got[0]) != "first" || string(got[1]) != "second" || string(got[2]) != "third" {
		t.Fatalf("cold read: %q, want [first second third]", got)
	}
}

// failingAppender makes segments whose appends fail.
type failingAppender struct{ objstore.Appender }

func (f failingAppender) Create(ctx context.Context, key string) (objstore.Appendable, error) {
	a, err := f.Appender.Create(ctx, key)
	return failingAppendable{a}, err
}

type failingAppendable struct{ objstore.Appendable }

func (failingAppendable) Append(context.Context, []byte) (int64, error) {
	return 0, errors.New("injected append failure")
}

// A segment that fails an append is retired and the flush is written as
// its own object: the append succeeds, the fallback is counted, and the
// window accounting stays whole (Close leaves no intent).
func TestWALSegmentAppendFails(t *testing.T) {
	env := newFileEnv(t)
	ctx := ctxT(t)
	e := env.engine(t, Options{})
	e.writer.segs.store = failingAppender{e.appender} // before the first flush
	l, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := l.Append(ctx, 1, payload(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	if m := e.Metrics(); m.SegmentFallbacks != 3 {
		t.Fatalf("%d fallbacks, want 3", m.SegmentFallbacks)
	}
	if got := readAll(t, env, 1); len(got) != 3 {
		t.Fatalf("cold read: %d entries, want 3", len(got))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := windowIntentsLeft(t, e); n != 0 {
		t.Fatalf("%d window intents after Close, want none", n)
	}
}

// A store that cannot append (mem://), or WALSegmentBytes < 0: every
// flush is its own object.
func TestWALSegmentsOff(t *testing.T) {
	env := newFileEnv(t)
	ctx := ctxT(t)
	e := env.engine(t, Options{WALSegmentBytes: -1})
	l, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := l.Append(ctx, 1, payload(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	if objs := walObjects(t, env.store); len(objs) != 5 || len(segments(t, env.store)) != 0 {
		t.Fatalf("objects: %v, want the 5 flushes' own", objs)
	}
	if e.appender == nil {
		t.Fatal("a file store has an Appender")
	}
	if m := newMemEnv(t).engine(t, Options{}); m.appender != nil {
		t.Fatalf("mem store: appender %T, want nil", m.appender)
	}
}

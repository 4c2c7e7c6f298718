package engine

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	name := key[strings.LastIndexByte(key, '/')+1:]
	var ms int64
	var seq uint64
	if _, err := fmt.Sscanf(name, "%013d-%08x-", &ms, &seq); err != nil {
		t.Fatalf("WAL object name %q: %v", key, err)
	}
	return seq
}

// On a file store the writer creates the objects of its next flushes
// ahead (docs/index-format.md, "Prepared WAL objects"): a flush fills the
// object prepared for its seq, GC keeps prepared objects while the writer
// lives, a prepared object deleted behind the writer's back is created
// at the PUT instead, and Close deletes the ones left unused.
func TestPreparedObjects(t *testing.T) {
	env := newFileEnv(t)
	ctx := ctxT(t)
	prepared := make(chan []string, 64)
	opts := Options{}
	opts.hooks.prepared = func(keys []string) { prepared <- keys }
	e := env.engine(t, opts)
	l, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	appendOne := func(p []byte) {
		t.Helper()
		if _, err := l.Append(ctx, 1, p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	// next returns the object prepared for flush seq, waiting for the
	// batch that holds it.
	seen := map[uint64]string{}
	next := func(seq uint64) string {
		t.Helper()
		for {
			if k, ok := seen[seq]; ok {
				return k
			}
			select {
			case keys := <-prepared:
				for _, k := range keys {
					seen[seqOf(t, k)] = k
				}
			case <-ctx.Done():
				t.Fatalf("no object prepared for flush %d", seq)
			}
		}
	}

	appendOne([]byte("first")) // flush 1: nothing prepared yet
	k2 := next(2)
	objs := walObjects(t, env.store)
	if len(objs) != 1+opts.withDefaults().PrepareAhead {
		t.Fatalf("objects after one flush: %v, want it and %d prepared", objs, opts.withDefaults().PrepareAhead)
	}
	if size, ok := objs[k2]; !ok || size != 0 {
		t.Fatalf("objects after one flush: %v, want %s prepared, empty", objs, k2)
	}

	// Another node's GC (intents honoured) keeps the prepared objects.
	st, err := env.engine(t, Options{NodeID: "gc"}).CollectGarbage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted != 0 || st.Referenced != 1 || st.Protected != len(objs)-1 {
		t.Fatalf("GC while objects are prepared: %+v, want 1 referenced, %d protected, none deleted", st, len(objs)-1)
	}

	appendOne([]byte("second")) // flush 2 fills k2
	if objs := walObjects(t, env.store); objs[k2] == 0 {
		t.Fatalf("after flush 2: %s has %d bytes, want the flush's object", k2, objs[k2])
	}

	// Flush 3's object is deleted behind the writer's back (through
	// another store value, as another process would): its PUT creates it,
	// and the engine counts it gone.
	k3 := next(3)
	other, err := objstore.Open(ctx, env.url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Delete(ctx, k3); err != nil {
		t.Fatal(err)
	}
	appendOne([]byte("third"))
	if objs := walObjects(t, env.store); objs[k3] == 0 {
		t.Fatalf("after flush 3: %s has %d bytes, want the flush's object", k3, objs[k3])
	}
	if m := e.Metrics(); m.PreparedFilled != 1 || m.PreparedGone != 1 {
		t.Fatalf("after flush 3: %d prepared objects filled, %d gone; want 1 and 1", m.PreparedFilled, m.PreparedGone)
	}

	for _, n := range []int{200 << 10, 10, 300 << 10} {
		appendOne(bytes.Repeat([]byte("b"), n))
	}

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	objs = walObjects(t, env.store)
	if len(objs) != len(want) {
		t.Fatalf("objects after Close: %d (%v), want the %d flushes' only", len(objs), objs, len(want))
	}
	// A cold engine reads every entry back from the files.
	cold, err := env.engine(t, Options{NodeID: "reader"}).Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cold.ReadEntries(ctx, 0, 1000, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d entries, want %d", len(got), len(want))
	}
	for i, g := range got {
		if !bytes.Equal(g.Payload, want[i]) {
			t.Fatalf("entry %d: %d bytes, want %d", i, len(g.Payload), len(want[i]))
		}
	}
}

// Prepared objects keep their window's intent after the window is over,
// until their flushes take them: the sweep of finished windows leaves the
// intent, and another node's GC keeps the files.
func TestPreparedObjectsOutliveTheirWindow(t *testing.T) {
	env := newFileEnv(t)
	ctx := ctxT(t)
	const window = 10 * time.Second
	var ms atomic.Int64
	ms.Store(1000*window.Milliseconds() - 100) // 100 ms before a window ends
	clock := func() time.Time { return time.UnixMilli(ms.Load()) }
	prepared := make(chan []string, 64)
	opts := Options{Now: clock, PendingWindow: window}
	opts.hooks.prepared = func(keys []string) { prepared <- keys }
	e := env.engine(t, opts)
	l, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, 1, []byte("first")); err != nil {
		t.Fatal(err)
	}
	var keys []string
	select {
	case keys = <-prepared:
	case <-ctx.Done():
		t.Fatal("nothing prepared after the first flush")
	}

	ms.Add(200) // the window of the first flush and of the names is over
	e.writer.windows.sweep(ctx, ms.Load())
	st, err := env.engine(t, Options{NodeID: "gc", Now: clock, PendingWindow: window}).CollectGarbage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	objs := walObjects(t, env.store)
	for _, k := range keys {
		if _, ok := objs[k]; !ok {
			t.Fatalf("prepared %s deleted after its window ended (GC %+v)", k, st)
		}
	}
	if st.Deleted != 0 {
		t.Fatalf("GC after the window ended: %+v, want nothing deleted", st)
	}
	if _, err := l.Append(ctx, 1, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if m := e.Metrics(); m.PreparedFilled != 1 || m.PreparedGone != 0 {
		t.Fatalf("second flush: %d prepared objects filled, %d gone; want 1 and 0", m.PreparedFilled, m.PreparedGone)
	}
}

// A store that cannot prepare (mem://), or PrepareAhead < 0: every object
// is created at its PUT and nothing is listed ahead.
func TestPreparedObjectsOff(t *testing.T) {
	env := newFileEnv(t)
	ctx := ctxT(t)
	e := env.engine(t, Options{PrepareAhead: -1})
	l, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := l.Append(ctx, 1, payload(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	if objs := walObjects(t, env.store); len(objs) != 5 {
		t.Fatalf("objects: %v, want the 5 flushes' only", objs)
	}
	if e.preparer == nil {
		t.Fatal("a file store has a Preparer")
	}
	if m := newMemEnv(t).engine(t, Options{}); m.preparer != nil {
		t.Fatalf("mem store: preparer %T, want nil", m.preparer)
	}
}

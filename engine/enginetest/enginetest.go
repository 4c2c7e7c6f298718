// Package enginetest is the acceptance suite of the storage engine: the
// contract of lakestream.LogStorage, lakestream.Log and
// lakestream.LogCursor as executable tests, run against the real engine on
// whatever object store and metadata store a backend provides.
//
// A backend's test calls Run with a constructor of fresh environments (one
// per subtest):
//
//	func TestAcceptanceMem(t *testing.T) {
//		enginetest.Run(t, func(t *testing.T) enginetest.Env {
//			st, _ := objstore.Open(t.Context(), "mem://")
//			ms := meta.NewMem(meta.MemOptions{})
//			t.Cleanup(func() { st.Close(); ms.Close() })
//			return enginetest.Env{Store: st, Meta: ms}
//		})
//	}
//
// An Env is an empty object store and an empty metadata store (or isolated
// key spaces of shared ones: a bucket prefix, an etcd prefix) that nothing
// else writes to while the subtest runs. Most subtests start two or more
// engines on one Env, as separate nodes sharing storage would be, so the
// cross-node paths (head watches, commit conflicts, fencing, cursors loaded
// elsewhere) are exercised on every backend. The constructor owns the
// stores' cleanup; the suite closes the engines it starts (before the
// stores: cleanups run last-in first-out).
//
// Subtests never call t.Parallel, so constructors may use t.Setenv. Nothing
// in the suite sleeps: it waits on results, channels and contexts, and every
// wait is bounded by opTimeout, a failure deadline.
package enginetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/cursor"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// opTimeout bounds each subtest's operations. It is a failure deadline, not
// a wait: a correct engine answers in milliseconds.
const opTimeout = 60 * time.Second

// Env is one subtest's storage: an object store and a metadata store that
// any number of engines share.
type Env struct {
	// Store holds the WAL objects; it is empty when the subtest starts.
	Store objstore.Store
	// Meta holds heads, indexes and cursors; it is empty when the subtest
	// starts.
	Meta meta.Store
	// NewMeta returns another empty metadata store of the same backend
	// whose MaxTxnOps is maxTxnOps (≥ 16), closed when t ends. Nil: the
	// suite uses meta.NewMem for the tests that need one.
	NewMeta func(t *testing.T, maxTxnOps int) meta.Store
	// Options are the base options of every engine the suite starts
	// (tests change some fields, e.g. Linger, for their own engines).
	Options engine.Options
}

// Start starts an engine on the Env's stores with the Env's options changed
// by tweaks, and closes it when t ends.
func (env Env) Start(t *testing.T, tweaks ...func(*engine.Options)) *engine.Engine {
	t.Helper()
	return env.StartOn(t, env.Meta, tweaks...)
}

// StartOn is Start on another metadata store (and the Env's object store).
func (env Env) StartOn(t *testing.T, ms meta.Store, tweaks ...func(*engine.Options)) *engine.Engine {
	t.Helper()
	o := env.Options
	for _, f := range tweaks {
		f(&o)
	}
	e, err := engine.New(env.Store, ms, o)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("closing engine %s: %v", e.NodeID(), err)
		}
	})
	return e
}

func (env Env) newMeta(t *testing.T, maxTxnOps int) meta.Store {
	if env.NewMeta != nil {
		return env.NewMeta(t, maxTxnOps)
	}
	ms := meta.NewMem(meta.MemOptions{MaxTxnOps: maxTxnOps})
	t.Cleanup(func() { ms.Close() })
	return ms
}

// Run runs the suite; newEnv is called once per subtest.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	tests := []struct {
		name string
		fn   func(t *testing.T, env Env)
	}{
		{"AppendReadRoundTrip", testAppendReadRoundTrip},
		{"ReadLimits", testReadLimits},
		{"PointReads", testPointReads},
		{"FindOffsetByTime", testFindOffsetByTime},
		{"FindOffsetByTimeMixedPublishTimes", testFindOffsetByTimeMixed},
		{"SearchOffset", testSearchOffset},
		{"WaitForEntries", testWaitForEntries},
		{"Fence", testFence},
		{"SoftTrim", testSoftTrim},
		{"SoftTrimRacingAppends", testSoftTrimRacingAppends},
		{"HardTrimAndGC", testHardTrimAndGC},
		{"GCWithCursorNamedLikeIndex", testGCCursorNames},
		{"DeleteLog", testDeleteLog},
		{"Prefetch", testPrefetch},
		{"CursorLifecycle", testCursorLifecycle},
		{"EphemeralCursor", testEphemeralCursor},
		{"MarkDeletePersisted", testMarkDeletePersisted},
		{"IndividualDelete", testIndividualDelete},
		{"Backlog", testBacklog},
		{"CursorStateBound", testCursorStateBound},
		{"ConcurrentAppends", testConcurrentAppends},
		{"AppendAsync", testAppendAsync},
		{"AppendChain", testAppendChain},
		{"ReadStaged", testReadStaged},
		{"OpenStagedSets", testOpenStagedSets},
		{"ManyLogsSmallTxns", testManyLogsSmallTxns},
		{"InvalidAppends", testInvalidAppends},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newEnv(t)) })
	}
}

// ---- helpers ----

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

func openLog(t *testing.T, s lakestream.LogStorage, id lakestream.LogID) lakestream.Log {
	t.Helper()
	l, err := s.Log(testCtx(t), id)
	if err != nil {
		t.Fatalf("Log(%d): %v", id, err)
	}
	return l
}

// payload is size bytes that name log and i (unique per (log, i) when size
// is at least 24).
func payload(id lakestream.LogID, i, size int) []byte {
	b := fmt.Appendf(nil, "log %d entry %d;", id, i)
	for j := 0; len(b) < size; j++ {
		b = append(b, byte('a'+(i+j)%26))
	}
	return b[:size]
}

// spec is one entry to append.
type spec struct {
	records int
	size    int
	pub     int64 // 0 = none
}

func appendOne(ctx context.Context, l lakestream.Log, i int, s spec) (lakestream.Entry, error) {
	p := payload(l.ID(), i, s.size)
	var opts []lakestream.AppendOption
	if s.pub != 0 {
		opts = append(opts, lakestream.WithPublishTime(s.pub))
	}
	h, err := l.Append(ctx, s.records, p, opts...)
	return lakestream.Entry{EntryHeader: h, Payload: p}, err
}

// appendSeq appends specs one after another, on the logs in turn (handles
// of one log on several engines), and checks each returned header.
func appendSeq(t *testing.T, ls []lakestream.Log, specs []spec) []lakestream.Entry {
	t.Helper()
	ctx := testCtx(t)
	next, err := ls[0].NextOffset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cum := int64(-1)
	var out []lakestream.Entry
	for i, s := range specs {
		before := time.Now().UnixMilli()
		e, err := appendOne(ctx, ls[i%len(ls)], i, s)
		after := time.Now().UnixMilli()
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		h := e.EntryHeader
		if h.Offset != next || h.Records != int32(s.records) || h.Size != int32(len(e.Payload)) {
			t.Fatalf("append %d: header %+v, want offset %d, %d records, size %d", i, h, next, s.records, len(e.Payload))
		}
		if h.WriteTimeMs < before || h.WriteTimeMs > after {
			t.Errorf("append %d: write time %d outside [%d, %d]", i, h.WriteTimeMs, before, after)
		}
		wantPub := s.pub
		if wantPub == 0 {
			wantPub = h.WriteTimeMs
		}
		if h.PublishTimeMs != wantPub {
			t.Errorf("append %d: publish time %d, want %d", i, h.PublishTimeMs, wantPub)
		}
		if cum >= 0 && h.CumulativeSize != cum+int64(h.Size) {
			t.Errorf("append %d: cumulative size %d, want %d", i, h.CumulativeSize, cum+int64(h.Size))
		}
		cum = h.CumulativeSize
		next = h.End()
		out = append(out, e)
	}
	return out
}

// appendBurst appends specs concurrently (so several share a WAL object)
// and returns the entries in offset order.
func appendBurst(t *testing.T, l lakestream.Log, first int, specs []spec) []lakestream.Entry {
	t.Helper()
	ctx := testCtx(t)
	out := make([]lakestream.Entry, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Go(func() { out[i], errs[i] = appendOne(ctx, l, first+i, s) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("burst append: %v", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Offset < out[j].Offset })
	return out
}

// checkTiling checks that entries are contiguous from first with
// consistent cumulative sizes.
func checkTiling(t *testing.T, what string, es []lakestream.Entry, first int64) {
	t.Helper()
	off := first
	for i, e := range es {
		if e.Offset != off {
			t.Fatalf("%s: entry %d at offset %d, want %d (gap or overlap)", what, i, e.Offset, off)
		}
		if i > 0 && e.CumulativeSize != es[i-1].CumulativeSize+int64(e.Size) {
			t.Fatalf("%s: entry %d cumulative size %d, previous %d + size %d", what, i, e.CumulativeSize, es[i-1].CumulativeSize, e.Size)
		}
		off = e.End()
	}
}

func sameEntries(t *testing.T, what string, got, want []lakestream.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d\ngot  %v\nwant %v", what, len(got), len(want), offsets(got), offsets(want))
	}
	for i := range got {
		if got[i].EntryHeader != want[i].EntryHeader {
			t.Fatalf("%s: entry %d header %+v, want %+v", what, i, got[i].EntryHeader, want[i].EntryHeader)
		}
		if !bytes.Equal(got[i].Payload, want[i].Payload) {
			t.Fatalf("%s: entry %d (offset %d) payload %q, want %q", what, i, got[i].Offset, got[i].Payload, want[i].Payload)
		}
	}
}

func offsets(es []lakestream.Entry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Offset
	}
	return out
}

func headers(es []lakestream.Entry) []lakestream.EntryHeader {
	out := make([]lakestream.EntryHeader, len(es))
	for i, e := range es {
		out[i] = e.EntryHeader
	}
	return out
}

func readAll(t *testing.T, l lakestream.Log) []lakestream.Entry {
	t.Helper()
	ctx := testCtx(t)
	first, err := l.FirstOffset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	es, err := l.ReadEntries(ctx, first, math.MaxInt32, math.MaxInt64)
	if err != nil {
		t.Fatalf("ReadEntries(%d): %v", first, err)
	}
	return es
}

func checkHeads(t *testing.T, what string, l lakestream.Log, first, next int64) {
	t.Helper()
	ctx := testCtx(t)
	f, err1 := l.FirstOffset(ctx)
	n, err2 := l.NextOffset(ctx)
	last, err3 := l.LastOffset(ctx)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatalf("%s: heads: %v", what, err)
	}
	if f != first || n != next || last != next-1 {
		t.Fatalf("%s: first/next/last = %d/%d/%d, want %d/%d/%d", what, f, n, last, first, next, next-1)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func countObjects(t *testing.T, st objstore.Store) int {
	t.Helper()
	n := 0
	if err := st.List(testCtx(t), "wal/", func(objstore.ObjectInfo) error { n++; return nil }); err != nil {
		t.Fatalf("list objects: %v", err)
	}
	return n
}

// objectPerFlush makes an engine write every flush as its own WAL object,
// for tests that count the objects in the store (on a store that appends,
// flushes share WAL segments; docs/index-format.md, "WAL segments").
func objectPerFlush(o *engine.Options) { o.WALSegmentBytes = -1 }

// sizeCut makes an engine cut WAL objects on size only: exactly when the
// pending payload reaches flushBytes (Linger is an hour). Tests use it to
// put chosen entries in one object, deterministically.
func sizeCut(flushBytes int) func(*engine.Options) {
	return func(o *engine.Options) {
		o.FlushBytes = flushBytes
		o.Linger = time.Hour
	}
}

// ---- tests ----

func testAppendReadRoundTrip(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la, lb := openLog(t, a, 1), openLog(t, b, 1)
	checkHeads(t, "new log", la, 0, 0)
	if es, err := la.ReadEntries(ctx, 0, 10, 1<<20); err != nil || len(es) != 0 {
		t.Fatalf("read of empty log: %v %v", offsets(es), err)
	}

	// Sequential appends alternating between two engines: multi-record
	// entries, with and without publish times, one empty payload.
	var specs []spec
	for i := range 16 {
		s := spec{records: i%4 + 1, size: 20 + i*7%60, pub: 1_700_000_000_000 + int64(i)*10}
		if i%5 == 4 {
			s.pub = 0 // write time
		}
		if i == 6 {
			s.size = 0
		}
		specs = append(specs, s)
	}
	want := appendSeq(t, []lakestream.Log{la, lb}, specs)
	// Then bursts: several entries per WAL chunk.
	for round := range 3 {
		burst := make([]spec, 6)
		for i := range burst {
			burst[i] = spec{records: (i+round)%3 + 1, size: 30 + i, pub: 1_700_000_001_000 + int64(round*10+i)}
		}
		want = append(want, appendBurst(t, lb, 100+round*10, burst)...)
	}
	checkTiling(t, "appended", want, 0)
	next := want[len(want)-1].End()
	checkHeads(t, "after appends", la, 0, next)

	// Every engine, including a new one with a cold cache, reads the same.
	c := env.Start(t)
	for name, s := range map[string]lakestream.LogStorage{"writer a": a, "writer b": b, "cold c": c} {
		l := openLog(t, s, 1)
		sameEntries(t, name, readAll(t, l), want)
		checkHeads(t, name, l, 0, next)
		// The LogStorage methods agree with the Log's.
		es, err := s.ReadEntries(ctx, 1, 0, math.MaxInt32, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		sameEntries(t, name+" LogStorage.ReadEntries", es, want)
		hs, err := s.IndexRange(ctx, 1, 0, next)
		if err != nil || !slices.Equal(hs, headers(want)) {
			t.Fatalf("%s: IndexRange = %v %v, want %v", name, hs, err, headers(want))
		}
		f, err1 := s.FirstOffset(ctx, 1)
		last, err2 := s.LastOffset(ctx, 1)
		if f != 0 || last != next-1 || errors.Join(err1, err2) != nil {
			t.Fatalf("%s: LogStorage first/last %d/%d %v %v", name, f, last, err1, err2)
		}
	}

	// A read starting inside an entry returns that entry first.
	for _, w := range want {
		for o := w.Offset; o < w.End(); o++ {
			es, err := lb.ReadEntries(ctx, o, 1, 1)
			if err != nil || len(es) != 1 || es[0].EntryHeader != w.EntryHeader || !bytes.Equal(es[0].Payload, w.Payload) {
				t.Fatalf("read from %d (inside %+v): %v %v", o, w.EntryHeader, offsets(es), err)
			}
		}
	}
	// At and beyond the head: empty, no error.
	for _, o := range []int64{next, next + 5} {
		if es, err := la.ReadEntries(ctx, o, 10, 1<<20); err != nil || len(es) != 0 {
			t.Fatalf("read from %d (head %d): %v %v", o, next, offsets(es), err)
		}
	}
	// Payloads returned are the caller's: changing one changes nothing.
	es, _ := la.ReadEntries(ctx, 0, 1, 1<<20)
	if len(es[0].Payload) > 0 {
		es[0].Payload[0] ^= 0xff
	}
	sameEntries(t, "after caller modified a returned payload", readAll(t, la), want)
	// Logs are independent.
	other := openLog(t, a, 2)
	checkHeads(t, "other log", other, 0, 0)
}

// wantRead is the read contract: the entry containing start and the ones
// after it, as many as fit in maxRecords and maxBytes, at least one.
func wantRead(all []lakestream.Entry, start int64, maxRecords int, maxBytes int64) []lakestream.Entry {
	i := sort.Search(len(all), func(i int) bool { return all[i].End() > start })
	var out []lakestream.Entry
	var recs, size int64
	for ; i < len(all); i++ {
		e := all[i]
		if len(out) > 0 && (recs+int64(e.Records) > int64(maxRecords) || size+int64(e.Size) > maxBytes) {
			break
		}
		out = append(out, e)
		recs += int64(e.Records)
		size += int64(e.Size)
	}
	return out
}

func testReadLimits(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la := openLog(t, a, 1)
	var specs []spec
	for i := range 12 {
		specs = append(specs, spec{records: i%4 + 1, size: 10 + i%3*15})
	}
	all := appendSeq(t, []lakestream.Log{la}, specs)
	next := all[len(all)-1].End()
	lb := openLog(t, b, 1)
	limits := []struct {
		recs  int
		bytes int64
	}{{1, 1 << 20}, {3, 1 << 20}, {4, 1 << 20}, {7, 1 << 20}, {1 << 20, 1}, {1 << 20, 40}, {1 << 20, 55}, {5, 60}, {0, 0}, {1 << 20, 1 << 20}}
	for start := int64(0); start < next; start++ {
		for _, lim := range limits {
			got, err := lb.ReadEntries(ctx, start, lim.recs, lim.bytes)
			if err != nil {
				t.Fatalf("ReadEntries(%d, %d, %d): %v", start, lim.recs, lim.bytes, err)
			}
			sameEntries(t, fmt.Sprintf("ReadEntries(%d, %d records, %d bytes)", start, lim.recs, lim.bytes),
				got, wantRead(all, start, lim.recs, lim.bytes))
		}
	}
}

func testPointReads(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la := openLog(t, a, 1)
	var specs []spec
	for i := range 10 {
		specs = append(specs, spec{records: i%3 + 1, size: 16 + i})
	}
	all := appendSeq(t, []lakestream.Log{la}, specs)
	all = append(all, appendBurst(t, la, 50, []spec{{2, 20, 0}, {3, 21, 0}, {1, 22, 0}, {4, 23, 0}})...)
	checkTiling(t, "appended", all, 0)
	next := all[len(all)-1].End()
	lb := openLog(t, b, 1)

	check := func(first int64) {
		t.Helper()
		live := all[sort.Search(len(all), func(i int) bool { return all[i].End() > first }):]
		for _, w := range live {
			for o := max(w.Offset, first); o < w.End(); o++ {
				e, err := lb.ReadEntry(ctx, o)
				if err != nil || e.EntryHeader != w.EntryHeader || !bytes.Equal(e.Payload, w.Payload) {
					t.Fatalf("ReadEntry(%d) = %+v %v, want %+v", o, e.EntryHeader, err, w.EntryHeader)
				}
				h, err := lb.EntryHeader(ctx, o)
				if err != nil || h != w.EntryHeader {
					t.Fatalf("EntryHeader(%d) = %+v %v, want %+v", o, h, err, w.EntryHeader)
				}
			}
		}
		for _, o := range []int64{next, next + 1, next + 1000} {
			_, err := lb.ReadEntry(ctx, o)
			wantErr(t, fmt.Sprintf("ReadEntry(%d), head %d", o, next), err, lakestream.ErrOffsetOutOfRange)
			_, err = lb.EntryHeader(ctx, o)
			wantErr(t, fmt.Sprintf("EntryHeader(%d), head %d", o, next), err, lakestream.ErrOffsetOutOfRange)
		}
		for o := int64(0); o < first; o++ {
			_, err := lb.ReadEntry(ctx, o)
			wantErr(t, fmt.Sprintf("ReadEntry(%d), first %d", o, first), err, lakestream.ErrOffsetTrimmed)
			_, err = lb.EntryHeader(ctx, o)
			wantErr(t, fmt.Sprintf("EntryHeader(%d), first %d", o, first), err, lakestream.ErrOffsetTrimmed)
			_, err = lb.ReadEntries(ctx, o, 10, 1<<20)
			wantErr(t, fmt.Sprintf("ReadEntries(%d), first %d", o, first), err, lakestream.ErrOffsetTrimmed)
		}
		for s := int64(-1); s <= next+1; s++ {
			for e := s; e <= next+2; e += 3 {
				var want []lakestream.EntryHeader
				for _, w := range live {
					if lo, hi := max(s, first), min(e, next); lo < hi && w.Offset < hi && w.End() > lo {
						want = append(want, w.EntryHeader)
					}
				}
				got, err := lb.IndexRange(ctx, s, e)
				if err != nil || len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
					t.Fatalf("IndexRange(%d, %d) = %v %v, want %v", s, e, got, err, want)
				}
				n, err := lb.MessageCount(ctx, s, e)
				if wantN := max(0, min(e, next)-max(s, first)); err != nil || n != wantN {
					t.Fatalf("MessageCount(%d, %d) = %d %v, want %d (first %d, head %d)", s, e, n, err, wantN, first, next)
				}
			}
		}
	}
	check(0)
	first, err := la.SoftTrim(ctx, all[3].Offset)
	if err != nil || first != all[3].End() {
		t.Fatalf("SoftTrim(%d) = %d %v, want %d", all[3].Offset, first, err, all[3].End())
	}
	check(first)
}

func testFindOffsetByTime(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la := openLog(t, a, 1)
	const base = 1_700_000_000_000
	if o, err := la.FindOffsetByTime(ctx, time.UnixMilli(base)); err != nil || o != 0 {
		t.Fatalf("FindOffsetByTime on empty log = %d %v, want 0", o, err)
	}
	// Non-monotone publish times, in single-entry and multi-entry chunks.
	pubs := []int64{100, 300, 200, 400, 400, 500, 450, 700}
	var specs []spec
	for i, p := range pubs {
		specs = append(specs, spec{records: i%2 + 1, size: 20, pub: base + p})
	}
	all := appendSeq(t, []lakestream.Log{la}, specs)
	var burst []spec
	for _, p := range []int64{900, 800, 1000, 1000} {
		burst = append(burst, spec{records: 2, size: 20, pub: base + p})
	}
	all = append(all, appendBurst(t, la, 100, burst)...)
	next := all[len(all)-1].End()
	lb := openLog(t, b, 1)

	find := func(first int64, ms int64) int64 {
		for _, e := range all {
			if e.End() > first && e.PublishTimeMs >= ms {
				return max(e.Offset, first)
			}
		}
		return next
	}
	check := func(first int64) {
		t.Helper()
		for ms := int64(base); ms <= base+1100; ms += 50 {
			for _, d := range []int64{-1, 0, 1} {
				got, err := lb.FindOffsetByTime(ctx, time.UnixMilli(ms+d))
				if want := find(first, ms+d); err != nil || got != want {
					t.Fatalf("FindOffsetByTime(base+%d) = %d %v, want %d (first %d)", ms+d-base, got, err, want, first)
				}
			}
		}
	}
	check(0)
	first, err := lb.SoftTrim(ctx, all[2].Offset)
	if err != nil {
		t.Fatal(err)
	}
	check(first)
}

// testFindOffsetByTimeMixed: one WAL chunk holds an entry with an explicit
// (old) publish time and an entry without one (its publish time is its
// write time, now). The second must be found for a time between the two.
func testFindOffsetByTimeMixed(t *testing.T, env Env) {
	ctx := testCtx(t)
	a := env.Start(t, sizeCut(40))
	la := openLog(t, a, 1)
	all := appendBurst(t, la, 0, []spec{{1, 20, 1000}, {1, 20, 0}})
	var explicit, implicit lakestream.Entry
	for _, e := range all {
		if e.PublishTimeMs == 1000 {
			explicit = e
		} else {
			implicit = e
		}
	}
	if implicit.PublishTimeMs < time.Now().Add(-time.Hour).UnixMilli() {
		t.Fatalf("entry without publish time has publish time %d, want its write time %d", implicit.PublishTimeMs, implicit.WriteTimeMs)
	}
	if got, err := la.FindOffsetByTime(ctx, time.UnixMilli(500)); err != nil || got != all[0].Offset {
		t.Fatalf("FindOffsetByTime(500) = %d %v, want %d", got, err, all[0].Offset)
	}
	if got, err := la.FindOffsetByTime(ctx, time.UnixMilli(2000)); err != nil || got != implicit.Offset {
		t.Fatalf("FindOffsetByTime(2000) = %d %v, want %d: the entry appended without a publish time (publish time = write time %d) shares a chunk with one published at %d",
			got, err, implicit.Offset, implicit.PublishTimeMs, explicit.PublishTimeMs)
	}
}

func testSearchOffset(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la := openLog(t, a, 1)
	var specs []spec
	for i := range 15 {
		specs = append(specs, spec{records: i%3 + 1, size: 10 + i})
	}
	all := appendSeq(t, []lakestream.Log{la}, specs)
	next := all[len(all)-1].End()
	lb := openLog(t, b, 1)
	for _, lo := range []int64{0, all[4].Offset, all[9].Offset} {
		for _, hi := range []int64{all[9].Offset, all[12].Offset, next} {
			if hi < lo {
				continue
			}
			for _, target := range []int64{-1, all[0].CumulativeSize, all[5].CumulativeSize, all[5].CumulativeSize + 1, all[14].CumulativeSize, all[14].CumulativeSize + 1} {
				pred := func(h lakestream.EntryHeader) bool { return h.CumulativeSize >= target }
				want := hi
				for _, e := range all {
					if e.Offset >= lo && e.Offset < hi && pred(e.EntryHeader) {
						want = e.Offset
						break
					}
				}
				got, err := lb.SearchOffset(ctx, lo, hi, pred)
				if err != nil || got != want {
					t.Fatalf("SearchOffset(%d, %d, cumulative ≥ %d) = %d %v, want %d", lo, hi, target, got, err, want)
				}
			}
		}
	}
	got, err := lb.SearchOffset(ctx, 0, next, func(lakestream.EntryHeader) bool { return false })
	if err != nil || got != next {
		t.Fatalf("SearchOffset(never) = %d %v, want %d", got, err, next)
	}
}

func testWaitForEntries(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la, lb := openLog(t, a, 1), openLog(t, b, 1)
	type result struct {
		head int64
		err  error
	}
	wait := func(l lakestream.Log, ctx context.Context, offset int64) <-chan result {
		ch := make(chan result, 1)
		go func() {
			h, err := l.WaitForEntries(ctx, offset)
			ch <- result{h, err}
		}()
		return ch
	}
	// Waiters on the other engine, before the appends: the head watch wakes
	// them (engine b appends nothing).
	w0 := wait(lb, ctx, 0)
	w3 := wait(lb, ctx, 3)
	appendSeq(t, []lakestream.Log{la}, []spec{{2, 10, 0}})
	if r := <-w0; r.err != nil || r.head < 2 {
		t.Fatalf("WaitForEntries(0) = %d %v, want ≥ 2", r.head, r.err)
	}
	select {
	case r := <-w3:
		t.Fatalf("WaitForEntries(3) returned %d %v with head 2", r.head, r.err)
	default:
	}
	appendSeq(t, []lakestream.Log{la}, []spec{{1, 10, 0}, {1, 10, 0}})
	if r := <-w3; r.err != nil || r.head != 4 {
		t.Fatalf("WaitForEntries(3) = %d %v, want 4", r.head, r.err)
	}
	// Already beyond: returns at once, on either engine.
	for _, l := range []lakestream.Log{la, lb} {
		if h, err := l.WaitForEntries(ctx, 1); err != nil || h != 4 {
			t.Fatalf("WaitForEntries(1) with head 4 = %d %v", h, err)
		}
	}
	// A new engine's handle sees the head and wakes too.
	lc := openLog(t, env.Start(t), 1)
	wc := wait(lc, ctx, 4)
	appendSeq(t, []lakestream.Log{lb}, []spec{{1, 10, 0}})
	if r := <-wc; r.err != nil || r.head != 5 {
		t.Fatalf("new engine: WaitForEntries(4) = %d %v, want 5", r.head, r.err)
	}
	// Context cancel.
	cctx, cancel := context.WithCancel(ctx)
	wx := wait(lb, cctx, 100)
	cancel()
	if r := <-wx; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("WaitForEntries after cancel = %d %v, want context.Canceled", r.head, r.err)
	}
	// Deleting the log (on another engine) ends waits.
	wd := wait(lb, ctx, 100)
	if err := a.DeleteLog(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if r := <-wd; !errors.Is(r.err, lakestream.ErrNoSuchLog) {
		t.Fatalf("WaitForEntries on a deleted log = %d %v, want ErrNoSuchLog", r.head, r.err)
	}
}

func testFence(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la, lb := openLog(t, a, 1), openLog(t, b, 1)
	appendSeq(t, []lakestream.Log{la}, []spec{{1, 10, 0}, {2, 10, 0}, {3, 10, 0}})
	lo := openLog(t, a, 2) // another log, not fenced
	appendSeq(t, []lakestream.Log{lo}, []spec{{1, 10, 0}})
	if f, err := la.Fenced(ctx); err != nil || f {
		t.Fatalf("Fenced before Fence: %v %v", f, err)
	}

	// Appenders on a keep appending; b fences while they run.
	var (
		mu    sync.Mutex
		acked []lakestream.Entry
		bad   []error
		wg    sync.WaitGroup
	)
	progress := make(chan struct{}, 1000)
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				e, err := appendOne(ctx, la, 1000*g+i, spec{records: 1 + i%2, size: 12})
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, e)
				case !errors.Is(err, lakestream.ErrFenced):
					bad = append(bad, err)
				}
				mu.Unlock()
				if err != nil {
					return
				}
				progress <- struct{}{}
			}
		})
	}
	for range 5 {
		<-progress
	}
	if err := lb.Fence(ctx); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	// After Fence returns, every append fails, on every engine.
	for name, l := range map[string]lakestream.Log{"a": la, "b": lb, "new": openLog(t, env.Start(t), 1)} {
		_, err := appendOne(ctx, l, 0, spec{records: 1, size: 5})
		wantErr(t, "append on "+name+" after fence", err, lakestream.ErrFenced)
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("appends racing a fence failed with errors other than ErrFenced: %v", errors.Join(bad...))
	}
	// The log holds exactly the three first entries and the acknowledged ones.
	got := readAll(t, lb)
	checkTiling(t, "fenced log", got, 0)
	if len(got) != 3+len(acked) {
		t.Fatalf("fenced log has %d entries, want 3 + %d acknowledged", len(got), len(acked))
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].Offset < acked[j].Offset })
	sameEntries(t, "acknowledged before the fence", got[3:], acked)
	// Every handle, on every engine, learns the log is fenced.
	for name, l := range map[string]lakestream.Log{"a": la, "b": lb, "new": openLog(t, env.Start(t), 1)} {
		if f, err := l.Fenced(ctx); err != nil || !f {
			t.Fatalf("Fenced on %s after Fence: %v %v", name, f, err)
		}
	}
	if f, err := lo.Fenced(ctx); err != nil || f {
		t.Fatalf("Fenced on another log: %v %v", f, err)
	}
	// Fencing again is a no-op; the other log still takes appends.
	if err := la.Fence(ctx); err != nil {
		t.Fatalf("second Fence: %v", err)
	}
	appendSeq(t, []lakestream.Log{lo}, []spec{{1, 10, 0}})
}

func testSoftTrim(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la := openLog(t, a, 1)
	specs := make([]spec, 5)
	for i := range specs {
		specs[i] = spec{records: 3, size: 10}
	}
	all := appendSeq(t, []lakestream.Log{la}, specs) // [0,3) [3,6) [6,9) [9,12) [12,15)
	lb := openLog(t, b, 1)
	steps := []struct{ inclusive, first int64 }{
		{-1, 0},  // nothing
		{1, 3},   // inside [0,3): rounds up
		{0, 3},   // never back
		{3, 6},   // first record of [3,6): the whole entry
		{5, 6},   // entry end exactly
		{-5, 6},  // never back
		{10, 12}, // inside [9,12)
	}
	for _, s := range steps {
		for _, l := range []lakestream.Log{lb, la} { // trim on b, repeat on a (no-op)
			first, err := l.SoftTrim(ctx, s.inclusive)
			if err != nil || first != s.first {
				t.Fatalf("SoftTrim(%d) = %d %v, want %d", s.inclusive, first, err, s.first)
			}
		}
		checkHeads(t, fmt.Sprintf("after SoftTrim(%d)", s.inclusive), la, s.first, 15)
		if s.first > 0 {
			_, err := la.ReadEntries(ctx, s.first-1, 10, 1<<20)
			wantErr(t, "read below first", err, lakestream.ErrOffsetTrimmed)
		}
		got := readAll(t, la)
		sameEntries(t, fmt.Sprintf("after SoftTrim(%d)", s.inclusive), got, all[s.first/3:])
	}
	// Trimming to (or beyond) the head empties the log but keeps offsets.
	first, err := lb.SoftTrim(ctx, 1000)
	if err != nil || first != 15 {
		t.Fatalf("SoftTrim(1000) with head 15 = %d %v, want 15", first, err)
	}
	checkHeads(t, "trimmed to head", la, 15, 15)
	if n, err := la.MessageCount(ctx, 0, 100); err != nil || n != 0 {
		t.Fatalf("MessageCount of emptied log = %d %v", n, err)
	}
	more := appendSeq(t, []lakestream.Log{la}, []spec{{2, 10, 0}})
	if more[0].Offset != 15 || more[0].CumulativeSize != all[4].CumulativeSize+10 {
		t.Fatalf("append after trim to head: %+v", more[0].EntryHeader)
	}
	sameEntries(t, "after trim to head and append", readAll(t, lb), more)
}

// job is one append of appendTogether.
type job struct {
	l lakestream.Log
	i int
	s spec
}

// appendTogether runs the appends concurrently and returns their entries in
// job order.
func appendTogether(t *testing.T, jobs ...job) []lakestream.Entry {
	t.Helper()
	ctx := testCtx(t)
	out := make([]lakestream.Entry, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for k, j := range jobs {
		wg.Go(func() { out[k], errs[k] = appendOne(ctx, j.l, j.i, j.s) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("append: %v", err)
	}
	return out
}

func gcPass(t *testing.T, e *engine.Engine, want engine.GCStats) {
	t.Helper()
	st, err := e.CollectGarbage(testCtx(t))
	if err != nil {
		t.Fatalf("CollectGarbage: %v", err)
	}
	if st.Listed != want.Listed || st.Referenced != want.Referenced || st.Deleted != want.Deleted {
		t.Fatalf("CollectGarbage = %+v, want listed/referenced/deleted %d/%d/%d", st, want.Listed, want.Referenced, want.Deleted)
	}
}

// getHook is a metadata store that calls before(key) ahead of every Get,
// so a test can stop an engine between two of its reads.
type getHook struct {
	meta.Store
	mu     sync.Mutex
	before func(key string)
}

func (h *getHook) Get(ctx context.Context, key string) (meta.KV, bool, error) {
	h.mu.Lock()
	f := h.before
	h.mu.Unlock()
	if f != nil {
		f(key)
	}
	return h.Store.Get(ctx, key)
}

func (h *getHook) set(f func(key string)) {
	h.mu.Lock()
	h.before = f
	h.mu.Unlock()
}

// testSoftTrimRacingAppends: SoftTrim(inclusive) with inclusive at the head
// while appends land. Whatever the interleaving, it trims at most the entry
// that holds inclusive, never an entry after it: here the engine is stopped
// after it read the head (10) and before it writes the trim, while [10,12)
// and [12,14) are appended. Taking effect before the appends the trim
// stops at 10, after them at 12; 14 would discard an acknowledged entry
// the caller did not ask to trim.
func testSoftTrimRacingAppends(t *testing.T, env Env) {
	ctx := testCtx(t)
	a := env.Start(t)
	la := openLog(t, a, 1)
	appendSeq(t, []lakestream.Log{la}, []spec{{5, 10, 0}, {5, 10, 0}}) // [0,5) [5,10)
	hook := &getHook{Store: env.Meta}
	b := env.StartOn(t, hook)
	lb := openLog(t, b, 1)
	paused, resume := make(chan struct{}), make(chan struct{})
	var heads atomic.Int64
	hook.set(func(key string) {
		if !strings.HasSuffix(key, "/head") {
			return
		}
		if heads.Add(1) == 2 { // the read after the one that saw head 10
			close(paused)
			<-resume
		}
	})
	type result struct {
		first int64
		err   error
	}
	done := make(chan result, 1)
	go func() {
		f, err := lb.SoftTrim(ctx, 10)
		done <- result{f, err}
	}()
	select {
	case <-paused:
	case r := <-done: // the engine read the head once only: no window to test
		t.Logf("SoftTrim(10) = %d %v without a second head read", r.first, r.err)
		return
	}
	more := appendSeq(t, []lakestream.Log{la}, []spec{{2, 10, 0}, {2, 10, 0}}) // [10,12) [12,14)
	close(resume)
	r := <-done
	hook.set(nil)
	if r.err != nil || (r.first != 10 && r.first != 12) {
		t.Errorf("SoftTrim(10) racing appends of [10,12) and [12,14) = %d %v, want 10 or 12 (offset 10's entry ends at 12)", r.first, r.err)
	}
	want := more[1:]
	if r.first == 10 {
		want = more
	}
	sameEntries(t, "readable after SoftTrim(10)", readAll(t, la), want)
}

func testHardTrimAndGC(t *testing.T, env Env) {
	ctx := testCtx(t)
	// Objects are cut at exactly 100 payload bytes: a 100-byte entry is an
	// object of its own; two 50-byte entries appended together share one.
	w := env.Start(t, sizeCut(100), objectPerFlush)
	l1, l2 := openLog(t, w, 1), openLog(t, w, 2)
	objA := appendTogether(t, job{l1, 0, spec{1, 100, 0}})
	objB := appendTogether(t, job{l1, 1, spec{1, 50, 0}}, job{l2, 0, spec{1, 50, 0}})
	objC := appendTogether(t, job{l1, 2, spec{1, 100, 0}})
	objD := appendTogether(t, job{l2, 1, spec{1, 100, 0}})
	log1 := []lakestream.Entry{objA[0], objB[0], objC[0]}
	log2 := []lakestream.Entry{objB[1], objD[0]}
	checkTiling(t, "log 1", log1, 0)
	checkTiling(t, "log 2", log2, 0)
	if n := countObjects(t, env.Store); n != 4 {
		t.Fatalf("%d WAL objects, want 4", n)
	}

	// Every object is referenced: a pass (intents honoured or not) keeps all.
	gcPass(t, w, engine.GCStats{Listed: 4, Referenced: 4})
	// gc treats every pending intent as dead: only index references protect.
	gc := env.Start(t, func(o *engine.Options) { o.PendingIntentTTL = time.Nanosecond }, objectPerFlush)
	gcPass(t, gc, engine.GCStats{Listed: 4, Referenced: 4})

	check := func(what string, objects int, want1, want2 []lakestream.Entry) {
		t.Helper()
		if n := countObjects(t, env.Store); n != objects {
			t.Fatalf("%s: %d WAL objects, want %d", what, n, objects)
		}
		r := env.Start(t) // a cold cache: reads really GET the objects
		if want1 != nil {
			sameEntries(t, what+": log 1", readAll(t, openLog(t, r, 1)), want1)
		}
		if want2 != nil {
			sameEntries(t, what+": log 2", readAll(t, openLog(t, r, 2)), want2)
		}
	}

	// Log 1 drops its chunks in A and B; B stays: log 2 still uses it.
	if err := w.HardTrim(ctx, 1, 2); err != nil {
		t.Fatalf("HardTrim(1, 2): %v", err)
	}
	checkHeads(t, "log 1 after HardTrim", l1, 2, 3)
	gcPass(t, gc, engine.GCStats{Listed: 4, Referenced: 3, Deleted: 1})
	check("after HardTrim(log 1, 2)", 3, log1[2:], log2)
	_, err := openLog(t, gc, 1).ReadEntries(ctx, 1, 10, 1<<20)
	wantErr(t, "read hard-trimmed offset", err, lakestream.ErrOffsetTrimmed)

	// Now log 2 drops its chunk in B too: B goes.
	if err := gc.HardTrim(ctx, 2, 1); err != nil {
		t.Fatalf("HardTrim(2, 1): %v", err)
	}
	gcPass(t, gc, engine.GCStats{Listed: 3, Referenced: 2, Deleted: 1})
	check("after HardTrim(log 2, 1)", 2, log1[2:], log2[1:])
	gcPass(t, gc, engine.GCStats{Listed: 2, Referenced: 2})

	// Appends go on after trims and GC.
	more := appendTogether(t, job{l1, 3, spec{2, 100, 0}})
	if more[0].Offset != 3 {
		t.Fatalf("append after hard trim at %d, want 3", more[0].Offset)
	}
	log1 = append(log1, more[0])
	gcPass(t, gc, engine.GCStats{Listed: 3, Referenced: 3})

	// Deleting the logs frees their objects.
	if err := w.DeleteLog(ctx, 1); err != nil {
		t.Fatal(err)
	}
	gcPass(t, gc, engine.GCStats{Listed: 3, Referenced: 1, Deleted: 2})
	check("after DeleteLog(1)", 1, nil, log2[1:])
	if err := w.DeleteLog(ctx, 2); err != nil {
		t.Fatal(err)
	}
	gcPass(t, gc, engine.GCStats{Listed: 1, Deleted: 1})
	if n := countObjects(t, env.Store); n != 0 {
		t.Fatalf("%d WAL objects after deleting every log, want 0", n)
	}
}

// testGCCursorNames: cursor names are free-form (Pulsar subscription names
// may contain '/'); none may confuse the GC's scan of index entries.
func testGCCursorNames(t *testing.T, env Env) {
	ctx := testCtx(t)
	e := env.Start(t, objectPerFlush)
	l := openLog(t, e, 1)
	all := appendSeq(t, []lakestream.Log{l}, []spec{{1, 10, 0}, {1, 10, 0}})
	names := []string{"a/b", "sub/idx/0", "x/idx/"}
	for _, n := range names {
		c, err := l.OpenCursor(ctx, n, 0)
		if err != nil {
			t.Fatalf("OpenCursor(%q): %v", n, err)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.CursorNames(ctx)
	if err != nil || !slices.Equal(got, names) {
		t.Fatalf("CursorNames = %q %v, want %q", got, err, names)
	}
	st, err := e.CollectGarbage(ctx)
	if err != nil {
		t.Fatalf("CollectGarbage with cursors %q: %v", names, err)
	}
	if st.Deleted != 0 {
		t.Fatalf("CollectGarbage deleted %d referenced objects", st.Deleted)
	}
	sameEntries(t, "after GC", readAll(t, openLog(t, env.Start(t), 1)), all)
}

func testDeleteLog(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la := openLog(t, a, 1)
	appendSeq(t, []lakestream.Log{la}, []spec{{1, 10, 0}, {2, 10, 0}})
	c, err := la.OpenCursor(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lo := openLog(t, a, 2)
	kept := appendSeq(t, []lakestream.Log{lo}, []spec{{1, 10, 0}})

	if err := b.DeleteLog(ctx, 1); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	// Later calls fail with ErrNoSuchLog on every engine: one that had a
	// handle, the one that deleted, and a new one.
	_, err = a.Log(ctx, 1)
	wantErr(t, "Log on an engine holding a handle, right after DeleteLog on another", err, lakestream.ErrNoSuchLog)
	_, err = la.Append(ctx, 1, []byte("x"))
	wantErr(t, "Append on an old handle", err, lakestream.ErrNoSuchLog)
	_, err = la.ReadEntries(ctx, 0, 10, 1<<20)
	wantErr(t, "ReadEntries on an old handle", err, lakestream.ErrNoSuchLog)
	_, err = la.NextOffset(ctx)
	wantErr(t, "NextOffset on an old handle", err, lakestream.ErrNoSuchLog)
	_, err = la.WaitForEntries(ctx, 0)
	wantErr(t, "WaitForEntries on an old handle", err, lakestream.ErrNoSuchLog)
	_, err = la.OpenCursor(ctx, "new", -1)
	wantErr(t, "OpenCursor on an old handle of a deleted log", err, lakestream.ErrNoSuchLog)
	_, err = la.LoadCursor(ctx, "s")
	wantErr(t, "LoadCursor on an old handle of a deleted log", err, lakestream.ErrNoSuchLog)
	for name, s := range map[string]lakestream.LogStorage{"a": a, "b": b, "new": env.Start(t)} {
		_, err := s.Log(ctx, 1)
		wantErr(t, "Log on "+name, err, lakestream.ErrNoSuchLog)
		_, err = s.Append(ctx, 1, 1, []byte("x"))
		wantErr(t, "Append on "+name, err, lakestream.ErrNoSuchLog)
		_, err = s.ReadEntries(ctx, 1, 0, 10, 1<<20)
		wantErr(t, "ReadEntries on "+name, err, lakestream.ErrNoSuchLog)
		err = s.DeleteLog(ctx, 1)
		wantErr(t, "DeleteLog again on "+name, err, lakestream.ErrNoSuchLog)
	}
	// Other logs are untouched.
	sameEntries(t, "other log", readAll(t, openLog(t, b, 2)), kept)
	appendSeq(t, []lakestream.Log{lo}, []spec{{1, 10, 0}})
}

func testPrefetch(t *testing.T, env Env) {
	ctx := testCtx(t)
	a := env.Start(t)
	la := openLog(t, a, 1)
	var specs []spec
	for range 8 {
		specs = append(specs, spec{records: 2, size: 100})
	}
	all := appendSeq(t, []lakestream.Log{la}, specs)
	next := all[len(all)-1].End()
	c := env.Start(t)
	if err := c.Prefetch(ctx, 1, 0, next); err != nil {
		t.Fatalf("Prefetch: %v", err)
	}
	if err := c.Prefetch(ctx, 1, 5, 3); err != nil {
		t.Fatalf("Prefetch of an empty range: %v", err)
	}
	if err := c.Prefetch(ctx, 1, next, next+10); err != nil {
		t.Fatalf("Prefetch beyond the head: %v", err)
	}
	gets := c.Metrics().ObjectGets
	if gets == 0 || c.CacheBytes() == 0 {
		t.Fatalf("Prefetch fetched nothing: %+v, cache %d bytes", c.Metrics(), c.CacheBytes())
	}
	sameEntries(t, "after prefetch", readAll(t, openLog(t, c, 1)), all)
	if m := c.Metrics(); m.ObjectGets != gets {
		t.Fatalf("reads after Prefetch made %d GETs", m.ObjectGets-gets)
	}
}

func testCursorLifecycle(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la, lb := openLog(t, a, 1), openLog(t, b, 1)
	appendSeq(t, []lakestream.Log{la}, []spec{{3, 10, 0}, {3, 10, 0}, {3, 10, 0}})

	cb, err := la.OpenCursor(ctx, "b", -1)
	if err != nil {
		t.Fatal(err)
	}
	if cb.Name() != "b" || !cb.Durable() || cb.MarkDeleteOffset() != -1 || cb.ReadOffset() != 0 || cb.PersistedMarkDeleteOffset() != -1 || len(cb.Properties()) != 0 {
		t.Fatalf("new cursor: name %q durable %v md %d read %d persisted %d props %v", cb.Name(), cb.Durable(), cb.MarkDeleteOffset(), cb.ReadOffset(), cb.PersistedMarkDeleteOffset(), cb.Properties())
	}
	ca, err := la.OpenCursor(ctx, "a", 4)
	if err != nil {
		t.Fatal(err)
	}
	if ca.MarkDeleteOffset() != 4 || ca.ReadOffset() != 5 || ca.PersistedMarkDeleteOffset() != 4 {
		t.Fatalf("cursor opened at 4: md %d read %d persisted %d", ca.MarkDeleteOffset(), ca.ReadOffset(), ca.PersistedMarkDeleteOffset())
	}
	// Opening an existing cursor (here or elsewhere) ignores the initial
	// position.
	for _, l := range []lakestream.Log{la, lb} {
		c, err := l.OpenCursor(ctx, "a", 7)
		if err != nil {
			t.Fatal(err)
		}
		if c.MarkDeleteOffset() != 4 {
			t.Fatalf("reopened cursor: md %d, want 4", c.MarkDeleteOffset())
		}
	}
	for _, l := range []lakestream.Log{la, lb} {
		names, err := l.CursorNames(ctx)
		if err != nil || !slices.Equal(names, []string{"a", "b"}) {
			t.Fatalf("CursorNames = %q %v", names, err)
		}
	}
	_, err = lb.LoadCursor(ctx, "zz")
	wantErr(t, "LoadCursor of an unknown cursor", err, lakestream.ErrNoSuchCursor)
	_, err = la.OpenCursor(ctx, "", -1)
	wantErr(t, "OpenCursor with an empty name", err, lakestream.ErrInvalidArgument)
	// Cursors are per log.
	if names, err := openLog(t, a, 2).CursorNames(ctx); err != nil || len(names) != 0 {
		t.Fatalf("CursorNames of another log = %q %v", names, err)
	}

	// DeleteCursor (from another engine) and LogCursor.Delete.
	if err := lb.DeleteCursor(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	_, err = la.LoadCursor(ctx, "a")
	wantErr(t, "LoadCursor after DeleteCursor", err, lakestream.ErrNoSuchCursor)
	if err := cb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = lb.LoadCursor(ctx, "b")
	wantErr(t, "LoadCursor after Delete", err, lakestream.ErrNoSuchCursor)
	if names, err := lb.CursorNames(ctx); err != nil || len(names) != 0 {
		t.Fatalf("CursorNames after deletes = %q %v", names, err)
	}
	// A deleted cursor can be created again, fresh.
	c, err := lb.OpenCursor(ctx, "a", -1)
	if err != nil || c.MarkDeleteOffset() != -1 {
		t.Fatalf("recreated cursor: %v", err)
	}
}

func testEphemeralCursor(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la := openLog(t, a, 1)
	all := appendSeq(t, []lakestream.Log{la}, []spec{{1, 10, 0}, {2, 10, 0}, {1, 10, 0}, {3, 10, 0}})
	c, err := la.OpenEphemeralCursor(ctx, "reader", 3)
	if err != nil {
		t.Fatal(err)
	}
	if c.Durable() || c.Name() != "reader" || c.ReadOffset() != 3 {
		t.Fatalf("ephemeral cursor: durable %v name %q read %d", c.Durable(), c.Name(), c.ReadOffset())
	}
	es, err := c.ReadEntries(ctx, 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "ephemeral read from 3", es, all[2:])
	if err := c.MarkDelete(ctx, 4, map[string]int64{"p": 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.IndividualDelete(6, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.PersistState(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		for _, l := range []lakestream.Log{la, openLog(t, b, 1)} {
			if names, err := l.CursorNames(ctx); err != nil || len(names) != 0 {
				t.Fatalf("%s: CursorNames = %q %v: an ephemeral cursor was persisted", what, names, err)
			}
			_, err := l.LoadCursor(ctx, "reader")
			wantErr(t, what+": LoadCursor of an ephemeral cursor", err, lakestream.ErrNoSuchCursor)
		}
	}
	check("open")
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	check("closed")
}

func testMarkDeletePersisted(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la, lb := openLog(t, a, 1), openLog(t, b, 1)
	appendSeq(t, []lakestream.Log{la}, []spec{{2, 10, 0}, {2, 10, 0}, {2, 10, 0}, {2, 10, 0}, {2, 10, 0}})
	c, err := la.OpenCursor(ctx, "s", -1)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string, md int64, props map[string]int64) {
		t.Helper()
		if c.MarkDeleteOffset() != md || c.PersistedMarkDeleteOffset() != md {
			t.Fatalf("%s: md %d persisted %d, want %d", what, c.MarkDeleteOffset(), c.PersistedMarkDeleteOffset(), md)
		}
		// MarkDelete returns once persisted: the other engine sees it now.
		o, err := lb.LoadCursor(ctx, "s")
		if err != nil {
			t.Fatalf("%s: LoadCursor on the other engine: %v", what, err)
		}
		defer o.Close(ctx)
		if o.MarkDeleteOffset() != md || o.ReadOffset() != md+1 || o.FirstNonDeletedOffset() != md+1 || !maps.Equal(o.Properties(), props) {
			t.Fatalf("%s: loaded md %d read %d first-unacked %d props %v, want md %d props %v", what, o.MarkDeleteOffset(), o.ReadOffset(), o.FirstNonDeletedOffset(), o.Properties(), md, props)
		}
		for off := int64(0); off < 10; off++ {
			if o.IsIndividuallyDeleted(off) != (off <= md) {
				t.Fatalf("%s: loaded IsIndividuallyDeleted(%d) = %v with md %d", what, off, o.IsIndividuallyDeleted(off), md)
			}
		}
	}
	if err := c.MarkDelete(ctx, 3, map[string]int64{"k": 7}); err != nil {
		t.Fatal(err)
	}
	expect("MarkDelete(3)", 3, map[string]int64{"k": 7})
	if err := c.MarkDelete(ctx, 1, map[string]int64{"k": 8}); err != nil {
		t.Fatal(err)
	}
	expect("MarkDelete(1) never goes back", 3, map[string]int64{"k": 7})
	if err := c.MarkDelete(ctx, 6, map[string]int64{"a": -1, "b": 2}); err != nil {
		t.Fatal(err)
	}
	expect("MarkDelete(6)", 6, map[string]int64{"a": -1, "b": 2})
	if err := c.MarkDelete(ctx, 6, nil); err != nil {
		t.Fatal(err)
	}
	expect("MarkDelete(6) without properties", 6, nil)
	if c.ReadOffset() != 7 {
		t.Fatalf("read offset %d after MarkDelete(6), want 7", c.ReadOffset())
	}
	es, err := c.ReadEntries(ctx, 10, 1<<20)
	if err != nil || !slices.Equal(offsets(es), []int64{6, 8}) {
		t.Fatalf("ReadEntries after MarkDelete(6) = %v %v, want [6 8] (entry 6 still has record 7)", offsets(es), err)
	}
}

func testIndividualDelete(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la, lb := openLog(t, a, 1), openLog(t, b, 1)
	// [0,4) [4,8) [8,12) [12,16) [16] [17]
	appendSeq(t, []lakestream.Log{la}, []spec{{4, 10, 0}, {4, 11, 0}, {4, 12, 0}, {4, 13, 0}, {1, 14, 0}, {1, 15, 0}})
	c, err := la.OpenCursor(ctx, "s", -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{4, 4}, {9, 1}, {11, 1}, {17, 1}} {
		if err := c.IndividualDelete(r[0], r[1]); err != nil {
			t.Fatalf("IndividualDelete(%d, %d): %v", r[0], r[1], err)
		}
	}
	state := func(what string, cur lakestream.LogCursor, md int64, ranges [][2]int64) {
		t.Helper()
		var n int64
		for _, r := range ranges {
			n += r[1] - r[0]
		}
		if cur.MarkDeleteOffset() != md || !slices.Equal(cur.AckedRanges(), ranges) || cur.IndividualDeleteCount() != n || cur.FirstNonDeletedOffset() != md+1 {
			t.Fatalf("%s: md %d ranges %v count %d first-unacked %d, want md %d ranges %v count %d",
				what, cur.MarkDeleteOffset(), cur.AckedRanges(), cur.IndividualDeleteCount(), cur.FirstNonDeletedOffset(), md, ranges, n)
		}
		for o := int64(0); o < 20; o++ {
			want := o <= md
			for _, r := range ranges {
				want = want || (o >= r[0] && o < r[1])
			}
			if cur.IsIndividuallyDeleted(o) != want {
				t.Fatalf("%s: IsIndividuallyDeleted(%d) = %v", what, o, !want)
			}
		}
	}
	state("after acks", c, -1, [][2]int64{{4, 8}, {9, 10}, {11, 12}, {17, 18}})
	// Reads skip the fully acknowledged entries [4,8) and [17], and return
	// the partially acknowledged [8,12).
	es, err := c.ReadEntries(ctx, 10, 1<<20)
	if err != nil || !slices.Equal(offsets(es), []int64{0, 8, 12, 16}) || c.ReadOffset() != 18 {
		t.Fatalf("ReadEntries = %v %v read %d, want [0 8 12 16] read 18", offsets(es), err, c.ReadOffset())
	}
	if more, err := c.HasMoreEntries(ctx); err != nil || more {
		t.Fatalf("HasMoreEntries at the head = %v %v", more, err)
	}
	// Acknowledging the records above mark-delete advances it over the
	// contiguous run.
	if err := c.IndividualDelete(0, 4); err != nil {
		t.Fatal(err)
	}
	state("after ack of [0,4)", c, 7, [][2]int64{{9, 10}, {11, 12}, {17, 18}})
	if err := c.PersistState(ctx); err != nil {
		t.Fatal(err)
	}
	if c.PersistedMarkDeleteOffset() != 7 {
		t.Fatalf("persisted md %d, want 7", c.PersistedMarkDeleteOffset())
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The other engine loads the same state.
	cb, err := lb.LoadCursor(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	state("loaded on the other engine", cb, 7, [][2]int64{{9, 10}, {11, 12}, {17, 18}})
	if cb.ReadOffset() != 8 {
		t.Fatalf("loaded read offset %d, want 8", cb.ReadOffset())
	}
	if more, err := cb.HasMoreEntries(ctx); err != nil || !more {
		t.Fatalf("HasMoreEntries = %v %v", more, err)
	}
	for _, step := range []struct {
		max  int
		want []int64
	}{{1, []int64{8}}, {2, []int64{12, 16}}, {5, nil}} {
		es, err := cb.ReadEntries(ctx, step.max, 1<<20)
		if err != nil || !slices.Equal(offsets(es), step.want) {
			t.Fatalf("ReadEntries(%d) = %v %v, want %v", step.max, offsets(es), err, step.want)
		}
	}
	cb.SeekOffset(0) // below mark-delete: reads resume at the first unacknowledged
	if es, err := cb.ReadEntries(ctx, 10, 1<<20); err != nil || !slices.Equal(offsets(es), []int64{8, 12, 16}) {
		t.Fatalf("after Seek(0): %v %v", offsets(es), err)
	}
	cb.SeekOffset(8)
	if es, err := cb.ReadEntries(ctx, 10, 1); err != nil || !slices.Equal(offsets(es), []int64{8}) {
		t.Fatalf("ReadEntries(maxBytes 1) = %v %v, want [8]", offsets(es), err)
	}
	// A partial ack of [8,12) leaves it readable; Close persists.
	if err := cb.IndividualDelete(8, 1); err != nil {
		t.Fatal(err)
	}
	state("after ack of 8", cb, 9, [][2]int64{{11, 12}, {17, 18}})
	if err := cb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c2, err := la.LoadCursor(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	state("reloaded after Close", c2, 9, [][2]int64{{11, 12}, {17, 18}})
	if es, err := c2.ReadEntries(ctx, 10, 1<<20); err != nil || !slices.Equal(offsets(es), []int64{8, 12, 16}) {
		t.Fatalf("ReadEntries with [8,12) partly acknowledged = %v %v, want [8 12 16]", offsets(es), err)
	}
	// Acknowledging the rest makes [8,12) skipped.
	if err := c2.IndividualDelete(10, 1); err != nil {
		t.Fatal(err)
	}
	state("after ack of 10", c2, 11, [][2]int64{{17, 18}})
	c2.SeekOffset(0)
	if es, err := c2.ReadEntries(ctx, 10, 1<<20); err != nil || !slices.Equal(offsets(es), []int64{12, 16}) {
		t.Fatalf("ReadEntries = %v %v, want [12 16]", offsets(es), err)
	}
	if err := c2.IndividualDelete(5, 0); !errors.Is(err, lakestream.ErrInvalidArgument) {
		t.Fatalf("IndividualDelete of 0 records: %v, want ErrInvalidArgument", err)
	}
}

func testBacklog(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la := openLog(t, a, 1)
	// [0,2) 10 B, [2,4) 20 B, [4,6) 30 B, [6,8) 40 B, [8,10) 50 B
	appendSeq(t, []lakestream.Log{la}, []spec{{2, 10, 0}, {2, 20, 0}, {2, 30, 0}, {2, 40, 0}, {2, 50, 0}})
	c, err := la.OpenCursor(ctx, "s", -1)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string, cur lakestream.LogCursor, want lakestream.Backlog) {
		t.Helper()
		got, err := cur.Backlog(ctx)
		if err != nil || got != want {
			t.Fatalf("%s: Backlog = %+v %v, want %+v", what, got, err, want)
		}
	}
	expect("new cursor", c, lakestream.Backlog{Records: 10, Bytes: 150})
	if err := c.MarkDelete(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	expect("md 1", c, lakestream.Backlog{Records: 8, Bytes: 140})
	if err := c.MarkDelete(ctx, 2, nil); err != nil {
		t.Fatal(err)
	}
	// Bytes count whole entries: [2,4) is partly acknowledged.
	expect("md 2", c, lakestream.Backlog{Records: 7, Bytes: 140})
	if err := c.IndividualDelete(6, 2); err != nil {
		t.Fatal(err)
	}
	expect("md 2, [6,8) acked", c, lakestream.Backlog{Records: 5, Bytes: 140})
	appendSeq(t, []lakestream.Log{openLog(t, b, 1)}, []spec{{2, 60, 0}})
	expect("after an append on another engine", c, lakestream.Backlog{Records: 7, Bytes: 200})
	if err := c.MarkDelete(ctx, 11, nil); err != nil {
		t.Fatal(err)
	}
	expect("everything acknowledged", c, lakestream.Backlog{})
	// Trimmed records are not backlog.
	c2, err := la.OpenCursor(ctx, "t", -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.SoftTrim(ctx, 5); err != nil {
		t.Fatal(err)
	}
	expect("after SoftTrim(5)", c2, lakestream.Backlog{Records: 6, Bytes: 150})
	// An ephemeral cursor has a backlog too.
	e, err := la.OpenEphemeralCursor(ctx, "r", 8)
	if err != nil {
		t.Fatal(err)
	}
	expect("ephemeral from 8", e, lakestream.Backlog{Records: 4, Bytes: 110})
}

func testCursorStateBound(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b := env.Start(t), env.Start(t)
	la := openLog(t, a, 1)
	appendSeq(t, []lakestream.Log{la}, []spec{{1, 10, 0}})
	c, err := la.OpenCursor(ctx, "s", -1)
	if err != nil {
		t.Fatal(err)
	}
	// Acknowledge every other record: one range each.
	for i := range int64(cursor.MaxAckedRanges) {
		if err := c.IndividualDelete(2*i+1, 1); err != nil {
			t.Fatalf("ack %d of %d: %v", i, cursor.MaxAckedRanges, err)
		}
	}
	over := int64(2*cursor.MaxAckedRanges + 1)
	if err := c.IndividualDelete(over, 1); !errors.Is(err, lakestream.ErrCursorStateTooLarge) {
		t.Fatalf("ack making range %d: %v, want ErrCursorStateTooLarge", cursor.MaxAckedRanges+1, err)
	}
	// An ack that merges ranges always succeeds, and makes room.
	if err := c.IndividualDelete(2, 1); err != nil {
		t.Fatalf("merging ack: %v", err)
	}
	if err := c.IndividualDelete(over, 1); err != nil {
		t.Fatalf("ack after a merge made room: %v", err)
	}
	want := c.AckedRanges()
	if len(want) != cursor.MaxAckedRanges {
		t.Fatalf("%d ranges, want %d", len(want), cursor.MaxAckedRanges)
	}
	if err := c.PersistState(ctx); err != nil {
		t.Fatalf("persisting a cursor with %d ranges: %v", len(want), err)
	}
	o, err := openLog(t, b, 1).LoadCursor(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := o.AckedRanges(); !slices.Equal(got, want) {
		t.Fatalf("loaded %d ranges, want %d (first %v, %v)", len(got), len(want), got[:min(3, len(got))], want[:3])
	}
}

func testConcurrentAppends(t *testing.T, env Env) {
	ctx := testCtx(t)
	const (
		engines    = 2
		goroutines = 8
		perG       = 12
		logs       = 4
	)
	type acked struct {
		e       lakestream.Entry
		eng, g  int
		ordinal int
	}
	var (
		mu   sync.Mutex
		byLg = map[lakestream.LogID][]acked{}
		errs []error
		wg   sync.WaitGroup
	)
	for ei := range engines {
		e := env.Start(t)
		handles := map[lakestream.LogID]lakestream.Log{}
		for id := range lakestream.LogID(logs) {
			handles[id+1] = openLog(t, e, id+1)
		}
		for g := range goroutines {
			wg.Go(func() {
				for i := range perG {
					id := lakestream.LogID((g+i)%logs + 1)
					s := spec{records: 1 + (i+g)%3, size: 24 + (i*g+ei)%40}
					ent, err := appendOne(ctx, handles[id], ei*10000+g*100+i, s)
					mu.Lock()
					if err != nil {
						errs = append(errs, fmt.Errorf("engine %d goroutine %d append %d: %w", ei, g, i, err))
					} else {
						byLg[id] = append(byLg[id], acked{ent, ei, g, i})
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	reader := env.Start(t)
	total := 0
	for id := range lakestream.LogID(logs) {
		id++
		as := byLg[id]
		total += len(as)
		sort.Slice(as, func(i, j int) bool { return as[i].e.Offset < as[j].e.Offset })
		var want []lakestream.Entry
		seen := map[string]bool{}
		last := map[[2]int]int{}
		for _, a := range as {
			want = append(want, a.e)
			if seen[string(a.e.Payload)] {
				t.Fatalf("log %d: payload %q acknowledged twice", id, a.e.Payload)
			}
			seen[string(a.e.Payload)] = true
			k := [2]int{a.eng, a.g}
			if o, ok := last[k]; ok && o > a.ordinal {
				t.Fatalf("log %d: engine %d goroutine %d: append %d got a lower offset than its earlier append %d", id, a.eng, a.g, a.ordinal, o)
			}
			last[k] = a.ordinal
		}
		checkTiling(t, fmt.Sprintf("log %d acknowledged", id), want, 0)
		l := openLog(t, reader, id)
		sameEntries(t, fmt.Sprintf("log %d read back", id), readAll(t, l), want)
		checkHeads(t, fmt.Sprintf("log %d", id), l, 0, want[len(want)-1].End())
	}
	if total != engines*goroutines*perG {
		t.Fatalf("%d appends acknowledged, want %d", total, engines*goroutines*perG)
	}
}

func testManyLogsSmallTxns(t *testing.T, env Env) {
	ctx := testCtx(t)
	const (
		logs      = 300
		size      = 32
		maxTxnOps = 16 // ⇒ at most 8 logs per commit transaction
	)
	ms := env.newMeta(t, maxTxnOps)
	if ms.MaxTxnOps() != maxTxnOps {
		t.Fatalf("NewMeta(%d) gave MaxTxnOps %d", maxTxnOps, ms.MaxTxnOps())
	}
	// a cuts an object when all 300 entries are in: one flush, one commit
	// transaction (its commit record), whatever the number of logs; the
	// fold then writes their heads and index entries in transactions of at
	// most 16 operations.
	a := env.StartOn(t, ms, sizeCut(logs*size), objectPerFlush)
	b := env.StartOn(t, ms)
	round := func(e *engine.Engine, r int, ids []lakestream.LogID) map[lakestream.LogID]lakestream.Entry {
		t.Helper()
		out := make([]lakestream.Entry, len(ids))
		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		for k, id := range ids {
			wg.Go(func() {
				p := payload(id, r, size)
				h, err := e.Append(ctx, id, 1+int(id)%3, p)
				out[k], errs[k] = lakestream.Entry{EntryHeader: h, Payload: p}, err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		m := map[lakestream.LogID]lakestream.Entry{}
		for k, id := range ids {
			m[id] = out[k]
		}
		return m
	}
	var ids []lakestream.LogID
	for i := range lakestream.LogID(logs) {
		ids = append(ids, 1000+i)
	}
	objects := countObjects(t, env.Store)
	r1 := round(a, 1, ids)
	if n := countObjects(t, env.Store); n != objects+1 {
		t.Fatalf("%d objects for one flush of %d logs, want 1", n-objects, logs)
	}
	if m := a.Metrics(); m.ObjectPuts != 1 || m.Txns != 1 {
		t.Fatalf("metrics after one flush of %d logs: %d puts, %d commit txns (want 1 put, 1 commit txn)", logs, m.ObjectPuts, m.Txns)
	}
	for _, id := range ids {
		if r1[id].Offset != 0 {
			t.Fatalf("log %d: first entry at %d", id, r1[id].Offset)
		}
	}
	// Another engine appends to 50 of the logs: a's next commit follows
	// them in the commit order (no compare on a head, nothing to retry).
	r2b := round(b, 2, ids[:50])
	r3 := round(a, 3, ids)
	t.Logf("engine a: %+v", a.Metrics())
	reader := env.StartOn(t, ms)
	for k, id := range ids {
		want := []lakestream.Entry{r1[id]}
		if k < 50 {
			want = append(want, r2b[id])
		}
		want = append(want, r3[id])
		checkTiling(t, fmt.Sprintf("log %d", id), want, 0)
		sameEntries(t, fmt.Sprintf("log %d", id), readAll(t, openLog(t, reader, id)), want)
	}
}

func testInvalidAppends(t *testing.T, env Env) {
	ctx := testCtx(t)
	e := env.Start(t, func(o *engine.Options) { o.MaxEntryBytes = 1000 })
	l := openLog(t, e, 1)
	for _, n := range []int{0, -1} {
		_, err := l.Append(ctx, n, []byte("x"))
		wantErr(t, fmt.Sprintf("Append of %d records", n), err, lakestream.ErrInvalidArgument)
	}
	_, err := l.Append(ctx, 1, make([]byte, 1001))
	wantErr(t, "Append over MaxEntryBytes", err, lakestream.ErrTooLarge)
	if h, err := l.Append(ctx, 1, make([]byte, 1000)); err != nil || h.Offset != 0 {
		t.Fatalf("Append of MaxEntryBytes: %+v %v", h, err)
	}
	d := env.Start(t)
	_, err = d.Append(ctx, 1, 1, make([]byte, 16<<20+1))
	wantErr(t, "Append over the default 16 MiB", err, lakestream.ErrTooLarge)
	_, err = e.Log(ctx, -1)
	wantErr(t, "Log(-1)", err, lakestream.ErrInvalidArgument)
	checkHeads(t, "after invalid appends", l, 0, 1)
}

func testClosed(t *testing.T, env Env) {
	ctx := testCtx(t)
	e := env.Start(t)
	l := openLog(t, e, 1)
	appendSeq(t, []lakestream.Log{l}, []spec{{1, 10, 0}})
	c, err := l.OpenCursor(ctx, "s", -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.IndividualDelete(5, 2); err != nil { // not persisted yet
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = l.Append(ctx, 1, []byte("x"))
	wantErr(t, "Append after Close", err, lakestream.ErrClosed)
	_, err = e.Log(ctx, 2)
	wantErr(t, "Log after Close", err, lakestream.ErrClosed)
	_, err = e.Append(ctx, 1, 1, []byte("x"))
	wantErr(t, "Engine.Append after Close", err, lakestream.ErrClosed)
	// Close persisted the open cursor.
	o, err := openLog(t, env.Start(t), 1).LoadCursor(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.AckedRanges(), [][2]int64{{5, 7}}) {
		t.Fatalf("cursor after engine Close: ranges %v, want [[5 7]]", o.AckedRanges())
	}
}

// testAppendAsync: AppendAsync fixes an entry's place when it returns, so a
// burst from one goroutine, interleaved with blocking Appends from the same
// goroutine, lands in call order; done is called once per entry with the
// header Append would return; refusals known at once (invalid, fenced,
// closed) are returned and done is never called.
// testAppendChain: appends of a chain commit in order; a chain belongs to
// its log and its engine; a refusal of an append's own arguments does not
// break it, any other failure does, and a broken chain refuses every later
// append with ErrChainBroken wrapping that failure. (That a failure fails
// the chain's later appends in flight needs fault points: engine's
// TestAppendChain.)
func testAppendChain(t *testing.T, env Env) {
	ctx := testCtx(t)
	e, other := env.Start(t), env.Start(t)
	la, lb := openLog(t, e, 1), openLog(t, e, 2)
	c := la.NewAppendChain()
	if err := c.Err(); err != nil {
		t.Fatalf("new chain: Err() = %v", err)
	}
	const n = 50
	type result struct {
		h   lakestream.EntryHeader
		err error
	}
	results := make([]chan result, n)
	for i := range n {
		ch := make(chan result, 1)
		results[i] = ch
		if err := la.AppendAsync(ctx, 1, payload(1, i, 10), func(h lakestream.EntryHeader, err error) { ch <- result{h, err} },
			lakestream.WithAppendChain(c)); err != nil {
			t.Fatalf("AppendAsync %d: %v", i, err)
		}
		if i%7 == 3 { // unchained appends in between
			if _, err := la.Append(ctx, 1, payload(1, 1000+i, 10)); err != nil {
				t.Fatal(err)
			}
		}
	}
	prev := int64(-1)
	for i, ch := range results {
		r := <-ch
		if r.err != nil || r.h.Offset <= prev {
			t.Fatalf("chained append %d: %+v %v (previous at %d)", i, r.h, r.err, prev)
		}
		prev = r.h.Offset
	}
	never := func(lakestream.EntryHeader, error) { t.Error("done called for a refused AppendAsync") }
	wantErr(t, "a chain of log 1 on log 2", lb.AppendAsync(ctx, 1, []byte("x"), never, lakestream.WithAppendChain(c)), lakestream.ErrInvalidArgument)
	wantErr(t, "a chain of another engine", openLog(t, other, 1).AppendAsync(ctx, 1, []byte("x"), never, lakestream.WithAppendChain(c)),
		lakestream.ErrInvalidArgument)
	wantErr(t, "0 records on a chain", la.AppendAsync(ctx, 0, []byte("x"), never, lakestream.WithAppendChain(c)), lakestream.ErrInvalidArgument)
	if err := c.Err(); err != nil {
		t.Fatalf("chain broken by refusals of arguments: %v", err)
	}
	if _, err := la.Append(ctx, 1, []byte("still"), lakestream.WithAppendChain(c)); err != nil {
		t.Fatalf("chain after refusals of arguments: %v", err)
	}
	if err := la.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a chained append on a fenced log", la.AppendAsync(ctx, 1, []byte("x"), never, lakestream.WithAppendChain(c)), lakestream.ErrFenced)
	if err := c.Err(); !errors.Is(err, lakestream.ErrChainBroken) || !errors.Is(err, lakestream.ErrFenced) {
		t.Fatalf("chain after a failure: Err() = %v, want ErrChainBroken wrapping ErrFenced", err)
	}
	_, err := la.Append(ctx, 1, []byte("x"), lakestream.WithAppendChain(c))
	wantErr(t, "Append on a broken chain", err, lakestream.ErrChainBroken)
	c2 := lb.NewAppendChain()
	for i := range 3 {
		if h, err := lb.Append(ctx, 1, payload(2, i, 10), lakestream.WithAppendChain(c2)); err != nil || h.Offset != int64(i) {
			t.Fatalf("new chain on log 2: %+v %v", h, err)
		}
	}
}

func testAppendAsync(t *testing.T, env Env) {
	ctx := testCtx(t)
	e := env.Start(t)
	l := openLog(t, e, 1)
	const n = 200
	type result struct {
		h   lakestream.EntryHeader
		err error
	}
	results := make([]chan result, n)
	var want []lakestream.Entry
	for i := range n {
		p := payload(1, i, 10+i%50)
		want = append(want, lakestream.Entry{EntryHeader: lakestream.EntryHeader{Records: int32(1 + i%3)}, Payload: p})
		if i%10 == 9 {
			h, err := l.Append(ctx, 1+i%3, p)
			if err != nil {
				t.Fatalf("Append %d: %v", i, err)
			}
			results[i] = make(chan result, 1)
			results[i] <- result{h, nil}
			continue
		}
		ch := make(chan result, 2) // 2: a second call of done would be seen
		results[i] = ch
		if err := l.AppendAsync(ctx, 1+i%3, p, func(h lakestream.EntryHeader, err error) { ch <- result{h, err} }); err != nil {
			t.Fatalf("AppendAsync %d: %v", i, err)
		}
		p[0] ^= 0xff // not retained: the stored entry keeps the original byte
		p[0] ^= 0xff
	}
	next := int64(0)
	for i, ch := range results {
		r := <-ch
		if r.err != nil {
			t.Fatalf("entry %d: %v", i, r.err)
		}
		if r.h.Offset != next || r.h.Records != want[i].Records || int(r.h.Size) != len(want[i].Payload) {
			t.Fatalf("entry %d: header %+v, want offset %d records %d size %d", i, r.h, next, want[i].Records, len(want[i].Payload))
		}
		want[i].EntryHeader = r.h
		next = r.h.End()
		select {
		case extra := <-ch:
			t.Fatalf("entry %d: done called twice (%+v)", i, extra)
		default:
		}
	}
	sameEntries(t, "AppendAsync burst", readAll(t, l), want)

	never := func(lakestream.EntryHeader, error) { t.Error("done called for a refused AppendAsync") }
	wantErr(t, "AppendAsync of 0 records", l.AppendAsync(ctx, 0, []byte("x"), never), lakestream.ErrInvalidArgument)
	if err := l.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "AppendAsync on a fenced log", l.AppendAsync(ctx, 1, []byte("x"), never), lakestream.ErrFenced)
	m := openLog(t, e, 2)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "AppendAsync after Close", m.AppendAsync(ctx, 1, []byte("x"), never), lakestream.ErrClosed)
}

// testReadStaged: Log.ReadStaged returns a log's entries of an open
// staging set in the order the commit appends them — staged on two
// engines, read on a third —, other logs' and other sets' left out; a set
// nobody staged into reads as empty; a committed set fails ErrStageEnded
// and its entries are in the log, once.
func testReadStaged(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b, c := env.Start(t), env.Start(t), env.Start(t)
	const set = "txn-1-2"
	var want [][]byte
	for i := range 8 {
		e := a
		if i%2 == 1 {
			e = b
		}
		p := payload(1, i, 10+i)
		if h, err := openLog(t, e, 1).Append(ctx, 1+i%2, p, lakestream.WithStage(set)); err != nil || h.Offset != -1 {
			t.Fatalf("staged append %d: %+v %v", i, h, err)
		}
		want = append(want, p)
		if _, err := openLog(t, e, 2).Append(ctx, 1, payload(2, i, 10), lakestream.WithStage(set)); err != nil {
			t.Fatal(err)
		}
		if _, err := openLog(t, e, 1).Append(ctx, 1, payload(1, 100+i, 10), lakestream.WithStage("other")); err != nil {
			t.Fatal(err)
		}
	}
	read := func(l lakestream.Log, set string) ([]lakestream.Entry, error) {
		var out []lakestream.Entry
		err := l.ReadStaged(ctx, set, func(e lakestream.Entry) bool {
			e.Payload = bytes.Clone(e.Payload)
			out = append(out, e)
			return true
		})
		return out, err
	}
	got, err := read(openLog(t, c, 1), set)
	if err != nil || len(got) != len(want) {
		t.Fatalf("ReadStaged: %d entries, %v; want %d", len(got), err, len(want))
	}
	for i, g := range got {
		if g.Offset != -1 || g.Records != int32(1+i%2) || !bytes.Equal(g.Payload, want[i]) {
			t.Fatalf("staged entry %d: %+v %q, want offset -1, %d records, %q", i, g.EntryHeader, g.Payload, 1+i%2, want[i])
		}
	}
	if got, err := read(openLog(t, c, 3), set); err != nil || len(got) != 0 {
		t.Fatalf("a log with nothing staged: %d entries, %v", len(got), err)
	}
	if got, err := read(openLog(t, c, 1), "nobody"); err != nil || len(got) != 0 {
		t.Fatalf("a set nobody staged into: %d entries, %v", len(got), err)
	}
	if err := c.CommitStaged(ctx, set); err != nil {
		t.Fatal(err)
	}
	if _, err := read(openLog(t, a, 1), set); !errors.Is(err, lakestream.ErrStageEnded) {
		t.Fatalf("ReadStaged of a committed set: %v, want ErrStageEnded", err)
	}
	es, err := openLog(t, c, 1).ReadEntries(ctx, 0, 1000, 1<<20)
	if err != nil || len(es) != len(want) {
		t.Fatalf("log 1 after the commit: %d entries, %v; want %d", len(es), err, len(want))
	}
	for i, e := range es {
		if !bytes.Equal(e.Payload, want[i]) {
			t.Fatalf("log 1 entry %d after the commit: %q, want %q", i, e.Payload, want[i])
		}
	}
}

// testOpenStagedSets: Log.OpenStagedSets lists the sets with entries of
// the log staged — staged on two engines, listed on a third —, in name
// order, up to its limit; a set leaves the lists of all its logs when it
// is committed or discarded, and a log nothing was staged into lists
// none.
func testOpenStagedSets(t *testing.T, env Env) {
	ctx := testCtx(t)
	a, b, c := env.Start(t), env.Start(t), env.Start(t)
	stage := func(e *engine.Engine, id lakestream.LogID, set string) {
		t.Helper()
		if h, err := openLog(t, e, id).Append(ctx, 1, payload(id, 0, 10), lakestream.WithStage(set)); err != nil || h.Offset != -1 {
			t.Fatalf("staged append to log %d, set %s: %+v %v", id, set, h, err)
		}
	}
	stage(a, 1, "txn-b")
	stage(b, 2, "txn-b")
	stage(b, 1, "txn-a")
	stage(a, 1, "txn-c")
	stage(a, 1, "txn-b") // again: listed once
	list := func(id lakestream.LogID, limit int, want ...string) {
		t.Helper()
		got, err := openLog(t, c, id).OpenStagedSets(ctx, limit)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("log %d: OpenStagedSets(%d) = %q, %v; want %q", id, limit, got, err, want)
		}
	}
	list(1, 10, "txn-a", "txn-b", "txn-c")
	list(1, 2, "txn-a", "txn-b")
	list(2, 10, "txn-b")
	list(3, 10)
	if err := c.CommitStaged(ctx, "txn-b"); err != nil {
		t.Fatal(err)
	}
	list(1, 10, "txn-a", "txn-c")
	list(2, 10)
	if err := b.DiscardStaged(ctx, "txn-a"); err != nil {
		t.Fatal(err)
	}
	list(1, 10, "txn-c")
	if err := a.CommitStaged(ctx, "txn-c"); err != nil {
		t.Fatal(err)
	}
	list(1, 10)
}

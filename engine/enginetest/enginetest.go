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
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/cursor"
	"github.com/lakegate/lakegate/engine/meta"
	"github.com/lakegate/lakegate/engine/objstore"
	"github.com/lakegate/lakegate/lakestream"
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

// payload is size bytes (at least the prefix) that name log and i.
func payload(id lakestream.LogID, i, size int) []byte {
	b := fmt.Appendf(nil, "log %d entry %d;", id, i)
	for j := 0; len(b) < size; j++ {
		b = append(b, byte('a'+(i+j)%26))
	}
	return b
}

// spec is one entry to append.
type spec struct {
	records int
	size    int
	pub     int64 // 0 = none
}

func appendOne(ctx context.Context, l lakestream.Log, i int, s spec) (lakestream.Entry, error) {
	p := payload(l.ID(), i, s.size)
	if s.size == 0 {
		p = []byte{}
	}
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
					if w.Offset < min(e, next) && w.End() > max(s, first) {
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


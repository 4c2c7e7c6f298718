package engine

// The WAL writer under every limit of the WAL format (engine/wal/limits.go)
// and of Append (lakestream/log.go): no valid append sequence may panic the
// writer, and every acknowledged append reads back. Run:
//
//	go test -race -run 'TestWriter' ./engine/

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
)

// TestWriterMaxRecordsInOneFlush: two appends of MaxInt32 records each to
// one log, landing in one flush, used to panic the PUT goroutine ("wal:
// Builder.Add … does not fit"): their chunk would hold more records than
// wal.MaxRecordsPerChunk. The writer cuts the flush between them.
func TestWriterMaxRecordsInOneFlush(t *testing.T) {
	env := newMemEnv(t)
	e := env.engine(t, Options{Linger: 50 * time.Millisecond})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	hs := make([]lakestream.EntryHeader, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { hs[i], errs[i] = e.Append(ctx, 1, math.MaxInt32, []byte{byte(i)}) })
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("append %d: %v", i, errs[i])
		}
		ents, err := e.ReadEntries(ctx, 1, hs[i].Offset, 1, 1<<20)
		if err != nil || len(ents) != 1 || ents[0].Records != math.MaxInt32 || !bytes.Equal(ents[0].Payload, []byte{byte(i)}) {
			t.Fatalf("read back append %d at %d: %v %+v", i, hs[i].Offset, err, ents)
		}
	}
}

// appendCase is one append of a property round and what it got.
type appendCase struct {
	log     lakestream.LogID
	records int
	payload []byte
	h       lakestream.EntryHeader
	err     error
}

// runAppends runs the cases concurrently (one goroutine each) and then
// checks that every one was acknowledged, reads back at its offset with its
// records and payload, and that each log's entries tile [0, head).
func runAppends(t *testing.T, e *Engine, cases []*appendCase) {
	t.Helper()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() { c.h, c.err = e.Append(ctx, c.log, c.records, c.payload) })
	}
	wg.Wait()
	byLog := map[lakestream.LogID][]*appendCase{}
	for _, c := range cases {
		if c.err != nil {
			t.Fatalf("valid append (log %d, %d records, %d bytes) failed: %v", c.log, c.records, len(c.payload), c.err)
		}
		if c.h.Records != int32(c.records) || c.h.Size != int32(len(c.payload)) {
			t.Fatalf("append acknowledged as %+v, want %d records of %d bytes", c.h, c.records, len(c.payload))
		}
		byLog[c.log] = append(byLog[c.log], c)
	}
	for id, cs := range byLog {
		slices.SortFunc(cs, func(a, b *appendCase) int { return cmp.Compare(a.h.Offset, b.h.Offset) })
		var next int64
		for _, c := range cs {
			if c.h.Offset != next {
				t.Fatalf("log %d: entry at %d, want %d (gap or overlap)", id, c.h.Offset, next)
			}
			next += int64(c.records)
		}
		if head, err := e.LastOffset(ctx, id); err != nil || head+1 != next {
			t.Fatalf("log %d: last offset %d (%v), want %d", id, head, err, next-1)
		}
		// One read from the first offset returns every entry, in order.
		got, err := e.ReadEntries(ctx, id, 0, math.MaxInt32, 1<<62)
		for err == nil && len(got) < len(cs) {
			var more []lakestream.Entry
			more, err = e.ReadEntries(ctx, id, got[len(got)-1].End(), math.MaxInt32, 1<<62)
			if len(more) == 0 {
				break
			}
			got = append(got, more...)
		}
		if err != nil || len(got) != len(cs) {
			t.Fatalf("log %d: read %d entries (%v), want %d", id, len(got), err, len(cs))
		}
		for i, c := range cs {
			if got[i].Offset != c.h.Offset || got[i].Records != int32(c.records) || !bytes.Equal(got[i].Payload, c.payload) {
				t.Fatalf("log %d entry %d: read %+v, appended at %d with %d records", id, i, got[i].EntryHeader, c.h.Offset, c.records)
			}
		}
	}
}

// TestWriterValidAppendsProperty drives random rounds of concurrent valid
// appends through one writer: record counts from 1 to MaxInt32 (Append's
// limit; two of them break wal.MaxRecordsPerChunk in one chunk), payloads
// from empty to MaxEntryBytes, up to 64 logs, flushes cut by size, by
// linger and by the WAL limits. No round may panic, and every
// acknowledged append reads back.
func TestWriterValidAppendsProperty(t *testing.T) {
	big := bytes.Repeat([]byte{0xa5}, maxEntryBytes) // shared: Append copies it
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			opts := Options{
				Linger:     []time.Duration{time.Millisecond, 20 * time.Millisecond}[r.IntN(2)],
				FlushBytes: []int{4 << 10, 1 << 20, maxFlushBytes}[r.IntN(3)],
			}
			e := newMemEnv(t).engine(t, opts)
			nLogs := 1 + r.IntN(64)
			var cases []*appendCase
			for range 50 + r.IntN(150) {
				c := &appendCase{log: lakestream.LogID(r.IntN(nLogs))}
				switch r.IntN(4) {
				case 0:
					c.records = 1
				case 1:
					c.records = 1 + r.IntN(1<<20)
				case 2:
					c.records = math.MaxInt32/2 + r.IntN(math.MaxInt32/2)
				default:
					c.records = math.MaxInt32
				}
				switch n := r.IntN(100); {
				case n < 2:
					c.payload = big
				case n < 10:
					c.payload = big[:r.IntN(64<<10)]
				default:
					c.payload = fmt.Appendf(nil, "log %d seed %d #%d", c.log, seed, len(cases))
				}
				cases = append(cases, c)
			}
			runAppends(t, e, cases)
		})
	}
}

// TestWriterEntriesPerChunkLimit: more concurrent appends to one log than
// one chunk may hold (wal.MaxEntriesPerChunk) within one linger window: the
// writer cuts the object at the limit.
func TestWriterEntriesPerChunkLimit(t *testing.T) {
	e := newMemEnv(t).engine(t, Options{Linger: 200 * time.Millisecond, FlushBytes: maxFlushBytes})
	cases := make([]*appendCase, wal.MaxEntriesPerChunk+100)
	for i := range cases {
		cases[i] = &appendCase{log: 1, records: 1 + i%3, payload: []byte{byte(i)}}
	}
	runAppends(t, e, cases)
	if m := e.Metrics(); m.ObjectPuts < 2 {
		t.Fatalf("%d WAL objects for %d entries of one log, want at least 2", m.ObjectPuts, len(cases))
	}
}

// TestWriterLogsPerObjectLimit: appends to more logs than one object may
// hold (wal.MaxChunksPerObject) within one linger window; the writer cuts
// the object at the limit. The appends go straight to the writer and are
// read back through the index: tens of thousands of log handles (each
// with a head watch) would only measure the in-memory store's watches.
func TestWriterLogsPerObjectLimit(t *testing.T) {
	// The commit of tens of thousands of logs is slow on the in-memory
	// store under a loaded machine: the limit, not the speed, is tested.
	e := newMemEnv(t).engine(t, Options{Linger: 200 * time.Millisecond, FlushBytes: maxFlushBytes, CommitTimeout: 5 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // as the commit's: ctxT's minute ran out on a loaded machine
	defer cancel()
	n := wal.MaxChunksPerObject + 100
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = e.writer.append(ctx, lakestream.LogID(i), 1, binary.AppendUvarint(nil, uint64(i)), 0, nil, nil, "")
		})
	}
	wg.Wait()
	objects := map[string]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("append to log %d: %v", i, errs[i])
		}
	}
	seen := 0
	if err := e.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	err := e.scan(ctx, e.keys.logsPrefix(), func(key string, value []byte) error {
		if !strings.Contains(key, "/idx/") {
			return nil
		}
		ie, err := decodeIndexEntry(value)
		if err != nil {
			return err
		}
		id, err := strconv.ParseUint(key[len(e.keys.logsPrefix()):][:16], 16, 64)
		if err != nil {
			return err
		}
		c, err := newLogHandle(e, lakestream.LogID(id)).loadChunk(ctx, ie)
		if err != nil {
			return err
		}
		if ie.First != 0 || ie.Records != 1 || len(c.entries) != 1 || !bytes.Equal(c.entries[0].Payload, binary.AppendUvarint(nil, id)) {
			return fmt.Errorf("log %d: index %+v, chunk %+v", id, ie, c.entries)
		}
		objects[ie.Object]++
		seen++
		return nil
	})
	if err != nil || seen != n {
		t.Fatalf("read back %d of %d logs: %v", seen, n, err)
	}
	if len(objects) < 2 {
		t.Fatalf("%d logs in %d WAL objects, want at least 2", n, len(objects))
	}
	for o, logs := range objects {
		if logs > wal.MaxChunksPerObject {
			t.Fatalf("object %s holds %d logs", o, logs)
		}
	}
}

// TestRepackWALRecordsLimit: RepackWAL repacks only as many chunks as one
// WAL chunk may hold: three chunks of MaxInt32 records each are left as
// they are (no two fit together) and the small chunks after them are
// repacked; never a panic or a chunk the decoder rejects.
func TestRepackWALRecordsLimit(t *testing.T) {
	e := newMemEnv(t).engine(t, Options{})
	ctx := ctxT(t)
	var cases []*appendCase
	for i := range 3 {
		c := &appendCase{log: 1, records: math.MaxInt32, payload: []byte{byte(i)}}
		if c.h, c.err = e.Append(ctx, 1, c.records, c.payload); c.err != nil {
			t.Fatal(c.err)
		}
		cases = append(cases, c)
		if err := e.clog.foldNow(ctx); err != nil { // one index entry per chunk
			t.Fatal(err)
		}
	}
	for _, n := range []int{1, 2, 3} {
		c := &appendCase{log: 1, records: n, payload: []byte{byte(10 + n)}}
		if c.h, c.err = e.Append(ctx, 1, c.records, c.payload); c.err != nil {
			t.Fatal(c.err)
		}
		cases = append(cases, c)
		if err := e.clog.foldNow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each MaxInt32 chunk is passed over (the cursor moves past it), then
	// the three small ones become one.
	var repacked, nothing int
	for range 6 {
		st, err := e.RepackWAL(ctx, 1, 8)
		if errors.Is(err, ErrNothingToCompact) {
			nothing++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		repacked += st.Chunks
	}
	if repacked != 3 || nothing != 5 {
		t.Fatalf("repacked %d chunks in %d calls, want 3 in 1", repacked, 6-nothing)
	}
	got, err := e.ReadEntries(ctx, 1, 0, math.MaxInt32, 1<<30)
	for err == nil && len(got) < len(cases) {
		var more []lakestream.Entry
		if more, err = e.ReadEntries(ctx, 1, got[len(got)-1].End(), math.MaxInt32, 1<<30); len(more) == 0 {
			break
		}
		got = append(got, more...)
	}
	if err != nil || len(got) != len(cases) {
		t.Fatalf("read %d entries (%v), want %d", len(got), err, len(cases))
	}
	for i, c := range cases {
		if got[i].Offset != c.h.Offset || !bytes.Equal(got[i].Payload, c.payload) {
			t.Fatalf("entry %d: %+v, want offset %d", i, got[i].EntryHeader, c.h.Offset)
		}
	}
}

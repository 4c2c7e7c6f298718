package engine

// TestLeaderlessProperties checks the safety properties S1–S9 of the
// leaderless log protocol (docs/index-format.md) under concurrency and
// faults:
//
//	go test ./engine -run TestLeaderlessProperties -v [-props.seed N] [-props.appends N]
//
// Two engines (separate WAL writers, one metadata store, one bucket) append
// concurrently to the same logs with random entry sizes while the object
// store fails or loses replies of PUTs, the metadata store fails or loses
// replies of transactions, writers "crash" between PUT and commit, a
// compactor repacks chunks (crashing between its steps) and GC runs. A
// reader checks during the run that every committed offset stays readable
// (S8) and that heads never go back (S2). Afterwards every acknowledged
// append is readable exactly once at its offset, nothing that definitely
// failed is visible, appends with an unknown outcome are visible at most
// once, index entries tile each log without overlap (S1, S5, S7), the
// compaction cursor never passes the head (S6), and a fenced log took no
// append after Fence returned (S3).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

var (
	propsSeed    = flag.Int64("props.seed", 1, "seed of TestLeaderlessProperties")
	propsAppends = flag.Int("props.appends", 1500, "appends per engine in TestLeaderlessProperties")
)

type outcome int

const (
	acked outcome = iota + 1
	failed
	unknown
)

type appendRecord struct {
	log     lakestream.LogID
	payload string
	records int
	outcome outcome
	h       lakestream.EntryHeader
	err     error
}

// lockedRand is a seeded rand shared by goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (r *lockedRand) float() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64()
}

func (r *lockedRand) intn(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Intn(n)
}

func TestLeaderlessProperties(t *testing.T) {
	for _, seed := range []int64{*propsSeed, *propsSeed + 1} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runLeaderless(t, seed) })
	}
}

func runLeaderless(t *testing.T, seed int64) {
	const nLogs = 12
	const fencedLog = lakestream.LogID(0)
	rnd := &lockedRand{r: rand.New(rand.NewSource(seed))}
	var chaos atomic.Bool // on once the engines are open

	ms := meta.NewMem(meta.MemOptions{
		MaxTxnOps: 16, // 8 logs per commit transaction: 12 logs need two
		Fault: func(c meta.Call) meta.Fault {
			if !chaos.Load() {
				return meta.FaultNone
			}
			switch p := rnd.float(); {
			case p < 0.02:
				return meta.FaultUnavailable
			case p < 0.04 && c.Method == meta.MethodTxn:
				return meta.FaultLostReply
			}
			return meta.FaultNone
		},
	})
	bucket, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close(); ms.Close() })

	var faulty []*objstore.Faulty
	newEngine := func(name string, s int64) *Engine {
		f := objstore.NewFaulty(bucket, s)
		faulty = append(faulty, f)
		f.FailRandomly(objstore.OpPutIfAbsent, 0.03)
		f.LoseReplyRandomly(objstore.OpPutIfAbsent, 0.03)
		f.FailRandomly(objstore.OpGetRange, 0.02)
		opts := Options{NodeID: name, MaxInflightFlushes: 3, FlushBytes: 2048, CacheBytes: 64 << 10, Logger: quietLogger}
		opts.hooks.afterPut = func(string) error {
			if chaos.Load() && rnd.float() < 0.04 {
				return errors.New("injected crash between PUT and commit")
			}
			return nil
		}
		opts.hooks.repackStep = func(int64, string) error {
			if chaos.Load() && rnd.float() < 0.1 {
				return errors.New("injected compaction crash")
			}
			return nil
		}
		e, err := New(f, ms, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	engines := []*Engine{newEngine("a", seed*10+1), newEngine("b", seed*10+2)}
	ctx := ctxT(t)
	chaos.Store(true)

	var (
		mu      sync.Mutex
		records []*appendRecord
	)
	var fenceMu sync.Mutex
	fenceNext := int64(-1) // head of fencedLog right after Fence returned
	var wg sync.WaitGroup
	appendsPerEngine := *propsAppends
	if testing.Short() {
		appendsPerEngine = 300
	}
	var done atomic.Int64
	for ei := range engines {
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(ei, g int) {
				defer wg.Done()
				for i := 0; i < appendsPerEngine/4; i++ {
					e := engines[ei]
					log := lakestream.LogID(rnd.intn(nLogs))
					n := 1 + rnd.intn(5)
					p := fmt.Sprintf("e%d-g%d-%d-%s", ei, g, i, string(make([]byte, rnd.intn(200))))
					r := &appendRecord{log: log, payload: p, records: n}
					r.h, r.err = e.Append(ctx, log, n, []byte(p), lakestream.WithPublishTime(int64(i)))
					switch {
					case r.err == nil:
						r.outcome = acked
					case errors.Is(r.err, lakestream.ErrIndeterminate):
						r.outcome = unknown
					default:
						r.outcome = failed
					}
					mu.Lock()
					records = append(records, r)
					mu.Unlock()
					if done.Add(1) == int64(appendsPerEngine) { // half way: fence one log
						for {
							if err := engines[1].logMust(t, fencedLog).Fence(ctx); err == nil {
								break
							}
						}
						chaos.Store(false)
						n, err := engines[1].logMust(t, fencedLog).NextOffset(ctx)
						chaos.Store(true)
						if err != nil {
							t.Error(err)
						}
						fenceMu.Lock()
						fenceNext = n
						fenceMu.Unlock()
					}
				}
			}(ei, g)
		}
	}

	// Compactor, garbage collector, and a reader checking S2 and S8 while
	// the appends run.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var compactions atomic.Int64
	bg.Add(2)
	go func() {
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			e := engines[i%2]
			if _, err := e.RepackWAL(ctx, lakestream.LogID(rnd.intn(nLogs)), 2+rnd.intn(6)); err == nil {
				compactions.Add(1)
			}
			if i%20 == 0 {
				e.CollectGarbage(ctx)
			}
		}
	}()
	go func() {
		defer bg.Done()
		lastHead := make([]int64, nLogs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := lakestream.LogID(rnd.intn(nLogs))
			l := engines[rnd.intn(2)].logMust(t, id)
			h, err := l.refresh(ctx)
			if err != nil {
				continue // injected unavailability
			}
			if h.Next < lastHead[id] {
				t.Errorf("S2: log %d head went back from %d to %d", id, lastHead[id], h.Next)
			}
			lastHead[id] = h.Next
			pos := h.First
			for pos < h.Next {
				ents, err := l.readEntries(ctx, h, pos, 1<<30, 1<<20)
				if err != nil {
					if errors.Is(err, lakestream.ErrUnavailable) || errors.Is(err, objstore.ErrInjected) || errors.Is(err, meta.ErrUnavailable) {
						break
					}
					t.Errorf("S8: log %d offset %d (head %d) unreadable: %v", id, pos, h.Next, err)
					return
				}
				for _, en := range ents {
					if en.Offset > pos {
						t.Errorf("S8: log %d: offsets %d..%d missing", id, pos, en.Offset)
						return
					}
					pos = en.End()
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	chaos.Store(false)
	for _, f := range faulty {
		f.Reset()
	}

	// One more compaction and GC pass without faults, then verify.
	for id := lakestream.LogID(0); id < nLogs; id++ {
		engines[0].RepackWAL(ctx, id, 8)
	}
	gc, err := engines[1].CollectGarbage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	verifyLeaderless(t, ctx, engines[0], ms, bucket, records, nLogs, fencedLog, fenceNext)
	var counts [4]int
	for _, r := range records {
		counts[r.outcome]++
	}
	t.Logf("appends: %d acked, %d failed, %d unknown; %d compactions; gc %+v; metrics %+v",
		counts[acked], counts[failed], counts[unknown], compactions.Load(), gc, engines[0].Metrics())
	if counts[acked] == 0 || counts[failed] == 0 || compactions.Load() == 0 {
		t.Errorf("the run did not exercise both success and failure paths and compaction")
	}
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func (e *Engine) logMust(t *testing.T, id lakestream.LogID) *logHandle {
	for {
		l, err := e.log(context.Background(), id)
		if err == nil {
			return l
		}
		if !errors.Is(err, lakestream.ErrUnavailable) {
			t.Fatal(err)
		}
	}
}

func verifyLeaderless(t *testing.T, ctx context.Context, e *Engine, ms meta.Store, bucket objstore.Store, records []*appendRecord, nLogs int, fencedLog lakestream.LogID, fenceNext int64) {
	byPayload := map[string]*appendRecord{}
	for _, r := range records {
		byPayload[r.payload] = r
	}
	seen := map[string]int{}
	for id := lakestream.LogID(0); id < lakestream.LogID(nLogs); id++ {
		l := e.logMust(t, id)
		h, err := l.refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// S1, S5, S7: the index tiles [first, next) exactly.
		p := e.keys.idxPrefix(id)
		kvs, err := ms.Range(ctx, p, prefixEnd(p), 0)
		if err != nil {
			t.Fatal(err)
		}
		pos := h.First
		for i, kv := range kvs {
			ie, err := decodeIndexEntry(kv.Value)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 && ie.First > h.First {
				t.Errorf("log %d: first index entry starts at %d > first %d", id, ie.First, h.First)
			}
			if i > 0 && ie.First != pos {
				t.Errorf("S7: log %d: index entry %d..%d follows one ending at %d", id, ie.First, ie.Last(), pos)
			}
			pos = ie.End()
			if _, err := bucket.GetRange(ctx, ie.Object, ie.Offset, 1); err != nil {
				t.Errorf("S8: log %d: index entry %d..%d names object %s: %v", id, ie.First, ie.Last(), ie.Object, err)
			}
		}
		if pos != h.Next {
			t.Errorf("S1: log %d: index ends at %d, head is %d", id, pos, h.Next)
		}
		// S6: the compaction cursor never passes the head.
		if kv, found, _ := ms.Get(ctx, e.keys.log(id)+"compacted"); found {
			if c, _ := strconv.ParseInt(string(kv.Value), 10, 64); c > h.Next {
				t.Errorf("S6: log %d: compaction cursor %d > head %d", id, c, h.Next)
			}
		}
		// S3: a fenced log took nothing after Fence returned.
		if id == fencedLog && fenceNext >= 0 && h.Next != fenceNext {
			t.Errorf("S3: log %d grew from %d to %d after Fence", id, fenceNext, h.Next)
		}
		ents, err := l.readEntries(ctx, h, h.First, 1<<30, 1<<40)
		if err != nil {
			t.Fatalf("log %d: %v", id, err)
		}
		next := h.First
		for _, en := range ents {
			if en.Offset != next {
				t.Errorf("log %d: entry at %d, expected %d", id, en.Offset, next)
			}
			next = en.End()
			s := string(en.Payload)
			seen[s]++
			r, ok := byPayload[s]
			switch {
			case !ok:
				t.Errorf("log %d offset %d: payload %.20q was never appended", id, en.Offset, s)
			case r.log != id || int(en.Records) != r.records:
				t.Errorf("log %d offset %d: payload of log %d with %d records", id, en.Offset, r.log, r.records)
			case r.outcome == failed:
				t.Errorf("log %d offset %d: append that failed definitely is visible (%v)", id, en.Offset, r.err)
			case r.outcome == acked && r.h.Offset != en.Offset:
				t.Errorf("log %d: acked at %d, found at %d", id, r.h.Offset, en.Offset)
			case r.outcome == acked && r.h.CumulativeSize != en.CumulativeSize:
				t.Errorf("log %d offset %d: acked cumulative size %d, read %d", id, en.Offset, r.h.CumulativeSize, en.CumulativeSize)
			}
		}
		if next != h.Next {
			t.Errorf("log %d: entries end at %d, head %d", id, next, h.Next)
		}
	}
	for _, r := range records {
		n := seen[r.payload]
		switch {
		case r.outcome == acked && n != 1:
			t.Errorf("acked append %.20q (log %d offset %d) seen %d times", r.payload, r.log, r.h.Offset, n)
		case n > 1:
			t.Errorf("append %.20q seen %d times", r.payload, n)
		}
	}
	// GC left every referenced object, and nothing else but protected ones.
	var objects int
	bucket.List(ctx, "wal/", func(objstore.ObjectInfo) error { objects++; return nil })
	t.Logf("objects left after GC: %d", objects)
}

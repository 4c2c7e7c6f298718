package engine

// Benchmarks of the engine on the in-memory stores (mem:// objects, meta.Mem),
// so they measure the engine's own costs — batching, WAL encoding, commits,
// index walks, cache and decode — without disk or network. The
// end-to-end numbers on etcd and a real object store come from
// `lakegate bench engine` (docs/benchmarks.md).
//
//	go test -run '^$' -bench . -benchtime 2000x ./engine/
//
// Custom metrics: appends/s, puts/s, puts/op (WAL objects per append),
// txns/op (commit transactions per append); gets/op and hits/op (chunk
// GETs and cache hits per read).

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

const (
	// benchEntryBytes is the payload of every benchmark entry.
	benchEntryBytes = 1024
	// benchProducers is the number of concurrent appenders, like the
	// driver's default: a closed loop of 64 producers.
	benchProducers = 64
	// benchReadEntries is the entries one read asks for (one dispatch
	// batch of a consumer).
	benchReadEntries = 64
	// benchFillEntries is the entries the read benchmarks write first.
	benchFillEntries = 4096
)

func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("logs=%d", n), func(b *testing.B) { benchAppend(b, n) })
	}
}

// benchAppend appends 1 KiB entries from benchProducers goroutines, the
// logs taken round-robin; one op is one acknowledged append.
func benchAppend(b *testing.B, nLogs int) {
	env := newMemEnv(b)
	e := env.engine(b, Options{})
	ctx := ctxT(b)
	logs := benchOpenLogs(b, ctx, e, nLogs)
	payload := make([]byte, benchEntryBytes)
	var next atomic.Uint64

	b.SetBytes(benchEntryBytes)
	b.SetParallelism((benchProducers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	m0 := e.Metrics()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := (next.Add(1) - 1) % uint64(nLogs)
			if _, err := logs[i].Append(ctx, 1, payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	m1 := e.Metrics()
	puts, txns := float64(m1.ObjectPuts-m0.ObjectPuts), float64(m1.Txns-m0.Txns)
	b.ReportMetric(float64(b.N)/elapsed, "appends/s")
	b.ReportMetric(puts/elapsed, "puts/s")
	b.ReportMetric(puts/float64(b.N), "puts/op")
	b.ReportMetric(txns/float64(b.N), "txns/op")
}

// BenchmarkReadTail reads entries just written by the same engine: every
// chunk is in the cache the writer filled, so a read costs a head read, an
// index range and copies (hits/op > 0, gets/op = 0).
func BenchmarkReadTail(b *testing.B) {
	env := newMemEnv(b)
	e := env.engine(b, Options{})
	ctx := ctxT(b)
	l := benchOpenLogs(b, ctx, e, 1)[0]
	benchFill(b, ctx, l, benchFillEntries)
	benchRead(b, ctx, e, l)
}

// BenchmarkReadCold reads the same entries through a second engine whose
// cache keeps nothing: every chunk is a ranged GET plus a decode.
func BenchmarkReadCold(b *testing.B) {
	env := newMemEnv(b)
	w := env.engine(b, Options{NodeID: "writer"})
	ctx := ctxT(b)
	benchFill(b, ctx, benchOpenLogs(b, ctx, w, 1)[0], benchFillEntries)
	r := env.engine(b, Options{NodeID: "reader", CacheBytes: 1}) // no chunk fits
	benchRead(b, ctx, r, benchOpenLogs(b, ctx, r, 1)[0])
}

// benchRead reads benchReadEntries entries per op, walking the log from 0
// to its head and around again.
func benchRead(b *testing.B, ctx context.Context, e *Engine, l lakestream.Log) {
	head, err := l.NextOffset(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchReadEntries * benchEntryBytes)
	m0 := e.Metrics()
	var off int64
	for b.Loop() {
		ents, err := l.ReadEntries(ctx, off, benchReadEntries, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		if len(ents) == 0 {
			b.Fatalf("read at %d below head %d returned nothing", off, head)
		}
		off = ents[len(ents)-1].End()
		if off >= head {
			off = 0
		}
	}
	m1 := e.Metrics()
	b.ReportMetric(float64(m1.ObjectGets-m0.ObjectGets)/float64(b.N), "gets/op")
	b.ReportMetric(float64(m1.CacheHits-m0.CacheHits)/float64(b.N), "hits/op")
}

func benchOpenLogs(b *testing.B, ctx context.Context, e *Engine, n int) []lakestream.Log {
	b.Helper()
	logs := make([]lakestream.Log, n)
	for i := range logs {
		l, err := e.Log(ctx, lakestream.LogID(i))
		if err != nil {
			b.Fatal(err)
		}
		logs[i] = l
	}
	return logs
}

// benchFill appends n entries of benchEntryBytes to l from benchProducers
// goroutines (one at a time would wait a linger per entry).
func benchFill(b *testing.B, ctx context.Context, l lakestream.Log, n int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	payload := make([]byte, benchEntryBytes)
	for range benchProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := l.Append(ctx, 1, payload); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

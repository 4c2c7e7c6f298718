package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// Under lakestream.WithStaleReads a log's bounds come from a fresh read
// made at most maxAge ago: looking at many logs one after the other costs
// one read of commits/sync, not one per call, and still sees every append
// that finished before that read. Without it every call reads.
func TestStaleReadsShareOneSync(t *testing.T) {
	var syncs atomic.Int64
	ms := meta.NewMem(meta.MemOptions{Fault: func(c meta.Call) meta.Fault {
		if c.Method == meta.MethodGet && strings.HasSuffix(c.Key, "commits/sync") {
			syncs.Add(1)
		}
		return meta.FaultNone
	}})
	st, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); ms.Close() })
	e, err := New(st, ms, Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := ctxT(t)
	var logs []lakestream.Log
	for id := range lakestream.LogID(10) {
		l, err := e.Log(ctx, id+1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, 1, payload(id+1, 0)); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	nexts := func(ctx context.Context) int64 {
		t.Helper()
		before := syncs.Load()
		for _, l := range logs {
			if n, err := l.NextOffset(ctx); err != nil || n != 1 {
				t.Fatalf("NextOffset = %d, %v; want 1 (the append before the call)", n, err)
			}
		}
		return syncs.Load() - before
	}
	if n := nexts(ctx); n != int64(len(logs)) {
		t.Fatalf("fresh reads of %d logs: %d syncs, want one each", len(logs), n)
	}
	stale := lakestream.WithStaleReads(ctx, time.Hour)
	if n := nexts(stale); n != 0 {
		t.Fatalf("stale reads of %d logs after a fresh one: %d syncs, want none", len(logs), n)
	}
	if n := nexts(lakestream.WithStaleReads(ctx, time.Nanosecond)); n != int64(len(logs)) {
		t.Fatalf("reads allowing 1 ns of staleness: %d syncs, want one each", n)
	}
}

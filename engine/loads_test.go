package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/objstore"
)

// countingStore counts the GetRange calls in progress at once.
type countingStore struct {
	objstore.Store
	now, peak atomic.Int64
}

func (s *countingStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	cur := s.now.Add(1)
	defer s.now.Add(-1)
	for {
		p := s.peak.Load()
		if cur <= p || s.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond) // a store's latency: lets concurrent loads overlap
	return s.Store.GetRange(ctx, key, off, n)
}

// TestColdLoadsBounded: readers of many logs from behind read and decode
// at most Options.MaxConcurrentLoads chunks at once (docs/memory.md), and
// every reader still gets its entries.
func TestColdLoadsBounded(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxT(t)
	w := env.engine(t, Options{NodeID: "w"})
	const logs, entries = 8, 5
	for l := lakestream.LogID(1); l <= logs; l++ {
		for i := 0; i < entries; i++ {
			if _, err := w.Append(ctx, l, 1, payload(l, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cs := &countingStore{Store: env.store}
	r, err := New(cs, env.meta, Options{NodeID: "r", MaxConcurrentLoads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	for l := lakestream.LogID(1); l <= logs; l++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := r.ReadEntries(ctx, l, 0, entries, 1<<20)
			if err != nil {
				t.Errorf("log %d: %v", l, err)
				return
			}
			if len(got) != entries {
				t.Errorf("log %d: %d entries, want %d", l, len(got), entries)
			}
		}()
	}
	wg.Wait()
	if p := cs.peak.Load(); p < 1 || p > 2 {
		t.Fatalf("%d chunk loads at once, want 1..2 (MaxConcurrentLoads)", p)
	}
}

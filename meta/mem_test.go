package meta_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/meta/metatest"
)

func TestMemAcceptance(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store {
		s := meta.NewMem(meta.MemOptions{})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestMemAcceptanceSmallLimits(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store {
		s := meta.NewMem(meta.MemOptions{
			MaxTxnOps:         metatest.MinMaxTxnOps,
			WatchBufferEvents: metatest.MinWatchBufferEvents,
			HistoryRevisions:  50,
		})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func put(t *testing.T, s meta.Store, key, value string) int64 {
	t.Helper()
	ok, rev, err := s.Txn(context.Background(), nil, []meta.Op{meta.Put(key, []byte(value))})
	if err != nil || !ok {
		t.Fatalf("put %q: ok=%v err=%v", key, ok, err)
	}
	return rev
}

// TestMemRevisions pins the exact revision arithmetic of etcd: a fresh
// store is at 1, and every Txn that changes something adds exactly 1.
func TestMemRevisions(t *testing.T) {
	ctx := context.Background()
	s := meta.NewMem(meta.MemOptions{})
	if r := s.Revision(); r != 1 {
		t.Fatalf("fresh revision %d, want 1", r)
	}
	if r := put(t, s, "a", "1"); r != 2 {
		t.Fatalf("first write at %d, want 2", r)
	}
	ok, r, err := s.Txn(ctx, nil, []meta.Op{meta.Put("a", nil), meta.Put("b", nil), meta.DeletePrefix("c")})
	if err != nil || !ok || r != 3 {
		t.Fatalf("multi-op txn: ok=%v rev=%d err=%v, want rev 3", ok, r, err)
	}
	// No change: no new revision.
	if _, r, _ := s.Txn(ctx, nil, []meta.Op{meta.Delete("zz")}); r != 3 {
		t.Fatalf("no-op delete moved revision to %d", r)
	}
	if _, r, _ := s.Txn(ctx, []meta.Cmp{{Key: "a", ModRevision: 1}}, []meta.Op{meta.Put("a", nil)}); r != 3 {
		t.Fatalf("failed txn moved revision to %d", r)
	}
	if r := put(t, s, "b", "x"); r != 4 {
		t.Fatalf("write at %d, want 4", r)
	}
}

func TestMemFaultUnavailable(t *testing.T) {
	ctx := context.Background()
	s := meta.NewMem(meta.MemOptions{})
	s.InjectFault(meta.MethodTxn, meta.FaultUnavailable)
	_, _, err := s.Txn(ctx, nil, []meta.Op{meta.Put("k", []byte("v"))})
	if !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("injected FaultUnavailable: %v", err)
	}
	if _, found, _ := s.Get(ctx, "k"); found {
		t.Fatal("txn applied despite FaultUnavailable")
	}
	if s.Revision() != 1 {
		t.Fatalf("revision %d after a lost txn", s.Revision())
	}
	// One-shot: the next txn goes through.
	put(t, s, "k", "v")

	s.InjectFault(meta.MethodGet, meta.FaultUnavailable)
	s.InjectFault(meta.MethodRange, meta.FaultLostReply) // for reads: unavailable
	if _, _, err := s.Get(ctx, "k"); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("Get with fault: %v", err)
	}
	if _, err := s.RangeReverse(ctx, "", "", 0); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("RangeReverse with fault: %v", err)
	}
	if _, found, err := s.Get(ctx, "k"); err != nil || !found {
		t.Fatalf("Get after the fault: found=%v err=%v", found, err)
	}
}

func TestMemFaultLostReply(t *testing.T) {
	ctx := context.Background()
	s := meta.NewMem(meta.MemOptions{})
	ch := s.Watch(ctx, "", 1)
	s.InjectFault(meta.MethodTxn, meta.FaultLostReply)
	ok, _, err := s.Txn(ctx, []meta.Cmp{{Key: "k"}}, []meta.Op{meta.Put("k", []byte("v"))})
	if !errors.Is(err, meta.ErrUnavailable) || ok {
		t.Fatalf("lost reply: ok=%v err=%v", ok, err)
	}
	kv, found, err := s.Get(ctx, "k")
	if err != nil || !found || string(kv.Value) != "v" || kv.ModRevision != 2 {
		t.Fatalf("txn with lost reply not applied: %+v found=%v err=%v", kv, found, err)
	}
	if ev := <-ch; ev.KV.Key != "k" || ev.KV.ModRevision != 2 {
		t.Fatalf("watch after lost reply: %+v", ev)
	}
}

func TestMemFaultHook(t *testing.T) {
	ctx := context.Background()
	// Fail every txn that touches "logs/"; let the others through.
	s := meta.NewMem(meta.MemOptions{Fault: func(c meta.Call) meta.Fault {
		if c.Method != meta.MethodTxn {
			return meta.FaultNone
		}
		for _, op := range c.Ops {
			if len(op.Key) >= 5 && op.Key[:5] == "logs/" {
				return meta.FaultUnavailable
			}
		}
		return meta.FaultNone
	}})
	if _, _, err := s.Txn(ctx, nil, []meta.Op{meta.Put("logs/1", nil)}); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("hooked fault: %v", err)
	}
	put(t, s, "other", "x")
	// Queued faults come first.
	s.InjectFault(meta.MethodTxn, meta.FaultUnavailable)
	if _, _, err := s.Txn(ctx, nil, []meta.Op{meta.Put("other", nil)}); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("queued fault: %v", err)
	}
}

// TestMemWatchOverflow: a watcher that does not keep up is closed, not
// skipped silently; others are unaffected.
func TestMemWatchOverflow(t *testing.T) {
	ctx := context.Background()
	s := meta.NewMem(meta.MemOptions{WatchBufferEvents: 4})
	slow := s.Watch(ctx, "", 1)
	fast := s.Watch(ctx, "", 1)
	for i := range 10 {
		put(t, s, "k", "v")
		if ev := <-fast; ev.KV.ModRevision != int64(i+2) {
			t.Fatalf("fast watcher event %d: %+v", i, ev)
		}
	}
	n := 0
	for range slow {
		n++
	}
	if n != 4 {
		t.Fatalf("slow watcher got %d events before closing, want its buffer (4)", n)
	}
	// A replay larger than the buffer closes the watch as well.
	replay := s.Watch(ctx, "", 1)
	n = 0
	for range replay {
		n++
	}
	if n != 4 {
		t.Fatalf("replay watcher got %d events before closing, want 4", n)
	}
}

// TestMemWatchCompacted: a watch from a revision whose history is gone is
// closed at once; the history keeps HistoryRevisions revisions.
func TestMemWatchCompacted(t *testing.T) {
	ctx := context.Background()
	s := meta.NewMem(meta.MemOptions{HistoryRevisions: 3})
	for range 6 {
		put(t, s, "k", "v") // revisions 2..7
	}
	// Revisions 5, 6, 7 are kept: a watch may start after 4, not earlier.
	if _, open := <-s.Watch(ctx, "", 3); open {
		t.Fatal("watch from compacted revision 3 delivered an event")
	}
	ch := s.Watch(ctx, "", 4)
	for want := int64(5); want <= 7; want++ {
		if ev := <-ch; ev.KV.ModRevision != want {
			t.Fatalf("replay: %+v, want revision %d", ev, want)
		}
	}
	s.Compact(6)
	if _, open := <-s.Watch(ctx, "", 5); open {
		t.Fatal("watch from revision 5 after Compact(6) delivered an event")
	}
	if ev := <-s.Watch(ctx, "", 6); ev.KV.ModRevision != 7 {
		t.Fatalf("watch after 6: %+v", ev)
	}
	// The open watch is unaffected by compaction.
	r := put(t, s, "k", "w")
	if ev := <-ch; ev.KV.ModRevision != r {
		t.Fatalf("open watch after compaction: %+v", ev)
	}
}

// TestMemWatchFuture: a watch from a future revision starts there.
func TestMemWatchFuture(t *testing.T) {
	ctx := context.Background()
	s := meta.NewMem(meta.MemOptions{})
	ch := s.Watch(ctx, "", 3) // from revision 4
	put(t, s, "a", "2")
	put(t, s, "a", "3")
	r := put(t, s, "a", "4")
	if ev := <-ch; ev.KV.ModRevision != r {
		t.Fatalf("future watch: %+v, want revision %d", ev, r)
	}
}

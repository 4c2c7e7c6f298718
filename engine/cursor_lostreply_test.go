package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

// TestCursorPersistAfterLostReply: a cursor write whose reply was lost, and
// whose re-read failed too (both happen while etcd changes leader), did
// apply; the next persist must write after it, not take the key it moved
// for a write made elsewhere. (A partition's deduplication snapshot did:
// ErrConflict, and the node gave up a partition it still owned.) A write
// made elsewhere is still a conflict.
func TestCursorPersistAfterLostReply(t *testing.T) {
	var (
		key                atomic.Value
		lostTxns, failGets atomic.Int32
	)
	ms := meta.NewMem(meta.MemOptions{Fault: func(c meta.Call) meta.Fault {
		k, _ := key.Load().(string)
		switch {
		case k == "":
		case c.Method == meta.MethodTxn && len(c.Ops) == 1 && c.Ops[0].Key == k && lostTxns.Add(-1) >= 0:
			return meta.FaultLostReply
		case c.Method == meta.MethodGet && c.Key == k && failGets.Add(-1) >= 0:
			return meta.FaultUnavailable
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
	l := e.logMust(t, 1)
	for i := range 3 {
		if _, err := l.Append(ctx, 1, payload(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := l.OpenCursor(ctx, "c", -1)
	if err != nil {
		t.Fatal(err)
	}
	key.Store(e.keys.cursor(1, "c"))
	lostTxns.Store(1)
	failGets.Store(2) // the re-read after the lost reply, and the one after the failed compare
	if err := c.MarkDelete(ctx, 0, map[string]int64{"a": 1}); !errors.Is(err, lakestream.ErrUnavailable) {
		t.Fatalf("write with a lost reply: %v, want ErrUnavailable", err)
	}
	if err := c.MarkDelete(ctx, 1, map[string]int64{"a": 2}); !errors.Is(err, lakestream.ErrUnavailable) {
		t.Fatalf("next write, its re-read failing: %v, want ErrUnavailable (the handle stays open)", err)
	}
	if err := c.MarkDelete(ctx, 1, map[string]int64{"a": 2}); err != nil {
		t.Fatalf("next write after a lost reply that applied: %v", err)
	}
	c2, err := l.LoadCursor(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if md, p := c2.MarkDeleteOffset(), c2.Properties(); md != 1 || p["a"] != 2 {
		t.Fatalf("persisted: mark-delete %d properties %v, want 1, a=2", md, p)
	}
	// Written elsewhere: a conflict.
	if err := c2.MarkDelete(ctx, 2, map[string]int64{"a": 3}); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkDelete(ctx, 2, map[string]int64{"a": 4}); !errors.Is(err, lakestream.ErrConflict) {
		t.Fatalf("write after another handle's: %v, want ErrConflict", err)
	}
}

package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

func newFaultyEnv(t *testing.T) (*testEnv, *objstore.Faulty) {
	t.Helper()
	st, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	f := objstore.NewFaulty(st, 1)
	ms := meta.NewMem(meta.MemOptions{})
	t.Cleanup(func() { st.Close(); ms.Close() })
	return &testEnv{meta: ms, store: f}, f
}

// TestPutRetry: failed PUTs and lost PUT replies are retried within
// CommitTimeout, so the appends succeed, once each.
func TestPutRetry(t *testing.T) {
	env, f := newFaultyEnv(t)
	e := env.engine(t, Options{CommitTimeout: 20 * time.Second})
	ctx := ctxT(t)
	l, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.FailNext(objstore.OpPutIfAbsent, 3)
	if _, err := l.Append(ctx, 1, []byte("a")); err != nil {
		t.Fatalf("after 3 failed PUTs: %v", err)
	}
	// The PUT takes effect but reports an error: the retry finds the
	// object (ErrExists), reads it back, and succeeds.
	f.LoseReplyNext(objstore.OpPutIfAbsent, 1)
	if _, err := l.Append(ctx, 1, []byte("b")); err != nil {
		t.Fatalf("after a lost PUT reply: %v", err)
	}
	if f.Injected() != 4 {
		t.Fatalf("injected %d faults, want 4", f.Injected())
	}
	es, err := l.ReadEntries(ctx, 0, 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || string(es[0].Payload) != "a" || string(es[1].Payload) != "b" {
		t.Fatalf("entries %+v", es)
	}
}

// TestPutOutage: PUTs failing for longer than CommitTimeout fail the
// append with ErrUnavailable, within about CommitTimeout; afterwards
// appends succeed again.
func TestPutOutage(t *testing.T) {
	env, f := newFaultyEnv(t)
	const timeout = 500 * time.Millisecond
	e := env.engine(t, Options{CommitTimeout: timeout})
	ctx := ctxT(t)
	l, err := e.Log(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.FailRandomly(objstore.OpPutIfAbsent, 1)
	start := time.Now()
	_, err = l.Append(ctx, 1, []byte("lost"))
	took := time.Since(start)
	if !errors.Is(err, lakestream.ErrUnavailable) {
		t.Fatalf("append during an outage: %v, want ErrUnavailable", err)
	}
	if took > timeout+5*time.Second {
		t.Fatalf("append failed after %v, want about %v", took, timeout)
	}
	if f.Injected() < 2 {
		t.Fatalf("%d PUT attempts failed, want retries", f.Injected())
	}
	t.Logf("outage: append failed after %v and %d PUT attempts: %v", took.Round(time.Millisecond), f.Injected(), err)
	f.Reset()
	h, err := l.Append(ctx, 1, []byte("after"))
	if err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	if h.Offset != 0 {
		t.Fatalf("offset %d: the failed append took an offset", h.Offset)
	}
}

package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/objstore"
)

func TestFaultyFailNext(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(open(t, "mem://"), 1)
	f.FailNext(objstore.OpPutIfAbsent, 2)

	for i := range 2 {
		if err := f.PutIfAbsent(ctx, "k", []byte("x")); !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("PutIfAbsent %d: %v, want ErrInjected", i, err)
		}
	}
	// Failed before reaching the store: nothing was written.
	if _, err := f.Get(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get after failed creates: %v, want ErrNotFound", err)
	}
	if err := f.PutIfAbsent(ctx, "k", []byte("x")); err != nil {
		t.Fatalf("third PutIfAbsent: %v", err)
	}
	// Other operations were never affected.
	if err := f.Put(ctx, "other", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if got := f.Injected(); got != 2 {
		t.Fatalf("Injected() = %d, want 2", got)
	}
}

func TestFaultyLoseReply(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(open(t, "mem://"), 1)
	f.LoseReplyNext(objstore.OpPutIfAbsent|objstore.OpDelete, 2)

	// The PUT reports an error but took effect: a retry sees ErrExists,
	// and the object is there.
	if err := f.PutIfAbsent(ctx, "wal/1", []byte("entry")); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("PutIfAbsent: %v, want ErrInjected", err)
	}
	got, err := f.Get(ctx, "wal/1")
	if err != nil || string(got) != "entry" {
		t.Fatalf("Get after lost reply = %q, %v; want the object", got, err)
	}
	if err := f.Delete(ctx, "wal/1"); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Delete: %v, want ErrInjected", err)
	}
	if _, err := f.Get(ctx, "wal/1"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get after lost delete reply: %v, want ErrNotFound", err)
	}
	if err := f.PutIfAbsent(ctx, "wal/1", []byte("again")); err != nil {
		t.Fatalf("rules used up, PutIfAbsent: %v", err)
	}
}

// Rules are consulted in the order added; each counts only its own kinds.
func TestFaultyRuleOrder(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(open(t, "mem://"), 1)
	if err := f.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	f.FailNext(objstore.OpGet, 1)
	f.LoseReplyNext(objstore.OpReads, 1)
	if _, err := f.GetRange(ctx, "k", 0, 1); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("GetRange: %v, want the second rule's fault", err)
	}
	if _, err := f.Get(ctx, "k"); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Get: %v, want the first rule's fault", err)
	}
	if _, err := f.Get(ctx, "k"); err != nil {
		t.Fatalf("Get after rules: %v", err)
	}
}

func faultPattern(seed int64, p float64) string {
	f := objstore.NewFaulty(objstore.Instrument(mustOpenMem()), seed)
	f.FailRandomly(objstore.OpPut, p)
	f.LoseReplyRandomly(objstore.OpGet, p)
	var pattern []byte
	for i := range 200 {
		key := fmt.Sprintf("k%d", i)
		err := f.Put(context.Background(), key, []byte("v"))
		pattern = append(pattern, map[bool]byte{true: 'F', false: '.'}[err != nil])
		_, err = f.Get(context.Background(), key)
		pattern = append(pattern, map[bool]byte{true: 'L', false: '.'}[err != nil])
	}
	return string(pattern)
}

func mustOpenMem() objstore.Store {
	s, err := objstore.Open(context.Background(), "mem://")
	if err != nil {
		panic(err)
	}
	return s
}

func TestFaultyRandomIsDeterministic(t *testing.T) {
	a, b := faultPattern(42, 0.3), faultPattern(42, 0.3)
	if a != b {
		t.Fatalf("same seed, different faults:\n%s\n%s", a, b)
	}
	if c := faultPattern(43, 0.3); c == a {
		t.Fatalf("different seeds, same faults: %s", a)
	}
	var fails, losses int
	for _, c := range a {
		switch c {
		case 'F':
			fails++
		case 'L':
			losses++
		}
	}
	// 200 draws each at p=0.3; a Get after a failed Put fails too (not found
	// counts as an error here), so only check the Put side closely.
	if fails < 35 || fails > 85 {
		t.Fatalf("%d of 200 Puts failed at p=0.3", fails)
	}
	if losses < fails {
		t.Fatalf("%d Gets failed, fewer than the %d failed Puts", losses, fails)
	}
	if p0 := faultPattern(42, 0); strings.ContainsAny(p0, "FL") {
		t.Fatalf("p=0 injected faults: %s", p0)
	}
}

// The hook holds an operation in flight until the test releases it, without
// sleeping: here to check that a create blocked mid-flight still wins
// against a later one only if it gets there first.
func TestFaultyHookBlocks(t *testing.T) {
	ctx := t.Context()
	inner := open(t, "mem://")
	f := objstore.NewFaulty(inner, 1)
	entered := make(chan string, 1)
	release := make(chan struct{})
	f.SetHook(func(ctx context.Context, op objstore.Op, key string) error {
		if op != objstore.OpPutIfAbsent || key != "slow" {
			return nil
		}
		entered <- key
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	done := make(chan error, 1)
	go func() { done <- f.PutIfAbsent(ctx, "slow", []byte("blocked writer")) }()
	<-entered // the blocked writer is inside the hook, not yet at the store

	if err := inner.PutIfAbsent(ctx, "slow", []byte("fast writer")); err != nil {
		t.Fatalf("fast writer: %v", err)
	}
	close(release)
	if err := <-done; !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("blocked writer: %v, want ErrExists", err)
	}

	// A hook error is the operation's error, and is not counted as injected.
	hookErr := errors.New("hook says no")
	f.SetHook(func(context.Context, objstore.Op, string) error { return hookErr })
	if err := f.Delete(ctx, "slow"); !errors.Is(err, hookErr) {
		t.Fatalf("Delete with failing hook: %v", err)
	}
	f.Reset()
	if err := f.Delete(ctx, "slow"); err != nil {
		t.Fatalf("Delete after Reset: %v", err)
	}
	if n := f.Injected(); n != 0 {
		t.Fatalf("Injected() = %d, want 0", n)
	}
}

// A hook that blocks honours the operation's context.
func TestFaultyHookContext(t *testing.T) {
	f := objstore.NewFaulty(open(t, "mem://"), 1)
	f.SetHook(func(ctx context.Context, _ objstore.Op, _ string) error {
		<-ctx.Done()
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get: %v, want context.Canceled", err)
	}
}

func TestOpString(t *testing.T) {
	if s := (objstore.OpPut | objstore.OpList).String(); s != "put|list" {
		t.Fatalf("String() = %q", s)
	}
	if s := objstore.Op(0).String(); s != "none" {
		t.Fatalf("String() = %q", s)
	}
}

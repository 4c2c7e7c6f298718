package engine

import (
	"bytes"
	"slices"
	"sync"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

// TestApplyOwn: a single writer's records are applied on their
// transaction's reply (no wait for the watch) with the offsets the watch
// gives; with two engines committing to one log at once the compare on
// commits/sync misses and the records fall back to the watch — offsets stay
// unique and dense, and both engines read the same entries.
func TestApplyOwn(t *testing.T) {
	env := newMemEnv(t)
	e1 := env.engine(t, Options{Logger: quietLogger})
	ctx := ctxT(t)
	const id = 3
	l1, err := e1.Log(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for i := range 40 {
		h, err := l1.Append(ctx, 1, payload(id, i))
		if err != nil {
			t.Fatal(err)
		}
		if h.Offset != next {
			t.Fatalf("append %d at offset %d, want %d", i, h.Offset, next)
		}
		next = h.End()
	}
	// The first commit has no record to compare with; the ones after it
	// follow the last record applied here, so their reply applies them —
	// unless the watch, racing the reply (a loaded machine), was first.
	if m := e1.Metrics(); m.OwnApplies+m.OwnWatchFirst < 30 {
		t.Fatalf("%d of 40 sequential commits applied on their reply (%d more by the watch first)", m.OwnApplies, m.OwnWatchFirst)
	}

	e2 := env.engine(t, Options{Logger: quietLogger})
	l2, err := e2.Log(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		offs []int64
		wg   sync.WaitGroup
	)
	for w, l := range []lakestream.Log{l1, l2, l1, l2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				h, err := l.Append(ctx, 2, payload(id, 1000*(w+1)+i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				offs = append(offs, h.Offset)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.Sort(offs)
	for i, o := range offs {
		if o != next+2*int64(i) {
			t.Fatalf("concurrent appends: offset #%d is %d, want %d (offsets %v)", i, o, next+2*int64(i), offs)
		}
	}
	// A read from below the head an engine knows is not linearizable;
	// NextOffset is (it waits until the engine's watch has applied the
	// newest record).
	for _, l := range []lakestream.Log{l1, l2} {
		if n, err := l.NextOffset(ctx); err != nil || n != next+400 {
			t.Fatalf("NextOffset: %d, %v; want %d", n, err, next+400)
		}
	}
	r1, err := l1.ReadEntries(ctx, 0, 10000, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l2.ReadEntries(ctx, 0, 10000, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	if len(r1) != 240 || len(r2) != len(r1) {
		t.Fatalf("read %d and %d entries, want 240", len(r1), len(r2))
	}
	for i := range r1 {
		if r1[i].EntryHeader != r2[i].EntryHeader || !bytes.Equal(r1[i].Payload, r2[i].Payload) {
			t.Fatalf("entry %d differs: %+v %q / %+v %q", i, r1[i].EntryHeader, r1[i].Payload, r2[i].EntryHeader, r2[i].Payload)
		}
	}
	if err := e1.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e2.clog.foldNow(ctx); err != nil {
		t.Fatal(err)
	}
	e3 := env.engine(t, Options{Logger: quietLogger})
	l3, err := e3.Log(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l3.NextOffset(ctx); err != nil {
		t.Fatal(err)
	}
	r3, err := l3.ReadEntries(ctx, 0, 10000, 1<<24)
	if err != nil || len(r3) != len(r1) {
		t.Fatalf("a new engine after the folds read %d entries (%v), want %d", len(r3), err, len(r1))
	}
	for i := range r1 {
		if r3[i].EntryHeader != r1[i].EntryHeader || !bytes.Equal(r3[i].Payload, r1[i].Payload) {
			t.Fatalf("entry %d after the folds: %+v, want %+v", i, r3[i].EntryHeader, r1[i].EntryHeader)
		}
	}
}

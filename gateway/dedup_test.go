package gateway

import (
	"context"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

func newTestDedup() *dedupState {
	d := &dedupState{}
	d.mu.persisted = map[string]int64{}
	d.mu.inflight = map[string]map[int64]int{}
	d.mu.changed = make(chan struct{})
	return d
}

// A resend racing the original's append waits for it and is then judged
// by its outcome.
func TestDedupAdmitWaitsForInflight(t *testing.T) {
	ctx := context.Background()
	d := newTestDedup()
	if dup, err := d.admit(ctx, "p", 0, 0); dup || err != nil {
		t.Fatal(dup, err)
	}
	// The same producer's next SEND is not held up by its own earlier one.
	if dup, err := d.admit(ctx, "p", 1, 1); dup || err != nil {
		t.Fatal(dup, err)
	}
	res := make(chan bool, 1)
	go func() {
		dup, _ := d.admit(ctx, "p", 0, 0) // a resend of 0 while 0 and 1 are in flight
		res <- dup
	}()
	d.finish("p", 0, lakestream.EntryHeader{Offset: 0, Records: 1}, nil)
	d.finish("p", 1, lakestream.EntryHeader{Offset: 1, Records: 1}, nil)
	if !<-res {
		t.Fatal("resend of a persisted sequence id admitted")
	}
	if got := d.lastSequenceID("p"); got != 1 {
		t.Fatalf("last sequence id %d", got)
	}
	if got := d.lastSequenceID("q"); got != -1 {
		t.Fatalf("unknown producer: %d", got)
	}

	// An original that fails lets its resend through.
	if dup, _ := d.admit(ctx, "p", 2, 2); dup {
		t.Fatal("2 is new")
	}
	go func() {
		dup, _ := d.admit(ctx, "p", 2, 2)
		res <- dup
	}()
	d.finish("p", 2, lakestream.EntryHeader{}, context.Canceled)
	if <-res {
		t.Fatal("resend of a failed append judged a duplicate")
	}
}

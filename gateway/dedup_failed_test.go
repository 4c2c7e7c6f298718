package gateway

import (
	"context"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

// A failed append followed by a successful later one of the same producer
// (pipelined appends, e.g. while etcd elects a leader): the resend of the
// failed one is appended, not answered as a duplicate (which would
// acknowledge a message never stored); once it is stored, a further
// resend is a duplicate again.
func TestDedupResendOfFailedBelowHighest(t *testing.T) {
	ctx := context.Background()
	d := newTestDedup()
	for seq := int64(0); seq < 3; seq++ {
		if dup, err := d.admit(ctx, "p", seq, seq); dup || err != nil {
			t.Fatal(seq, dup, err)
		}
	}
	d.finish("p", 0, lakestream.EntryHeader{Offset: 0, Records: 1}, nil)
	d.finish("p", 1, lakestream.EntryHeader{}, lakestream.ErrUnavailable)
	d.finish("p", 2, lakestream.EntryHeader{Offset: 1, Records: 1}, nil)

	// The client resends 1 and 2 on its new connection.
	if dup, err := d.admit(ctx, "p", 1, 1); dup || err != nil {
		t.Fatalf("resend of failed 1: dup=%v err=%v", dup, err)
	}
	d.finish("p", 1, lakestream.EntryHeader{Offset: 2, Records: 1}, nil)
	if dup, _ := d.admit(ctx, "p", 2, 2); !dup {
		t.Fatal("resend of stored 2 admitted")
	}
	if dup, _ := d.admit(ctx, "p", 1, 1); !dup {
		t.Fatal("second resend of 1 (now stored) admitted")
	}
	if got := d.lastSequenceID("p"); got != 2 {
		t.Fatalf("last sequence id %d", got)
	}
}

// The failures remembered per producer are bounded.
func TestDedupFailedBounded(t *testing.T) {
	d := newTestDedup()
	d.mu.Lock()
	for h := range int64(dedupFailedMax + 10) {
		d.rememberFailedLocked("p", h)
	}
	n := len(d.mu.failed["p"])
	_, lowest := d.mu.failed["p"][0]
	d.mu.Unlock()
	if n != dedupFailedMax || lowest {
		t.Fatalf("%d remembered (want %d), lowest kept: %v", n, dedupFailedMax, lowest)
	}
}

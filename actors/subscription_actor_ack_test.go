package actors

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// batchLog is a lakestream.Log of fixed entries (batches) for the
// subscription actor's entry lookups. While held (hold), IndexRange
// reports each call on entered and waits for the release, so a test can
// keep lookups in flight.
type batchLog struct {
	lakestream.Log
	es      []lakestream.Entry
	first   int64         // entries below are trimmed
	entered chan struct{} // buffered; one value per held call
	mu      sync.Mutex
	gate    chan struct{} // closed by the release; nil: not held
	ranges  int           // IndexRange calls (tests that do not hold only)
}

// hold makes IndexRange calls wait until release is called.
func (l *batchLog) hold() (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := make(chan struct{})
	l.gate = g
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		close(g)
		l.gate = nil
	}
}

func (l *batchLog) IndexRange(ctx context.Context, start, endExcl int64) ([]lakestream.EntryHeader, error) {
	l.mu.Lock()
	gate := l.gate
	l.mu.Unlock()
	if gate != nil {
		l.entered <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		l.ranges++
	}
	var out []lakestream.EntryHeader
	for _, e := range l.es {
		if e.Offset >= l.first && e.End() > start && e.Offset < endExcl {
			out = append(out, e.EntryHeader)
		}
	}
	return out, nil
}

func (l *batchLog) EntryHeader(_ context.Context, off int64) (lakestream.EntryHeader, error) {
	if off < l.first {
		return lakestream.EntryHeader{}, lakestream.ErrOffsetTrimmed
	}
	for _, e := range l.es {
		if e.Contains(off) {
			return e.EntryHeader, nil
		}
	}
	return lakestream.EntryHeader{}, lakestream.ErrOffsetOutOfRange
}

func (l *batchLog) WaitForEntries(ctx context.Context, _ int64) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (l *batchLog) ReadEntries(context.Context, int64, int, int64) ([]lakestream.Entry, error) {
	return nil, nil
}

// TestSubscriptionActorAnswersAckOnceApplied: the reply of an ack naming
// an entry the subscription does not hold (the client's AckWithResponse)
// comes only after the log was asked for the entry's record count and the
// whole entry is acknowledged; an ack sent before a consumer leaves is
// applied before its RemoveConsumer returns.
func TestSubscriptionActorAnswersAckOnceApplied(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	lg := &batchLog{es: entries(3, 3, 3), entered: make(chan struct{}, 4)}
	acks := newFakeAcks()
	cur := &memCursor{a: acks}
	sub := StartSubscription(rt, SubscriptionOptions{Name: "s", Type: SubShared, Log: lg, Cursor: cur})
	defer sub.Close()
	sink := chanSink{got: make(chan Deliver, 16)}
	if err := sub.AddConsumer(1, SubShared, sink); err != nil {
		t.Fatal(err)
	}
	replied := make(chan error, 1)
	release := lg.hold()
	sub.Ack(1, AckIndividual, []AckID{{EntryOffset: 3}}, func(err error) { replied <- err })
	waitFor(t, lg.entered, "the lookup")
	select {
	case err := <-replied:
		t.Fatalf("answered (%v) before the entry was looked up", err)
	default:
	}
	release()
	if err := waitFor(t, replied, "the ack's answer"); err != nil {
		t.Fatal(err)
	}
	if got := ackedRecords(cur.a, 9); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Fatalf("acknowledged %v", got)
	}
	info, err := sub.Info()
	if err != nil {
		t.Fatal(err)
	}
	if n := info.UnackedRecords(0, 9); n != 6 {
		t.Fatalf("backlog %d records, want 6 (ranges %v)", n, info.AckedRanges)
	}

	// An ack then the consumer's leave: the leave looks the entry up
	// itself (superseding the lookup in flight) and applies the ack first.
	release = lg.hold()
	sub.Ack(1, AckIndividual, []AckID{{EntryOffset: 6}}, func(err error) { replied <- err })
	removed := make(chan error, 1)
	go func() { removed <- sub.RemoveConsumer(1) }()
	waitFor(t, lg.entered, "the ack's lookup")
	waitFor(t, lg.entered, "the leave's lookup")
	release()
	if err := waitFor(t, removed, "RemoveConsumer"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-replied:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("RemoveConsumer returned before the ack sent ahead of it was applied")
	}
	if got := ackedRecords(cur.a, 9); !slices.Equal(got, []int64{3, 4, 5, 6, 7, 8}) {
		t.Fatalf("acknowledged %v", got)
	}
}

// TestSubscriptionActorRetriesFailedLookup: a lookup that fails is retried
// and the ack applied then.
func TestSubscriptionActorRetriesFailedLookup(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	lg := &flakyIndexLog{batchLog: batchLog{es: entries(2, 2)}, fails: 2}
	cur := &memCursor{a: newFakeAcks()}
	sub := StartSubscription(rt, SubscriptionOptions{Name: "s", Type: SubShared, Log: lg, Cursor: cur, RetryBackoff: time.Millisecond})
	defer sub.Close()
	if err := sub.AddConsumer(1, SubShared, chanSink{got: make(chan Deliver, 16)}); err != nil {
		t.Fatal(err)
	}
	replied := make(chan error, 1)
	sub.Ack(1, AckIndividual, []AckID{{EntryOffset: 2}}, func(err error) { replied <- err })
	if err := waitFor(t, replied, "the ack's answer"); err != nil {
		t.Fatal(err)
	}
	if got := ackedRecords(cur.a, 4); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("acknowledged %v", got)
	}
}

type flakyIndexLog struct {
	batchLog
	fails int // IndexRange calls still to fail (used on the actor's goroutines one at a time)
}

func (l *flakyIndexLog) IndexRange(ctx context.Context, start, endExcl int64) ([]lakestream.EntryHeader, error) {
	if l.fails > 0 {
		l.fails--
		return nil, errors.Join(lakestream.ErrUnavailable, errors.New("injected"))
	}
	return l.batchLog.IndexRange(ctx, start, endExcl)
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not come within 10 s", what)
	}
	var zero T
	return zero
}

// TestResolveEntries: offsets close together are found with one index
// walk; any offset of an entry resolves to the entry; trimmed and
// out-of-range offsets get that error as their answer.
func TestResolveEntries(t *testing.T) {
	sizes := make([]int32, 0, 40000)
	for range 40000 {
		sizes = append(sizes, 5)
	}
	lg := &batchLog{es: entries(sizes...), first: 10} // entries at 0, 5 are trimmed
	offs := []int64{3, 12, 14, 4000, 8000, 100000, 150000, 199999, 200000}
	rs, err := resolveEntries(context.Background(), lg, offs)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(offs) {
		t.Fatalf("%d answers for %d offsets", len(rs), len(offs))
	}
	for i, r := range rs {
		switch off := offs[i]; {
		case r.Offset != off:
			t.Fatalf("answer %d is for %d, want %d", i, r.Offset, off)
		case off < 10:
			if !errors.Is(r.Err, lakestream.ErrOffsetTrimmed) {
				t.Fatalf("%d: %+v, want trimmed", off, r)
			}
		case off >= 200000:
			if !errors.Is(r.Err, lakestream.ErrOffsetOutOfRange) {
				t.Fatalf("%d: %+v, want out of range", off, r)
			}
		case r.Err != nil || r.Header.Offset != off/5*5 || r.Header.Records != 5:
			t.Fatalf("%d: %+v", off, r)
		}
	}
	// Runs: [3 .. 8000] (gaps ≤ 4096), [100000], [150000], [199999 200000].
	if lg.ranges != 4 {
		t.Fatalf("%d index walks, want 4", lg.ranges)
	}
}

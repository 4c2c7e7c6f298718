package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// faultLog is an in-memory lakestream.Log for the subscription actor: one
// record per entry, a head that WaitForEntries follows, and ReadEntries
// failures injected by failReads. Methods the actor does not call are left
// to the embedded nil interface (calling them panics).
type faultLog struct {
	lakestream.Log

	mu      sync.Mutex
	next    int64         // head: offsets [0, next) exist
	changed chan struct{} // closed and replaced when next advances
	fails   int           // ReadEntries calls still to fail
	failed  int           // ReadEntries calls that failed
}

func newFaultLog() *faultLog { return &faultLog{changed: make(chan struct{})} }

func (l *faultLog) append(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next += int64(n)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *faultLog) failReads(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails = n
}

func (l *faultLog) failures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

func (l *faultLog) ReadEntries(ctx context.Context, start int64, maxRecords int, _ int64) ([]lakestream.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if start < l.next && l.fails > 0 {
		// Fail only reads that would return entries: a read at the tail
		// goes on to wait, as the engine's does after a successful refresh.
		l.fails--
		l.failed++
		return nil, fmt.Errorf("%w: injected metadata outage", lakestream.ErrUnavailable)
	}
	var out []lakestream.Entry
	for off := start; off < l.next && len(out) < maxRecords; off++ {
		out = append(out, lakestream.Entry{EntryHeader: lakestream.EntryHeader{Offset: off, Records: 1}})
	}
	return out, nil
}

func (l *faultLog) WaitForEntries(ctx context.Context, offset int64) (int64, error) {
	for {
		l.mu.Lock()
		next, ch := l.next, l.changed
		l.mu.Unlock()
		if next > offset {
			return next, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return next, ctx.Err()
		}
	}
}

// memCursor is an ephemeral lakestream.LogCursor over fakeAcks.
type memCursor struct {
	lakestream.LogCursor
	mu sync.Mutex
	a  *fakeAcks
}

func (c *memCursor) Durable() bool { return false }
func (c *memCursor) MarkDeleteOffset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.a.MarkDeleteOffset()
}
func (c *memCursor) IsIndividuallyDeleted(o int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.a.IsIndividuallyDeleted(o)
}
func (c *memCursor) IndividualDelete(o, n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.a.IndividualDelete(o, n)
}
func (c *memCursor) Close(context.Context) error { return nil }

// PersistedMarkDeleteOffset: an ephemeral cursor's state is all there is.
func (c *memCursor) PersistedMarkDeleteOffset() int64 { return c.MarkDeleteOffset() }

// chanSink passes deliveries to a channel.
type chanSink struct{ got chan Deliver }

func (s chanSink) Deliver(d Deliver) bool { s.got <- d; return true }
func (chanSink) ActiveChange(bool)        {}
func (chanSink) Disconnect()              {}
func (s chanSink) expect(t *testing.T, off int64) {
	t.Helper()
	select {
	case d := <-s.got:
		if d.Entry.Offset != off {
			t.Fatalf("delivered offset %d, want %d", d.Entry.Offset, off)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("offset %d not delivered within 5 s", off)
	}
}

// A tail read that fails (the metadata store was unreachable when the
// consumer woke up for new entries) must be retried: the consumer gets
// every later entry. (A failed read used to be dropped as if it had been
// cancelled, and the subscription then waited for it forever.)
func TestSubscriptionActorRetriesFailedTailRead(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	lg := newFaultLog()
	sub := StartSubscription(rt, SubscriptionOptions{
		Name: "s", Type: SubExclusive, Log: lg, Cursor: &memCursor{a: newFakeAcks()},
		RetryBackoff: time.Millisecond,
	})
	defer sub.Close()
	sink := chanSink{got: make(chan Deliver, 16)}
	if err := sub.AddConsumer(1, SubExclusive, sink); err != nil {
		t.Fatal(err)
	}
	sub.Flow(1, 100)
	lg.append(1)
	sink.expect(t, 0)

	// The consumer waits at the tail; entries arrive while reads fail.
	lg.failReads(2)
	lg.append(2)
	sink.expect(t, 1)
	sink.expect(t, 2)
	if n := lg.failures(); n != 2 {
		t.Fatalf("%d reads failed, want 2 (the fault was not exercised)", n)
	}
	lg.append(1)
	sink.expect(t, 3)
	if err := sub.RemoveConsumer(1); err != nil {
		t.Fatal(err)
	}
}

func (c *memCursor) AckedRanges() [][2]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][2]int64
	for o := c.a.md + 1; len(c.a.acked) > 0 && o <= c.a.maxAcked(); o++ {
		if !c.a.acked[o] {
			continue
		}
		if n := len(out); n > 0 && out[n-1][1] == o {
			out[n-1][1]++
		} else {
			out = append(out, [2]int64{o, o + 1})
		}
	}
	return out
}

func (f *fakeAcks) maxAcked() int64 {
	m := f.md
	for o := range f.acked {
		m = max(m, o)
	}
	return m
}

// ConsumersMax bounds the consumers attached (each holds a reservation for
// its SinkReady): one more is refused with ErrSubscriptionBusy, and a
// consumer that leaves gives its place back.
func TestSubscriptionActorConsumersMax(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()
	sub := StartSubscription(rt, SubscriptionOptions{
		Name: "s", Type: SubShared, Log: newFaultLog(), Cursor: &memCursor{a: newFakeAcks()}, ConsumersMax: 1,
	})
	defer sub.Close()
	sink := chanSink{got: make(chan Deliver, 10)}
	if err := sub.AddConsumer(1, SubShared, sink); err != nil {
		t.Fatal(err)
	}
	if err := sub.AddConsumer(2, SubShared, sink); !errors.Is(err, ErrSubscriptionBusy) {
		t.Fatalf("second consumer: %v, want ErrSubscriptionBusy", err)
	}
	sub.SinkReady(2) // not attached: a no-op
	if err := sub.RemoveConsumer(1); err != nil {
		t.Fatal(err)
	}
	if err := sub.AddConsumer(2, SubShared, sink); err != nil {
		t.Fatalf("after the first left: %v", err)
	}
	if i, err := sub.Info(); err != nil || i.Consumers != 1 {
		t.Fatalf("Info: %d consumers, %v; want 1", i.Consumers, err)
	}
}

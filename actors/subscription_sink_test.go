package actors

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// A consumer whose connection cannot take an entry (its outbound queue is
// full) is skipped until it has room again: its entries go to the others
// (Shared) or wait for it in order (Exclusive, Key_Shared), never counted
// as redelivered.

// deliverTo carries out acts as the subscription actor does: a Deliver to
// a consumer whose sink is full (full says so, or the machine knows it
// already) is reported Undelivered and the actions that follow are
// carried out too. It returns the entry offsets each consumer took and
// the other actions.
func deliverTo(s *Subscription, acts []Action, full func(id uint64) bool) (got map[uint64][]Deliver, other []Action) {
	got = map[uint64][]Deliver{}
	for i := 0; i < len(acts); i++ {
		switch a := acts[i].(type) {
		case Deliver:
			if s.SinkFull(a.ConsumerID) || full(a.ConsumerID) {
				acts = append(acts, s.Undelivered(a.ConsumerID, a.Entry)...)
				continue
			}
			got[a.ConsumerID] = append(got[a.ConsumerID], a)
		default:
			other = append(other, a)
		}
	}
	return got, other
}

func takenOffsets(ds []Deliver) []int64 {
	var out []int64
	for _, d := range ds {
		if d.RedeliveryCount != 0 {
			panic("an entry nobody got was counted as redelivered")
		}
		out = append(out, d.Entry.Offset)
	}
	return out
}

func onlyRead(t *testing.T, acts []Action) Action {
	t.Helper()
	_, reads := split(acts)
	if len(reads) != 1 {
		t.Fatalf("want one read, got %v", acts)
	}
	return reads[0]
}

func TestSharedSinkFullGoesToOthers(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubShared, ReadMaxRecords: 100}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	must(t)(s.AddConsumer(2, SubShared))
	rt := onlyRead(t, must(t)(s.Flow(1, 10))).(ReadTail)
	must(t)(s.Flow(2, 10))
	stalled := func(id uint64) bool { return id == 1 }
	got, other := deliverTo(s, s.OnRead(rt.Gen, true, entries(1, 1, 1, 1, 1, 1)), stalled)
	// (Shared keeps no order: the refused ones follow the others.)
	if len(got[1]) != 0 || !slices.Equal(slices.Sorted(slices.Values(takenOffsets(got[2]))), []int64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("consumer 1 (full) got %v, consumer 2 got %v", takenOffsets(got[1]), takenOffsets(got[2]))
	}
	if !s.SinkFull(1) || s.ConsumerCounts()[1].Permits != 10 {
		t.Fatalf("consumer 1: sink full %v, permits %d (want its 10 back)", s.SinkFull(1), s.ConsumerCounts()[1].Permits)
	}
	// The next read goes on for consumer 2; consumer 1 gets nothing while
	// full, whatever its sink would say now.
	rt = onlyRead(t, other).(ReadTail)
	got, other = deliverTo(s, s.OnRead(rt.Gen, true, entries(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)[6:]), func(uint64) bool { return false })
	if len(got[1]) != 0 || len(got[2]) != 4 {
		t.Fatalf("while full: consumer 1 got %v, consumer 2 %v", takenOffsets(got[1]), takenOffsets(got[2]))
	}
	// Consumer 2 is out of permits: nothing is read for the full one.
	if _, reads := split(other); len(reads) != 0 {
		t.Fatalf("read issued with no consumer able to take: %v", reads)
	}
	rt = onlyRead(t, s.SinkReady(1)).(ReadTail)
	if rt.From != 10 {
		t.Fatalf("read from %d after SinkReady, want 10", rt.From)
	}
	got, _ = deliverTo(s, s.OnRead(rt.Gen, true, entries(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)[10:]), func(uint64) bool { return false })
	if !slices.Equal(takenOffsets(got[1]), []int64{10, 11}) {
		t.Fatalf("consumer 1 after SinkReady got %v", takenOffsets(got[1]))
	}
}

func TestExclusiveSinkFullKeepsOrder(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubExclusive, ReadMaxRecords: 100}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubExclusive))
	rt := onlyRead(t, must(t)(s.Flow(1, 100))).(ReadTail)
	taken := 0
	fullAfter2 := func(uint64) bool { taken++; return taken > 2 }
	got, other := deliverTo(s, s.OnRead(rt.Gen, true, entries(1, 2, 1, 3, 1)), fullAfter2)
	if !slices.Equal(takenOffsets(got[1]), []int64{0, 1}) {
		t.Fatalf("took %v, want [0 1]", takenOffsets(got[1]))
	}
	// The tail read issued before the refusal is cancelled: nobody
	// could take what it brings.
	if _, reads := split(other); len(reads) != 1 || !slices.ContainsFunc(other, func(a Action) bool { _, ok := a.(CancelRead); return ok }) {
		t.Fatalf("want the tail read issued, then cancelled: %v", other)
	}
	if p := s.ConsumerCounts()[1].Permits; p != 100-3 {
		t.Fatalf("permits %d, want %d (the 3 records taken)", p, 100-3)
	}
	// Room again: the refused entries come first, in order.
	rr := onlyRead(t, s.SinkReady(1)).(ReadReplay)
	if !slices.Equal(rr.Offsets, []int64{3, 4, 7}) {
		t.Fatalf("replay %v, want [3 4 7]", rr.Offsets)
	}
	got, _ = deliverTo(s, s.OnRead(rr.Gen, false, entries(1, 2, 1, 3, 1)[2:]), func(uint64) bool { return false })
	if !slices.Equal(takenOffsets(got[1]), []int64{3, 4, 7}) {
		t.Fatalf("after SinkReady took %v, want [3 4 7]", takenOffsets(got[1]))
	}
	// SinkReady of a consumer that is not full, or unknown: nothing.
	if acts := s.SinkReady(1); len(acts) != 0 {
		t.Fatalf("SinkReady when not full: %v", acts)
	}
	if acts := s.SinkReady(9); len(acts) != 0 {
		t.Fatalf("SinkReady of an unknown consumer: %v", acts)
	}
}

// Key_Shared: a key's entries refused by its consumer wait for it (no
// other consumer may take them), in order.
func TestKeySharedSinkFullKeepsKeyOrder(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubKeyShared, ReadMaxRecords: 100}, newFakeAcks(), 0)
	must(t)(s.AddKeySharedConsumer(1, KeySharedPolicy{}, ConsumerMeta{Name: "a"}))
	must(t)(s.AddKeySharedConsumer(2, KeySharedPolicy{}, ConsumerMeta{Name: "b"}))
	rt := onlyRead(t, must(t)(s.Flow(1, 100))).(ReadTail)
	must(t)(s.Flow(2, 100))
	es := entries(1, 1, 1, 1) // no key: one hash, one owner
	owner, _ := s.keys.owner(EntryKeyHash(es[0].Payload))
	taken := 0
	got, _ := deliverTo(s, s.OnRead(rt.Gen, true, es), func(id uint64) bool { taken++; return taken > 1 })
	if !slices.Equal(takenOffsets(got[owner]), []int64{0}) || len(got[3-owner]) != 0 {
		t.Fatalf("owner %d took %v, other took %v", owner, takenOffsets(got[owner]), takenOffsets(got[3-owner]))
	}
	rr := onlyRead(t, s.SinkReady(owner)).(ReadReplay)
	if !slices.Equal(rr.Offsets, []int64{1, 2, 3}) {
		t.Fatalf("replay %v, want [1 2 3]", rr.Offsets)
	}
	got, _ = deliverTo(s, s.OnRead(rr.Gen, false, es[1:]), func(uint64) bool { return false })
	if !slices.Equal(takenOffsets(got[owner]), []int64{1, 2, 3}) {
		t.Fatalf("after SinkReady the owner took %v", takenOffsets(got[owner]))
	}
}

// gateSink refuses every entry while closed (a connection whose queue is
// full) and passes the others to got.
type gateSink struct {
	mu   sync.Mutex
	open bool
	got  chan Deliver
}

func (s *gateSink) Deliver(d Deliver) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return false
	}
	s.got <- d
	return true
}
func (*gateSink) ActiveChange(bool) {}
func (*gateSink) Disconnect()       {}

func (s *gateSink) setOpen(open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = open
}

// ReadEntry serves replays (one record per entry, as ReadEntries).
func (l *faultLog) ReadEntry(_ context.Context, off int64) (lakestream.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off >= l.next {
		return lakestream.Entry{}, lakestream.ErrOffsetOutOfRange
	}
	return lakestream.Entry{EntryHeader: lakestream.EntryHeader{Offset: off, Records: 1}}, nil
}

// The actor never waits for a sink: a Shared consumer whose sink refuses
// is skipped (the other one gets everything) until SinkReady, then it gets
// entries again; an Exclusive one gets what it refused first, in order.
func TestSubscriptionActorSkipsFullSink(t *testing.T) {
	rt := NewRuntime(nil)
	defer rt.Shutdown()

	t.Run("Shared", func(t *testing.T) {
		lg := newFaultLog()
		sub := StartSubscription(rt, SubscriptionOptions{Name: "s", Type: SubShared, Log: lg, Cursor: &memCursor{a: newFakeAcks()}})
		defer sub.Close()
		full := &gateSink{got: make(chan Deliver, 100)}
		other := chanSink{got: make(chan Deliver, 100)}
		if err := sub.AddConsumer(1, SubShared, full); err != nil {
			t.Fatal(err)
		}
		if err := sub.AddConsumer(2, SubShared, other); err != nil {
			t.Fatal(err)
		}
		sub.Flow(1, 1000)
		sub.Flow(2, 1000)
		lg.append(10)
		for range 10 {
			select {
			case <-other.got:
			case <-time.After(5 * time.Second):
				t.Fatal("the consumer with room did not get every entry")
			}
		}
		full.setOpen(true)
		sub.SinkReady(1)
		lg.append(10)
		got := 0
		for range 10 {
			select {
			case <-full.got:
				got++
			case <-other.got:
			case <-time.After(5 * time.Second):
				t.Fatal("entries after SinkReady not delivered")
			}
		}
		if got == 0 {
			t.Fatal("the consumer that had room again got nothing")
		}
	})
	t.Run("Exclusive", func(t *testing.T) {
		lg := newFaultLog()
		sub := StartSubscription(rt, SubscriptionOptions{Name: "e", Type: SubExclusive, Log: lg, Cursor: &memCursor{a: newFakeAcks()}})
		defer sub.Close()
		sink := &gateSink{open: true, got: make(chan Deliver, 100)}
		if err := sub.AddConsumer(1, SubExclusive, sink); err != nil {
			t.Fatal(err)
		}
		sub.Flow(1, 1000)
		lg.append(3)
		for off := range int64(3) {
			chanSink{got: sink.got}.expect(t, off)
		}
		sink.setOpen(false)
		// Refused once read: kept for the consumer. The actor does not
		// wait for the sink meanwhile.
		lg.append(5)
		if _, err := sub.Info(); err != nil {
			t.Fatal(err)
		}
		sink.setOpen(true)
		sub.SinkReady(1)
		lg.append(2)
		for off := int64(3); off < 10; off++ {
			chanSink{got: sink.got}.expect(t, off)
		}
	})
}

package actors

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// delayedEntries builds single-record entries from offset 0; at[i] is
// entry i's deliver_at_time (0: none).
func delayedEntries(t *testing.T, at ...int64) []lakestream.Entry {
	t.Helper()
	var out []lakestream.Entry
	for i, a := range at {
		md := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(uint64(i)), PublishTime: proto.Uint64(1)}
		if a != 0 {
			md.DeliverAtTime = proto.Int64(a)
		}
		raw, err := proto.Marshal(md)
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := protocol.AppendEntry(nil, raw, []byte{byte(i)})
		out = append(out, lakestream.Entry{EntryHeader: lakestream.EntryHeader{Offset: int64(i), Records: 1}, Payload: payload})
	}
	return out
}

// clock is a settable clock for SubscriptionConfig.Now.
type clock struct{ ms int64 }

func (c *clock) now() int64 { return c.ms }

func offsetsOf(d []Deliver) []int64 {
	var out []int64
	for _, x := range d {
		out = append(out, x.Entry.Offset)
	}
	return out
}

func wakes(acts []Action) []int64 {
	var out []int64
	for _, a := range acts {
		if w, ok := a.(WakeAt); ok {
			out = append(out, w.At)
		}
	}
	return out
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDelayedDeliveryShared: an entry with a deliver_at_time in the future
// is held (the others go at once), a wake is asked for its time, a tick
// before it releases nothing, a tick at it delivers it.
func TestDelayedDeliveryShared(t *testing.T) {
	for _, typ := range []SubType{SubShared, SubKeyShared} {
		clk := &clock{ms: 1000}
		s := NewSubscription(SubscriptionConfig{Type: typ, Now: clk.now}, newFakeAcks(), 0)
		must(t)(s.AddConsumer(1, typ))
		_, reads := split(must(t)(s.Flow(1, 10)))
		es := delayedEntries(t, 0, 3000, 0, 2000, 500)
		acts := s.OnRead(reads[0].(ReadTail).Gen, true, es)
		d, _ := split(acts)
		if got := offsetsOf(d); !equalInts(got, []int64{0, 2, 4}) {
			t.Fatalf("%s: delivered %v at once, want [0 2 4] (4 was due already)", typ, got)
		}
		if w := wakes(acts); !equalInts(w, []int64{2000}) {
			t.Fatalf("%s: wakes %v, want [2000]", typ, w)
		}
		if s.DelayedEntries() != 2 {
			t.Fatalf("%s: %d delayed", typ, s.DelayedEntries())
		}
		clk.ms = 1999
		if d, reads := split(s.Tick()); len(d) != 0 || len(reads) != 0 {
			t.Fatalf("%s: early tick delivered %v, read %v", typ, d, reads)
		}
		clk.ms = 2000
		acts = s.Tick()
		_, reads = split(acts)
		rr, ok := reads[0].(ReadReplay)
		if !ok || !equalInts(rr.Offsets, []int64{3}) {
			t.Fatalf("%s: tick at 2000 read %v, want a replay of [3]", typ, reads)
		}
		if w := wakes(acts); !equalInts(w, []int64{3000}) {
			t.Fatalf("%s: next wake %v, want [3000]", typ, w)
		}
		d, _ = split(s.OnRead(rr.Gen, false, es[3:4]))
		if got := offsetsOf(d); !equalInts(got, []int64{3}) {
			t.Fatalf("%s: replay delivered %v", typ, got)
		}
	}
}

// TestDelayedDeliveryExclusiveIgnoresDelay: Exclusive and Failover
// subscriptions deliver delayed messages at once, as Pulsar's do.
func TestDelayedDeliveryExclusiveIgnoresDelay(t *testing.T) {
	for _, typ := range []SubType{SubExclusive, SubFailover} {
		clk := &clock{ms: 1000}
		s := NewSubscription(SubscriptionConfig{Type: typ, Now: clk.now}, newFakeAcks(), 0)
		must(t)(s.AddConsumer(1, typ))
		_, reads := split(must(t)(s.Flow(1, 10)))
		d, _ := split(s.OnRead(reads[0].(ReadTail).Gen, true, delayedEntries(t, 5000, 0)))
		if len(d) != 2 || s.DelayedEntries() != 0 {
			t.Fatalf("%s: delivered %d, held %d", typ, len(d), s.DelayedEntries())
		}
	}
}

// TestDelayedDeliveryBound: at DelayedMaxEntries the entry due last is let
// go; once the index is half empty the tail is read again from it, and it
// is held (and delivered) like the others — none delivered early, none
// lost.
func TestDelayedDeliveryBound(t *testing.T) {
	clk := &clock{ms: 0}
	s := NewSubscription(SubscriptionConfig{Type: SubShared, Now: clk.now, DelayedMaxEntries: 2}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	_, reads := split(must(t)(s.Flow(1, 100)))
	// Entry 0 due at 300 is evicted when entry 2 (due at 200) comes.
	es := delayedEntries(t, 300, 100, 200)
	_, reads = split(s.OnRead(reads[0].(ReadTail).Gen, true, es))
	if s.DelayedEntries() != 2 {
		t.Fatalf("held %d, want 2", s.DelayedEntries())
	}
	tail := reads[0].(ReadTail) // waiting at the tail (offset 3)
	if tail.From != 3 {
		t.Fatalf("tail read from %d", tail.From)
	}
	clk.ms = 100
	acts := s.Tick()
	var replay ReadReplay
	rewound := false
	for _, a := range acts {
		switch a := a.(type) {
		case CancelRead:
			rewound = true
		case ReadReplay:
			replay = a
		}
	}
	if !rewound || !equalInts(replay.Offsets, []int64{1}) {
		t.Fatalf("tick at 100: %v; want the tail read cancelled and a replay of [1]", acts)
	}
	d, reads := split(s.OnRead(replay.Gen, false, es[1:2]))
	if got := offsetsOf(d); !equalInts(got, []int64{1}) {
		t.Fatalf("delivered %v", got)
	}
	rt, ok := reads[0].(ReadTail)
	if !ok || rt.From != 0 {
		t.Fatalf("after the replay: %v, want the tail read again from the evicted entry 0", reads)
	}
	// Reading 0..2 again: 1 is acknowledged? not yet (pending): skipped;
	// 2 is held already: skipped; 0 is held again.
	d, _ = split(s.OnRead(rt.Gen, true, es))
	if len(d) != 0 || s.DelayedEntries() != 2 {
		t.Fatalf("rescan delivered %v, held %d (want none, 2)", offsetsOf(d), s.DelayedEntries())
	}
	for _, at := range []int64{200, 300} {
		clk.ms = at
		_, reads := split(s.Tick())
		var rr ReadReplay
		for _, r := range reads {
			if x, ok := r.(ReadReplay); ok {
				rr = x
			}
		}
		if len(rr.Offsets) != 1 {
			t.Fatalf("tick at %d: reads %v", at, reads)
		}
		d, _ := split(s.OnRead(rr.Gen, false, es[rr.Offsets[0]:rr.Offsets[0]+1]))
		if len(d) != 1 {
			t.Fatalf("tick at %d delivered %v", at, offsetsOf(d))
		}
	}
	if s.DelayedEntries() != 0 {
		t.Fatalf("%d still held", s.DelayedEntries())
	}
}

// TestDelayedDeliveryAfterRestart: a machine that replaces another (a
// restart, an ownership move) holds the delayed entries again when it
// reads them, and delivers them when due.
func TestDelayedDeliveryAfterRestart(t *testing.T) {
	clk := &clock{ms: 0}
	acks := newFakeAcks()
	es := delayedEntries(t, 0, 500)
	s := NewSubscription(SubscriptionConfig{Type: SubShared, Now: clk.now}, acks, 0)
	must(t)(s.AddConsumer(1, SubShared))
	_, reads := split(must(t)(s.Flow(1, 10)))
	acts := s.OnRead(reads[0].(ReadTail).Gen, true, es)
	d, _ := split(acts)
	if len(d) != 1 || d[0].Entry.Offset != 0 || !equalInts(wakes(acts), []int64{500}) {
		t.Fatalf("delivered %v, wakes %v", offsetsOf(d), wakes(acts))
	}
	ackNow(t, s, 1, AckIndividual, []AckID{{EntryOffset: 0}})

	// The replacement starts after the mark-delete point.
	s = NewSubscription(SubscriptionConfig{Type: SubShared, Now: clk.now}, acks, acks.MarkDeleteOffset()+1)
	must(t)(s.AddConsumer(2, SubShared))
	_, reads = split(must(t)(s.Flow(2, 10)))
	rt := reads[0].(ReadTail)
	acts = s.OnRead(rt.Gen, true, es[rt.From:])
	if d, _ := split(acts); len(d) != 0 || !equalInts(wakes(acts), []int64{500}) || s.DelayedEntries() != 1 {
		t.Fatalf("after the restart: delivered %v, wakes %v, held %d", offsetsOf(d), wakes(acts), s.DelayedEntries())
	}
	clk.ms = 500
	_, reads = split(s.Tick())
	var rr ReadReplay
	for _, r := range reads {
		if x, ok := r.(ReadReplay); ok {
			rr = x
		}
	}
	if d, _ := split(s.OnRead(rr.Gen, false, es[1:])); len(d) != 1 || d[0].Entry.Offset != 1 {
		t.Fatalf("due entry after the restart: %v", offsetsOf(d))
	}
}

// TestExpire: an expiry acknowledges everything below its offset and
// forgets the entries wholly below it wherever they wait (delivered,
// queued for redelivery, held for delayed delivery); an entry straddling
// the offset keeps its unexpired records.
func TestExpire(t *testing.T) {
	clk := &clock{ms: 0}
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared, Now: clk.now}, acks, 0)
	must(t)(s.AddConsumer(1, SubShared))
	_, reads := split(must(t)(s.Flow(1, 2)))
	// 0 and 1 delivered, 2 held (due at 500), 3 queued (no permits left).
	es := delayedEntries(t, 0, 0, 500, 0, 0)
	s.OnRead(reads[0].(ReadTail).Gen, true, es[:4])
	if s.PendingEntries() != 2 || s.DelayedEntries() != 1 {
		t.Fatalf("pending %d, held %d", s.PendingEntries(), s.DelayedEntries())
	}
	acts, err := s.Expire(4)
	if err != nil {
		t.Fatal(err)
	}
	if acks.MarkDeleteOffset() != 3 || s.PendingEntries() != 0 || s.DelayedEntries() != 0 || s.ReadPosition() != 4 {
		t.Fatalf("after expiry: mark-delete %d, pending %d, held %d, read position %d", acks.MarkDeleteOffset(), s.PendingEntries(), s.DelayedEntries(), s.ReadPosition())
	}
	if d, _ := split(acts); len(d) != 0 {
		t.Fatalf("expiry delivered %v", offsetsOf(d))
	}
	if acts, err := s.Expire(2); err != nil || len(acts) != 0 {
		t.Fatalf("an expiry below mark-delete: %v %v", acts, err)
	}
}

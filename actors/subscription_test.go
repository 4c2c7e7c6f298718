package actors

import (
	"errors"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// fakeAcks is an in-memory AckState with LogCursor's semantics: acking the
// record just above mark-delete advances it over contiguous acks.
type fakeAcks struct {
	md    int64
	acked map[int64]bool
}

func newFakeAcks() *fakeAcks { return &fakeAcks{md: -1, acked: map[int64]bool{}} }

func (f *fakeAcks) MarkDeleteOffset() int64 { return f.md }
func (f *fakeAcks) IsIndividuallyDeleted(o int64) bool {
	return o <= f.md || f.acked[o]
}
func (f *fakeAcks) IndividualDelete(o, n int64) error {
	for i := o; i < o+n; i++ {
		if i > f.md {
			f.acked[i] = true
		}
	}
	for f.acked[f.md+1] {
		delete(f.acked, f.md+1)
		f.md++
	}
	return nil
}

// entries builds entries of the given record counts starting at offset 0.
func entries(sizes ...int32) []lakestream.Entry {
	var out []lakestream.Entry
	off := int64(0)
	for _, n := range sizes {
		out = append(out, lakestream.Entry{EntryHeader: lakestream.EntryHeader{Offset: off, Records: n}})
		off += int64(n)
	}
	return out
}

func split(acts []Action) (d []Deliver, reads []Action) {
	for _, a := range acts {
		switch a := a.(type) {
		case Deliver:
			d = append(d, a)
		case ReadTail, ReadReplay:
			reads = append(reads, a)
		}
	}
	return
}

// ackNow acknowledges ids for consumer id and requires the machine to
// apply them at once (it knows their entries) and without error; it
// returns the other actions.
func ackNow(t *testing.T, s *Subscription, id uint64, kind AckKind, ids []AckID) []Action {
	t.Helper()
	tokens++
	var out []Action
	done := false
	for _, a := range s.Ack(tokens, id, kind, ids) {
		if d, ok := a.(AckDone); ok && d.Token == tokens {
			if d.Err != nil {
				t.Fatalf("ack %v: %v", ids, d.Err)
			}
			done = true
			continue
		}
		out = append(out, a)
	}
	if !done {
		t.Fatalf("ack %v not applied at once: %v", ids, out)
	}
	return out
}

// tokens numbers the acknowledgements of a test.
var tokens uint64

func must(t *testing.T) func([]Action, error) []Action {
	return func(acts []Action, err error) []Action {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return acts
	}
}

func TestExclusiveDispatchWithinPermits(t *testing.T) {
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubExclusive, ReadMaxRecords: 10}, acks, 0)
	must(t)(s.AddConsumer(1, SubExclusive))
	if _, err := s.AddConsumer(2, SubExclusive); !errors.Is(err, ErrConsumerBusy) {
		t.Fatalf("second exclusive consumer: %v", err)
	}
	if _, err := s.AddConsumer(2, SubShared); !errors.Is(err, ErrConsumerBusy) {
		t.Fatalf("other type: %v", err)
	}
	_, reads := split(must(t)(s.Flow(1, 3)))
	rt, ok := reads[0].(ReadTail)
	if len(reads) != 1 || !ok || rt.From != 0 {
		t.Fatalf("reads %v", reads)
	}
	// No second read while one is in flight.
	if _, reads := split(must(t)(s.Flow(1, 1))); len(reads) != 0 {
		t.Fatalf("second read while reading: %v", reads)
	}
	d, reads := split(s.OnRead(rt.Gen, true, entries(1, 1, 1, 1, 1)))
	// 4 permits: four entries delivered, the fifth goes to replay; no read.
	if len(d) != 4 || len(reads) != 0 {
		t.Fatalf("delivered %d, reads %v", len(d), reads)
	}
	if s.ReadPosition() != 5 {
		t.Fatalf("read position %d", s.ReadPosition())
	}
	// More permits: the replayed entry is read first.
	_, reads = split(must(t)(s.Flow(1, 10)))
	rr, ok := reads[0].(ReadReplay)
	if !ok || len(rr.Offsets) != 1 || rr.Offsets[0] != 4 {
		t.Fatalf("reads %v", reads)
	}
	d, reads = split(s.OnRead(rr.Gen, false, entries(1, 1, 1, 1, 1)[4:]))
	if len(d) != 1 || d[0].Entry.Offset != 4 {
		t.Fatalf("replay delivered %v", d)
	}
	if rt, ok := reads[0].(ReadTail); !ok || rt.From != 5 {
		t.Fatalf("then tail read: %v", reads)
	}
	// A stale result is ignored.
	if acts := s.OnRead(rr.Gen, false, entries(1)); acts != nil {
		t.Fatalf("stale read produced %v", acts)
	}
}

func TestSharedRoundRobinAndRedeliveryOnClose(t *testing.T) {
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	must(t)(s.AddConsumer(1, SubShared))
	must(t)(s.AddConsumer(2, SubShared))
	must(t)(s.Flow(1, 10))
	_, reads := split(must(t)(s.Flow(2, 10)))
	if len(reads) != 0 {
		t.Fatalf("flow of 2 started a second read")
	}
	_, reads = split(s.Poke())
	if len(reads) != 0 {
		t.Fatal("poke while reading")
	}
	// The read was issued by the first flow.
	d, _ := split(s.OnRead(1, true, entries(1, 1, 1, 1)))
	by := map[uint64][]int64{}
	for _, x := range d {
		by[x.ConsumerID] = append(by[x.ConsumerID], x.Entry.Offset)
	}
	if len(by[1]) != 2 || len(by[2]) != 2 {
		t.Fatalf("not round robin: %v", by)
	}
	// Consumer 1 acks one of its two, then leaves: the other goes to 2
	// with no redelivery count (close is not a nack).
	ackNow(t, s, 1, AckIndividual, []AckID{{EntryOffset: by[1][0]}})
	// The tail read in flight (it may wait at the end of the log forever)
	// is cancelled so the replay goes first.
	acts := s.RemoveConsumer(1)
	if _, ok := acts[0].(CancelRead); !ok {
		t.Fatalf("no CancelRead: %v", acts)
	}
	_, reads = split(acts)
	rr, ok := reads[0].(ReadReplay)
	if !ok || len(rr.Offsets) != 1 || rr.Offsets[0] != by[1][1] {
		t.Fatalf("reads %v", reads)
	}
	d, _ = split(s.OnRead(rr.Gen, false, entries(1, 1, 1, 1)[by[1][1]:by[1][1]+1]))
	if len(d) != 1 || d[0].ConsumerID != 2 || d[0].RedeliveryCount != 0 {
		t.Fatalf("redelivered %+v", d)
	}
	if s.PendingEntries() != 3 {
		t.Fatalf("pending %d", s.PendingEntries())
	}
}

func TestBatchIndexAckAndAckSetOnRedelivery(t *testing.T) {
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubExclusive}, acks, 0)
	must(t)(s.AddConsumer(1, SubExclusive))
	must(t)(s.Flow(1, 100))
	d, _ := split(s.OnRead(1, true, entries(4, 3)))
	if len(d) != 2 || d[0].AckSet != nil {
		t.Fatalf("delivered %v", d)
	}
	// Ack records 0 and 2 of the first batch (bits 1 and 3 stay unacked).
	set := protocol.AckSetAllUnacked(4)
	set[0] &^= 1 | 4
	ackNow(t, s, 1, AckIndividual, []AckID{{EntryOffset: 0, AckSet: set}})
	if acks.MarkDeleteOffset() != 0 || !acks.IsIndividuallyDeleted(2) || acks.IsIndividuallyDeleted(1) {
		t.Fatalf("acks %+v", acks)
	}
	// Nack everything: the first batch comes back with its ack set and a
	// redelivery count; the second whole.
	// The tail read in flight is cancelled; the replay is read first.
	_, reads := split(must(t)(s.Redeliver(1, nil)))
	rr := reads[0].(ReadReplay)
	if acts := s.OnRead(2, true, entries(1)); acts != nil {
		t.Fatalf("cancelled tail read was used: %v", acts)
	}
	if len(rr.Offsets) != 2 {
		t.Fatalf("replay %v", rr)
	}
	d, _ = split(s.OnRead(rr.Gen, false, entries(4, 3)))
	if len(d) != 2 || d[0].RedeliveryCount != 1 || d[1].RedeliveryCount != 1 {
		t.Fatalf("redelivered %+v", d)
	}
	if got := d[0].AckSet; len(got) != 1 || got[0] != 0b1010 {
		t.Fatalf("ack set %b", got)
	}
	if d[1].AckSet != nil {
		t.Fatalf("untouched batch has ack set %v", d[1].AckSet)
	}
	// Cumulative ack of the second entry acknowledges everything.
	ackNow(t, s, 1, AckCumulative, []AckID{{EntryOffset: 4}})
	if acks.MarkDeleteOffset() != 6 || s.PendingEntries() != 0 {
		t.Fatalf("md %d pending %d", acks.MarkDeleteOffset(), s.PendingEntries())
	}
}

func TestFullyAckedEntriesAreSkipped(t *testing.T) {
	acks := newFakeAcks()
	acks.IndividualDelete(1, 1)
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, acks, 0)
	must(t)(s.AddConsumer(7, SubShared))
	must(t)(s.Flow(7, 100))
	d, _ := split(s.OnRead(1, true, entries(1, 1, 1)))
	if len(d) != 2 || d[0].Entry.Offset != 0 || d[1].Entry.Offset != 2 {
		t.Fatalf("delivered %+v", d)
	}
}

func TestFailoverActiveChange(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubFailover}, newFakeAcks(), 0)
	a1 := must(t)(s.AddConsumer(1, SubFailover))
	a2 := must(t)(s.AddConsumer(2, SubFailover))
	if a1[0] != (ActiveChange{1, true}) || a2[0] != (ActiveChange{2, false}) {
		t.Fatalf("%v %v", a1, a2)
	}
	acts := s.RemoveConsumer(1)
	if acts[0] != (ActiveChange{2, true}) {
		t.Fatalf("%v", acts)
	}
	if _, err := s.AddConsumer(3, SubKeyShared); !errors.Is(err, ErrConsumerBusy) {
		t.Fatal(err)
	}
}

// TestConsumerCounts: permits and unacknowledged records per consumer, a
// batch-index ack counting only the records it acknowledged.
func TestConsumerCounts(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubShared}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	must(t)(s.AddConsumer(2, SubShared))
	_, reads := split(must(t)(s.Flow(1, 5)))
	must(t)(s.Flow(2, 1))
	rt := reads[0].(ReadTail)
	// Entries of 3, 1 and 2 records: round robin gives 1 the first, 2 the
	// second (its only permit), 1 the third.
	d, _ := split(s.OnRead(rt.Gen, true, entries(3, 1, 2)))
	if len(d) != 3 {
		t.Fatalf("delivered %d entries, want 3", len(d))
	}
	got := s.ConsumerCounts()
	if got[1] != (ConsumerCounts{Permits: 0, UnackedRecords: 5}) || got[2] != (ConsumerCounts{Permits: 0, UnackedRecords: 1}) {
		t.Fatalf("counts %+v", got)
	}
	// Acknowledge record 1 of the first entry (batch index) and the
	// second entry.
	ackNow(t, s, 1, AckIndividual, []AckID{{EntryOffset: 0, AckSet: protocol.AckSetAllUnacked(3)}})
	set := protocol.AckSetAllUnacked(3)
	set[0] &^= 1 << 1
	ackNow(t, s, 1, AckIndividual, []AckID{{EntryOffset: 0, AckSet: set}})
	ackNow(t, s, 2, AckIndividual, []AckID{{EntryOffset: 3}})
	got = s.ConsumerCounts()
	if got[1] != (ConsumerCounts{UnackedRecords: 4}) || got[2] != (ConsumerCounts{}) {
		t.Fatalf("after acks: counts %+v", got)
	}
}

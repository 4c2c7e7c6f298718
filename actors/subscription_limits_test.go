package actors

import (
	"testing"

	"github.com/lakegate/lakegate/protocol"
)

// Tests of the unacknowledged limits (MaxUnackedPerConsumer,
// MaxUnackedPerSubscription): dispatch is blocked at the limit, never an
// acknowledgement, and goes on once acknowledgements bring the count to
// half of it.

// readOf returns the only read among acts (failing otherwise).
func readOf(t *testing.T, acts []Action) Action {
	t.Helper()
	_, reads := split(acts)
	if len(reads) != 1 {
		t.Fatalf("reads %v, want one", reads)
	}
	return reads[0]
}

// deliveredTo counts the deliveries per consumer.
func deliveredTo(acts []Action) map[uint64]int {
	out := map[uint64]int{}
	d, _ := split(acts)
	for _, x := range d {
		out[x.ConsumerID]++
	}
	return out
}

func ids(offsets ...int64) []AckID {
	out := make([]AckID, len(offsets))
	for i, o := range offsets {
		out[i] = AckID{EntryOffset: o}
	}
	return out
}

func TestMaxUnackedPerConsumerBlocksDispatchUntilHalf(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubShared, ReadMaxRecords: 10, MaxUnackedPerConsumer: 3}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	rt := readOf(t, must(t)(s.Flow(1, 100))).(ReadTail)
	acts := s.OnRead(rt.Gen, true, entries(1, 1, 1, 1, 1))
	d, reads := split(acts)
	if len(d) != 3 || len(reads) != 0 {
		t.Fatalf("delivered %d (want 3: the limit), reads %v (want none while blocked)", len(d), reads)
	}
	if sub, cs := s.BlockedOnUnacked(); sub || !cs[1] {
		t.Fatalf("blocked: subscription %v, consumers %v; want consumer 1", sub, cs)
	}
	if got := s.ConsumerCounts()[1]; !got.Blocked || got.UnackedRecords != 3 || got.Permits != 97 {
		t.Fatalf("counts %+v", got)
	}
	// More permits do not unblock it.
	if d, reads := split(must(t)(s.Flow(1, 10))); len(d) != 0 || len(reads) != 0 {
		t.Fatalf("after FLOW: delivered %d, reads %v", len(d), reads)
	}
	// One ack: 2 unacknowledged, above half of 3 — still blocked.
	if d, reads := split(ackNow(t, s, 1, AckIndividual, ids(0))); len(d) != 0 || len(reads) != 0 {
		t.Fatalf("after 1 ack: delivered %d, reads %v", len(d), reads)
	}
	// Two: 1 ≤ 3/2 — unblocked, the held entries are read again.
	rr, ok := readOf(t, ackNow(t, s, 1, AckIndividual, ids(1))).(ReadReplay)
	if !ok || len(rr.Offsets) != 2 || rr.Offsets[0] != 3 {
		t.Fatalf("after 2 acks: read %+v, want a replay of 3 and 4", rr)
	}
	d, _ = split(s.OnRead(rr.Gen, false, entries(1, 1, 1, 1, 1)[3:]))
	if len(d) != 2 {
		t.Fatalf("replayed %d, want 2", len(d))
	}
	if _, cs := s.BlockedOnUnacked(); !cs[1] || s.UnackedRecords() != 3 {
		t.Fatalf("at 3 unacked again: blocked %v, unacked %d", cs, s.UnackedRecords())
	}
}

func TestMaxUnackedPerConsumerLeavesOtherConsumersServed(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubShared, ReadMaxRecords: 10, MaxUnackedPerConsumer: 2}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	must(t)(s.AddConsumer(2, SubShared))
	rt := readOf(t, must(t)(s.Flow(1, 100))).(ReadTail)
	must(t)(s.Flow(2, 100))
	// Round robin: 0 and 2 to consumer 1, 1 and 3 to consumer 2; both
	// reach the limit, 4 and 5 wait.
	got := deliveredTo(s.OnRead(rt.Gen, true, entries(1, 1, 1, 1, 1, 1)))
	if got[1] != 2 || got[2] != 2 {
		t.Fatalf("delivered %v, want 2 to each", got)
	}
	// Consumer 2 acknowledges what it got, consumer 1 nothing: consumer 2
	// gets the rest.
	rr := readOf(t, ackNow(t, s, 2, AckIndividual, ids(1, 3))).(ReadReplay)
	got = deliveredTo(s.OnRead(rr.Gen, false, entries(1, 1, 1, 1, 1, 1)[4:]))
	if got[1] != 0 || got[2] != 2 {
		t.Fatalf("after consumer 2's acks: delivered %v, want both to consumer 2", got)
	}
	if _, cs := s.BlockedOnUnacked(); !cs[1] || !cs[2] {
		t.Fatalf("blocked %v, want both at their limit again", cs)
	}
}

func TestMaxUnackedPerSubscriptionBlocksEveryConsumer(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubShared, ReadMaxRecords: 10, MaxUnackedPerSubscription: 4}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	must(t)(s.AddConsumer(2, SubShared))
	rt := readOf(t, must(t)(s.Flow(1, 100))).(ReadTail)
	must(t)(s.Flow(2, 100))
	acts := s.OnRead(rt.Gen, true, entries(1, 1, 1, 1, 1, 1))
	if got := deliveredTo(acts); got[1]+got[2] != 4 {
		t.Fatalf("delivered %v, want 4 in all", got)
	}
	if _, reads := split(acts); len(reads) != 0 {
		t.Fatalf("read %v while the subscription is blocked", reads)
	}
	if sub, _ := s.BlockedOnUnacked(); !sub {
		t.Fatal("subscription not blocked at its limit")
	}
	// Acks down to 3, then 2 (= 4/2): unblocked at 2.
	if _, reads := split(ackNow(t, s, 1, AckIndividual, ids(0))); len(reads) != 0 {
		t.Fatalf("read at 3 unacked: %v", reads)
	}
	rr := readOf(t, ackNow(t, s, 2, AckIndividual, ids(1))).(ReadReplay)
	if got := deliveredTo(s.OnRead(rr.Gen, false, entries(1, 1, 1, 1, 1, 1)[4:])); got[1]+got[2] != 2 {
		t.Fatalf("after unblocking: delivered %v, want the 2 held", got)
	}
}

func TestExclusiveIsNotLimitedByUnacked(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubExclusive, ReadMaxRecords: 10, MaxUnackedPerConsumer: 2, MaxUnackedPerSubscription: 2}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubExclusive))
	rt := readOf(t, must(t)(s.Flow(1, 100))).(ReadTail)
	acts := s.OnRead(rt.Gen, true, entries(1, 1, 1, 1, 1))
	if d, reads := split(acts); len(d) != 5 || len(reads) != 1 {
		t.Fatalf("delivered %d, reads %v: want all 5 and the next read (Pulsar limits Shared and Key_Shared only)", len(d), reads)
	}
}

func TestBatchIndexAckRecountsUnacked(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubShared, ReadMaxRecords: 10, MaxUnackedPerConsumer: 4}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	rt := readOf(t, must(t)(s.Flow(1, 100))).(ReadTail)
	if d, reads := split(s.OnRead(rt.Gen, true, entries(4))); len(d) != 1 || len(reads) != 0 {
		t.Fatalf("delivered %d, reads %v", len(d), reads)
	}
	// Records 0 and 1 acknowledged (bit 1 = still unacked): 2 left = 4/2.
	set := protocol.AckSetAllUnacked(4)
	set[0] &^= 0b11
	acts := ackNow(t, s, 1, AckIndividual, []AckID{{EntryOffset: 0, AckSet: set}})
	if _, cs := s.BlockedOnUnacked(); cs[1] || s.UnackedRecords() != 2 {
		t.Fatalf("after a batch-index ack: blocked %v, unacked %d", cs, s.UnackedRecords())
	}
	if rt, ok := readOf(t, acts).(ReadTail); !ok || rt.From != 4 {
		t.Fatalf("read %+v, want the tail from 4", rt)
	}
}

func TestSetUnackedLimitsAppliesAtOnce(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubKeyShared, ReadMaxRecords: 10}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubKeyShared))
	rt := readOf(t, must(t)(s.Flow(1, 100))).(ReadTail)
	if d, _ := split(s.OnRead(rt.Gen, true, entries(1, 1, 1))); len(d) != 3 {
		t.Fatalf("delivered %d", len(d))
	}
	// The next tail read is in flight; a limit below what is held blocks
	// the consumer: what that read brings waits.
	acts := s.SetUnackedLimits(2, 0)
	if _, cs := s.BlockedOnUnacked(); !cs[1] {
		t.Fatalf("not blocked by the lowered limit: %v", acts)
	}
	_, reads := split(acts)
	var gen uint64
	for _, a := range reads {
		gen = a.(ReadTail).Gen
	}
	if gen == 0 {
		gen = s.ReadGen()
	}
	if d, reads := split(s.OnRead(gen, true, entries(1, 1, 1, 1)[3:])); len(d) != 0 || len(reads) != 0 {
		t.Fatalf("delivered %d, reads %v while blocked", len(d), reads)
	}
	// Lifting the limit lets the held entry go.
	rr, ok := readOf(t, s.SetUnackedLimits(0, 0)).(ReadReplay)
	if !ok || len(rr.Offsets) != 1 || rr.Offsets[0] != 3 {
		t.Fatalf("after lifting the limit: %+v", rr)
	}
}

func TestRemovedConsumerReleasesItsUnacked(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubShared, ReadMaxRecords: 10, MaxUnackedPerSubscription: 2}, newFakeAcks(), 0)
	must(t)(s.AddConsumer(1, SubShared))
	must(t)(s.AddConsumer(2, SubShared))
	rt := readOf(t, must(t)(s.Flow(1, 100))).(ReadTail)
	if d, _ := split(s.OnRead(rt.Gen, true, entries(1, 1, 1))); len(d) != 2 {
		t.Fatalf("delivered %d, want 2 (the subscription's limit)", len(d))
	}
	must(t)(s.Flow(2, 100))
	// Consumer 1 leaves: its 2 entries are requeued, the subscription is
	// unblocked and consumer 2 gets all three.
	rr := readOf(t, s.RemoveConsumer(1)).(ReadReplay)
	if len(rr.Offsets) != 3 {
		t.Fatalf("replay %v, want 0, 1, 2", rr.Offsets)
	}
	got := deliveredTo(s.OnRead(rr.Gen, false, entries(1, 1, 1)))
	if got[2] != 2 {
		t.Fatalf("delivered %v, want 2 to consumer 2 (then blocked again)", got)
	}
}

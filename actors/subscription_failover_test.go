package actors

import (
	"fmt"
	"testing"
)

// activeOf collects the ActiveChange actions: consumer id → active.
func activeOf(acts []Action) map[uint64]bool {
	m := map[uint64]bool{}
	for _, a := range acts {
		if a, ok := a.(ActiveChange); ok {
			m[a.ConsumerID] = a.Active
		}
	}
	return m
}

// TestFailoverActivePerPartition: the active consumer of partition i is
// sorted(priority, name)[i % n] over the highest-priority consumers, and
// every consumer hears of each change.
func TestFailoverActivePerPartition(t *testing.T) {
	type cons struct {
		id   uint64
		name string
		prio int32
	}
	for _, tc := range []struct {
		name  string
		cons  []cons
		wants []uint64 // active consumer id for partitions 0..3
	}{
		{"names", []cons{{1, "c", 0}, {2, "a", 0}, {3, "b", 0}}, []uint64{2, 3, 1, 2}},
		{"priorities", []cons{{1, "a", 1}, {2, "c", 0}, {3, "b", 0}}, []uint64{3, 2, 3, 2}},
	} {
		for part, want := range tc.wants {
			t.Run(fmt.Sprintf("%s/p%d", tc.name, part), func(t *testing.T) {
				s := NewSubscription(SubscriptionConfig{Type: SubFailover, PartitionIndex: int32(part)}, newFakeAcks(), 0)
				state := map[uint64]bool{}
				for _, c := range tc.cons {
					for id, a := range activeOf(must(t)(s.AddConsumerWithMeta(c.id, SubFailover, ConsumerMeta{Name: c.name, PriorityLevel: c.prio}))) {
						state[id] = a
					}
				}
				for _, c := range tc.cons {
					if state[c.id] != (c.id == want) {
						t.Fatalf("consumer %d (%s) active=%v, want active %d; state %v", c.id, c.name, state[c.id], want, state)
					}
				}
			})
		}
	}
}

// TestFailoverHandoverRedelivers: when a consumer sorting first joins, it
// becomes active, everyone is told, and the entries the old active one had
// not acknowledged go to it.
func TestFailoverHandoverRedelivers(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubFailover, ReadMaxRecords: 10}, newFakeAcks(), 0)
	must(t)(s.AddConsumerWithMeta(1, SubFailover, ConsumerMeta{Name: "b"}))
	_, reads := split(must(t)(s.Flow(1, 10)))
	if len(reads) != 1 {
		t.Fatalf("reads %v", reads)
	}
	d, _ := split(s.OnRead(s.ReadGen(), true, entries(1, 1, 1)))
	if len(d) != 3 || d[0].ConsumerID != 1 {
		t.Fatalf("delivered %+v", d)
	}
	ackNow(t, s, 1, AckIndividual, []AckID{{EntryOffset: 0}})

	acts := must(t)(s.AddConsumerWithMeta(2, SubFailover, ConsumerMeta{Name: "a"}))
	if got := activeOf(acts); len(got) != 2 || got[1] || !got[2] {
		t.Fatalf("active changes %v", got)
	}
	// Nothing is read for the new active consumer before it has permits
	// (the old one's do not count).
	if _, reads := split(acts); len(reads) != 0 {
		t.Fatalf("read before the active consumer has permits: %v", reads)
	}
	// With permits, the replay of entries 1 and 2 is asked for (the tail
	// read in flight was interrupted); deliver it.
	acts = must(t)(s.Flow(2, 10))
	var replay *ReadReplay
	for _, a := range append(acts, s.Poke()...) {
		if r, ok := a.(ReadReplay); ok {
			replay = &r
		}
	}
	if replay == nil || len(replay.Offsets) != 2 || replay.Offsets[0] != 1 || replay.Offsets[1] != 2 {
		t.Fatalf("replay %+v (acts %v)", replay, acts)
	}
	es := entries(1, 1, 1)[1:]
	d, _ = split(s.OnRead(replay.Gen, false, es))
	if len(d) != 2 || d[0].ConsumerID != 2 || d[1].ConsumerID != 2 {
		t.Fatalf("redelivered %+v", d)
	}
	// The old active one leaving changes nothing for the new one.
	if got := activeOf(s.RemoveConsumer(1)); len(got) != 0 {
		t.Fatalf("active changes on removing a standby: %v", got)
	}
}

// TestFailoverReadsOnlyForTheActiveConsumer: an inactive consumer's permits
// do not make the machine read (it used to read, find nobody to deliver
// to, and read the same entries again, over and over).
func TestFailoverReadsOnlyForTheActiveConsumer(t *testing.T) {
	s := NewSubscription(SubscriptionConfig{Type: SubFailover}, newFakeAcks(), 0)
	must(t)(s.AddConsumerWithMeta(1, SubFailover, ConsumerMeta{Name: "b"}))
	must(t)(s.AddConsumerWithMeta(2, SubFailover, ConsumerMeta{Name: "a"})) // active: sorts first
	if _, reads := split(must(t)(s.Flow(1, 100))); len(reads) != 0 {
		t.Fatalf("read for the inactive consumer: %v", reads)
	}
	_, reads := split(must(t)(s.Flow(2, 1)))
	if len(reads) != 1 {
		t.Fatalf("no read for the active consumer: %v", reads)
	}
	d, reads := split(s.OnRead(reads[0].(ReadTail).Gen, true, entries(1, 1)))
	if len(d) != 1 || d[0].ConsumerID != 2 || len(reads) != 0 {
		t.Fatalf("delivered %v, reads %v (the active consumer has no permits left)", d, reads)
	}
}

package actors

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// keyedEntries builds single-record entries at offsets 0.. with the given
// partition keys.
func keyedEntries(t *testing.T, keys ...string) []lakestream.Entry {
	t.Helper()
	var out []lakestream.Entry
	for i, k := range keys {
		md, err := protocol.MarshalMetadata(&pb.MessageMetadata{
			ProducerName: proto.String("p"), SequenceId: proto.Uint64(uint64(i)),
			PublishTime: proto.Uint64(1), PartitionKey: proto.String(k),
		})
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := protocol.AppendEntry(nil, md, []byte(k))
		out = append(out, lakestream.Entry{EntryHeader: lakestream.EntryHeader{Offset: int64(i), Records: 1}, Payload: payload})
	}
	return out
}

func TestKeySharedSelectorStableAndSticky(t *testing.T) {
	var k keySelector
	for id := uint64(1); id <= 3; id++ {
		if err := k.add(id, "", KeySharedPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[int32]uint64{}
	counts := map[uint64]int{}
	for h := int32(0); h < KeyHashRange; h++ {
		o, _ := k.owner(h)
		before[h] = o
		counts[o]++
	}
	if len(counts) != 3 {
		t.Fatalf("owners %v", counts)
	}
	k.remove(2)
	for h := int32(0); h < KeyHashRange; h++ {
		if o, _ := k.owner(h); before[h] != 2 && o != before[h] {
			t.Fatalf("hash %d moved from %d to %d though its owner stayed", h, before[h], o)
		}
	}
	if err := k.add(4, "", KeySharedPolicy{Sticky: true, Ranges: []HashRange{{0, 10}}}); !errors.Is(err, ErrConsumerAssign) {
		t.Fatalf("mixed modes: %v", err)
	}

	var st keySelector
	if err := st.add(1, "", KeySharedPolicy{Sticky: true, Ranges: []HashRange{{0, 99}, {200, 299}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.add(2, "", KeySharedPolicy{Sticky: true, Ranges: []HashRange{{50, 150}}}); !errors.Is(err, ErrConsumerAssign) {
		t.Fatalf("overlap: %v", err)
	}
	if err := st.add(2, "", KeySharedPolicy{Sticky: true, Ranges: []HashRange{{100, 199}}}); err != nil {
		t.Fatal(err)
	}
	for h, want := range map[int32]uint64{0: 1, 99: 1, 100: 2, 199: 2, 250: 1} {
		if o, ok := st.owner(h); !ok || o != want {
			t.Errorf("owner(%d) = %d %v, want %d", h, o, ok, want)
		}
	}
	if _, ok := st.owner(300); ok {
		t.Error("hash 300 has no owner")
	}
}

// movedAndStayed returns a key that moves to consumer 2 when it joins
// consumer 1 (both unnamed, as AddConsumer attaches them) and one that stays
// with consumer 1.
func movedAndStayed(t *testing.T) (moved, stayed string) {
	t.Helper()
	var probe keySelector
	for id := uint64(1); id <= 2; id++ {
		if err := probe.add(id, "", KeySharedPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 1000 && (moved == "" || stayed == ""); i++ {
		k := fmt.Sprintf("k%d", i)
		switch o, _ := probe.owner(KeyHash([]byte(k))); o {
		case 2:
			moved = cmp.Or(moved, k)
		case 1:
			stayed = cmp.Or(stayed, k)
		}
	}
	if moved == "" || stayed == "" {
		t.Fatalf("no key moves (%q) or stays (%q) among 1000: the ring gives a consumer nothing", moved, stayed)
	}
	return moved, stayed
}

// A consumer joining takes over keys only once the previous owner has
// acknowledged what it holds of them; order per key is kept throughout,
// and keys that stay are not held up.
func TestKeySharedDrainOnJoin(t *testing.T) {
	moved, stayed := movedAndStayed(t)
	es := keyedEntries(t, moved, stayed, moved, stayed) // offsets 0..3
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubKeyShared}, acks, 0)
	must(t)(s.AddConsumer(1, SubKeyShared))
	acts := must(t)(s.Flow(1, 100))
	// The first two entries go to consumer 1 (the only one).
	d, _ := split(s.OnRead(acts[0].(ReadTail).Gen, true, es[:2]))
	if len(d) != 2 || d[0].ConsumerID != 1 || d[1].ConsumerID != 1 {
		t.Fatalf("delivered %+v", d)
	}
	must(t)(s.AddConsumer(2, SubKeyShared))
	must(t)(s.Flow(2, 100))
	if o, _ := s.keys.owner(EntryKeyHash(es[0].Payload)); o != 2 {
		t.Fatalf("key %q owned by %d after the join, want 2", moved, o)
	}
	// The next entries of both keys: the stayed key's goes to consumer 1
	// at once; the moved key's waits (consumer 1 still holds entry 0).
	d, _ = split(s.OnRead(s.ReadGen(), true, es[2:]))
	if len(d) != 1 || d[0].Entry.Offset != 3 || d[0].ConsumerID != 1 {
		t.Fatalf("delivered %+v, want only entry 3 (key %q) to consumer 1", d, stayed)
	}
	// PIP-379's stats: consumer 1 drains the moved key's hash (one record,
	// entry 2 held back from consumer 2: at least one blocked attempt);
	// consumer 2 drains nothing.
	mh := EntryKeyHash(es[0].Payload)
	cc := s.ConsumerCounts()
	if c1 := cc[1].KeyShared; c1.DrainingCount != 1 || c1.DrainingUnacked != 1 || c1.DrainingCleared != 0 || len(c1.Draining) != 1 ||
		c1.Draining[0].Hash != mh || c1.Draining[0].UnackedRecords != 1 || c1.Draining[0].BlockedAttempts < 1 {
		t.Fatalf("consumer 1 while draining: %+v, want hash %d draining with 1 record", c1, mh)
	}
	if c2 := cc[2].KeyShared; c2.DrainingCount != 0 || len(c2.Draining) != 0 || !rangesHold(c2.KeyHashRanges, mh) || rangesHold(cc[1].KeyShared.KeyHashRanges, mh) {
		t.Fatalf("consumer 2 while 1 drains: %+v (hash %d should be in its ranges, not in 1's %v)", c2, mh, cc[1].KeyShared.KeyHashRanges)
	}
	if m := s.KeySharedMode(); m != "AUTO_SPLIT" {
		t.Fatalf("mode %q", m)
	}
	// Consumer 1 acks the moved key's entry: the waiting one goes to 2.
	acts = ackNow(t, s, 1, AckIndividual, []AckID{{EntryOffset: 0}})
	var replay *ReadReplay
	for _, a := range acts {
		if r, ok := a.(ReadReplay); ok {
			replay = &r
		}
	}
	if replay == nil || !slices.Equal(replay.Offsets, []int64{2}) {
		t.Fatalf("replay after the drain ended: %v", acts)
	}
	d, _ = split(s.OnRead(replay.Gen, false, es[2:3]))
	if len(d) != 1 || d[0].Entry.Offset != 2 || d[0].ConsumerID != 2 {
		t.Fatalf("moved key's entry: delivered %+v, want entry 2 to consumer 2", d)
	}
	cc = s.ConsumerCounts()
	if c1 := cc[1].KeyShared; c1.DrainingCount != 0 || c1.DrainingUnacked != 0 || c1.DrainingCleared != 1 || len(c1.Draining) != 0 {
		t.Fatalf("consumer 1 after the drain: %+v, want nothing draining and one hash cleared", c1)
	}
}

// rangesHold reports whether h is in one of rs.
func rangesHold(rs []HashRange, h int32) bool {
	return slices.ContainsFunc(rs, func(r HashRange) bool { return r.Start <= h && h <= r.End })
}

// The hash ranges reported per consumer are what owner answers, hash by
// hash: disjoint, ascending, merged, covering the whole space in
// AUTO_SPLIT and exactly the sticky ranges in STICKY.
func TestKeySharedRangesByConsumer(t *testing.T) {
	var k keySelector
	for id := uint64(1); id <= 3; id++ {
		if err := k.add(id, fmt.Sprintf("c%d", id), KeySharedPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	checkRanges(t, &k, true)
	var st keySelector
	if err := st.add(1, "", KeySharedPolicy{Sticky: true, Ranges: []HashRange{{0, 99}, {100, 150}, {300, 400}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.add(2, "", KeySharedPolicy{Sticky: true, Ranges: []HashRange{{151, 299}}}); err != nil {
		t.Fatal(err)
	}
	checkRanges(t, &st, false)
	if got := st.rangesByConsumer()[1]; !slices.Equal(got, []HashRange{{0, 150}, {300, 400}}) {
		t.Fatalf("sticky consumer 1: %v, want its ranges merged", got)
	}
}

func checkRanges(t *testing.T, k *keySelector, whole bool) {
	t.Helper()
	byConsumer := k.rangesByConsumer()
	owned := 0
	for id, rs := range byConsumer {
		for i, r := range rs {
			if r.Start > r.End || (i > 0 && rs[i-1].End+1 >= r.Start) {
				t.Fatalf("consumer %d: ranges %v not ascending, disjoint and merged", id, rs)
			}
			for h := r.Start; h <= r.End; h++ {
				if o, ok := k.owner(h); !ok || o != id {
					t.Fatalf("hash %d reported for consumer %d, owner says %d %v", h, id, o, ok)
				}
			}
			owned += int(r.End-r.Start) + 1
		}
	}
	if whole && owned != KeyHashRange {
		t.Fatalf("AUTO_SPLIT ranges cover %d hashes, want %d", owned, KeyHashRange)
	}
}

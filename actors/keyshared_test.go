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
}

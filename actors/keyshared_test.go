package actors

import (
	"errors"
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
		if err := k.add(id, KeySharedPolicy{}); err != nil {
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
	if err := k.add(4, KeySharedPolicy{Sticky: true, Ranges: []HashRange{{0, 10}}}); !errors.Is(err, ErrConsumerAssign) {
		t.Fatalf("mixed modes: %v", err)
	}

	var st keySelector
	if err := st.add(1, KeySharedPolicy{Sticky: true, Ranges: []HashRange{{0, 99}, {200, 299}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.add(2, KeySharedPolicy{Sticky: true, Ranges: []HashRange{{50, 150}}}); !errors.Is(err, ErrConsumerAssign) {
		t.Fatalf("overlap: %v", err)
	}
	if err := st.add(2, KeySharedPolicy{Sticky: true, Ranges: []HashRange{{100, 199}}}); err != nil {
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

// A consumer joining takes over keys only once the previous owner has
// acknowledged what it holds of them; order per key is kept throughout.
func TestKeySharedDrainOnJoin(t *testing.T) {
	acks := newFakeAcks()
	s := NewSubscription(SubscriptionConfig{Type: SubKeyShared}, acks, 0)
	must(t)(s.AddConsumer(1, SubKeyShared))
	acts := must(t)(s.Flow(1, 100))
	es := keyedEntries(t, "a", "b", "c", "d", "e", "f", "g", "h")
	// First half delivered to consumer 1 (the only one).
	d, _ := split(s.OnRead(acts[0].(ReadTail).Gen, true, es[:4]))
	if len(d) != 4 {
		t.Fatalf("delivered %d", len(d))
	}
	must(t)(s.AddConsumer(2, SubKeyShared))
	acts = must(t)(s.Flow(2, 100))
	// Find a key that moved to consumer 2.
	moved := -1
	for i := range 4 {
		if o, _ := s.keys.owner(EntryKeyHash(es[i].Payload)); o == 2 {
			moved = i
		}
	}
	if moved < 0 {
		t.Skip("no key of the first half moved; pick other keys")
	}
	// The second half repeats the same keys (entries 4..7 = keys of 0..3).
	second := keyedEntries(t, "a", "b", "c", "d", "a", "b", "c", "d")[4:]
	var gen uint64
	for _, a := range acts {
		if r, ok := a.(ReadTail); ok {
			gen = r.Gen
		}
	}
	if gen == 0 {
		gen = s.ReadGen()
	}
	d, _ = split(s.OnRead(gen, true, second))
	for _, x := range d {
		if x.Entry.Offset == int64(4+moved) {
			t.Fatalf("entry of moved key delivered to %d before consumer 1 acked", x.ConsumerID)
		}
	}
	// Consumer 1 acks the moved key's first entry: the waiting one goes to 2.
	acts = must(t)(s.Ack(1, AckIndividual, []AckID{{EntryOffset: int64(moved)}}))
	var replay *ReadReplay
	for _, a := range acts {
		if r, ok := a.(ReadReplay); ok {
			replay = &r
		}
	}
	if replay == nil {
		t.Fatalf("no replay read after the drain ended: %v", acts)
	}
	var read []lakestream.Entry
	for _, off := range replay.Offsets {
		read = append(read, second[off-4])
	}
	d, _ = split(s.OnRead(replay.Gen, false, read))
	found := false
	for _, x := range d {
		if x.Entry.Offset == int64(4+moved) {
			found = x.ConsumerID == 2
		}
	}
	if !found {
		t.Fatalf("moved key's entry not delivered to consumer 2: %v", d)
	}
}

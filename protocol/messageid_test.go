package protocol

import (
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

func TestMessageIDWire(t *testing.T) {
	tests := []struct {
		name string
		id   MessageID
	}{
		{"earliest", EarliestMessageID},
		{"latest", LatestMessageID},
		{"entry", NewMessageID(7, 100, -1, -1)},
		{"batch index", NewMessageID(7, 100, 3, 2)},
		{"partition 0", NewMessageID(1, 0, 0, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.id.PB())
			if err != nil {
				t.Fatal(err)
			}
			var m pb.MessageIdData
			if err := proto.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if got := MessageIDFromPB(&m); got != tc.id {
				t.Fatalf("round trip %v, want %v", got, tc.id)
			}
		})
	}
	// Clients write earliest as the uint64 0xffffffffffffffff (10-byte varint).
	b, _ := proto.Marshal(EarliestMessageID.PB())
	want := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), math.MaxUint64)
	want = protowire.AppendVarint(protowire.AppendTag(want, 2, protowire.VarintType), math.MaxUint64)
	if string(b) != string(want) {
		t.Fatalf("earliest on the wire %x, want %x", b, want)
	}
	if MessageIDFromPB(nil) != EarliestMessageID || !EarliestMessageID.IsEarliest() || !LatestMessageID.IsLatest() {
		t.Fatal("sentinels")
	}
}

func TestMessageIDCompareAndOffset(t *testing.T) {
	ordered := []MessageID{
		EarliestMessageID,
		NewMessageID(7, 0, -1, -1),
		NewMessageID(7, 0, 0, -1),
		NewMessageID(7, 0, 1, -1),
		NewMessageID(7, 3, -1, -1),
		NewMessageID(8, 0, -1, -1),
		LatestMessageID,
	}
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := ordered[i].Compare(ordered[j]); got != want {
				t.Fatalf("%v vs %v = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	if got := NewMessageID(7, 100, -1, -1).Offset(); got != 100 {
		t.Fatalf("entry offset %d", got)
	}
	if got := NewMessageID(7, 100, 4, -1).Offset(); got != 104 {
		t.Fatalf("batch offset %d", got)
	}
	// Partition does not take part in ordering.
	if NewMessageID(1, 1, -1, 0).Compare(NewMessageID(1, 1, -1, 5)) != 0 {
		t.Fatal("partition compared")
	}
}

func TestAckSet(t *testing.T) {
	for _, n := range []int{1, 3, 63, 64, 65, 128, 1000} {
		s := AckSetAllUnacked(n)
		if len(s) != (n+63)/64 {
			t.Fatalf("n=%d: %d words", n, len(s))
		}
		if got := AckSetUnackedCount(s); got != n {
			t.Fatalf("n=%d: %d unacked", n, got)
		}
		for i := range n + 70 {
			if AckSetIsUnacked(s, i) != (i < n) {
				t.Fatalf("n=%d: bit %d", n, i)
			}
		}
	}
	if AckSetAllUnacked(0) != nil || AckSetIsUnacked(nil, 0) || AckSetIsUnacked([]int64{1}, -1) {
		t.Fatal("edge cases")
	}
	// Batch of 3 with message 1 acked, as a client sends it: 0b101.
	if s := []int64{5}; !slices.Equal([]bool{AckSetIsUnacked(s, 0), AckSetIsUnacked(s, 1), AckSetIsUnacked(s, 2)}, []bool{true, false, true}) {
		t.Fatal("0b101")
	}
}

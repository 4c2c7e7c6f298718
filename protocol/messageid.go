package protocol

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

// MessageID is a Pulsar message id in the signed form clients reason about.
//
// lakegate maps it onto a log as follows (see docs/protocol.md):
//
//	LedgerID   = the log's generation, constant for the life of a log
//	EntryID    = record offset of the first message of the entry (one SEND)
//	BatchIndex = index of the message inside the entry's batch, or -1
//	Partition  = partition index of the topic, -1 when not partitioned
//
// so a message's record offset is EntryID + max(BatchIndex, 0).
type MessageID struct {
	LedgerID   int64
	EntryID    int64
	BatchIndex int32
	Partition  int32
}

// Earliest and Latest are the sentinel ids clients send to mean "before the
// first message" and "after the last message". Clients encode the signed -1
// as the uint64 0xffffffffffffffff.
var (
	EarliestMessageID = MessageID{LedgerID: -1, EntryID: -1, BatchIndex: -1, Partition: -1}
	LatestMessageID   = MessageID{LedgerID: math.MaxInt64, EntryID: math.MaxInt64, BatchIndex: -1, Partition: -1}
)

// NewMessageID builds the id of the message at batchIndex (-1 for a
// non-batched entry) of the entry starting at record offset entryOffset in a
// log of the given generation.
func NewMessageID(generation, entryOffset int64, batchIndex, partition int32) MessageID {
	return MessageID{LedgerID: generation, EntryID: entryOffset, BatchIndex: batchIndex, Partition: partition}
}

// MessageIDFromPB converts wire ids (uint64 reinterpreted as int64). A nil
// id converts to EarliestMessageID.
func MessageIDFromPB(m *pb.MessageIdData) MessageID {
	if m == nil {
		return EarliestMessageID
	}
	return MessageID{
		LedgerID:   int64(m.GetLedgerId()),
		EntryID:    int64(m.GetEntryId()),
		BatchIndex: m.GetBatchIndex(),
		Partition:  m.GetPartition(),
	}
}

// PB converts id to its wire form. partition and batch_index are written
// only when they differ from the proto default (-1), as the broker does.
func (id MessageID) PB() *pb.MessageIdData {
	m := &pb.MessageIdData{
		LedgerId: proto.Uint64(uint64(id.LedgerID)),
		EntryId:  proto.Uint64(uint64(id.EntryID)),
	}
	if id.Partition != -1 {
		m.Partition = proto.Int32(id.Partition)
	}
	if id.BatchIndex != -1 {
		m.BatchIndex = proto.Int32(id.BatchIndex)
	}
	return m
}

// Offset returns the record offset of the message id names:
// EntryID + max(BatchIndex, 0). Meaningless for Earliest/Latest.
func (id MessageID) Offset() int64 {
	return id.EntryID + int64(max(id.BatchIndex, 0))
}

// IsEarliest reports whether id is the Earliest sentinel (ledger and entry -1).
func (id MessageID) IsEarliest() bool { return id.LedgerID == -1 && id.EntryID == -1 }

// IsLatest reports whether id is the Latest sentinel (ledger and entry MaxInt64).
func (id MessageID) IsLatest() bool {
	return id.LedgerID == math.MaxInt64 && id.EntryID == math.MaxInt64
}

// Compare orders ids of one partition: by LedgerID, then EntryID, then
// BatchIndex, all signed. A BatchIndex of -1 (the entry as a whole) sorts
// before index 0 of the same entry. Partition is ignored. Returns -1, 0, +1.
func (id MessageID) Compare(o MessageID) int {
	if c := cmp.Compare(id.LedgerID, o.LedgerID); c != 0 {
		return c
	}
	if c := cmp.Compare(id.EntryID, o.EntryID); c != 0 {
		return c
	}
	return cmp.Compare(id.BatchIndex, o.BatchIndex)
}

func (id MessageID) String() string {
	return fmt.Sprintf("%d:%d:%d:%d", id.LedgerID, id.EntryID, id.Partition, id.BatchIndex)
}

// Batch-index ack sets (CommandAck.message_id.ack_set, CommandMessage.ack_set)
// are bitsets over the messages of one entry in little-endian 64-bit words:
// bit i of word i/64 set means message i is still unacknowledged.

// AckSetAllUnacked returns the ack set of a batch of n messages none of which
// is acknowledged. n <= 0 yields nil.
func AckSetAllUnacked(n int) []int64 {
	if n <= 0 {
		return nil
	}
	words := make([]int64, (n+63)/64)
	for i := range words {
		words[i] = -1
	}
	if r := n % 64; r != 0 {
		words[len(words)-1] = int64(uint64(1)<<r - 1)
	}
	return words
}

// AckSetIsUnacked reports whether message i is still unacknowledged in set.
// Indexes beyond the set count as acknowledged.
func AckSetIsUnacked(set []int64, i int) bool {
	if i < 0 || i/64 >= len(set) {
		return false
	}
	return uint64(set[i/64])&(uint64(1)<<(i%64)) != 0
}

// AckSetUnackedCount returns how many bits of set are 1.
func AckSetUnackedCount(set []int64) int {
	n := 0
	for _, w := range set {
		n += bits.OnesCount64(uint64(w))
	}
	return n
}

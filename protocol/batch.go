package protocol

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

// A batch payload, after decompression, is num_messages_in_batch repetitions
// of
//
//	[u32 size][SingleMessageMetadata (size bytes)][payload (payload_size bytes)]
//
// with nothing after the last message. An entry whose MessageMetadata has no
// num_messages_in_batch field is not a batch: its payload is one message.

// MaxBatchMessages bounds the message count SplitBatch accepts for one entry.
// Pulsar clients default to 1000 messages per batch; 1<<20 leaves ample room
// while keeping a hostile count from sizing anything.
const MaxBatchMessages = 1 << 20

// singleMetaMinBytes is the smallest encoding of a SingleMessageMetadata
// (payload_size is required: one tag byte plus one varint byte).
const singleMetaMinBytes = 2

// EntryRecords returns how many records (log offsets) an entry with metadata
// md occupies: num_messages_in_batch when the field is present, else 1.
// Errors: ErrMalformed if the field is present but not in [1, MaxBatchMessages].
func EntryRecords(md *pb.MessageMetadata) (int, error) {
	if md.NumMessagesInBatch == nil {
		return 1, nil
	}
	n := int(md.GetNumMessagesInBatch())
	if n < 1 || n > MaxBatchMessages {
		return 0, fmt.Errorf("%w: num_messages_in_batch %d", ErrMalformed, n)
	}
	return n, nil
}

// BatchMessage is one message of a batch. Both slices alias the payload given
// to SplitBatch.
type BatchMessage struct {
	// Metadata is the raw SingleMessageMetadata, byte-exact.
	Metadata []byte
	// Payload is the message value (payload_size bytes).
	Payload []byte
}

// ParseMetadata decodes m.Metadata.
// Errors: ErrMalformed.
func (m BatchMessage) ParseMetadata() (*pb.SingleMessageMetadata, error) {
	s := &pb.SingleMessageMetadata{}
	if err := proto.Unmarshal(m.Metadata, s); err != nil {
		return nil, fmt.Errorf("%w: single message metadata: %v", ErrMalformed, err)
	}
	return s, nil
}

// SplitBatch splits a decompressed batch payload holding exactly n messages.
// The returned messages alias payload. Only payload_size is decoded from each
// SingleMessageMetadata (the rest is validated as well-formed protobuf wire
// data); use BatchMessage.ParseMetadata for the other fields.
//
// Errors: ErrMalformed if n is not in [1, MaxBatchMessages], if a size is
// truncated or inconsistent, if a metadata lacks a valid payload_size, or if
// bytes remain after the n-th message.
func SplitBatch(payload []byte, n int) ([]BatchMessage, error) {
	if n < 1 || n > MaxBatchMessages {
		return nil, fmt.Errorf("%w: batch of %d messages", ErrMalformed, n)
	}
	// Each message takes at least 4+2 bytes; never size by n alone.
	msgs := make([]BatchMessage, 0, min(n, len(payload)/(4+singleMetaMinBytes)))
	rest := payload
	for i := range n {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: batch message %d/%d: size truncated", ErrMalformed, i, n)
		}
		metaSize := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(metaSize) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: batch message %d/%d: metadata size %d > %d bytes left", ErrMalformed, i, n, metaSize, len(rest))
		}
		meta := rest[:metaSize:metaSize]
		rest = rest[metaSize:]
		size, err := singlePayloadSize(meta)
		if err != nil {
			return nil, fmt.Errorf("%w: batch message %d/%d: %v", ErrMalformed, i, n, err)
		}
		if uint64(size) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: batch message %d/%d: payload size %d > %d bytes left", ErrMalformed, i, n, size, len(rest))
		}
		msgs = append(msgs, BatchMessage{Metadata: meta, Payload: rest[:size:size]})
		rest = rest[size:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last of %d batch messages", ErrMalformed, len(rest), n)
	}
	return msgs, nil
}

// singlePayloadSize walks SingleMessageMetadata wire data and returns its
// payload_size (field 3), which must be present and non-negative.
func singlePayloadSize(b []byte) (int, error) {
	const payloadSizeField protowire.Number = 3
	size, found := int64(0), false
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, protowire.ParseError(l)
		}
		b = b[l:]
		if num == payloadSizeField {
			if typ != protowire.VarintType {
				return 0, fmt.Errorf("payload_size has wire type %d", typ)
			}
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return 0, protowire.ParseError(l)
			}
			size, found = int64(int32(v)), true // int32 field: proto truncates to 32 bits
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(num, typ, b)
		if l < 0 {
			return 0, protowire.ParseError(l)
		}
		b = b[l:]
	}
	if !found {
		return 0, fmt.Errorf("payload_size missing")
	}
	if size < 0 {
		return 0, fmt.Errorf("payload_size %d", size)
	}
	return int(size), nil
}

// AppendBatchMessage appends one batch message to dst. It sets
// meta.PayloadSize to len(payload) before marshalling (deterministically).
// Errors: ErrMalformed if meta cannot be marshalled, ErrFrameTooLarge if
// payload exceeds an int32 or the metadata a u32.
func AppendBatchMessage(dst []byte, meta *pb.SingleMessageMetadata, payload []byte) ([]byte, error) {
	if len(payload) > math.MaxInt32 {
		return dst, fmt.Errorf("%w: batch message payload of %d bytes", ErrFrameTooLarge, len(payload))
	}
	meta.PayloadSize = proto.Int32(int32(len(payload)))
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(meta)
	if err != nil {
		return dst, fmt.Errorf("%w: single message metadata: %v", ErrMalformed, err)
	}
	return AppendBatchMessageRaw(dst, raw, payload)
}

// AppendBatchMessageRaw appends one batch message from raw SingleMessageMetadata
// bytes, which must already carry payload_size = len(payload) (for instance a
// BatchMessage from SplitBatch, re-batched byte-exact).
// Errors: ErrFrameTooLarge if metadata does not fit a u32 size.
func AppendBatchMessageRaw(dst, metadata, payload []byte) ([]byte, error) {
	if uint64(len(metadata)) > math.MaxUint32 {
		return dst, fmt.Errorf("%w: single message metadata of %d bytes", ErrFrameTooLarge, len(metadata))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(metadata)))
	dst = append(dst, metadata...)
	return append(dst, payload...), nil
}

// RecordKey is what topic compaction needs of one record of an entry: its
// key and whether it deletes the key (a tombstone: an empty or null
// value).
type RecordKey struct {
	Key    string
	HasKey bool
	// Tombstone: the record's value is empty (or null_value is set).
	Tombstone bool
}

// EntryRecordKeys returns the key of every record of a stored entry
// ([u32 metaSize][metadata][payload]), decompressing a compressed batch
// (at most maxBytes uncompressed). A record's key is its partition key
// (Pulsar compacts by it). Errors: ErrMalformed; an encrypted batch cannot
// be read (ErrMalformed too).
func EntryRecordKeys(entry []byte, maxBytes int) ([]RecordKey, error) {
	rawMeta, payload, err := SplitEntry(entry)
	if err != nil {
		return nil, err
	}
	md, err := ParseMetadata(rawMeta)
	if err != nil {
		return nil, err
	}
	if md.NumMessagesInBatch == nil {
		return []RecordKey{{Key: md.GetPartitionKey(), HasKey: md.PartitionKey != nil && !md.GetNullPartitionKey(),
			Tombstone: len(payload) == 0 || md.GetNullValue()}}, nil
	}
	n, err := EntryRecords(md)
	if err != nil {
		return nil, err
	}
	if len(md.GetEncryptionKeys()) > 0 {
		return nil, fmt.Errorf("%w: an encrypted batch", ErrMalformed)
	}
	if ct := md.GetCompression(); ct != pb.CompressionType_NONE {
		if payload, err = Decompress(ct, payload, int(md.GetUncompressedSize()), maxBytes); err != nil {
			return nil, err
		}
	}
	msgs, err := SplitBatch(payload, n)
	if err != nil {
		return nil, err
	}
	out := make([]RecordKey, len(msgs))
	for i, m := range msgs {
		sm, err := m.ParseMetadata()
		if err != nil {
			return nil, err
		}
		out[i] = RecordKey{Key: sm.GetPartitionKey(), HasKey: sm.PartitionKey != nil && !sm.GetNullPartitionKey(),
			Tombstone: len(m.Payload) == 0 || sm.GetNullValue()}
	}
	return out, nil
}

// SingleFromBatch returns a stored entry holding only message i of a batch
// entry, as if its producer had sent it alone: the batch's metadata with
// the message's own fields (key, ordering key, properties, event time,
// sequence id, null flags), no batch, uncompressed (at most maxBytes
// decompressed). Topic compaction stores a batch's surviving messages so.
// Errors: ErrMalformed (not a batch, i out of range, an encrypted batch).
func SingleFromBatch(entry []byte, i int, maxBytes int) ([]byte, error) {
	rawMeta, payload, err := SplitEntry(entry)
	if err != nil {
		return nil, err
	}
	md, err := ParseMetadata(rawMeta)
	if err != nil {
		return nil, err
	}
	n, err := EntryRecords(md)
	if err != nil {
		return nil, err
	}
	if md.NumMessagesInBatch == nil || i < 0 || i >= n || len(md.GetEncryptionKeys()) > 0 {
		return nil, fmt.Errorf("%w: message %d of an entry of %d records (batch %v, encrypted %v)", ErrMalformed, i, n, md.NumMessagesInBatch != nil, len(md.GetEncryptionKeys()) > 0)
	}
	if ct := md.GetCompression(); ct != pb.CompressionType_NONE {
		if payload, err = Decompress(ct, payload, int(md.GetUncompressedSize()), maxBytes); err != nil {
			return nil, err
		}
	}
	msgs, err := SplitBatch(payload, n)
	if err != nil {
		return nil, err
	}
	sm, err := msgs[i].ParseMetadata()
	if err != nil {
		return nil, err
	}
	out := proto.Clone(md).(*pb.MessageMetadata)
	out.NumMessagesInBatch, out.Compression, out.UncompressedSize = nil, nil, nil
	out.Properties = sm.GetProperties()
	out.PartitionKey, out.PartitionKeyB64Encoded = sm.PartitionKey, sm.PartitionKeyB64Encoded
	out.OrderingKey = sm.GetOrderingKey()
	out.EventTime = sm.EventTime
	if sm.SequenceId != nil {
		out.SequenceId = sm.SequenceId
	}
	out.NullValue, out.NullPartitionKey = sm.NullValue, sm.NullPartitionKey
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return AppendEntry(nil, raw, msgs[i].Payload)
}

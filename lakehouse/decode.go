package lakehouse

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// ErrCorruptEntry is returned by DecodeEntry, OpaqueEntry and RebuildEntry
// for bytes that are not a well-formed entry (or rows that do not form one).
// The wrapped message says what is wrong; protocol errors are wrapped too, so
// errors.Is(err, protocol.ErrCorruptCompressed) etc. still work. The
// compactor may keep such an entry with OpaqueEntry and report it.
var ErrCorruptEntry = errors.New("lakehouse: corrupt entry")

// Property is one message property. Order and duplicates are kept as the
// producer sent them.
type Property struct {
	Key, Value string
}

// Chunk describes one chunk of a chunked message (docs/table-schema.md).
type Chunk struct {
	UUID      string
	ChunkID   int32
	NumChunks int32
	TotalSize int32
}

// Message is one table row: one message of an entry, or an opaque entry.
// Field meanings are those of the columns in docs/table-schema.md.
// Byte slices may alias the decoded entry or file; callers that keep a
// Message beyond the entry's lifetime copy what they keep.
type Message struct {
	Offset     int64 // __offset
	Partition  int32 // __partition
	LedgerID   int64 // __ledger_id
	EntryID    int64 // __entry_id
	BatchIndex int32 // __batch_idx, -1 when not batched or opaque
	BatchSize  int32 // __batch_size

	Key            *string // __key, nil when absent
	KeyIsBase64    bool    // __key_is_base64
	NullKey        bool    // __null_key
	OrderingKey    []byte  // __ordering_key, nil when absent
	Payload        []byte  // __payload
	NullValue      bool    // __null_value
	Properties     []Property
	PublishTimeMs  int64   // __publish_time (ms since the Unix epoch)
	EventTimeMs    int64   // __event_time, 0 when absent
	ProducerName   string  // __producer_name
	SequenceID     int64   // __sequence_id
	SchemaVersion  []byte  // __schema_version, nil when absent
	ReplicatedFrom *string // __replicated_from, nil when absent

	Compression      pb.CompressionType // __compression (entry)
	UncompressedSize int64              // __uncompressed_size (entry)
	Opaque           bool               // __opaque
	Chunk            *Chunk             // __chunk_*, nil unless chunked

	// EntryMetadata is the entry's raw MessageMetadata, set on the entry's
	// first row only.
	EntryMetadata []byte
	// MessageMetadata is the raw SingleMessageMetadata, set only when its
	// canonical encoding from the fields above differs.
	MessageMetadata []byte
	// EntryPayload is the stored compressed payload, set on the first row
	// only when re-compression does not reproduce it.
	EntryPayload []byte
}

// DecodeEntry splits one stored log entry into its messages: it parses the
// metadata, decompresses (at most maxUncompressed bytes; ≤ 0 means
// protocol.DefaultMaxUncompressedSize) and unbatches. Encrypted and chunked
// entries come back as one opaque Message. Each row carries everything
// RebuildEntry needs to re-create e.Payload byte-for-byte (see
// docs/table-schema.md); DecodeEntry checks the canonical encodings against
// the stored bytes and keeps raw bytes only where they differ.
//
// e.Offset is the entry id; partition is the topic partition (-1 when not
// partitioned); ledger is the log generation. Errors wrap ErrCorruptEntry.
// It never panics on any input.
func DecodeEntry(e lakestream.Entry, partition int32, ledger int64, maxUncompressed int) ([]Message, error) {
	return DecodeEntryWith(e, partition, ledger, DecodeOptions{MaxUncompressedBytes: maxUncompressed})
}

// CompressedPolicy says what DecodeEntryWith keeps of a compressed entry
// payload that lakegate's encoder does not reproduce.
type CompressedPolicy int

const (
	// KeepIrreproducible (the default) keeps such a payload in
	// Message.EntryPayload, so RebuildEntry is byte-exact always. It costs
	// one re-compression per compressed entry at decode time, and storage
	// for entries from producers whose compressor differs from lakegate's
	// (e.g. libzstd in the Java client and in pulsar-client-go with cgo).
	KeepIrreproducible CompressedPolicy = iota
	// Recompress keeps nothing: RebuildEntry re-compresses with lakegate's
	// encoder. Metadata, batch layout and every message are still exact and
	// consumers decode the same messages, but the compressed bytes (and so
	// the entry's CRC) may differ from what the producer sent. No
	// re-compression at decode time.
	Recompress
)

// DecodeOptions configure DecodeEntryWith. The zero value gives the defaults.
type DecodeOptions struct {
	// MaxUncompressedBytes bounds one entry's decompressed batch; ≤ 0 means
	// protocol.DefaultMaxUncompressedSize (64 MiB).
	MaxUncompressedBytes int
	// Compressed is the policy for irreproducible compressed payloads.
	Compressed CompressedPolicy
}

// DecodeEntryWith is DecodeEntry with options.
func DecodeEntryWith(e lakestream.Entry, partition int32, ledger int64, opts DecodeOptions) ([]Message, error) {
	maxUncompressed := opts.MaxUncompressedBytes
	if maxUncompressed <= 0 {
		maxUncompressed = protocol.DefaultMaxUncompressedSize
	}
	rawMeta, payload, err := protocol.SplitEntry(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w at offset %d: %w", ErrCorruptEntry, e.Offset, err)
	}
	md, err := protocol.ParseMetadata(rawMeta)
	if err != nil {
		return nil, fmt.Errorf("%w at offset %d: %w", ErrCorruptEntry, e.Offset, err)
	}
	n, err := protocol.EntryRecords(md)
	if err != nil {
		return nil, fmt.Errorf("%w at offset %d: %w", ErrCorruptEntry, e.Offset, err)
	}
	if e.Records != 0 && int(e.Records) != n {
		return nil, fmt.Errorf("%w at offset %d: log says %d records, metadata %d", ErrCorruptEntry, e.Offset, e.Records, n)
	}
	base := entryMessage(md, rawMeta, e.Offset, partition, ledger, int32(n))
	if isOpaque(md) {
		base.Opaque = true
		base.Payload = payload
		return []Message{base}, nil
	}

	ct := md.GetCompression()
	batch := payload
	if ct != pb.CompressionType_NONE {
		batch, err = protocol.Decompress(ct, payload, int(md.GetUncompressedSize()), maxUncompressed)
		if err != nil {
			return nil, fmt.Errorf("%w at offset %d: %w", ErrCorruptEntry, e.Offset, err)
		}
	}

	var msgs []Message
	if md.NumMessagesInBatch == nil {
		m := base
		m.Payload = batch
		m.NullValue = md.GetNullValue()
		if md.PartitionKey != nil {
			k := md.GetPartitionKey()
			m.Key = &k
		}
		m.KeyIsBase64 = md.GetPartitionKeyB64Encoded()
		m.NullKey = md.GetNullPartitionKey()
		m.OrderingKey = md.OrderingKey
		m.EventTimeMs = int64(md.GetEventTime())
		m.Properties = properties(md.Properties)
		msgs = []Message{m}
	} else {
		parts, err := protocol.SplitBatch(batch, n)
		if err != nil {
			return nil, fmt.Errorf("%w at offset %d: %w", ErrCorruptEntry, e.Offset, err)
		}
		msgs = make([]Message, n)
		for i, p := range parts {
			s, err := p.ParseMetadata()
			if err != nil {
				return nil, fmt.Errorf("%w at offset %d, batch index %d: %w", ErrCorruptEntry, e.Offset, i, err)
			}
			m := base
			if i > 0 {
				m.EntryMetadata = nil
			}
			m.BatchIndex = int32(i)
			m.Offset = e.Offset + int64(i)
			m.Payload = p.Payload
			m.NullValue = s.GetNullValue()
			if s.PartitionKey != nil {
				k := s.GetPartitionKey()
				m.Key = &k
			}
			m.KeyIsBase64 = s.GetPartitionKeyB64Encoded()
			m.NullKey = s.GetNullPartitionKey()
			m.OrderingKey = s.OrderingKey
			m.EventTimeMs = int64(s.GetEventTime())
			if m.EventTimeMs == 0 {
				m.EventTimeMs = int64(md.GetEventTime())
			}
			m.Properties = properties(s.Properties)
			if s.SequenceId != nil {
				m.SequenceID = int64(s.GetSequenceId())
			} else {
				m.SequenceID = int64(md.GetSequenceId()) + int64(i)
			}
			canon, err := canonicalSingleMetadata(&m)
			if err != nil {
				return nil, fmt.Errorf("%w at offset %d, batch index %d: %w", ErrCorruptEntry, e.Offset, i, err)
			}
			if !bytes.Equal(canon, p.Metadata) {
				m.MessageMetadata = p.Metadata
			}
			msgs[i] = m
		}
	}

	if ct != pb.CompressionType_NONE && opts.Compressed == KeepIrreproducible {
		re, err := protocol.Compress(nil, ct, batch)
		if err != nil || !bytes.Equal(re, payload) {
			msgs[0].EntryPayload = payload
		}
	}
	return msgs, nil
}

// OpaqueEntry keeps an entry that DecodeEntry refused (or that the caller
// does not want split) as one opaque row. It needs only a well-formed
// [u32 metaSize][MessageMetadata] header; the metadata's fields fill the
// columns as far as it parses. Errors wrap ErrCorruptEntry.
func OpaqueEntry(e lakestream.Entry, partition int32, ledger int64) (Message, error) {
	rawMeta, payload, err := protocol.SplitEntry(e.Payload)
	if err != nil {
		return Message{}, fmt.Errorf("%w at offset %d: %w", ErrCorruptEntry, e.Offset, err)
	}
	md, err := protocol.ParseMetadata(rawMeta)
	if err != nil {
		// Keep the fields we can: none. The row still rebuilds exactly.
		md = &pb.MessageMetadata{}
	}
	records := e.Records
	if records <= 0 {
		records = 1
	}
	m := entryMessage(md, rawMeta, e.Offset, partition, ledger, records)
	m.Opaque = true
	m.Payload = payload
	return m, nil
}

func isOpaque(md *pb.MessageMetadata) bool {
	return len(md.EncryptionKeys) > 0 || md.GetNumChunksFromMsg() > 1
}

// entryMessage fills the entry-level fields shared by all rows of an entry.
func entryMessage(md *pb.MessageMetadata, rawMeta []byte, offset int64, partition int32, ledger int64, n int32) Message {
	m := Message{
		Offset:           offset,
		Partition:        partition,
		LedgerID:         ledger,
		EntryID:          offset,
		BatchIndex:       -1,
		BatchSize:        n,
		PublishTimeMs:    int64(md.GetPublishTime()),
		ProducerName:     md.GetProducerName(),
		SequenceID:       int64(md.GetSequenceId()),
		SchemaVersion:    md.SchemaVersion,
		Compression:      md.GetCompression(),
		UncompressedSize: int64(md.GetUncompressedSize()),
		EntryMetadata:    rawMeta,
	}
	if md.ReplicatedFrom != nil {
		r := md.GetReplicatedFrom()
		m.ReplicatedFrom = &r
	}
	if md.Uuid != nil || md.ChunkId != nil || md.NumChunksFromMsg != nil || md.TotalChunkMsgSize != nil {
		m.Chunk = &Chunk{
			UUID:      md.GetUuid(),
			ChunkID:   md.GetChunkId(),
			NumChunks: md.GetNumChunksFromMsg(),
			TotalSize: md.GetTotalChunkMsgSize(),
		}
	}
	return m
}

func properties(kvs []*pb.KeyValue) []Property {
	if len(kvs) == 0 {
		return nil
	}
	ps := make([]Property, len(kvs))
	for i, kv := range kvs {
		ps[i] = Property{Key: kv.GetKey(), Value: kv.GetValue()}
	}
	return ps
}

// canonicalSingleMetadata is the encoding RebuildEntry uses for a batched
// message without raw MessageMetadata (docs/table-schema.md, "Rebuilding").
func canonicalSingleMetadata(m *Message) ([]byte, error) {
	s := &pb.SingleMessageMetadata{
		PayloadSize: proto.Int32(int32(len(m.Payload))),
		SequenceId:  proto.Uint64(uint64(m.SequenceID)),
	}
	for _, p := range m.Properties {
		s.Properties = append(s.Properties, &pb.KeyValue{Key: proto.String(p.Key), Value: proto.String(p.Value)})
	}
	if m.Key != nil {
		s.PartitionKey = proto.String(*m.Key)
	}
	if m.EventTimeMs != 0 {
		s.EventTime = proto.Uint64(uint64(m.EventTimeMs))
	}
	if m.KeyIsBase64 {
		s.PartitionKeyB64Encoded = proto.Bool(true)
	}
	if m.OrderingKey != nil {
		s.OrderingKey = m.OrderingKey
	}
	if m.NullValue {
		s.NullValue = proto.Bool(true)
	}
	if m.NullKey {
		s.NullPartitionKey = proto.Bool(true)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("single message metadata: %w", err)
	}
	return b, nil
}

// RebuildEntry re-creates the stored entry bytes from the rows of one entry,
// given in batch order (all N rows of a batch, or the single row of a
// non-batched or opaque entry). The result is a new slice. Errors wrap
// ErrCorruptEntry when the rows do not form one complete entry.
func RebuildEntry(msgs []Message) ([]byte, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no rows", ErrCorruptEntry)
	}
	first := &msgs[0]
	if first.EntryMetadata == nil {
		return nil, fmt.Errorf("%w: entry %d: first row (batch index %d) has no entry metadata", ErrCorruptEntry, first.EntryID, first.BatchIndex)
	}
	if first.Opaque {
		if len(msgs) != 1 {
			return nil, fmt.Errorf("%w: entry %d: opaque entry with %d rows", ErrCorruptEntry, first.EntryID, len(msgs))
		}
		return protocol.AppendEntry(nil, first.EntryMetadata, first.Payload)
	}
	md, err := protocol.ParseMetadata(first.EntryMetadata)
	if err != nil {
		return nil, fmt.Errorf("%w: entry %d: %w", ErrCorruptEntry, first.EntryID, err)
	}
	var batch []byte
	if md.NumMessagesInBatch == nil {
		if len(msgs) != 1 {
			return nil, fmt.Errorf("%w: entry %d: non-batched entry with %d rows", ErrCorruptEntry, first.EntryID, len(msgs))
		}
		batch = first.Payload
	} else {
		if int(md.GetNumMessagesInBatch()) != len(msgs) {
			return nil, fmt.Errorf("%w: entry %d: batch of %d messages, %d rows", ErrCorruptEntry, first.EntryID, md.GetNumMessagesInBatch(), len(msgs))
		}
		size := 0
		for i := range msgs {
			size += 4 + len(msgs[i].MessageMetadata) + 32 + len(msgs[i].Payload)
		}
		batch = make([]byte, 0, size)
		for i := range msgs {
			m := &msgs[i]
			if m.EntryID != first.EntryID || int(m.BatchIndex) != i {
				return nil, fmt.Errorf("%w: entry %d: row %d is (entry %d, batch index %d)", ErrCorruptEntry, first.EntryID, i, m.EntryID, m.BatchIndex)
			}
			meta := m.MessageMetadata
			if meta == nil {
				if meta, err = canonicalSingleMetadata(m); err != nil {
					return nil, fmt.Errorf("%w: entry %d: %w", ErrCorruptEntry, first.EntryID, err)
				}
			}
			if batch, err = protocol.AppendBatchMessageRaw(batch, meta, m.Payload); err != nil {
				return nil, fmt.Errorf("%w: entry %d: %w", ErrCorruptEntry, first.EntryID, err)
			}
		}
	}
	payload := batch
	if ct := md.GetCompression(); ct != pb.CompressionType_NONE {
		if first.EntryPayload != nil {
			payload = first.EntryPayload
		} else if payload, err = protocol.Compress(nil, ct, batch); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrCorruptEntry, first.EntryID, err)
		}
	}
	return protocol.AppendEntry(make([]byte, 0, 4+len(first.EntryMetadata)+len(payload)), first.EntryMetadata, payload)
}

// SplitEntries groups rows (in offset order) into the row slices of their
// entries, for RebuildEntry. The result aliases msgs.
func SplitEntries(msgs []Message) [][]Message {
	var out [][]Message
	for i := 0; i < len(msgs); {
		j := i + 1
		for j < len(msgs) && msgs[j].EntryID == msgs[i].EntryID && msgs[j].LedgerID == msgs[i].LedgerID {
			j++
		}
		out = append(out, msgs[i:j:j])
		i = j
	}
	return out
}

package kafka

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

var (
	// ErrMalformed: bytes that are not a valid record batch or entry.
	ErrMalformed = errors.New("kafka: malformed")
	// ErrUnsupported: a valid batch lakegate does not take (an old magic,
	// an unknown codec, a transactional or control batch).
	ErrUnsupported = errors.New("kafka: unsupported")
	// ErrTooLarge: a batch or entry larger, decompressed, than allowed.
	ErrTooLarge = errors.New("kafka: too large")
)

// b64HeaderPrefix marks a property holding a Kafka header whose value is
// not valid UTF-8: its value is the base64 of the header's bytes
// (docs/kafka.md, "Produce").
const b64HeaderPrefix = "__kafka_b64."

// batchHeaderBytes is the fixed part of a RecordBatch v2, up to and
// including the record count; crcFrom is where the CRC's coverage starts
// (the attributes).
const (
	batchHeaderBytes = 61
	crcFrom          = 21
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch attribute bits (RecordBatch v2).
const (
	attrCodec         = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// SplitBatches splits the records of a produce request's partition into its
// record batches (each one whole RecordBatch, aliasing records).
func SplitBatches(records []byte) ([][]byte, error) {
	var out [][]byte
	for len(records) > 0 {
		if len(records) < 12 {
			return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(records))
		}
		n := int64(int32(binary.BigEndian.Uint32(records[8:])))
		if n < batchHeaderBytes-12 || n > int64(len(records)-12) {
			return nil, fmt.Errorf("%w: batch length %d with %d bytes left", ErrMalformed, n, len(records)-12)
		}
		out = append(out, records[:12+n:12+n])
		records = records[12+n:]
	}
	return out, nil
}

// EntryOptions are what EntryFromBatch needs beyond the batch.
type EntryOptions struct {
	// MaxBytes bounds the batch's records decompressed, and the entry.
	MaxBytes int
	// PublishMs is the entry's publish_time (the append time).
	PublishMs int64
	// ProducerName names the entry's producer when the batch has no
	// producer id (an idempotent producer's batch is "kafka-<id>").
	ProducerName string
	// Transactional: the batch comes in a transactional Produce and must
	// be marked transactional (its flag is not kept: the entry is staged
	// instead); without it a transactional batch is refused.
	Transactional bool
}

// EntryFromBatch converts one RecordBatch v2 (as SplitBatches returns it)
// into one Pulsar batch entry of the same records, in order
// (docs/kafka.md, "Produce"). It checks the batch's CRC and every count
// and length against the bytes there are. records is the number of records
// (the offsets the entry occupies). An idempotent producer's batch names
// its producer "kafka-<producer id>" with its base sequence as the entry's
// sequence_id and the last one as highest_sequence_id.
func EntryFromBatch(batch []byte, o EntryOptions) (entry []byte, records int, err error) {
	if len(batch) < batchHeaderBytes {
		return nil, 0, fmt.Errorf("%w: batch of %d bytes", ErrMalformed, len(batch))
	}
	if magic := int8(batch[16]); magic != 2 {
		return nil, 0, fmt.Errorf("%w: record batch magic %d (only 2)", ErrUnsupported, magic)
	}
	if got, want := crc32.Checksum(batch[crcFrom:], castagnoli), binary.BigEndian.Uint32(batch[17:]); got != want {
		return nil, 0, fmt.Errorf("%w: batch CRC %08x, computed %08x", ErrMalformed, want, got)
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(batch); err != nil {
		return nil, 0, fmt.Errorf("%w: record batch: %v", ErrMalformed, err)
	}
	switch {
	case b.Attributes&attrControl != 0:
		return nil, 0, fmt.Errorf("%w: a control batch from a producer", ErrUnsupported)
	case b.Attributes&attrTransactional != 0 && !o.Transactional:
		return nil, 0, fmt.Errorf("%w: a transactional batch outside a transactional produce", kerr.InvalidTxnState)
	case b.Attributes&attrTransactional == 0 && o.Transactional:
		return nil, 0, fmt.Errorf("%w: a transactional produce of a batch not marked transactional", kerr.InvalidTxnState)
	}
	n := int(b.NumRecords)
	if n < 1 || n > protocol.MaxBatchMessages || int(b.LastOffsetDelta) != n-1 {
		return nil, 0, fmt.Errorf("%w: %d records, last offset delta %d", ErrMalformed, n, b.LastOffsetDelta)
	}
	codec := int(b.Attributes & attrCodec)
	raw, err := decompress(codec, b.Records, o.MaxBytes)
	if err != nil {
		return nil, 0, err
	}
	payload := make([]byte, 0, len(raw)+n*32) // the records and their metadata
	var (
		r       kafkaRecord
		scratch []byte
	)
	for i := range n {
		if raw, err = parseRecord(raw, &r); err != nil {
			return nil, 0, fmt.Errorf("%w: record %d: %v", ErrMalformed, i, err)
		}
		if int(r.offsetDelta) != i {
			return nil, 0, fmt.Errorf("%w: record %d has offset delta %d", ErrMalformed, i, r.offsetDelta)
		}
		ts := b.FirstTimestamp + r.tsDelta
		if b.Attributes&attrLogAppendTime != 0 {
			ts = b.MaxTimestamp
		}
		if payload, scratch, err = appendSingle(payload, scratch, &r, ts); err != nil {
			return nil, 0, fmt.Errorf("record %d: %w", i, err)
		}
		if len(payload) > o.MaxBytes {
			return nil, 0, fmt.Errorf("%w: the batch's records come to more than %d bytes", ErrTooLarge, o.MaxBytes)
		}
	}
	if len(raw) != 0 {
		return nil, 0, fmt.Errorf("%w: %d bytes after the last record", ErrMalformed, len(raw))
	}
	md := &pb.MessageMetadata{
		ProducerName:       proto.String(o.ProducerName),
		SequenceId:         proto.Uint64(0),
		PublishTime:        proto.Uint64(uint64(max(o.PublishMs, 0))),
		NumMessagesInBatch: proto.Int32(int32(n)),
	}
	if b.ProducerID >= 0 {
		md.ProducerName = proto.String(idempotentName(b.ProducerID, b.ProducerEpoch))
		if b.FirstSequence >= 0 {
			md.SequenceId = proto.Uint64(uint64(b.FirstSequence))
			md.HighestSequenceId = proto.Uint64(uint64(b.FirstSequence) + uint64(n) - 1)
		}
	}
	body := payload
	if ct := pulsarCodec(codec); ct != pb.CompressionType_NONE {
		if body, err = protocol.Compress(nil, ct, payload); err != nil {
			return nil, 0, err
		}
		md.Compression = ct.Enum()
		md.UncompressedSize = proto.Uint32(uint32(len(payload)))
	}
	rawMeta, err := protocol.MarshalMetadata(md)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: message metadata: %v", ErrMalformed, err)
	}
	entry, err = protocol.AppendEntry(nil, rawMeta, body)
	return entry, n, err
}

// AppendBatch appends to dst the RecordBatch v2 of a stored entry whose
// first record is at offset first (docs/kafka.md, "Fetch"), uncompressed.
// maxBytes bounds the entry's payload decompressed. An encrypted entry
// (which the node cannot read) is one record holding the stored payload,
// with the header "__pulsar_opaque".
func AppendBatch(dst []byte, first int64, entry []byte, maxBytes int) ([]byte, error) {
	rawMeta, body, err := protocol.SplitEntry(entry)
	if err != nil {
		return dst, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	md, err := protocol.ParseMetadata(rawMeta)
	if err != nil {
		return dst, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	entryTime := int64(md.GetEventTime())
	if entryTime == 0 {
		entryTime = int64(md.GetPublishTime())
	}
	type rec struct {
		key, value []byte
		headers    [][]byte // alternate keys and values
		ts         int64
	}
	var recs []rec
	switch {
	case len(md.GetEncryptionKeys()) > 0:
		n, err := protocol.EntryRecords(md)
		if err != nil {
			return dst, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if n != 1 {
			// The offsets of an encrypted batch's records cannot be told
			// apart: one record would leave a gap the client reads as
			// compaction. Refused rather than misnumbered.
			return dst, fmt.Errorf("%w: an encrypted batch of %d records", ErrUnsupported, n)
		}
		recs = append(recs, rec{value: body, ts: entryTime, headers: [][]byte{[]byte("__pulsar_opaque"), []byte("encrypted")}})
	case md.NumMessagesInBatch == nil:
		raw, err := protocol.Decompress(md.GetCompression(), body, int(md.GetUncompressedSize()), maxBytes)
		if err != nil {
			return dst, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		r := rec{value: raw, ts: entryTime}
		if md.GetNullValue() {
			r.value = nil
		}
		r.key = keyOf(md.PartitionKey, md.GetPartitionKeyB64Encoded(), md.GetNullPartitionKey())
		for _, kv := range md.GetProperties() {
			k, v := headerOf([]byte(kv.GetKey()), []byte(kv.GetValue()))
			r.headers = append(r.headers, k, v)
		}
		recs = append(recs, r)
	default:
		n, err := protocol.EntryRecords(md)
		if err != nil {
			return dst, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		raw, err := protocol.Decompress(md.GetCompression(), body, int(md.GetUncompressedSize()), maxBytes)
		if err != nil {
			return dst, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		msgs, err := protocol.SplitBatch(raw, n)
		if err != nil {
			return dst, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		recs = make([]rec, 0, len(msgs))
		var sm singleMessage
		for _, m := range msgs {
			if err := parseSingle(m.Metadata, &sm); err != nil {
				return dst, fmt.Errorf("%w: %v", ErrMalformed, err)
			}
			r := rec{value: m.Payload, ts: entryTime}
			if sm.eventTime > 0 {
				r.ts = sm.eventTime
			}
			if sm.nullValue {
				r.value = nil
			} else if r.value == nil {
				r.value = []byte{}
			}
			r.key = recordKey(sm.key, sm.hasKey, sm.keyB64, sm.nullKey)
			if len(sm.props) > 0 {
				r.headers = make([][]byte, 0, len(sm.props))
				for i := 0; i < len(sm.props); i += 2 {
					k, v := headerOf(sm.props[i], sm.props[i+1])
					r.headers = append(r.headers, k, v)
				}
			}
			recs = append(recs, r)
		}
	}
	firstTs, maxTs := recs[0].ts, recs[0].ts
	for _, r := range recs {
		firstTs, maxTs = min(firstTs, r.ts), max(maxTs, r.ts)
	}
	size := 0
	for _, r := range recs {
		size += len(r.key) + len(r.value) + 24
		for _, h := range r.headers {
			size += len(h) + 5
		}
	}
	body2 := make([]byte, 0, size)
	for i, r := range recs {
		body2 = appendRecord(body2, r.ts-firstTs, int32(i), r.key, r.value, r.headers)
	}
	b := kmsg.RecordBatch{
		FirstOffset:     first,
		Magic:           2,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  firstTs,
		MaxTimestamp:    maxTs,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(recs)),
		Records:         body2,
	}
	if pid, epoch, ok := parseIdempotentName(md.GetProducerName()); ok && md.HighestSequenceId != nil && md.GetSequenceId() <= math.MaxInt32 {
		b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, epoch, int32(md.GetSequenceId())
	}
	if len(body2) > math.MaxInt32-batchHeaderBytes {
		return dst, fmt.Errorf("%w: batch of %d bytes", ErrTooLarge, len(body2))
	}
	b.Length = int32(batchHeaderBytes - 12 + len(body2))
	start := len(dst)
	dst = b.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start+17:], crc32.Checksum(dst[start+crcFrom:], castagnoli))
	return dst, nil
}

// keyOf is a record's key from Pulsar's key fields.
func keyOf(key *string, b64, null bool) []byte {
	if key == nil || null {
		return nil
	}
	if b64 {
		if k, err := base64.StdEncoding.DecodeString(*key); err == nil {
			return k
		}
	}
	return []byte(*key)
}

// idempotentName is the Pulsar producer name of an idempotent Kafka
// producer's batches: "kafka-<producer id>", with ".<epoch>" when the
// epoch is not 0 — a new epoch starts its sequences at 0 again, so it is
// a new producer to the partition's deduplication.
func idempotentName(pid int64, epoch int16) string {
	if epoch == 0 {
		return "kafka-" + strconv.FormatInt(pid, 10)
	}
	return "kafka-" + strconv.FormatInt(pid, 10) + "." + strconv.Itoa(int(epoch))
}

// parseIdempotentName reverses idempotentName.
func parseIdempotentName(name string) (pid int64, epoch int16, ok bool) {
	rest, ok := strings.CutPrefix(name, "kafka-")
	if !ok {
		return 0, 0, false
	}
	id, ep, dotted := strings.Cut(rest, ".")
	pid, err := strconv.ParseInt(id, 10, 64)
	if err != nil || pid < 0 {
		return 0, 0, false
	}
	if dotted {
		e, err := strconv.ParseInt(ep, 10, 16)
		if err != nil || e <= 0 {
			return 0, 0, false
		}
		epoch = int16(e)
	}
	return pid, epoch, true
}

// recordTimes are the Kafka timestamps of a stored entry's records, in
// order (as a Fetch answers them).
func recordTimes(entry []byte, maxBytes int) ([]int64, error) {
	batch, err := AppendBatch(nil, 0, entry, maxBytes)
	if err != nil {
		return nil, err
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(batch); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	raw := b.Records
	out := make([]int64, 0, b.NumRecords)
	for range b.NumRecords {
		size, k := binary.Varint(raw)
		if k <= 0 || size < 0 || size > int64(len(raw)-k) {
			return nil, fmt.Errorf("%w: record length", ErrMalformed)
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:k+int(size)]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		raw = raw[k+int(size):]
		out = append(out, b.FirstTimestamp+r.TimestampDelta64)
	}
	return out, nil
}

// batchPublishMs is the publish time of a batch's entry: its records'
// largest timestamp (the producer's clock, as a Pulsar producer's publish
// time is), or now for a LogAppendTime batch or one without timestamps.
func batchPublishMs(batch []byte, now int64) int64 {
	if len(batch) < batchHeaderBytes || binary.BigEndian.Uint16(batch[21:])&attrLogAppendTime != 0 {
		return now
	}
	if ts := int64(binary.BigEndian.Uint64(batch[35:])); ts > 0 {
		return ts
	}
	return now
}

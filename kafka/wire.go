package kafka

// The per-record halves of the conversion (records.go), written without
// a protobuf message or a kmsg record per record: a Kafka record is read
// in place and its SingleMessageMetadata written with protowire straight
// into the entry's payload (produce); a SingleMessageMetadata is read in
// place and the Kafka record written straight into the batch (fetch).
// Keys, values and headers alias the bytes they come from.

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// kafkaRecord is one record of a RecordBatch v2, aliasing its bytes. A nil
// key or value is null.
type kafkaRecord struct {
	tsDelta     int64
	offsetDelta int32
	key, value  []byte
	// headers alternate keys and values (a nil value: null).
	headers [][]byte
}

// errRecord: a record's bytes do not parse.
var errRecord = errors.New("record")

// readVarint reads a zigzag varint; ok false when b is too short or it
// overflows.
func readVarint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

// readBytes reads a varint length (−1: null) and that many bytes.
func readBytes(b []byte) ([]byte, []byte, bool) {
	n, b, ok := readVarint(b)
	switch {
	case !ok || n < -1 || n > int64(len(b)):
		return nil, b, false
	case n == -1:
		return nil, b, true
	}
	return b[:n:n], b[n:], true
}

// parseRecord reads one record (length prefix included) from raw into r
// (reusing r.headers) and returns the bytes after it.
func parseRecord(raw []byte, r *kafkaRecord) ([]byte, error) {
	size, b, ok := readVarint(raw)
	if !ok || size < 0 || size > int64(len(b)) {
		return nil, fmt.Errorf("%w: length", errRecord)
	}
	rest := b[size:]
	b = b[:size]
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: no attributes", errRecord)
	}
	b = b[1:] // attributes: unused
	if r.tsDelta, b, ok = readVarint(b); !ok {
		return nil, fmt.Errorf("%w: timestamp delta", errRecord)
	}
	od, b, ok := readVarint(b)
	if !ok || od < math.MinInt32 || od > math.MaxInt32 {
		return nil, fmt.Errorf("%w: offset delta", errRecord)
	}
	r.offsetDelta = int32(od)
	if r.key, b, ok = readBytes(b); !ok {
		return nil, fmt.Errorf("%w: key", errRecord)
	}
	if r.value, b, ok = readBytes(b); !ok {
		return nil, fmt.Errorf("%w: value", errRecord)
	}
	n, b, ok := readVarint(b)
	if !ok || n < 0 || n > int64(len(b)) { // a header takes at least a byte
		return nil, fmt.Errorf("%w: header count", errRecord)
	}
	r.headers = r.headers[:0]
	for range n {
		var k, v []byte
		if k, b, ok = readBytes(b); !ok || k == nil {
			return nil, fmt.Errorf("%w: header key", errRecord)
		}
		if v, b, ok = readBytes(b); !ok {
			return nil, fmt.Errorf("%w: header value", errRecord)
		}
		r.headers = append(r.headers, k, v)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after its headers", errRecord, len(b))
	}
	return rest, nil
}

// SingleMessageMetadata field numbers (PulsarApi.proto).
const (
	smProperties      protowire.Number = 1
	smPartitionKey    protowire.Number = 2
	smPayloadSize     protowire.Number = 3
	smEventTime       protowire.Number = 5
	smKeyB64          protowire.Number = 6
	smNullValue       protowire.Number = 9
	smNullPartitonKey protowire.Number = 10
	kvKey             protowire.Number = 1
	kvValue           protowire.Number = 2
)

// appendSingle appends one batch message of a Kafka record to a Pulsar
// batch payload — [u32 size][SingleMessageMetadata][value] — with the
// record's timestamp ts (docs/kafka.md, "Produce"). scratch is reused for
// the metadata and returned.
func appendSingle(dst, scratch []byte, r *kafkaRecord, ts int64) ([]byte, []byte, error) {
	m := scratch[:0]
	for i := 0; i < len(r.headers); i += 2 {
		k, v := r.headers[i], r.headers[i+1]
		if !utf8.Valid(k) {
			return dst, m, fmt.Errorf("%w: a header key that is not UTF-8", ErrMalformed)
		}
		var kvLen int
		b64 := !utf8.Valid(v)
		if b64 {
			kl := len(b64HeaderPrefix) + len(k)
			vl := base64.StdEncoding.EncodedLen(len(v))
			kvLen = protowire.SizeTag(kvKey) + protowire.SizeBytes(kl) + protowire.SizeTag(kvValue) + protowire.SizeBytes(vl)
			m = protowire.AppendTag(m, smProperties, protowire.BytesType)
			m = protowire.AppendVarint(m, uint64(kvLen))
			m = protowire.AppendTag(m, kvKey, protowire.BytesType)
			m = protowire.AppendVarint(m, uint64(kl))
			m = append(append(m, b64HeaderPrefix...), k...)
			m = protowire.AppendTag(m, kvValue, protowire.BytesType)
			m = protowire.AppendVarint(m, uint64(vl))
			m = base64.StdEncoding.AppendEncode(m, v)
			continue
		}
		kvLen = protowire.SizeTag(kvKey) + protowire.SizeBytes(len(k)) + protowire.SizeTag(kvValue) + protowire.SizeBytes(len(v))
		m = protowire.AppendTag(m, smProperties, protowire.BytesType)
		m = protowire.AppendVarint(m, uint64(kvLen))
		m = protowire.AppendTag(m, kvKey, protowire.BytesType)
		m = protowire.AppendBytes(m, k)
		m = protowire.AppendTag(m, kvValue, protowire.BytesType)
		m = protowire.AppendBytes(m, v)
	}
	keyB64 := false
	if r.key != nil {
		m = protowire.AppendTag(m, smPartitionKey, protowire.BytesType)
		if utf8.Valid(r.key) {
			m = protowire.AppendBytes(m, r.key)
		} else {
			keyB64 = true
			m = protowire.AppendVarint(m, uint64(base64.StdEncoding.EncodedLen(len(r.key))))
			m = base64.StdEncoding.AppendEncode(m, r.key)
		}
	}
	if len(r.value) > math.MaxInt32 {
		return dst, m, fmt.Errorf("%w: a value of %d bytes", ErrTooLarge, len(r.value))
	}
	m = protowire.AppendTag(m, smPayloadSize, protowire.VarintType)
	m = protowire.AppendVarint(m, uint64(int64(len(r.value)))) // int32: as proto encodes it
	if ts > 0 {
		m = protowire.AppendTag(m, smEventTime, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(ts))
	}
	if keyB64 {
		m = protowire.AppendTag(m, smKeyB64, protowire.VarintType)
		m = protowire.AppendVarint(m, 1)
	}
	if r.value == nil {
		m = protowire.AppendTag(m, smNullValue, protowire.VarintType)
		m = protowire.AppendVarint(m, 1)
	}
	if r.key == nil {
		m = protowire.AppendTag(m, smNullPartitonKey, protowire.VarintType)
		m = protowire.AppendVarint(m, 1)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m)))
	dst = append(dst, m...)
	return append(dst, r.value...), m, nil
}

// singleMessage is what a fetch needs of one batch message's
// SingleMessageMetadata, aliasing its bytes.
type singleMessage struct {
	key                []byte
	hasKey, keyB64     bool
	nullKey, nullValue bool
	eventTime          int64
	props              [][]byte // alternate keys and values
}

// parseSingle reads a SingleMessageMetadata in place (reusing sm.props).
func parseSingle(b []byte, sm *singleMessage) error {
	props := sm.props[:0]
	*sm = singleMessage{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == smProperties && typ == protowire.BytesType:
			kv, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			var k, v []byte
			for len(kv) > 0 {
				num, typ, n := protowire.ConsumeTag(kv)
				if n < 0 {
					return protowire.ParseError(n)
				}
				kv = kv[n:]
				if (num == kvKey || num == kvValue) && typ == protowire.BytesType {
					x, n := protowire.ConsumeBytes(kv)
					if n < 0 {
						return protowire.ParseError(n)
					}
					if num == kvKey {
						k = x
					} else {
						v = x
					}
					kv = kv[n:]
					continue
				}
				if n = protowire.ConsumeFieldValue(num, typ, kv); n < 0 {
					return protowire.ParseError(n)
				}
				kv = kv[n:]
			}
			if v == nil {
				v = []byte{}
			}
			props = append(props, k, v)
		case num == smPartitionKey && typ == protowire.BytesType:
			k, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			sm.key, sm.hasKey = k, true
			b = b[n:]
		case (num == smEventTime || num == smKeyB64 || num == smNullValue || num == smNullPartitonKey) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			switch num {
			case smEventTime:
				sm.eventTime = int64(v)
			case smKeyB64:
				sm.keyB64 = v != 0
			case smNullValue:
				sm.nullValue = v != 0
			case smNullPartitonKey:
				sm.nullKey = v != 0
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	sm.props = props
	return nil
}

// recordKey is a record's key from Pulsar's key fields (nil: null).
func recordKey(key []byte, has, b64, null bool) []byte {
	if !has || null {
		return nil
	}
	if b64 {
		if k, err := base64.StdEncoding.AppendDecode(nil, key); err == nil {
			return k
		}
	}
	if key == nil {
		return []byte{}
	}
	return key
}

// headerOf turns a Pulsar property into a Kafka header (a
// "__kafka_b64." key: its value decoded back).
func headerOf(k, v []byte) ([]byte, []byte) {
	if len(k) > len(b64HeaderPrefix) && string(k[:len(b64HeaderPrefix)]) == b64HeaderPrefix {
		if d, err := base64.StdEncoding.AppendDecode(nil, v); err == nil {
			return k[len(b64HeaderPrefix):], d
		}
	}
	return k, v
}

// appendVarBytes appends a varint length and b (nil: length −1).
func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

// varBytesSize is appendVarBytes's size.
func varBytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintSize(int64(len(b))) + len(b)
}

// varintSize is the size of a zigzag varint.
func varintSize(v int64) int {
	return protowire.SizeVarint(uint64(v<<1) ^ uint64(v>>63))
}

// appendRecord appends one Kafka record (length prefix included).
// headers alternate keys and values.
func appendRecord(dst []byte, tsDelta int64, offsetDelta int32, key, value []byte, headers [][]byte) []byte {
	size := 1 + varintSize(tsDelta) + varintSize(int64(offsetDelta)) + varBytesSize(key) + varBytesSize(value) + varintSize(int64(len(headers)/2))
	for _, h := range headers {
		size += varBytesSize(h)
	}
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendVarBytes(dst, key)
	dst = appendVarBytes(dst, value)
	dst = binary.AppendVarint(dst, int64(len(headers)/2))
	for _, h := range headers {
		dst = appendVarBytes(dst, h)
	}
	return dst
}

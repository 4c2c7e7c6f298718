package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// testRecord is what a producer sends and a consumer must read back.
type testRecord struct {
	key, value []byte
	headers    []kmsg.Header
	ts         int64
}

var sample = []testRecord{
	{key: []byte("order-1"), value: []byte(`{"id":1}`), ts: 1_700_000_000_000,
		headers: []kmsg.Header{{Key: "trace", Value: []byte("abc")}, {Key: "bin", Value: []byte{0xff, 0x00, 0xfe}}, {Key: "trace", Value: []byte("dup")}}},
	{key: nil, value: []byte("no key"), ts: 1_700_000_000_005},
	{key: []byte{0xc3, 0x28, 0x00}, value: nil, ts: 1_700_000_000_003}, // a binary key; a tombstone
	{key: []byte{}, value: []byte{}, ts: 1_700_000_000_010},            // empty key and value
}

// compressRecords compresses a batch's records region with a Kafka codec
// ("xerial": snappy in the Java client's framing).
func compressRecords(t testing.TB, codec string, raw []byte) ([]byte, int16) {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case "none":
		return raw, codecNone
	case "gzip":
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		w.Close()
		return buf.Bytes(), codecGzip
	case "snappy":
		return snappy.Encode(nil, raw), codecSnappy
	case "xerial":
		out := append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
		for len(raw) > 0 { // blocks of 7 bytes, to cross block boundaries
			n := min(len(raw), 7)
			blk := snappy.Encode(nil, raw[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
			out = append(out, blk...)
			raw = raw[n:]
		}
		return out, codecSnappy
	case "lz4":
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		w.Close()
		return buf.Bytes(), codecLZ4
	case "zstd":
		enc, _ := zstd.NewWriter(nil)
		return enc.EncodeAll(raw, nil), codecZstd
	}
	t.Fatalf("codec %q", codec)
	return nil, 0
}

// makeBatch encodes recs as one RecordBatch v2 the way a producer does.
func makeBatch(t testing.TB, codec string, recs []testRecord, producerID int64, seq int32) []byte {
	t.Helper()
	var raw []byte
	first := recs[0].ts
	for _, r := range recs {
		first = min(first, r.ts)
	}
	maxTs := first
	for i, r := range recs {
		maxTs = max(maxTs, r.ts)
		kr := kmsg.Record{TimestampDelta64: r.ts - first, OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	body, attrs := compressRecords(t, codec, raw)
	b := kmsg.RecordBatch{Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: first, MaxTimestamp: maxTs,
		ProducerID: producerID, ProducerEpoch: 0, FirstSequence: seq, NumRecords: int32(len(recs)), Records: body}
	b.Length = int32(batchHeaderBytes - 12 + len(body))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[crcFrom:], castagnoli))
	return out
}

// readBatch decodes a RecordBatch v2 as a consumer does, checking its CRC.
func readBatch(t testing.TB, batch []byte) (kmsg.RecordBatch, []testRecord) {
	t.Helper()
	if got, want := crc32.Checksum(batch[crcFrom:], castagnoli), binary.BigEndian.Uint32(batch[17:]); got != want {
		t.Fatalf("batch CRC %08x, computed %08x", want, got)
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(batch); err != nil {
		t.Fatal(err)
	}
	if int(b.Length) != len(batch)-12 {
		t.Fatalf("batch length field %d, %d bytes follow it", b.Length, len(batch)-12)
	}
	raw, err := decompress(int(b.Attributes&attrCodec), b.Records, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out []testRecord
	for range b.NumRecords {
		size, k := binary.Varint(raw)
		var r kmsg.Record
		if err := r.ReadFrom(raw[:k+int(size)]); err != nil {
			t.Fatal(err)
		}
		raw = raw[k+int(size):]
		out = append(out, testRecord{key: r.Key, value: r.Value, headers: r.Headers, ts: b.FirstTimestamp + r.TimestampDelta64})
	}
	if len(raw) != 0 {
		t.Fatalf("%d bytes after the records", len(raw))
	}
	return b, out
}

func sameRecords(t *testing.T, got, want []testRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if (g.key == nil) != (w.key == nil) || !bytes.Equal(g.key, w.key) || (g.value == nil) != (w.value == nil) ||
			!bytes.Equal(g.value, w.value) || g.ts != w.ts || len(g.headers) != len(w.headers) {
			t.Fatalf("record %d: %+v, want %+v", i, g, w)
		}
		for j := range w.headers {
			if g.headers[j].Key != w.headers[j].Key || !bytes.Equal(g.headers[j].Value, w.headers[j].Value) {
				t.Fatalf("record %d header %d: %q=%q, want %q=%q", i, j, g.headers[j].Key, g.headers[j].Value, w.headers[j].Key, w.headers[j].Value)
			}
		}
	}
}

// A Kafka batch becomes one Pulsar batch entry of its records, and that
// entry reads back as the same records, whatever the producer's codec.
func TestBatchEntryRoundTrip(t *testing.T) {
	for _, codec := range []string{"none", "gzip", "snappy", "xerial", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			batch := makeBatch(t, codec, sample, -1, -1)
			entry, n, err := EntryFromBatch(batch, EntryOptions{MaxBytes: 1 << 20, PublishMs: 1_700_000_001_000, ProducerName: "kafka-client"})
			if err != nil {
				t.Fatal(err)
			}
			if n != len(sample) {
				t.Fatalf("%d records, want %d", n, len(sample))
			}
			rawMeta, _, err := protocol.SplitEntry(entry)
			if err != nil {
				t.Fatal(err)
			}
			md, err := protocol.ParseMetadata(rawMeta)
			if err != nil {
				t.Fatal(err)
			}
			if md.GetNumMessagesInBatch() != int32(len(sample)) || md.GetProducerName() != "kafka-client" || md.GetPublishTime() != 1_700_000_001_000 {
				t.Fatalf("entry metadata %v", md)
			}
			if want := pulsarCodec(int(batch[22] & attrCodec)); md.GetCompression() != want {
				t.Fatalf("entry compression %v, want %v", md.GetCompression(), want)
			}
			out, err := AppendBatch([]byte("prefix"), 42, entry, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(out, []byte("prefix")) {
				t.Fatal("AppendBatch did not append")
			}
			b, got := readBatch(t, out[len("prefix"):])
			if b.FirstOffset != 42 || b.LastOffsetDelta != int32(len(sample)-1) || b.ProducerID != -1 {
				t.Fatalf("batch header %+v", b)
			}
			sameRecords(t, got, sample)
		})
	}
}

// An idempotent producer's batch is deduplicated by the partition as a
// Pulsar producer named kafka-<id> with the batch's sequences, and a
// consumer sees the producer id and base sequence again.
func TestBatchEntryIdempotentProducer(t *testing.T) {
	entry, _, err := EntryFromBatch(makeBatch(t, "none", sample, 7001, 40), EntryOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rawMeta, _, _ := protocol.SplitEntry(entry)
	md, _ := protocol.ParseMetadata(rawMeta)
	if md.GetProducerName() != "kafka-7001" || md.GetSequenceId() != 40 || md.GetHighestSequenceId() != 40+uint64(len(sample))-1 {
		t.Fatalf("entry metadata %v: want producer kafka-7001, sequences 40..%d", md, 40+len(sample)-1)
	}
	out, err := AppendBatch(nil, 0, entry, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := readBatch(t, out); b.ProducerID != 7001 || b.FirstSequence != 40 {
		t.Fatalf("batch producer %d sequence %d, want 7001 and 40", b.ProducerID, b.FirstSequence)
	}
}

// What a Pulsar producer wrote reads as the Kafka records it means: keys
// (base64 ones decoded), properties as headers, event time else publish
// time, tombstones; a non-batched message is one record.
func TestPulsarEntriesAsKafkaRecords(t *testing.T) {
	single := func(key string, b64 bool, props map[string]string, event uint64, null bool, payload string) *pb.SingleMessageMetadata {
		m := &pb.SingleMessageMetadata{PartitionKey: proto.String(key), PartitionKeyB64Encoded: proto.Bool(b64), NullValue: proto.Bool(null)}
		if event > 0 {
			m.EventTime = proto.Uint64(event)
		}
		for k, v := range props {
			m.Properties = append(m.Properties, &pb.KeyValue{Key: proto.String(k), Value: proto.String(v)})
		}
		return m
	}
	var payload []byte
	payload, _ = protocol.AppendBatchMessage(payload, single("k1", false, map[string]string{"a": "1"}, 0, false, ""), []byte("v1"))
	payload, _ = protocol.AppendBatchMessage(payload, single("AAEC", true, nil, 900, false, ""), []byte("v2"))
	payload, _ = protocol.AppendBatchMessage(payload, single("k3", false, nil, 0, true, ""), nil)
	zpayload, err := protocol.Compress(nil, pb.CompressionType_ZSTD, payload)
	if err != nil {
		t.Fatal(err)
	}
	md := &pb.MessageMetadata{ProducerName: proto.String("pulsar-producer"), SequenceId: proto.Uint64(5), PublishTime: proto.Uint64(1000),
		NumMessagesInBatch: proto.Int32(3), Compression: pb.CompressionType_ZSTD.Enum(), UncompressedSize: proto.Uint32(uint32(len(payload)))}
	raw, _ := protocol.MarshalMetadata(md)
	entry, _ := protocol.AppendEntry(nil, raw, zpayload)
	out, err := AppendBatch(nil, 10, entry, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b, got := readBatch(t, out)
	if b.FirstOffset != 10 || b.ProducerID != -1 {
		t.Fatalf("batch header %+v", b)
	}
	sameRecords(t, got, []testRecord{
		{key: []byte("k1"), value: []byte("v1"), ts: 1000, headers: []kmsg.Header{{Key: "a", Value: []byte("1")}}},
		{key: []byte{0, 1, 2}, value: []byte("v2"), ts: 900},
		{key: []byte("k3"), value: nil, ts: 1000},
	})

	one := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(2000), PartitionKey: proto.String("solo"),
		Properties: []*pb.KeyValue{{Key: proto.String("x"), Value: proto.String("y")}}}
	raw, _ = protocol.MarshalMetadata(one)
	entry, _ = protocol.AppendEntry(nil, raw, []byte("alone"))
	if out, err = AppendBatch(nil, 3, entry, 1<<20); err != nil {
		t.Fatal(err)
	}
	_, got = readBatch(t, out)
	sameRecords(t, got, []testRecord{{key: []byte("solo"), value: []byte("alone"), ts: 2000, headers: []kmsg.Header{{Key: "x", Value: []byte("y")}}}})
}

// Bad batches get a clear error, never a panic: a wrong CRC, an old
// magic, transactional batches, counts that do not match, trailing bytes,
// and records that decompress past the limit.
func TestBatchRefusals(t *testing.T) {
	good := makeBatch(t, "none", sample, -1, -1)
	o := EntryOptions{MaxBytes: 1 << 20}
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[crcFrom:], castagnoli))
		return b
	}
	for name, tc := range map[string]struct {
		batch []byte
		o     EntryOptions
		want  error
	}{
		"empty":         {nil, o, ErrMalformed},
		"bad crc":       {func() []byte { b := bytes.Clone(good); b[len(b)-1] ^= 1; return b }(), o, ErrMalformed},
		"magic 1":       {func() []byte { b := bytes.Clone(good); b[16] = 1; return b }(), o, ErrUnsupported},
		"transactional": {mutate(func(b []byte) { b[22] |= attrTransactional }), o, kerr.InvalidTxnState},
		"not txn":       {good, EntryOptions{MaxBytes: 1 << 20, Transactional: true}, kerr.InvalidTxnState},
		"control":       {mutate(func(b []byte) { b[22] |= attrControl }), o, ErrUnsupported},
		"control txn":   {mutate(func(b []byte) { b[22] |= attrControl | attrTransactional }), EntryOptions{MaxBytes: 1 << 20, Transactional: true}, ErrUnsupported},
		"codec 7":       {mutate(func(b []byte) { b[22] |= 7 }), o, ErrUnsupported},
		"count":         {mutate(func(b []byte) { binary.BigEndian.PutUint32(b[57:], 3) }), o, ErrMalformed},
		"last delta":    {mutate(func(b []byte) { binary.BigEndian.PutUint32(b[23:], 9) }), o, ErrMalformed},
		"too large":     {makeBatch(t, "zstd", []testRecord{{value: make([]byte, 5000)}}, -1, -1), EntryOptions{MaxBytes: 1000}, ErrTooLarge},
		"too large raw": {good, EntryOptions{MaxBytes: 20}, ErrTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := EntryFromBatch(tc.batch, tc.o); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	// Trailing bytes after the last record (counts consistent otherwise).
	var b kmsg.RecordBatch
	if err := b.ReadFrom(good); err != nil {
		t.Fatal(err)
	}
	b.Records = append(bytes.Clone(b.Records), 0, 0)
	b.Length += 2
	trailing := b.AppendTo(nil)
	binary.BigEndian.PutUint32(trailing[17:], crc32.Checksum(trailing[crcFrom:], castagnoli))
	if _, _, err := EntryFromBatch(trailing, o); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing bytes: %v, want ErrMalformed", err)
	}
}

func TestSplitBatches(t *testing.T) {
	a, b := makeBatch(t, "none", sample[:1], -1, -1), makeBatch(t, "gzip", sample, -1, -1)
	got, err := SplitBatches(append(bytes.Clone(a), b...))
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], a) || !bytes.Equal(got[1], b) {
		t.Fatalf("SplitBatches = %d batches, %v; want the two", len(got), err)
	}
	for _, bad := range [][]byte{a[:len(a)-1], append(bytes.Clone(a), 1, 2, 3), {0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}} {
		if _, err := SplitBatches(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("SplitBatches(%d bytes) = %v, want ErrMalformed", len(bad), err)
		}
	}
}

// Hostile batches never panic and never allocate past the limit.
func FuzzEntryFromBatch(f *testing.F) {
	for _, codec := range []string{"none", "gzip", "snappy", "xerial", "lz4", "zstd"} {
		f.Add(makeBatch(f, codec, sample, -1, -1))
	}
	f.Fuzz(func(t *testing.T, batch []byte) {
		// The CRC is recomputed so that the fuzzer reaches the decoders.
		if len(batch) >= batchHeaderBytes {
			binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[crcFrom:], castagnoli))
		}
		entry, n, err := EntryFromBatch(batch, EntryOptions{MaxBytes: 64 << 10})
		if err != nil {
			return
		}
		if len(entry) > 64<<10+4096 || n < 1 {
			t.Fatalf("%d records in an entry of %d bytes", n, len(entry))
		}
		if _, err := AppendBatch(nil, 0, entry, 64<<10); err != nil {
			t.Fatalf("an entry EntryFromBatch made does not read back: %v", err)
		}
	})
}

// benchRecords is a batch of 100 records of 1 KiB with a key and a header,
// as a producer with linger batches them.
func benchRecords() []testRecord {
	recs := make([]testRecord, 100)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, 1024)
		recs[i] = testRecord{key: []byte("key-" + string(rune('a'+i%26))), value: v, ts: 1_700_000_000_000 + int64(i),
			headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}}
	}
	return recs
}

// The cost of the one entry format (docs/kafka.md): converting a produced
// batch into a stored entry, and a stored entry into a fetched batch, per
// codec. Reported per record (ns/op ÷ 100).
func BenchmarkEntryFromBatch(b *testing.B) {
	for _, codec := range []string{"none", "lz4", "zstd"} {
		b.Run(codec, func(b *testing.B) {
			batch := makeBatch(b, codec, benchRecords(), -1, -1)
			b.SetBytes(100 * 1024)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := EntryFromBatch(batch, EntryOptions{MaxBytes: 1 << 20}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendBatch(b *testing.B) {
	for _, codec := range []string{"none", "lz4", "zstd"} {
		b.Run(codec, func(b *testing.B) {
			entry, _, err := EntryFromBatch(makeBatch(b, codec, benchRecords(), -1, -1), EntryOptions{MaxBytes: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(100 * 1024)
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				if dst, err = AppendBatch(dst[:0], 0, entry, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzAppendBatch: any stored entry (a Pulsar producer's bytes) is either
// refused or becomes a record batch a Kafka consumer can read.
func FuzzAppendBatch(f *testing.F) {
	for _, codec := range []string{"none", "lz4", "zstd"} {
		entry, _, err := EntryFromBatch(makeBatch(f, codec, sample, 7, 0), EntryOptions{MaxBytes: 64 << 10, ProducerName: "p"})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(entry)
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		batch, err := AppendBatch(nil, 5, entry, 64<<10)
		if err != nil {
			return
		}
		b, recs := readBatch(t, batch)
		if b.FirstOffset != 5 || int(b.NumRecords) != len(recs) || len(recs) == 0 {
			t.Fatalf("batch at %d of %d records (%d read)", b.FirstOffset, b.NumRecords, len(recs))
		}
	})
}

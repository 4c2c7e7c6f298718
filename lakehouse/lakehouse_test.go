package lakehouse

// Tests: entries built with the protocol encoders (and real pulsar-client-go
// frames) go decode → Arrow → Parquet → read → rebuild and must come back
// byte-identical; the written files are checked for zstd, field ids and µs
// UTC timestamps; typed columns for primitive, JSON and AVRO schemas.
//
//	go test -p 1 ./lakehouse/
//	go test -p 1 -run '^$' -fuzz FuzzDecodeEntry -fuzztime 30s ./lakehouse/

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"

	"github.com/lakegate/lakegate/lakehouse/lakehousetest"
)

const (
	testPartition = int32(3)
	testLedger    = int64(42)
)

// decodeAll decodes entries in order.
func decodeAll(t testing.TB, entries []lakestream.Entry) []Message {
	t.Helper()
	var msgs []Message
	for _, e := range entries {
		ms, err := DecodeEntry(e, testPartition, testLedger, 0)
		if err != nil {
			t.Fatalf("decode entry at %d: %v", e.Offset, err)
		}
		msgs = append(msgs, ms...)
	}
	return msgs
}

// writeFile writes msgs through a RecordBuilder to one Parquet file.
func writeFile(t testing.TB, mem memory.Allocator, typed *TypedSchema, msgs []Message, limits RecordLimits, opts WriteOptions) ([]byte, FileStats) {
	t.Helper()
	rb := NewRecordBuilder(mem, typed, limits)
	defer rb.Release()
	recs := rb.AppendAll(msgs)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var buf bytes.Buffer
	opts.Allocator = mem
	st, err := WriteParquet(&buf, rb.Schema(), recs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != len(recs) {
		t.Fatalf("wrote %d of %d records", st.Records, len(recs))
	}
	return buf.Bytes(), st
}

// checkRebuild rebuilds every entry from rows and compares with the input.
func checkRebuild(t *testing.T, entries []lakestream.Entry, rows []Message) {
	t.Helper()
	groups := SplitEntries(rows)
	if len(groups) != len(entries) {
		t.Fatalf("%d entries in rows, want %d", len(groups), len(entries))
	}
	for i, g := range groups {
		got, err := RebuildEntry(g)
		if err != nil {
			t.Fatalf("rebuild entry %d: %v", entries[i].Offset, err)
		}
		if !bytes.Equal(got, entries[i].Payload) {
			t.Fatalf("entry %d: rebuilt %d bytes differ from the stored %d", entries[i].Offset, len(got), len(entries[i].Payload))
		}
	}
}

func TestRoundTripEveryCodec(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, codec := range codecs {
		for _, batched := range []bool{false, true} {
			t.Run(codec.String()+"/batched="+strconv.FormatBool(batched), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(codec), 7))
				var specs []entrySpec
				seq := uint64(100)
				for range 40 {
					s := randEntry(r, codec, batched, seq)
					seq += uint64(len(s.msgs))
					specs = append(specs, s)
				}
				entries := logEntries(t, specs, 1000)
				msgs := decodeAll(t, entries)
				checkMessages(t, specs, entries, msgs)
				// Canonical encodings: nothing raw stored for our own encoders.
				for _, m := range msgs {
					if m.MessageMetadata != nil || m.EntryPayload != nil {
						t.Fatalf("offset %d: raw fallback used for a canonical entry", m.Offset)
					}
				}
				// Small limits: several records and row groups per file.
				data, st := writeFile(t, mem, nil, msgs, RecordLimits{MaxRows: 7}, WriteOptions{RowGroupBytes: 16 << 10})
				if st.Rows != int64(len(msgs)) || st.SizeBytes != int64(len(data)) {
					t.Fatalf("stats: rows %d size %d, want %d, %d", st.Rows, st.SizeBytes, len(msgs), len(data))
				}
				if st.RowGroups < 2 {
					t.Fatalf("%d row groups, want several", st.RowGroups)
				}
				rows, err := ReadParquet(context.Background(), bytes.NewReader(data), mem)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(rows, msgs) {
					for i := range rows {
						if !reflect.DeepEqual(rows[i], msgs[i]) {
							t.Fatalf("row %d:\n got %+v\nwant %+v", i, rows[i], msgs[i])
						}
					}
					t.Fatalf("rows differ (%d vs %d)", len(rows), len(msgs))
				}
				checkRebuild(t, entries, rows)
				checkStats(t, st, msgs)
			})
		}
	}
}

// checkMessages compares decoded rows with what the entries were built from.
func checkMessages(t *testing.T, specs []entrySpec, entries []lakestream.Entry, msgs []Message) {
	t.Helper()
	i := 0
	for k, s := range specs {
		for j, want := range s.msgs {
			m := msgs[i]
			i++
			bi := int32(j)
			if !s.batched {
				bi = -1
			}
			if m.EntryID != entries[k].Offset || m.Offset != entries[k].Offset+int64(j) || m.BatchIndex != bi ||
				m.BatchSize != int32(len(s.msgs)) || m.Partition != testPartition || m.LedgerID != testLedger {
				t.Fatalf("%s: ids (entry %d offset %d index %d size %d)", describe(s), m.EntryID, m.Offset, m.BatchIndex, m.BatchSize)
			}
			if !bytes.Equal(m.Payload, want.payload) || m.NullValue != want.nullValue ||
				!reflect.DeepEqual(m.Key, want.key) || m.KeyIsBase64 != want.b64 ||
				!reflect.DeepEqual(m.Properties, want.props) || m.EventTimeMs != int64(want.eventTimeMs) ||
				!bytes.Equal(m.OrderingKey, want.ordering) || (m.OrderingKey == nil) != (want.ordering == nil) {
				t.Fatalf("%s: message %d differs: %+v vs %+v", describe(s), j, m, want)
			}
			if m.PublishTimeMs != int64(s.publishMs) || m.ProducerName != s.producer ||
				m.SequenceID != int64(s.seq)+int64(j) || !bytes.Equal(m.SchemaVersion, s.schemaVer) ||
				!reflect.DeepEqual(m.ReplicatedFrom, s.replFrom) || m.Compression != s.codec {
				t.Fatalf("%s: entry fields differ: %+v", describe(s), m)
			}
			if (j == 0) != (m.EntryMetadata != nil) {
				t.Fatalf("%s: entry metadata on row %d: %v", describe(s), j, m.EntryMetadata != nil)
			}
		}
	}
	if i != len(msgs) {
		t.Fatalf("%d messages, want %d", len(msgs), i)
	}
}

func checkStats(t *testing.T, st FileStats, msgs []Message) {
	t.Helper()
	off := st.Column(ColOffset)
	if off == nil || !off.HasMinMax || off.Min != msgs[0].Offset || off.Max != msgs[len(msgs)-1].Offset || off.FieldID != 1 || off.NullCount != 0 {
		t.Fatalf("__offset stats %+v", off)
	}
	pt := st.Column(ColPublishTime)
	var lo, hi int64 = math.MaxInt64, math.MinInt64
	for _, m := range msgs {
		lo, hi = min(lo, m.PublishTimeMs*1000), max(hi, m.PublishTimeMs*1000)
	}
	if pt == nil || pt.Min != lo || pt.Max != hi {
		t.Fatalf("__publish_time stats %+v, want %d..%d", pt, lo, hi)
	}
	var nullKeys int64
	for _, m := range msgs {
		if m.Key == nil {
			nullKeys++
		}
	}
	if k := st.Column(ColKey); k.NullCount != nullKeys {
		t.Fatalf("__key null count %d, want %d", k.NullCount, nullKeys)
	}
	if p := st.Column(ColPayload); p.HasMinMax {
		t.Fatalf("__payload has min/max statistics")
	}
	if pk := st.Column("__properties.key_value.key"); pk == nil || pk.FieldID != PropertiesKeyFieldID {
		t.Fatalf("properties key stats %+v", pk)
	}
	want := map[string]string{ColPartition: "3", ColPublishDate: "2026-11-30"}
	if !reflect.DeepEqual(st.PartitionValues, want) {
		t.Fatalf("partition values %v, want %v", st.PartitionValues, want)
	}
}

// TestClientFrames: entries encoded by pulsar-client-go v0.19.0 (its own
// compressors and metadata encoding) rebuild byte-identically.
func TestClientFrames(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var entries []lakestream.Entry
	var names []string
	off := int64(0)
	for name, raw := range clientEntries(t) {
		e := entryOf(t, raw, off)
		off += int64(e.Records)
		entries = append(entries, e)
		names = append(names, name)
	}
	var msgs []Message
	for i, e := range entries {
		ms, err := DecodeEntry(e, testPartition, testLedger, 0)
		if err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		raw := 0
		for _, m := range ms {
			if m.MessageMetadata != nil {
				raw++
			}
		}
		t.Logf("%s: %d messages, %d raw single metadata, compressed payload kept raw: %v", names[i], len(ms), raw, ms[0].EntryPayload != nil)
		msgs = append(msgs, ms...)
	}
	// One file per entry: the captures have different publish days.
	var rows []Message
	for _, g := range SplitEntries(msgs) {
		data, _ := writeFile(t, mem, nil, g, RecordLimits{}, WriteOptions{})
		got, err := ReadParquet(context.Background(), bytes.NewReader(data), mem)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, got...)
	}
	checkRebuild(t, entries, rows)
}

// TestNonCanonical: metadata our encoder would write differently, and
// compressed bytes our codec would not reproduce, are kept raw and rebuilt.
func TestNonCanonical(t *testing.T) {
	var batch []byte
	var err error
	// compacted_out has no column; an explicit default (event_time 0) is
	// not written canonically.
	for i, sm := range []*pb.SingleMessageMetadata{
		{CompactedOut: proto.Bool(true), SequenceId: proto.Uint64(1)},
		{EventTime: proto.Uint64(0), SequenceId: proto.Uint64(2)},
		{SequenceId: proto.Uint64(3)},
	} {
		if batch, err = protocol.AppendBatchMessage(batch, sm, []byte{'a' + byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderCRC(false))
	if err != nil {
		t.Fatal(err)
	}
	compressed := enc.EncodeAll(batch, nil)
	md := &pb.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(uint64(baseTime.UnixMilli())),
		NumMessagesInBatch: proto.Int32(3), Compression: pb.CompressionType_ZSTD.Enum(), UncompressedSize: proto.Uint32(uint32(len(batch))),
	}
	meta, _ := protocol.MarshalMetadata(md)
	raw, _ := protocol.AppendEntry(nil, meta, compressed)
	e := entryOf(t, raw, 10)
	msgs, err := DecodeEntry(e, -1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].MessageMetadata == nil || msgs[1].MessageMetadata == nil || msgs[2].MessageMetadata != nil {
		t.Fatalf("raw single metadata kept: %v %v %v", msgs[0].MessageMetadata != nil, msgs[1].MessageMetadata != nil, msgs[2].MessageMetadata != nil)
	}
	if !bytes.Equal(msgs[0].EntryPayload, compressed) {
		t.Fatalf("compressed payload not kept raw")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data, _ := writeFile(t, mem, nil, msgs, RecordLimits{}, WriteOptions{})
	rows, err := ReadParquet(context.Background(), bytes.NewReader(data), mem)
	if err != nil {
		t.Fatal(err)
	}
	checkRebuild(t, []lakestream.Entry{e}, rows)
}

// TestOpaque: encrypted and chunked entries are one opaque row each.
func TestOpaque(t *testing.T) {
	mk := func(md *pb.MessageMetadata, payload []byte) []byte {
		meta, err := protocol.MarshalMetadata(md)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := protocol.AppendEntry(nil, meta, payload)
		return raw
	}
	pub := proto.Uint64(uint64(baseTime.UnixMilli()))
	encrypted := mk(&pb.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: pub,
		NumMessagesInBatch: proto.Int32(5), Compression: pb.CompressionType_LZ4.Enum(), UncompressedSize: proto.Uint32(99),
		EncryptionKeys: []*pb.EncryptionKeys{{Key: proto.String("k"), Value: []byte{1, 2}}}, EncryptionAlgo: proto.String("AES-GCM"),
	}, []byte("ciphertext"))
	chunk := mk(&pb.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(2), PublishTime: pub,
		Uuid: proto.String("u-1"), ChunkId: proto.Int32(1), NumChunksFromMsg: proto.Int32(3), TotalChunkMsgSize: proto.Int32(3000),
		Compression: pb.CompressionType_ZSTD.Enum(), UncompressedSize: proto.Uint32(5000),
	}, []byte("middle of a zstd frame"))
	entries := []lakestream.Entry{entryOf(t, encrypted, 0), entryOf(t, chunk, 5)}
	var msgs []Message
	for _, e := range entries {
		ms, err := DecodeEntry(e, 0, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || !ms[0].Opaque || ms[0].BatchIndex != -1 || ms[0].BatchSize != e.Records {
			t.Fatalf("entry %d: %+v", e.Offset, ms)
		}
		msgs = append(msgs, ms...)
	}
	if c := msgs[1].Chunk; c == nil || *c != (Chunk{UUID: "u-1", ChunkID: 1, NumChunks: 3, TotalSize: 3000}) {
		t.Fatalf("chunk %+v", c)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data, _ := writeFile(t, mem, nil, msgs, RecordLimits{}, WriteOptions{})
	rows, err := ReadParquet(context.Background(), bytes.NewReader(data), mem)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rows, msgs) {
		t.Fatalf("rows differ:\n%+v\n%+v", rows, msgs)
	}
	checkRebuild(t, entries, rows)

	// A corrupt entry is an error for DecodeEntry and opaque on request.
	bad := mk(&pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(3), PublishTime: pub,
		Compression: pb.CompressionType_ZLIB.Enum(), UncompressedSize: proto.Uint32(10)}, []byte("not zlib"))
	e := entryOf(t, bad, 7)
	if _, err := DecodeEntry(e, 0, 1, 0); !errors.Is(err, ErrCorruptEntry) || !errors.Is(err, protocol.ErrCorruptCompressed) {
		t.Fatalf("corrupt zlib: %v", err)
	}
	m, err := OpaqueEntry(e, 0, 1)
	if err != nil || !m.Opaque {
		t.Fatalf("opaque: %+v, %v", m, err)
	}
	if got, err := RebuildEntry([]Message{m}); err != nil || !bytes.Equal(got, bad) {
		t.Fatalf("rebuild opaque: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	good := randEntry(r, pb.CompressionType_LZ4, true, 1)
	good.msgs = good.msgs[:3]
	raw := good.build(t)
	e := entryOf(t, raw, 0)
	for n := 0; n < len(raw); n++ {
		cut := e
		cut.Payload = raw[:n]
		if _, err := DecodeEntry(cut, 0, 1, 0); !errors.Is(err, ErrCorruptEntry) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	wrong := e
	wrong.Records = 2
	if _, err := DecodeEntry(wrong, 0, 1, 0); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("record count mismatch: %v", err)
	}
	if _, err := DecodeEntry(e, 0, 1, 8); !errors.Is(err, protocol.ErrUncompressedTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	if _, err := DecodeEntry(lakestream.Entry{Payload: append(u32(3), 0xff, 0xff, 0xff)}, 0, 1, 0); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("bad metadata: %v", err)
	}
	// Rows that are not one entry.
	msgs, err := DecodeEntry(e, 0, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, rows := range [][]Message{nil, msgs[1:], msgs[:2], {msgs[0], msgs[2], msgs[1]}} {
		if _, err := RebuildEntry(rows); !errors.Is(err, ErrCorruptEntry) {
			t.Fatalf("rebuild of %d rows: %v", len(rows), err)
		}
	}
}

// TestFileFormat checks the written file itself: zstd on every column
// chunk, a field id on every field (read back through pqarrow), timestamps
// as µs UTC, partition columns enforced, file size bounded.
func TestFileFormat(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := rand.New(rand.NewPCG(3, 4))
	var specs []entrySpec
	for i := range 20 {
		specs = append(specs, randEntry(r, pb.CompressionType_ZSTD, i%2 == 0, uint64(i*100)))
	}
	entries := logEntries(t, specs, 0)
	msgs := decodeAll(t, entries)
	typed, err := NewRecordSchema(KindJSON, []byte(`{"type":"record","name":"T","fields":[{"name":"a","type":"long"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := writeFile(t, mem, typed, msgs, RecordLimits{MaxRows: 50}, WriteOptions{RowGroupBytes: 64 << 10})

	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	if md.NumRowGroups() < 2 {
		t.Fatalf("%d row groups", md.NumRowGroups())
	}
	for g := range md.NumRowGroups() {
		for c := range md.NumColumns() {
			ch, _ := md.RowGroup(g).ColumnChunk(c)
			if ch.Compression() != compress.Codecs.Zstd {
				t.Fatalf("row group %d column %s: %s", g, ch.PathInSchema(), ch.Compression())
			}
		}
	}
	// Field ids on every Parquet node, timestamps MICROS adjusted to UTC.
	ids := map[int32]string{}
	var walk func(n schema.Node)
	walk = func(n schema.Node) {
		if g, ok := n.(*schema.GroupNode); ok && n.Name() == "key_value" {
			walk(g.Field(0))
			walk(g.Field(1))
			return
		}
		if n.FieldID() < 0 {
			t.Fatalf("parquet node %s has no field id", n.Path())
		}
		if prev, dup := ids[n.FieldID()]; dup {
			t.Fatalf("field id %d on %s and %s", n.FieldID(), prev, n.Path())
		}
		ids[n.FieldID()] = n.Path()
		if g, ok := n.(*schema.GroupNode); ok {
			for i := range g.NumFields() {
				walk(g.Field(i))
			}
		}
		if p, ok := n.(*schema.PrimitiveNode); ok && (n.Name() == ColPublishTime || n.Name() == ColEventTime) {
			ts, ok := p.LogicalType().(schema.TimestampLogicalType)
			if !ok || !ts.IsAdjustedToUTC() || ts.TimeUnit() != schema.TimeUnitMicros {
				t.Fatalf("%s: logical type %s", n.Name(), p.LogicalType())
			}
		}
	}
	root := md.Schema.Root()
	for i := range root.NumFields() {
		walk(root.Field(i))
	}
	if ids[1000] != "a" || ids[13] != ColProperties || ids[PropertiesValueFieldID] != "__properties.key_value.value" {
		t.Fatalf("field ids: %v", ids)
	}

	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	want := Schema(typed)
	for i, f := range got.Fields() {
		wf := want.Field(i)
		if f.Name != wf.Name || !arrow.TypeEqual(f.Type, wf.Type) || f.Nullable != wf.Nullable {
			t.Fatalf("field %d: read %s, wrote %s", i, f, wf)
		}
		if id, ok := f.Metadata.GetValue(FieldIDKey); !ok || id != mustGet(t, wf.Metadata, FieldIDKey) {
			t.Fatalf("field %s: id %q", f.Name, id)
		}
	}
	ts := got.Field(got.FieldIndices(ColPublishTime)[0]).Type.(*arrow.TimestampType)
	if ts.Unit != arrow.Microsecond || ts.TimeZone != "UTC" {
		t.Fatalf("publish time read back as %s", ts)
	}
	mt := got.Field(got.FieldIndices(ColProperties)[0]).Type.(*arrow.MapType)
	if id, _ := mt.KeyField().Metadata.GetValue(FieldIDKey); id != "101" {
		t.Fatalf("map key id %q", id)
	}
	if id, _ := mt.ItemField().Metadata.GetValue(FieldIDKey); id != "102" {
		t.Fatalf("map value id %q", id)
	}
}

func mustGet(t *testing.T, md arrow.Metadata, k string) string {
	v, ok := md.GetValue(k)
	if !ok {
		t.Fatalf("no %s", k)
	}
	return v
}

func TestFileRollingAndPartitions(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := rand.New(rand.NewPCG(5, 6))
	var specs []entrySpec
	for i := range 30 {
		s := randEntry(r, pb.CompressionType_NONE, true, uint64(i*100))
		for j := range s.msgs {
			s.msgs[j].payload = randBytes(r, 4<<10)
			s.msgs[j].nullValue = false
		}
		specs = append(specs, s)
	}
	msgs := decodeAll(t, logEntries(t, specs, 0))
	rb := NewRecordBuilder(mem, nil, RecordLimits{MaxBytes: 32 << 10})
	defer rb.Release()
	recs := rb.AppendAll(msgs)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if len(recs) < 10 {
		t.Fatalf("%d records", len(recs))
	}
	// Roll files until every record is written; rows add up.
	var rows int64
	files := 0
	for rest := recs; len(rest) > 0; files++ {
		var buf bytes.Buffer
		st, err := WriteParquet(&buf, rb.Schema(), rest, WriteOptions{MaxFileBytes: 100 << 10, Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		if st.Records == 0 {
			t.Fatal("no progress")
		}
		rows += st.Rows
		rest = rest[st.Records:]
	}
	if rows != int64(len(msgs)) || files < 3 {
		t.Fatalf("%d rows in %d files, want %d rows in several", rows, files, len(msgs))
	}

	// Two days in one file: refused.
	other := msgs[0]
	other.PublishTimeMs += 86400 * 1000
	mixed := rb.AppendAll([]Message{msgs[0], other})
	defer mixed[0].Release()
	if _, err := WriteParquet(&bytes.Buffer{}, rb.Schema(), mixed, WriteOptions{Allocator: mem}); !errors.Is(err, ErrMixedPartitions) {
		t.Fatalf("mixed days: %v", err)
	}
}

func TestTypedPrimitive(t *testing.T) {
	be := func(n int, v uint64) []byte {
		b := binary.BigEndian.AppendUint64(nil, v)
		return b[8-n:]
	}
	cases := []struct {
		kind    SchemaKind
		payload []byte
		want    any // nil = null
	}{
		{KindString, []byte("héllo"), "héllo"},
		{KindInt8, []byte{0xfe}, int8(-2)},
		{KindInt16, be(2, 0xfffe), int16(-2)},
		{KindInt32, be(4, 123456), int32(123456)},
		{KindInt32, []byte{1, 2}, nil},
		{KindInt64, be(8, uint64(1)<<40), int64(1) << 40},
		{KindFloat, be(4, uint64(math.Float32bits(1.5))), float32(1.5)},
		{KindDouble, be(8, math.Float64bits(-2.25)), -2.25},
		{KindBoolean, []byte{1}, true},
		{KindBoolean, []byte{0}, false},
		{KindBytes, []byte{0, 1, 2}, []byte{0, 1, 2}},
	}
	for _, c := range cases {
		ts, err := NewPrimitiveSchema(c.kind)
		if err != nil {
			t.Fatal(err)
		}
		got := typedRoundTrip(t, ts, [][]byte{c.payload})
		if !reflect.DeepEqual(got[0][0], c.want) {
			t.Fatalf("%s %x: got %#v, want %#v", c.kind, c.payload, got[0][0], c.want)
		}
	}
}

// typedRoundTrip writes one non-batched message per payload with typed
// columns, reads the file back and returns the typed values per row.
func typedRoundTrip(t *testing.T, ts *TypedSchema, payloads [][]byte) [][]any {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var msgs []Message
	for i, p := range payloads {
		msgs = append(msgs, Message{Offset: int64(i), EntryID: int64(i), BatchIndex: -1, BatchSize: 1, Payload: p, PublishTimeMs: baseTime.UnixMilli()})
	}
	data, _ := writeFile(t, mem, ts, msgs, RecordLimits{}, WriteOptions{})
	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), parquet.NewReaderProperties(mem), pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	out := make([][]any, len(payloads))
	for i := range out {
		out[i] = make([]any, len(ts.Fields))
	}
	for j := range ts.Fields {
		col := tbl.Column(len(systemFields) + j).Data().Chunk(0)
		for i := range payloads {
			out[i][j] = arrowValue(t, col, i)
		}
	}
	return out
}

// arrowValue is row i of col as lakehousetest.ArrowValue returns it.
func arrowValue(t *testing.T, col arrow.Array, i int) any {
	t.Helper()
	v, err := lakehousetest.ArrowValue(col, i)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const recordDef = `{"type":"record","name":"Order","fields":[
	{"name":"id","type":"long"},
	{"name":"item","type":["null","string"],"default":null},
	{"name":"qty","type":"int"},
	{"name":"price","type":"double"},
	{"name":"ok","type":"boolean"},
	{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"blob","type":"bytes"}]}`

func TestTypedJSON(t *testing.T) {
	ts, err := NewRecordSchema(KindJSON, []byte(recordDef), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := typedRoundTrip(t, ts, [][]byte{
		[]byte(`{"id":9007199254740993,"item":"book","qty":2,"price":9.5,"ok":true,"at":1764460800000,"tags":["a", "b"],"blob":"AAEC"}`),
		[]byte(`{"id":1,"item":null,"qty":"two","price":1,"ok":false}`),
		[]byte(`not json`),
		[]byte(`{"id":1,"qty":3000000000}`),
	})
	want := [][]any{
		{int64(9007199254740993), "book", int32(2), 9.5, true, int64(1764460800000000), []any{"a", "b"}, []byte{0, 1, 2}},
		{int64(1), nil, nil, 1.0, false, nil, nil, nil},
		{nil, nil, nil, nil, nil, nil, nil, nil},
		{int64(1), nil, nil, nil, nil, nil, nil, nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("typed JSON:\n got %#v\nwant %#v", got, want)
	}
	// Ids in definition order, a nested field's children right after it.
	wantIDs := []int32{1000, 1001, 1002, 1003, 1004, 1005, 1006, 1008}
	for i, f := range ts.Fields {
		if f.ID != wantIDs[i] {
			t.Fatalf("field %s id %d, want %d", f.Name, f.ID, wantIDs[i])
		}
	}
	if el := ts.Fields[6].Children; len(el) != 1 || el[0].ID != 1007 || el[0].Name != ListElementName || ts.NextFieldID != 1009 {
		t.Fatalf("tags element %+v, next id %d", el, ts.NextFieldID)
	}
}

func TestTypedAvro(t *testing.T) {
	ts, err := NewRecordSchema(KindAvro, []byte(recordDef), nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := avro.MustParse(recordDef)
	item := "pen"
	type order struct {
		ID    int64    `avro:"id"`
		Item  *string  `avro:"item"`
		Qty   int32    `avro:"qty"`
		Price float64  `avro:"price"`
		OK    bool     `avro:"ok"`
		At    int64    `avro:"at"`
		Tags  []string `avro:"tags"`
		Blob  []byte   `avro:"blob"`
	}
	p1, err := avro.Marshal(sc, order{ID: 7, Item: &item, Qty: 3, Price: 2.5, OK: true, At: 1764460800123, Tags: []string{"x"}, Blob: []byte{9}})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := avro.Marshal(sc, order{ID: 8, Tags: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	got := typedRoundTrip(t, ts, [][]byte{p1, p2, {0xff}})
	want := [][]any{
		{int64(7), "pen", int32(3), 2.5, true, int64(1764460800123000), []any{"x"}, []byte{9}},
		{int64(8), nil, int32(0), 0.0, false, int64(0), []any{}, []byte{}},
		{nil, nil, nil, nil, nil, nil, nil, nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("typed AVRO:\n got %#v\nwant %#v", got, want)
	}
}

func TestSchemaEvolution(t *testing.T) {
	v1, err := NewRecordSchema(KindJSON, []byte(`{"type":"record","name":"T","fields":[{"name":"a","type":"long"},{"name":"b","type":"string"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := NewRecordSchema(KindJSON, []byte(`{"type":"record","name":"T","fields":[{"name":"c","type":["null","int"]},{"name":"a","type":"long"}]}`), v1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int32{}
	for _, f := range v2.Fields {
		got[f.Name] = f.ID
	}
	if !reflect.DeepEqual(got, map[string]int32{"a": 1000, "b": 1001, "c": 1002}) || !v2.Fields[2].Retired || v2.NextFieldID != 1003 {
		t.Fatalf("evolved ids %v %+v", got, v2)
	}
	if _, err := NewRecordSchema(KindJSON, []byte(`{"type":"record","name":"T","fields":[{"name":"a","type":"string"}]}`), v2); !errors.Is(err, ErrIncompatibleSchema) {
		t.Fatalf("type change: %v", err)
	}
	if _, err := NewRecordSchema(KindJSON, []byte(`{"type":"record","name":"T","fields":[{"name":"__x","type":"string"}]}`), nil); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("reserved name: %v", err)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, codec := range codecs {
		for _, batched := range []bool{false, true} {
			s := randEntry(r, codec, batched, 1)
			if len(s.msgs) > 3 {
				s.msgs = s.msgs[:3]
			}
			for i := range s.msgs {
				if len(s.msgs[i].payload) > 64 {
					s.msgs[i].payload = s.msgs[i].payload[:64]
				}
			}
			raw := s.build(f)
			f.Add(raw)
			f.Add(raw[:len(raw)/2])
		}
	}
	for _, raw := range clientEntries(f) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		e := lakestream.Entry{EntryHeader: lakestream.EntryHeader{Offset: 5}, Payload: raw}
		msgs, err := DecodeEntry(e, 0, 1, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrCorruptEntry) {
				t.Fatalf("error without ErrCorruptEntry: %v", err)
			}
			return
		}
		// Whatever decodes rebuilds exactly.
		got, err := RebuildEntry(msgs)
		if err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		if !bytes.Equal(got, raw) {
			t.Fatalf("rebuilt entry differs")
		}
	})
}

// TestRecompressPolicy: with Recompress nothing raw is kept and the
// rebuilt entry has the same metadata and the same decompressed batch.
func TestRecompressPolicy(t *testing.T) {
	for name, raw := range clientEntries(t) {
		e := entryOf(t, raw, 0)
		msgs, err := DecodeEntryWith(e, 0, 1, DecodeOptions{Compressed: Recompress})
		if err != nil {
			t.Fatal(err)
		}
		if msgs[0].EntryPayload != nil {
			t.Fatalf("%s: compressed payload kept", name)
		}
		got, err := RebuildEntry(msgs)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := decompressedEntry(t, got), decompressedEntry(t, raw); !bytes.Equal(a, b) {
			t.Fatalf("%s: rebuilt entry differs after decompression", name)
		}
	}
}

// decompressedEntry is the entry with its payload decompressed.
func decompressedEntry(t *testing.T, raw []byte) []byte {
	meta, payload, err := protocol.SplitEntry(raw)
	if err != nil {
		t.Fatal(err)
	}
	md, err := protocol.ParseMetadata(meta)
	if err != nil {
		t.Fatal(err)
	}
	if md.GetCompression() != pb.CompressionType_NONE {
		if payload, err = protocol.Decompress(md.GetCompression(), payload, int(md.GetUncompressedSize()), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := protocol.AppendEntry(nil, meta, payload)
	return out
}

// TestEncoderGolden pins lakegate's compressors' output. Rows decoded with
// KeepIrreproducible and no EntryPayload rebuild by re-compressing: if a
// library upgrade changes these bytes, files already written would rebuild
// to different (equivalent) compressed bytes. A failure here means: keep
// the old encoder for rebuilds, or accept and document the change.
func TestEncoderGolden(t *testing.T) {
	var src []byte
	for i := range 4096 {
		src = append(src, []byte(strconv.Itoa(i*i%977)+" lakegate ")...)
	}
	want := map[pb.CompressionType]string{
		pb.CompressionType_LZ4:    "5befa47f2b36cb46",
		pb.CompressionType_ZLIB:   "828d606e14ffd392",
		pb.CompressionType_ZSTD:   "8f496ddedf1fbd9f",
		pb.CompressionType_SNAPPY: "25c9b74ed47f1d80",
	}
	for _, codec := range codecs[1:] {
		out, err := protocol.Compress(nil, codec, src)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(out)
		got := hex.EncodeToString(sum[:8])
		t.Logf("%s: %s", codec, got)
		if w := want[codec]; w != got {
			t.Fatalf("%s output changed: %s, pinned %s", codec, got, w)
		}
	}
}

func TestEmptyFile(t *testing.T) {
	var buf bytes.Buffer
	st, err := WriteParquet(&buf, Schema(nil), nil, WriteOptions{})
	if err != nil || st.Rows != 0 || st.Records != 0 || st.PartitionValues != nil {
		t.Fatalf("%+v, %v", st, err)
	}
	rows, err := ReadParquet(context.Background(), bytes.NewReader(buf.Bytes()), nil)
	if err != nil || len(rows) != 0 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
}

// BenchmarkCompact measures decode → Arrow → Parquet of batched zstd
// entries (10 messages of ~200 bytes each); bytes are entry bytes.
func BenchmarkCompact(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	var specs []entrySpec
	for i := range 2000 {
		s := entrySpec{producer: "p", seq: uint64(i * 10), publishMs: uint64(baseTime.UnixMilli()) + uint64(i), codec: pb.CompressionType_ZSTD, batched: true}
		for range 10 {
			k := randString(r, 8)
			s.msgs = append(s.msgs, testMsg{key: &k, eventTimeMs: uint64(baseTime.UnixMilli()), props: []Property{{"a", "b"}},
				payload: []byte(`{"id":` + strconv.Itoa(r.IntN(1e6)) + `,"item":"` + randString(r, 20) + `","qty":3,"price":1.5,"ok":true,"at":1764460800000,"tags":["x","y"],"blob":"AAEC","pad":"` + randString(r, 60) + `"}`)})
		}
		specs = append(specs, s)
	}
	entries := logEntries(b, specs, 0)
	var total int64
	for _, e := range entries {
		total += int64(len(e.Payload))
	}
	ts, _ := NewRecordSchema(KindJSON, []byte(recordDef), nil)
	for _, typed := range []*TypedSchema{nil, ts} {
		name := "raw"
		if typed != nil {
			name = "json"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				rb := NewRecordBuilder(nil, typed, RecordLimits{})
				for _, e := range entries {
					ms, err := DecodeEntry(e, 0, 1, 0)
					if err != nil {
						b.Fatal(err)
					}
					for i := range ms {
						rb.Append(&ms[i])
					}
				}
				rec := rb.NewRecord()
				if _, err := WriteParquet(io.Discard, rb.Schema(), []arrow.RecordBatch{rec}, WriteOptions{}); err != nil {
					b.Fatal(err)
				}
				rec.Release()
				rb.Release()
			}
			b.ReportMetric(float64(20000*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

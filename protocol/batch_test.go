package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

func buildBatch(t testing.TB, values ...string) []byte {
	t.Helper()
	var b []byte
	for i, v := range values {
		var err error
		b, err = AppendBatchMessage(b, &pb.SingleMessageMetadata{
			PartitionKey: proto.String("key-" + strconv.Itoa(i)),
			Properties:   []*pb.KeyValue{{Key: proto.String("i"), Value: proto.String(strconv.Itoa(i))}},
			SequenceId:   proto.Uint64(uint64(i)),
		}, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestBatchRoundTrip(t *testing.T) {
	tests := [][]string{
		{"a"},
		{"", "", ""}, // empty (e.g. null_value) payloads
		{"hello", "world", string(bytes.Repeat([]byte{0}, 1000))},
	}
	for _, values := range tests {
		b := buildBatch(t, values...)
		msgs, err := SplitBatch(b, len(values))
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != len(values) {
			t.Fatalf("%d messages", len(msgs))
		}
		var re []byte
		for i, m := range msgs {
			if string(m.Payload) != values[i] {
				t.Fatalf("message %d payload %q", i, m.Payload)
			}
			smm, err := m.ParseMetadata()
			if err != nil {
				t.Fatal(err)
			}
			if smm.GetPartitionKey() != "key-"+strconv.Itoa(i) || int(smm.GetPayloadSize()) != len(values[i]) {
				t.Fatalf("message %d metadata %v", i, smm)
			}
			if re, err = AppendBatchMessageRaw(re, m.Metadata, m.Payload); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(re, b) {
			t.Fatal("raw re-batch is not byte-exact")
		}
	}
}

func TestSplitBatchErrors(t *testing.T) {
	good := buildBatch(t, "a", "bb")
	withMeta := func(meta []byte, payload string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(meta)))
		return append(append(b, meta...), payload...)
	}
	sizeField := func(v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), v)
	}
	tests := []struct {
		name    string
		payload []byte
		n       int
	}{
		{"zero count", good, 0},
		{"negative count", good, -1},
		{"count too large", good, MaxBatchMessages + 1},
		{"fewer messages than count", good, 3},
		{"more messages than count", good, 1},
		{"empty", nil, 1},
		{"size truncated", []byte{0, 0, 1}, 1},
		{"metadata past end", []byte{0, 0, 0, 9, 0x18, 0x01}, 1},
		{"payload past end", withMeta(sizeField(5), "abc"), 1},
		{"payload_size missing", withMeta(protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 1), ""), 1},
		{"payload_size negative", withMeta(sizeField(uint64(0xFFFFFFFFFFFFFFFF)), ""), 1},
		{"payload_size wrong wire type", withMeta(protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), nil), ""), 1},
		{"metadata not protobuf", withMeta([]byte{0xff}, ""), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := SplitBatch(tc.payload, tc.n); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestSplitBatchTruncation(t *testing.T) {
	b := buildBatch(t, "a", "bb", "ccc")
	for n := range len(b) {
		if _, err := SplitBatch(b[:n], 3); !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
}

func TestAppendBatchMessageSetsSize(t *testing.T) {
	smm := &pb.SingleMessageMetadata{PayloadSize: proto.Int32(99)}
	b, err := AppendBatchMessage(nil, smm, []byte("xyz"))
	if err != nil {
		t.Fatal(err)
	}
	if smm.GetPayloadSize() != 3 {
		t.Fatalf("payload_size %d", smm.GetPayloadSize())
	}
	if _, err := SplitBatch(b, 1); err != nil {
		t.Fatal(err)
	}
}

func TestEntryRecords(t *testing.T) {
	tests := []struct {
		field *int32
		want  int
		ok    bool
	}{
		{nil, 1, true},
		{proto.Int32(1), 1, true},
		{proto.Int32(1000), 1000, true},
		{proto.Int32(0), 0, false},
		{proto.Int32(-3), 0, false},
		{proto.Int32(MaxBatchMessages + 1), 0, false},
	}
	for _, tc := range tests {
		got, err := EntryRecords(&pb.MessageMetadata{NumMessagesInBatch: tc.field})
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("num_messages_in_batch %v: %d, %v", tc.field, got, err)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("error class %v", err)
		}
	}
}

func TestSingleFromBatch(t *testing.T) {
	var payload []byte
	for i, k := range []string{"a", "b", "c"} {
		var err error
		payload, err = AppendBatchMessage(payload, &pb.SingleMessageMetadata{PayloadSize: proto.Int32(2), PartitionKey: proto.String(k),
			SequenceId: proto.Uint64(uint64(10 + i)), Properties: []*pb.KeyValue{{Key: proto.String("i"), Value: proto.String(k)}}}, []byte("v"+k))
		if err != nil {
			t.Fatal(err)
		}
	}
	compressed, err := Compress(nil, pb.CompressionType_ZSTD, payload)
	if err != nil {
		t.Fatal(err)
	}
	md := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(10), PublishTime: proto.Uint64(5),
		NumMessagesInBatch: proto.Int32(3), Compression: pb.CompressionType_ZSTD.Enum(), UncompressedSize: proto.Uint32(uint32(len(payload))),
		SchemaVersion: []byte{0, 0, 0, 0, 0, 0, 0, 1}}
	raw, _ := proto.Marshal(md)
	entry, _ := AppendEntry(nil, raw, compressed)
	single, err := SingleFromBatch(entry, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	m, p, err := SplitEntry(single)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(p) != "vb" || got.GetPartitionKey() != "b" || got.GetSequenceId() != 11 || got.NumMessagesInBatch != nil ||
		got.GetCompression() != pb.CompressionType_NONE || got.GetProducerName() != "p" || got.GetPublishTime() != 5 ||
		len(got.GetSchemaVersion()) != 8 || len(got.GetProperties()) != 1 || got.GetProperties()[0].GetValue() != "b" {
		t.Fatalf("single message: payload %q, metadata %v", p, got)
	}
	keys, err := EntryRecordKeys(single, 1<<20)
	if err != nil || len(keys) != 1 || keys[0].Key != "b" {
		t.Fatalf("keys of the single message %v, %v", keys, err)
	}
	if _, err := SingleFromBatch(entry, 3, 1<<20); err == nil {
		t.Fatal("message 3 of a batch of 3")
	}
}

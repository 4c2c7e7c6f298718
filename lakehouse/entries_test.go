package lakehouse

// Helpers that build stored entries the way producers do, with the protocol
// package's encoders, plus the pulsar-client-go frames captured in
// protocol/testdata/client_frames.txt.

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

var codecs = []pb.CompressionType{
	pb.CompressionType_NONE, pb.CompressionType_LZ4, pb.CompressionType_ZLIB,
	pb.CompressionType_ZSTD, pb.CompressionType_SNAPPY,
}

// baseTime is the publish day of generated entries (one table partition).
var baseTime = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// testMsg is one message to put in an entry.
type testMsg struct {
	key         *string
	b64         bool
	ordering    []byte
	props       []Property
	eventTimeMs uint64
	nullValue   bool
	payload     []byte
}

func randString(r *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_é✓"
	rs := []rune(letters)
	var b strings.Builder
	for range n {
		b.WriteRune(rs[r.IntN(len(rs))])
	}
	return b.String()
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func randMsg(r *rand.Rand) testMsg {
	var m testMsg
	if r.IntN(4) > 0 {
		k := randString(r, 1+r.IntN(20))
		m.key = &k
		m.b64 = r.IntN(8) == 0
	}
	if r.IntN(5) == 0 {
		m.ordering = randBytes(r, r.IntN(6))
	}
	for range r.IntN(4) {
		m.props = append(m.props, Property{Key: randString(r, 1+r.IntN(8)), Value: randString(r, r.IntN(16))})
	}
	if r.IntN(2) == 0 {
		m.eventTimeMs = uint64(baseTime.UnixMilli()) - uint64(r.IntN(1e9))
	}
	switch r.IntN(20) {
	case 0:
		m.nullValue = true
	case 1:
		m.payload = randBytes(r, 256<<10+r.IntN(256<<10)) // large, incompressible
	case 2:
		m.payload = []byte(strings.Repeat(randString(r, 10), 10000)) // large, compressible
	default:
		m.payload = []byte(randString(r, r.IntN(200)))
	}
	return m
}

func kvs(ps []Property) []*pb.KeyValue {
	var out []*pb.KeyValue
	for _, p := range ps {
		out = append(out, &pb.KeyValue{Key: proto.String(p.Key), Value: proto.String(p.Value)})
	}
	return out
}

// entrySpec is one entry to build.
type entrySpec struct {
	producer  string
	seq       uint64
	publishMs uint64
	codec     pb.CompressionType
	batched   bool // num_messages_in_batch set (even for one message)
	schemaVer []byte
	replFrom  *string
	msgs      []testMsg
}

func randEntry(r *rand.Rand, codec pb.CompressionType, batched bool, seq uint64) entrySpec {
	e := entrySpec{
		producer:  "producer-" + randString(r, 4),
		seq:       seq,
		publishMs: uint64(baseTime.UnixMilli()) + uint64(r.IntN(20*3600*1000)),
		codec:     codec,
		batched:   batched,
	}
	if r.IntN(3) == 0 {
		e.schemaVer = randBytes(r, 8)
	}
	if r.IntN(5) == 0 {
		s := "cluster-" + randString(r, 3)
		e.replFrom = &s
	}
	n := 1
	if batched {
		n = 1 + r.IntN(30)
	}
	for range n {
		e.msgs = append(e.msgs, randMsg(r))
	}
	return e
}

// build encodes the entry as a producer does: [u32 metaSize][meta][payload].
func (s entrySpec) build(t testing.TB) []byte {
	t.Helper()
	md := &pb.MessageMetadata{
		ProducerName:  proto.String(s.producer),
		SequenceId:    proto.Uint64(s.seq),
		PublishTime:   proto.Uint64(s.publishMs),
		SchemaVersion: s.schemaVer,
	}
	if s.replFrom != nil {
		md.ReplicatedFrom = proto.String(*s.replFrom)
	}
	var raw []byte
	var err error
	if s.batched {
		md.NumMessagesInBatch = proto.Int32(int32(len(s.msgs)))
		for i, m := range s.msgs {
			sm := &pb.SingleMessageMetadata{
				Properties:  kvs(m.props),
				OrderingKey: m.ordering,
				SequenceId:  proto.Uint64(s.seq + uint64(i)),
			}
			if m.key != nil {
				sm.PartitionKey = proto.String(*m.key)
			}
			if m.b64 {
				sm.PartitionKeyB64Encoded = proto.Bool(true)
			}
			if m.eventTimeMs != 0 {
				sm.EventTime = proto.Uint64(m.eventTimeMs)
			}
			if m.nullValue {
				sm.NullValue = proto.Bool(true)
			}
			if raw, err = protocol.AppendBatchMessage(raw, sm, m.payload); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		m := s.msgs[0]
		md.Properties = kvs(m.props)
		md.OrderingKey = m.ordering
		if m.key != nil {
			md.PartitionKey = proto.String(*m.key)
		}
		if m.b64 {
			md.PartitionKeyB64Encoded = proto.Bool(true)
		}
		if m.eventTimeMs != 0 {
			md.EventTime = proto.Uint64(m.eventTimeMs)
		}
		if m.nullValue {
			md.NullValue = proto.Bool(true)
		}
		raw = m.payload
	}
	payload := raw
	if s.codec != pb.CompressionType_NONE {
		md.Compression = s.codec.Enum()
		md.UncompressedSize = proto.Uint32(uint32(len(raw)))
		if payload, err = protocol.Compress(nil, s.codec, raw); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := protocol.MarshalMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := protocol.AppendEntry(nil, meta, payload)
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

// logEntries lays entries out on a log from offset first.
func logEntries(t testing.TB, specs []entrySpec, first int64) []lakestream.Entry {
	t.Helper()
	var out []lakestream.Entry
	off := first
	for _, s := range specs {
		b := s.build(t)
		out = append(out, lakestream.Entry{
			EntryHeader: lakestream.EntryHeader{Offset: off, Records: int32(len(s.msgs)), PublishTimeMs: int64(s.publishMs), Size: int32(len(b))},
			Payload:     b,
		})
		off += int64(len(s.msgs))
	}
	return out
}

// clientEntries returns the entries of the SEND frames captured from
// pulsar-client-go v0.19.0, by frame name.
func clientEntries(t testing.TB) map[string][]byte {
	t.Helper()
	f, err := os.Open("../protocol/testdata/client_frames.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	var name string
	var hx strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "frame "):
			name = strings.Fields(line)[1]
			hx.Reset()
		case line == "end":
			raw, err := hex.DecodeString(hx.String())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(name, "send") {
				continue
			}
			fr, err := protocol.DecodeFrame(raw[4:])
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = fr.Entry
		default:
			hx.WriteString(line)
		}
	}
	if len(out) == 0 {
		t.Fatal("no SEND frames in client_frames.txt")
	}
	return out
}

// entryOf wraps raw entry bytes as a log entry at offset.
func entryOf(t testing.TB, raw []byte, offset int64) lakestream.Entry {
	t.Helper()
	meta, _, err := protocol.SplitEntry(raw)
	if err != nil {
		t.Fatal(err)
	}
	md, err := protocol.ParseMetadata(meta)
	if err != nil {
		t.Fatal(err)
	}
	n, err := protocol.EntryRecords(md)
	if err != nil {
		t.Fatal(err)
	}
	return lakestream.Entry{EntryHeader: lakestream.EntryHeader{Offset: offset, Records: int32(n)}, Payload: raw}
}

func u32(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

func describe(e entrySpec) string {
	return fmt.Sprintf("%s batched=%v n=%d", e.codec, e.batched, len(e.msgs))
}

package protocol

// Tests of the frame codec.
//
//	go test ./protocol/                                     unit and golden tests
//	go test -run TestServerFramesGolden ./protocol/ -update rewrite testdata/server_frames.txt
//	go test -fuzz=FuzzReadFrame -fuzztime=30s ./protocol/   fuzz (also FuzzSplitBatch, FuzzDecompress)
//	protocol/testdata/crosscheck.sh [-capture]              decode our frames with pulsar-client-go

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

// crc32cBitwise is an independent, table-free CRC32C (reflected polynomial
// 0x82F63B78) used to check the codec's checksum placement.
func crc32cBitwise(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func TestChecksumKnownVector(t *testing.T) {
	// The standard CRC-32C check value.
	if got := Checksum([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("Checksum = %#x, want 0xe3069283", got)
	}
	if got := crc32cBitwise([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("crc32cBitwise = %#x", got)
	}
}

// TestFrameLayoutByHand builds frames byte by byte from the protocol
// description and checks that the encoder produces exactly them and the
// decoder reads them back.
func TestFrameLayoutByHand(t *testing.T) {
	t.Run("ping", func(t *testing.T) {
		// BaseCommand{type: PING(18), ping: {}}:
		//   08 12      field 1 varint 18
		//   92 01 00   field 18 (18<<3|2 = 0x92 0x01), length 0
		want := []byte{0, 0, 0, 9, 0, 0, 0, 5, 0x08, 0x12, 0x92, 0x01, 0x00}
		got, err := AppendCommand(nil, Ping())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("got  %x\nwant %x", got, want)
		}
		f, err := DecodeFrame(want[4:])
		if err != nil {
			t.Fatal(err)
		}
		if f.Cmd.GetType() != pb.BaseCommand_PING || f.HasPayload() {
			t.Fatalf("decoded %v", f)
		}
	})

	t.Run("send with broker entry metadata", func(t *testing.T) {
		// Command: SEND{producer_id:1, sequence_id:2}
		//   08 06                 type = 6
		//   32 04 08 01 10 02     field 6, len 4: {1: 1, 2: 2}
		cmd := []byte{0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02}
		// MessageMetadata{producer_name:"p", sequence_id:2, publish_time:3}
		meta := []byte{0x0a, 0x01, 'p', 0x10, 0x02, 0x18, 0x03}
		payload := []byte("hi")
		// BrokerEntryMetadata{broker_timestamp:5, index:6}
		bem := []byte{0x08, 0x05, 0x10, 0x06}

		var entry []byte
		entry = binary.BigEndian.AppendUint32(entry, uint32(len(meta)))
		entry = append(entry, meta...)
		entry = append(entry, payload...)

		var want []byte
		total := 4 + len(cmd) + 2 + 4 + len(bem) + 2 + 4 + len(entry)
		want = binary.BigEndian.AppendUint32(want, uint32(total))
		want = binary.BigEndian.AppendUint32(want, uint32(len(cmd)))
		want = append(want, cmd...)
		want = append(want, 0x0e, 0x02)
		want = binary.BigEndian.AppendUint32(want, uint32(len(bem)))
		want = append(want, bem...)
		want = append(want, 0x0e, 0x01)
		want = binary.BigEndian.AppendUint32(want, crc32cBitwise(entry))
		want = append(want, entry...)

		c := &pb.BaseCommand{
			Type: pb.BaseCommand_SEND.Enum(),
			Send: &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(2)},
		}
		got, err := AppendFrame(nil, Frame{Cmd: c, Metadata: meta, Payload: payload, BrokerEntryMetadata: bem})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("got  %x\nwant %x", got, want)
		}

		f, err := ReadFrame(bufio.NewReader(bytes.NewReader(want)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(f.Cmd, c) || !bytes.Equal(f.Entry, entry) || !bytes.Equal(f.Metadata, meta) ||
			!bytes.Equal(f.Payload, payload) || !bytes.Equal(f.BrokerEntryMetadata, bem) {
			t.Fatalf("decoded %+v", f)
		}
		md, err := ParseMetadata(f.Metadata)
		if err != nil {
			t.Fatal(err)
		}
		if md.GetProducerName() != "p" || md.GetSequenceId() != 2 || md.GetPublishTime() != 3 {
			t.Fatalf("metadata %v", md)
		}
		b, err := ParseBrokerEntryMetadata(f.BrokerEntryMetadata)
		if err != nil || b.GetBrokerTimestamp() != 5 || b.GetIndex() != 6 {
			t.Fatalf("broker entry metadata %v %v", b, err)
		}
	})
}

// TestClientFrames decodes frames captured from pulsar-client-go's encoder,
// re-encodes them, and requires identical bytes.
func TestClientFrames(t *testing.T) {
	frames := readFrameFile(t, "testdata/client_frames.txt")
	if len(frames) == 0 {
		t.Fatal("no frames")
	}
	for _, nf := range frames {
		t.Run(nf.name, func(t *testing.T) {
			f, err := ReadFrame(bufio.NewReader(bytes.NewReader(nf.raw)), 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Cmd.GetType().String(); got != nf.attrs["type"] {
				t.Fatalf("type %s, want %s", got, nf.attrs["type"])
			}
			re, err := AppendFrame(nil, Frame{Cmd: f.Cmd, Entry: f.Entry, BrokerEntryMetadata: f.BrokerEntryMetadata})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(re, nf.raw) {
				t.Fatalf("re-encoded differs\ngot  %x\nwant %x", re, nf.raw)
			}
			if !f.HasPayload() {
				return
			}
			// The CRC in the frame is the CRC of the entry.
			crcAt := len(nf.raw) - len(f.Entry) - 4
			if got := binary.BigEndian.Uint32(nf.raw[crcAt:]); got != crc32cBitwise(f.Entry) {
				t.Fatalf("crc field %#x != crc(entry) %#x", got, crc32cBitwise(f.Entry))
			}
			md, err := ParseMetadata(f.Metadata)
			if err != nil {
				t.Fatal(err)
			}
			if got := md.GetCompression().String(); got != nf.attrs["compression"] {
				t.Fatalf("compression %s, want %s", got, nf.attrs["compression"])
			}
			want, _ := strconv.Atoi(nf.attrs["messages"])
			if want == 0 {
				if md.NumMessagesInBatch != nil {
					t.Fatal("single message carries num_messages_in_batch")
				}
				if string(f.Payload) != "single payload" {
					t.Fatalf("payload %q", f.Payload)
				}
				return
			}
			if int(md.GetNumMessagesInBatch()) != want || int(f.Cmd.Send.GetNumMessages()) != want {
				t.Fatalf("num messages %d/%d, want %d", md.GetNumMessagesInBatch(), f.Cmd.Send.GetNumMessages(), want)
			}
			raw, err := Decompress(md.GetCompression(), f.Payload, int(md.GetUncompressedSize()), 0)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := SplitBatch(raw, want)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range msgs {
				if string(m.Payload) != "hello hello hello hello " {
					t.Fatalf("message %d payload %q", i, m.Payload)
				}
				smm, err := m.ParseMetadata()
				if err != nil {
					t.Fatal(err)
				}
				if smm.GetPartitionKey() != "key-"+strconv.Itoa(i) || smm.GetSequenceId() != uint64(10+i) {
					t.Fatalf("message %d metadata %v", i, smm)
				}
			}
			// Our compressor output must be readable the same way (it need
			// not be byte-identical to the client's).
			comp, err := Compress(nil, md.GetCompression(), raw)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Decompress(md.GetCompression(), comp, len(raw), 0)
			if err != nil || !bytes.Equal(back, raw) {
				t.Fatalf("recompress round trip: %v", err)
			}
		})
	}
}

func sampleEntry(t testing.TB) (meta, payload []byte) {
	t.Helper()
	md := &pb.MessageMetadata{
		ProducerName:       proto.String("standalone-0-1"),
		SequenceId:         proto.Uint64(7),
		PublishTime:        proto.Uint64(1700000000000),
		NumMessagesInBatch: proto.Int32(2),
	}
	meta, err := MarshalMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"a", "bb"} {
		payload, err = AppendBatchMessage(payload, &pb.SingleMessageMetadata{
			PartitionKey: proto.String("k" + strconv.Itoa(i)),
		}, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
	}
	return meta, payload
}

func sendCmd() *pb.BaseCommand {
	return &pb.BaseCommand{
		Type: pb.BaseCommand_SEND.Enum(),
		Send: &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(7), NumMessages: proto.Int32(2)},
	}
}

func TestFrameRoundTrip(t *testing.T) {
	meta, payload := sampleEntry(t)
	entry, err := AppendEntry(nil, meta, payload)
	if err != nil {
		t.Fatal(err)
	}
	bem := []byte{0x08, 0x01}
	tests := []struct {
		name  string
		frame Frame
	}{
		{"simple", Frame{Cmd: Pong()}},
		{"payload from metadata and payload", Frame{Cmd: sendCmd(), Metadata: meta, Payload: payload}},
		{"payload from entry", Frame{Cmd: sendCmd(), Entry: entry}},
		{"empty payload", Frame{Cmd: sendCmd(), Metadata: meta, Payload: nil}},
		{"empty metadata", Frame{Cmd: sendCmd(), Metadata: []byte{}, Payload: []byte("x")}},
		{"broker entry metadata", Frame{Cmd: Message(3, NewMessageID(1, 10, -1, -1), 0, nil), Entry: entry, BrokerEntryMetadata: bem}},
		{"empty broker entry metadata", Frame{Cmd: Message(3, NewMessageID(1, 10, -1, -1), 0, nil), Entry: entry, BrokerEntryMetadata: []byte{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("prefix")
			b, err := AppendFrame(slices.Clone(prefix), tc.frame)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, prefix) {
				t.Fatal("AppendFrame clobbered dst")
			}
			b = b[len(prefix):]
			if got := binary.BigEndian.Uint32(b); int(got) != len(b)-4 {
				t.Fatalf("total %d, frame has %d bytes after it", got, len(b)-4)
			}
			var w bytes.Buffer
			if err := WriteFrame(&w, tc.frame); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.Bytes(), b) {
				t.Fatal("WriteFrame differs from AppendFrame")
			}
			f, err := ReadFrame(bufio.NewReader(bytes.NewReader(b)), len(b))
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(f.Cmd, tc.frame.Cmd) {
				t.Fatalf("cmd %v, want %v", f.Cmd, tc.frame.Cmd)
			}
			if f.HasPayload() != tc.frame.HasPayload() {
				t.Fatalf("HasPayload %v", f.HasPayload())
			}
			if !tc.frame.HasPayload() {
				return
			}
			wantEntry := tc.frame.Entry
			if wantEntry == nil {
				wantEntry, _ = AppendEntry(nil, tc.frame.Metadata, tc.frame.Payload)
			}
			m, p, err := SplitEntry(wantEntry)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f.Entry, wantEntry) || !bytes.Equal(f.Metadata, m) || !bytes.Equal(f.Payload, p) {
				t.Fatalf("entry %x, want %x", f.Entry, wantEntry)
			}
			if f.Metadata == nil || f.Payload == nil {
				t.Fatal("decoded payload frame has nil Metadata or Payload")
			}
			if (f.BrokerEntryMetadata != nil) != (tc.frame.BrokerEntryMetadata != nil) ||
				!bytes.Equal(f.BrokerEntryMetadata, tc.frame.BrokerEntryMetadata) {
				t.Fatalf("broker entry metadata %x", f.BrokerEntryMetadata)
			}
		})
	}
}

func TestReadFrameStream(t *testing.T) {
	meta, payload := sampleEntry(t)
	var stream []byte
	cmds := []Frame{{Cmd: Ping()}, {Cmd: sendCmd(), Metadata: meta, Payload: payload}, {Cmd: Success(4)}}
	for _, f := range cmds {
		var err error
		if stream, err = AppendFrame(stream, f); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(bytes.NewReader(stream))
	for i, want := range cmds {
		f, err := ReadFrame(r, 0)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !proto.Equal(f.Cmd, want.Cmd) {
			t.Fatalf("frame %d: %v", i, f.Cmd)
		}
	}
	if _, err := ReadFrame(r, 0); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
}

func TestChecksumMismatch(t *testing.T) {
	meta, payload := sampleEntry(t)
	good, err := AppendFrame(nil, Frame{Cmd: sendCmd(), Metadata: meta, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	cmdEnd := 8 + int(binary.BigEndian.Uint32(good[4:]))
	// Flipping any bit of the CRC field or of the entry must be caught.
	for i := cmdEnd + 2; i < len(good); i++ {
		bad := slices.Clone(good)
		bad[i] ^= 0x40
		_, err := DecodeFrame(bad[4:])
		if !errors.Is(err, ErrChecksum) {
			t.Fatalf("byte %d flipped: %v, want ErrChecksum", i, err)
		}
	}
}

func TestTruncationAtEveryByte(t *testing.T) {
	meta, payload := sampleEntry(t)
	var frames [][]byte
	for _, f := range []Frame{
		{Cmd: Pong()},
		{Cmd: sendCmd(), Metadata: meta, Payload: payload},
		{Cmd: Message(1, NewMessageID(1, 2, -1, -1), 0, nil), Metadata: meta, Payload: payload, BrokerEntryMetadata: []byte{0x08, 0x01}},
	} {
		b, err := AppendFrame(nil, f)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b)
	}
	for _, nf := range readFrameFile(t, "testdata/client_frames.txt") {
		frames = append(frames, nf.raw)
	}
	for fi, full := range frames {
		cmdEnd := 4 + int(binary.BigEndian.Uint32(full[4:])) // within the body
		for n := range len(full) {
			// As a stream: the reader runs dry inside the frame.
			_, err := ReadFrame(bufio.NewReader(bytes.NewReader(full[:n])), 0)
			want := io.ErrUnexpectedEOF
			if n == 0 {
				want = io.EOF
			}
			if !errors.Is(err, want) {
				t.Fatalf("frame %d cut at %d as stream: %v, want %v", fi, n, err, want)
			}
			// As a body whose total field agrees with the cut: sizes inside
			// must be found inconsistent (or the CRC wrong), never a panic.
			if n < 4 {
				continue
			}
			body := full[4:n]
			f, err := DecodeFrame(body)
			if len(body) == cmdEnd {
				// Cut exactly after the command: a valid simple frame.
				if err != nil || f.HasPayload() {
					t.Fatalf("frame %d cut after command: %v", fi, err)
				}
				continue
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrChecksum) {
				t.Fatalf("frame %d body cut at %d: %v, want ErrMalformed or ErrChecksum", fi, len(body), err)
			}
		}
	}
}

func TestFrameTooLarge(t *testing.T) {
	b, err := AppendCommand(nil, Success(1))
	if err != nil {
		t.Fatal(err)
	}
	total := len(b) - 4
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(b)), total); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	r := bufio.NewReader(bytes.NewReader(b))
	if _, err := ReadFrame(r, total-1); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if r.Buffered() != len(b)-4 {
		t.Fatalf("read past the size field: %d bytes left", r.Buffered())
	}
	// A hostile 4 GiB size with the default limit allocates nothing big.
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(huge)), 0); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("huge: %v", err)
		}
	})
	if allocs > 10 {
		t.Fatalf("%v allocations rejecting a huge frame", allocs)
	}
}

// A frame's buffer grows as its bytes arrive: a peer announcing the
// largest frame allowed and sending little of it makes ReadFrame allocate
// about what it sent, never the announced size; a frame sent whole still
// reads back intact (growing from FrameReadStepBytes).
func TestReadFrameAllocatesAsBytesArrive(t *testing.T) {
	const announced = DefaultMaxFrameSize
	for _, sent := range []int{0, 1, 1000, 100 << 10, 1 << 20} {
		t.Run(strconv.Itoa(sent), func(t *testing.T) {
			in := binary.BigEndian.AppendUint32(nil, announced)
			in = append(in, make([]byte, sent)...)
			r := bufio.NewReaderSize(bytes.NewReader(in), 16)
			allocated := bytesAllocated(func() {
				if _, err := ReadFrame(r, 0); !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("truncated frame: %v", err)
				}
			})
			// The doublings sum to under twice the last buffer, itself
			// under twice what was read (or the first step).
			if bound := uint64(4*sent + 2*FrameReadStepBytes + 4<<10); allocated > bound {
				t.Fatalf("%d bytes sent of %d announced: %d bytes allocated (bound %d)", sent, announced, allocated, bound)
			}
		})
	}
	payload := make([]byte, 3<<20+12345)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	b, err := AppendFrame(nil, Frame{Cmd: Success(1), Metadata: []byte{}, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFrame(bufio.NewReaderSize(&chunkReader{b: b, chunk: 1500}, 64<<10), 0)
	if err != nil || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("a 3 MiB frame in 1500-byte reads: err %v, payload intact %v", err, bytes.Equal(f.Payload, payload))
	}
}

// bytesAllocated is how many heap bytes f allocates.
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// chunkReader reads b at most chunk bytes at a time.
type chunkReader struct {
	b     []byte
	chunk int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.chunk)], r.b)
	r.b = r.b[n:]
	return n, nil
}

func TestDecodeFrameErrors(t *testing.T) {
	cmdBody := func(fields ...[]byte) []byte { return slices.Concat(fields...) }
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	msg := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	frameOf := func(cmd []byte, rest ...byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(cmd)))
		return append(append(b, cmd...), rest...)
	}
	tests := []struct {
		name string
		body []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"short size", []byte{0, 0}, ErrMalformed},
		{"cmd size past end", []byte{0, 0, 0, 9, 0x08}, ErrMalformed},
		{"empty command", frameOf(nil), ErrMalformed},
		{"not protobuf", frameOf([]byte{0xff, 0xff}), ErrMalformed},
		{"unknown type", frameOf(varint(1, 99)), ErrUnknownCommand},
		{"send without body", frameOf(varint(1, 6)), ErrMalformed},
		{"send missing required", frameOf(cmdBody(varint(1, 6), msg(6, varint(1, 1)))), ErrMalformed},
		{"flow ok", frameOf(cmdBody(varint(1, 11), msg(11, cmdBody(varint(1, 1), varint(2, 10))))), nil},
		{"ping without body", frameOf(varint(1, 18)), nil},
		{"bem truncated", frameOf(varint(1, 18), 0x0e, 0x02, 0, 0), ErrMalformed},
		{"bem size past end", frameOf(varint(1, 18), 0x0e, 0x02, 0, 0, 0, 9, 1), ErrMalformed},
		{"bem not protobuf", frameOf(varint(1, 18), 0x0e, 0x02, 0, 0, 0, 1, 0xff, 0, 0, 0, 0), ErrMalformed},
		{"bem then nothing", frameOf(varint(1, 18), 0x0e, 0x02, 0, 0, 0, 0), ErrMalformed},
		{"checksum header truncated", frameOf(varint(1, 18), 0x0e, 0x01, 0, 0), ErrMalformed},
		{"checksum wrong", frameOf(varint(1, 18), 0x0e, 0x01, 0, 0, 0, 0, 0, 0, 0, 0), ErrChecksum},
		{"no checksum, meta size past end", frameOf(varint(1, 18), 0, 0, 0, 5, 1), ErrMalformed},
		{"no checksum (pre-v6)", frameOf(varint(1, 18), 0, 0, 0, 1, 0x08, 'x'), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFrame(tc.body)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestAppendFrameErrors(t *testing.T) {
	if _, err := AppendFrame(nil, Frame{}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("nil command: %v", err)
	}
	dst := []byte("keep")
	out, err := AppendFrame(dst, Frame{Cmd: &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{}}})
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("missing required fields: %v", err)
	}
	if string(out) != "keep" {
		t.Fatalf("dst changed on error: %q", out)
	}
}

func TestEntryDeliverAt(t *testing.T) {
	meta := func(m *pb.MessageMetadata) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		e, err := AppendEntry(nil, b, []byte("payload"))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	base := func() *pb.MessageMetadata {
		return &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(7), PublishTime: proto.Uint64(1000),
			PartitionKey: proto.String("k"), Properties: []*pb.KeyValue{{Key: proto.String("a"), Value: proto.String("b")}}}
	}
	withDelay := base()
	withDelay.DeliverAtTime = proto.Int64(1_700_000_000_123)
	withDelay.EventTime = proto.Uint64(5) // a field after it
	if at, ok := EntryDeliverAt(meta(withDelay)); !ok || at != 1_700_000_000_123 {
		t.Fatalf("deliver at = %d, %v", at, ok)
	}
	if _, ok := EntryDeliverAt(meta(base())); ok {
		t.Fatal("an entry without deliver_at_time has one")
	}
	for _, bad := range [][]byte{nil, {0, 0, 0, 9, 1}, {0, 0, 0, 2, 0x98, 0x01}} {
		if _, ok := EntryDeliverAt(bad); ok {
			t.Fatalf("malformed entry %x has a delivery time", bad)
		}
	}
}

// AppendFrameHead followed by the entry's bytes is the frame AppendFrame
// encodes, with and without broker entry metadata, and it decodes back
// to the same entry.
func TestAppendFrameHead(t *testing.T) {
	meta, err := proto.Marshal(&pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(7), PublishTime: proto.Uint64(1)})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := AppendEntry(nil, meta, []byte("the payload"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bem := range [][]byte{nil, EntryMetadata(1700000000000, 41)} {
		f := Frame{Cmd: Message(3, NewMessageID(1, 2, -1, -1), 0, nil), Entry: entry, BrokerEntryMetadata: bem}
		whole, err := AppendFrame(nil, f)
		if err != nil {
			t.Fatal(err)
		}
		head, err := AppendFrameHead([]byte("prefix"), f)
		if err != nil {
			t.Fatal(err)
		}
		if string(head[:6]) != "prefix" {
			t.Fatalf("dst's bytes changed: %q", head[:6])
		}
		got := append(head[6:len(head):len(head)], entry...)
		if !bytes.Equal(got, whole) {
			t.Fatalf("head+entry differs from AppendFrame (broker entry metadata %v):\n%x\n%x", bem != nil, got, whole)
		}
		back, err := ReadFrame(bufio.NewReader(bytes.NewReader(got)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back.Entry, entry) {
			t.Fatalf("decoded entry %x, want %x", back.Entry, entry)
		}
	}
	if _, err := AppendFrameHead(nil, Frame{Cmd: Ping()}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a head without an entry: %v", err)
	}
}

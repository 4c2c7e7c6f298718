package protocol

// Fuzz targets for every decoder. Seeds are real frames (captured from
// pulsar-client-go and produced by our encoder), their truncations, and
// corrupted variants. Run each with, for example:
//
//	go test -run '^$' -fuzz=FuzzReadFrame -fuzztime=30s ./protocol/
//	go test -run '^$' -fuzz=FuzzSplitBatch -fuzztime=30s ./protocol/
//	go test -run '^$' -fuzz=FuzzDecompress -fuzztime=30s ./protocol/

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

// fuzzMaxFrame keeps fuzz inputs cheap while still exercising the limit.
const fuzzMaxFrame = 1 << 16

func seedFrames(t testing.TB) [][]byte {
	var out [][]byte
	for _, nf := range readFrameFile(t, "testdata/client_frames.txt") {
		out = append(out, nf.raw)
	}
	for _, nf := range readFrameFile(t, "testdata/server_frames.txt") {
		out = append(out, nf.raw)
	}
	return out
}

func FuzzReadFrame(f *testing.F) {
	for _, b := range seedFrames(f) {
		f.Add(b)
		f.Add(b[:len(b)/2]) // truncated
		f.Add(b[:len(b)-1]) // truncated by one
		c := bytes.Clone(b) // corrupted in the middle
		c[len(c)/2] ^= 0xff
		f.Add(c)
		f.Add(append(bytes.Clone(b), b...)) // two frames back to back
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for range 4 {
			fr, err := ReadFrame(r, fuzzMaxFrame)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) &&
					!errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrMalformed) &&
					!errors.Is(err, ErrChecksum) && !errors.Is(err, ErrUnknownCommand) {
					t.Fatalf("unexpected error class: %v", err)
				}
				if errors.Is(err, ErrFrameTooLarge) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					return // stream unusable from here
				}
				continue
			}
			checkReencode(t, fr)
		}
	})
}

// checkReencode: a decoded frame re-encodes (fresh CRC) and decodes to the
// same command and the same entry and broker entry metadata bytes.
func checkReencode(t *testing.T, fr Frame) {
	t.Helper()
	b, err := AppendFrame(nil, Frame{Cmd: fr.Cmd, Entry: fr.Entry, BrokerEntryMetadata: fr.BrokerEntryMetadata})
	if err != nil {
		t.Fatalf("re-encode of a decoded frame: %v", err)
	}
	again, err := DecodeFrame(b[4:])
	if err != nil {
		t.Fatalf("decode of re-encoded frame: %v", err)
	}
	if !proto.Equal(again.Cmd, fr.Cmd) {
		t.Fatalf("command changed: %v vs %v", again.Cmd, fr.Cmd)
	}
	if again.HasPayload() != fr.HasPayload() || !bytes.Equal(again.Entry, fr.Entry) ||
		!bytes.Equal(again.Metadata, fr.Metadata) || !bytes.Equal(again.Payload, fr.Payload) ||
		(again.BrokerEntryMetadata == nil) != (fr.BrokerEntryMetadata == nil) ||
		!bytes.Equal(again.BrokerEntryMetadata, fr.BrokerEntryMetadata) {
		t.Fatalf("payload section changed")
	}
	if fr.HasPayload() {
		// The parsers must cope with whatever the entry holds.
		md, err := ParseMetadata(fr.Metadata)
		if err != nil || md.NumMessagesInBatch == nil {
			return
		}
		n, err := EntryRecords(md)
		if err != nil {
			return
		}
		if raw, err := Decompress(md.GetCompression(), fr.Payload, int(md.GetUncompressedSize()), fuzzMaxFrame); err == nil {
			_, _ = SplitBatch(raw, n)
		}
	}
}

func FuzzSplitBatch(f *testing.F) {
	f.Add(buildBatch(f, "a"), 1)
	f.Add(buildBatch(f, "a", "bb", "ccc"), 3)
	f.Add(buildBatch(f, "", ""), 2)
	f.Add(buildBatch(f, "a", "bb", "ccc")[:20], 3)
	f.Add(buildBatch(f, "a", "bb"), 5)
	for _, nf := range readFrameFile(f, "testdata/client_frames.txt") {
		fr, err := DecodeFrame(nf.raw[4:])
		if err != nil || !fr.HasPayload() {
			continue
		}
		md, err := ParseMetadata(fr.Metadata)
		if err != nil || md.GetCompression() != pb.CompressionType_NONE {
			continue
		}
		f.Add(fr.Payload, int(md.GetNumMessagesInBatch()))
		f.Add(fr.Payload[:len(fr.Payload)-1], int(md.GetNumMessagesInBatch()))
	}
	f.Fuzz(func(t *testing.T, payload []byte, n int) {
		msgs, err := SplitBatch(payload, n)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if len(msgs) != n {
			t.Fatalf("%d messages, want %d", len(msgs), n)
		}
		var re []byte
		for _, m := range msgs {
			re, _ = AppendBatchMessageRaw(re, m.Metadata, m.Payload)
			if smm, err := m.ParseMetadata(); err == nil && int(smm.GetPayloadSize()) != len(m.Payload) {
				t.Fatalf("payload_size %d, payload %d bytes", smm.GetPayloadSize(), len(m.Payload))
			}
		}
		if !bytes.Equal(re, payload) {
			t.Fatal("split + raw append is not the identity")
		}
	})
}

func FuzzDecompress(f *testing.F) {
	inputs := compressInputs()
	for _, ct := range allCompressions {
		for _, name := range []string{"empty", "one", "15", "270 random", "64K text"} {
			in := inputs[name]
			c, err := Compress(nil, ct, in)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(ct), c, len(in))
			f.Add(uint8(ct), c[:len(c)/2], len(in))
			f.Add(uint8(ct), c, len(in)+1)
		}
	}
	// The client-captured compressed batches.
	for _, nf := range readFrameFile(f, "testdata/client_frames.txt") {
		fr, err := DecodeFrame(nf.raw[4:])
		if err != nil || !fr.HasPayload() {
			continue
		}
		if md, err := ParseMetadata(fr.Metadata); err == nil {
			f.Add(uint8(md.GetCompression()), fr.Payload, int(md.GetUncompressedSize()))
		}
	}
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, ct uint8, src []byte, size int) {
		typ := pb.CompressionType(ct % 6) // include one unsupported value
		out, err := Decompress(typ, src, size, limit)
		if err != nil {
			if !errors.Is(err, ErrCorruptCompressed) && !errors.Is(err, ErrUncompressedTooLarge) &&
				!errors.Is(err, ErrCompressionUnsupported) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if typ == pb.CompressionType_NONE {
			if !bytes.Equal(out, src) {
				t.Fatal("NONE changed the input")
			}
			return
		}
		if len(out) != size || size > limit {
			t.Fatalf("%d bytes out, uncompressed_size %d", len(out), size)
		}
		c, err := Compress(nil, typ, out)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decompress(typ, c, len(out), limit)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("recompress round trip: %v", err)
		}
	})
}

// FuzzEntryRecordKeys: any stored entry — the client frames' entries and
// damaged ones — gives keys or an error, never a panic; the count of
// keys is the entry's record count; a message taken out of a batch
// (SingleFromBatch) is an entry of one record.
func FuzzEntryRecordKeys(f *testing.F) {
	for _, nf := range readFrameFile(f, "testdata/client_frames.txt") {
		fr, err := DecodeFrame(nf.raw[4:])
		if err != nil || !fr.HasPayload() {
			continue
		}
		e, err := AppendEntry(nil, fr.Metadata, fr.Payload)
		if err != nil {
			continue
		}
		f.Add(e)
		f.Add(e[:len(e)-1])
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		if single, err := SingleFromBatch(entry, 0, 1<<20); err == nil {
			if keys, err := EntryRecordKeys(single, 1<<20); err != nil || len(keys) != 1 {
				t.Fatalf("a message out of a batch: %d keys, %v", len(keys), err)
			}
		}
		keys, err := EntryRecordKeys(entry, 1<<20)
		if err != nil {
			return
		}
		meta, _, _ := SplitEntry(entry)
		md, _ := ParseMetadata(meta)
		if n, _ := EntryRecords(md); n != len(keys) {
			t.Fatalf("%d keys for an entry of %d records", len(keys), n)
		}
	})
}

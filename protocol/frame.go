package protocol

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lakegate/lakegate/protocol/pb"
)

// Frame layout (all integers big-endian):
//
//	simple:  [u32 total][u32 cmdSize][BaseCommand]
//	payload: [u32 total][u32 cmdSize][BaseCommand]
//	         ([u16 0x0e02][u32 bemSize][BrokerEntryMetadata])?   broker entry metadata, optional
//	         [u16 0x0e01][u32 crc32c]                             checksum magic and CRC
//	         [u32 metaSize][MessageMetadata][payload]             the entry; the CRC covers exactly these bytes
//
// total counts every byte after the total field itself.

const (
	// MagicChecksum introduces the CRC32C of a payload section.
	MagicChecksum uint16 = 0x0e01
	// MagicBrokerEntryMetadata introduces broker entry metadata.
	MagicBrokerEntryMetadata uint16 = 0x0e02

	// DefaultMaxMessageSize is Pulsar's default max_message_size (5 MiB),
	// the size of metadata plus payload a producer may send, in bytes.
	DefaultMaxMessageSize = 5 << 20
	// FramePaddingBytes is the room Pulsar reserves on top of the max message
	// size for the command and the headers of a frame, in bytes.
	FramePaddingBytes = 10 << 10
	// DefaultMaxFrameSize is the default bound on a frame's total field, in
	// bytes: DefaultMaxMessageSize + FramePaddingBytes.
	DefaultMaxFrameSize = DefaultMaxMessageSize + FramePaddingBytes
	// FrameReadStepBytes is the smallest first buffer ReadFrame allocates
	// for a frame's body, in bytes (see ReadFrame).
	FrameReadStepBytes = 4 << 10

	frameHeaderBytes    = 4 // [u32 total]
	cmdSizeBytes        = 4 // [u32 cmdSize]
	checksumHeaderBytes = 6 // [u16 magic][u32 crc]
	bemHeaderBytes      = 6 // [u16 magic][u32 size]
	metaSizeBytes       = 4 // [u32 metaSize]
)

// Errors returned by the frame codec. They are the only errors ReadFrame and
// DecodeFrame return besides the reader's own I/O errors (io.EOF before a
// frame starts, io.ErrUnexpectedEOF inside one); each is wrapped with detail,
// so test with errors.Is.
var (
	// ErrFrameTooLarge: the frame's total field exceeds the caller's limit, or
	// a frame to encode does not fit a u32. Nothing past the 4-byte total has
	// been read; the stream cannot be resynchronised, close the connection.
	ErrFrameTooLarge = errors.New("protocol: frame too large")
	// ErrChecksum: the CRC32C of a payload section does not match its bytes.
	// The frame boundaries are intact; the frame is dropped (a broker answers
	// a SEND with ChecksumError).
	ErrChecksum = errors.New("protocol: checksum mismatch")
	// ErrMalformed: sizes inside a frame are truncated or inconsistent, the
	// BaseCommand is not valid protobuf, lacks a required field, or lacks the
	// body its type names. Also returned by the metadata, entry and batch
	// parsers.
	ErrMalformed = errors.New("protocol: malformed frame")
	// ErrUnknownCommand: the frame is well formed but its BaseCommand type is
	// not one this package knows (a newer protocol revision). The frame was
	// consumed; the caller may skip it or close the connection.
	ErrUnknownCommand = errors.New("protocol: unknown command type")
)

var crc32cTable = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C (Castagnoli) of b, as carried after MagicChecksum.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, crc32cTable) }

// Frame is one decoded or to-be-encoded Pulsar frame.
//
// Decoded frames (ReadFrame, DecodeFrame): all byte slices alias one buffer
// owned by the caller; nothing in this package keeps or reuses it. For a
// simple frame Entry, Metadata, Payload and BrokerEntryMetadata are nil. For
// a payload frame Entry, Metadata and Payload are non-nil (Payload may be
// empty) and BrokerEntryMetadata is non-nil only if the frame carried it.
//
// Frames to encode (AppendFrame, WriteFrame): the payload section is taken
// from Entry if it is non-nil (written verbatim, CRC computed over it), else
// from Metadata and Payload if Metadata is non-nil; otherwise the frame is a
// simple frame.
type Frame struct {
	Cmd *pb.BaseCommand

	// Entry is the byte-exact [u32 metaSize][MessageMetadata][payload]
	// region: what the CRC covers and what the gateway stores per SEND.
	Entry []byte
	// Metadata is the raw MessageMetadata bytes inside Entry (ParseMetadata
	// decodes them).
	Metadata []byte
	// Payload is the (possibly compressed, possibly batched) message bytes
	// after the metadata inside Entry.
	Payload []byte
	// BrokerEntryMetadata is the raw BrokerEntryMetadata protobuf
	// (without its magic and size), or nil.
	BrokerEntryMetadata []byte
}

// HasPayload reports whether f is (or will be encoded as) a payload frame.
func (f *Frame) HasPayload() bool { return f.Entry != nil || f.Metadata != nil }

// ReadFrame reads one frame from r. maxFrameSize bounds the frame's total
// field in bytes (values <= 0 mean DefaultMaxFrameSize); it is checked before
// anything is allocated. The frame's buffer is allocated as its bytes
// arrive, never from the total field alone: first what r holds already (at
// least FrameReadStepBytes), then at most doubling as more is read, so a
// peer that announces a large frame and trickles it makes the reader hold
// at most twice what it sent plus FrameReadStepBytes. The returned frame's
// slices alias that buffer, which the caller owns.
//
// Errors: io.EOF if r is at EOF before the first byte; io.ErrUnexpectedEOF
// (wrapped) if it ends inside a frame; ErrFrameTooLarge; and the errors of
// DecodeFrame. Other reader errors are returned wrapped.
func ReadFrame(r *bufio.Reader, maxFrameSize int) (Frame, error) {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	var hdr [frameHeaderBytes]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF && n == 0 {
			return Frame{}, io.EOF
		}
		return Frame{}, fmt.Errorf("protocol: reading frame size: %w", err)
	}
	total := binary.BigEndian.Uint32(hdr[:])
	if uint64(total) > uint64(maxFrameSize) {
		return Frame{}, fmt.Errorf("%w: total %d > max %d", ErrFrameTooLarge, total, maxFrameSize)
	}
	size := int(total)
	body := make([]byte, min(size, max(r.Buffered(), FrameReadStepBytes)))
	for read := 0; ; {
		n, err := io.ReadFull(r, body[read:])
		read += n
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, fmt.Errorf("protocol: reading frame body (%d of %d bytes): %w", read, total, err)
		}
		if read == size {
			break
		}
		grown := make([]byte, min(size, max(2*read, read+r.Buffered())))
		copy(grown, body)
		body = grown
	}
	return DecodeFrame(body)
}

// DecodeFrame decodes a frame body: the bytes after the u32 total field
// (exactly total of them). The returned slices alias body.
//
// A payload section without the 0x0e01 magic is accepted as the pre-v6
// checksum-less form; its Entry is the whole section.
//
// Errors: ErrMalformed, ErrChecksum, ErrUnknownCommand.
func DecodeFrame(body []byte) (Frame, error) {
	var f Frame
	if len(body) < cmdSizeBytes {
		return f, fmt.Errorf("%w: frame of %d bytes has no command size", ErrMalformed, len(body))
	}
	cmdSize := binary.BigEndian.Uint32(body)
	rest := body[cmdSizeBytes:]
	if uint64(cmdSize) > uint64(len(rest)) {
		return f, fmt.Errorf("%w: command size %d > %d bytes left", ErrMalformed, cmdSize, len(rest))
	}
	cmd, err := unmarshalCommand(rest[:cmdSize])
	if err != nil {
		return f, err
	}
	f.Cmd = cmd
	rest = rest[cmdSize:]
	if len(rest) == 0 {
		return f, nil
	}

	if len(rest) >= 2 && binary.BigEndian.Uint16(rest) == MagicBrokerEntryMetadata {
		if len(rest) < bemHeaderBytes {
			return f, fmt.Errorf("%w: broker entry metadata header truncated", ErrMalformed)
		}
		n := binary.BigEndian.Uint32(rest[2:])
		rest = rest[bemHeaderBytes:]
		if uint64(n) > uint64(len(rest)) {
			return f, fmt.Errorf("%w: broker entry metadata size %d > %d bytes left", ErrMalformed, n, len(rest))
		}
		bem := rest[:n:n]
		if err := proto.Unmarshal(bem, &pb.BrokerEntryMetadata{}); err != nil {
			return f, fmt.Errorf("%w: broker entry metadata: %v", ErrMalformed, err)
		}
		f.BrokerEntryMetadata = bem
		rest = rest[n:]
	}

	if len(rest) >= 2 && binary.BigEndian.Uint16(rest) == MagicChecksum {
		if len(rest) < checksumHeaderBytes {
			return f, fmt.Errorf("%w: checksum header truncated", ErrMalformed)
		}
		want := binary.BigEndian.Uint32(rest[2:])
		rest = rest[checksumHeaderBytes:]
		if got := Checksum(rest); got != want {
			return f, fmt.Errorf("%w: frame carries %#08x, computed %#08x", ErrChecksum, want, got)
		}
	}
	meta, payload, err := SplitEntry(rest)
	if err != nil {
		return f, err
	}
	f.Entry, f.Metadata, f.Payload = rest, meta, payload
	return f, nil
}

// SplitEntry splits an entry ([u32 metaSize][MessageMetadata][payload]) into
// its raw metadata and payload; both alias entry and are non-nil.
// Errors: ErrMalformed.
func SplitEntry(entry []byte) (metadata, payload []byte, err error) {
	if len(entry) < metaSizeBytes {
		return nil, nil, fmt.Errorf("%w: entry of %d bytes has no metadata size", ErrMalformed, len(entry))
	}
	n := binary.BigEndian.Uint32(entry)
	rest := entry[metaSizeBytes:]
	if uint64(n) > uint64(len(rest)) {
		return nil, nil, fmt.Errorf("%w: metadata size %d > %d bytes left", ErrMalformed, n, len(rest))
	}
	return rest[:n:n], rest[n:], nil
}

// AppendEntry appends the entry [u32 metaSize][metadata][payload] to dst.
// Errors: ErrFrameTooLarge if metadata does not fit a u32 size.
func AppendEntry(dst, metadata, payload []byte) ([]byte, error) {
	if uint64(len(metadata)) > math.MaxUint32 {
		return dst, fmt.Errorf("%w: metadata of %d bytes", ErrFrameTooLarge, len(metadata))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(metadata)))
	dst = append(dst, metadata...)
	return append(dst, payload...), nil
}

// ParseMetadata decodes raw MessageMetadata bytes (Frame.Metadata).
// Errors: ErrMalformed (invalid protobuf or a required field missing).
func ParseMetadata(raw []byte) (*pb.MessageMetadata, error) {
	m := &pb.MessageMetadata{}
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("%w: message metadata: %v", ErrMalformed, err)
	}
	return m, nil
}

// ParseBrokerEntryMetadata decodes raw BrokerEntryMetadata bytes.
// Errors: ErrMalformed.
func ParseBrokerEntryMetadata(raw []byte) (*pb.BrokerEntryMetadata, error) {
	m := &pb.BrokerEntryMetadata{}
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("%w: broker entry metadata: %v", ErrMalformed, err)
	}
	return m, nil
}

// EntryMetadata encodes the BrokerEntryMetadata a broker with Pulsar's
// entry-metadata interceptors attaches to an entry: the time it was stored
// (Unix ms) and the index of its last message.
func EntryMetadata(brokerTimestampMs, index int64) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.BrokerEntryMetadata{
		BrokerTimestamp: proto.Uint64(uint64(max(brokerTimestampMs, 0))),
		Index:           proto.Uint64(uint64(max(index, 0))),
	}) // cannot fail for two varints
	return b
}

// MarshalMetadata encodes m deterministically, for building entries.
func MarshalMetadata(m *pb.MessageMetadata) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// unmarshalCommand decodes a BaseCommand and checks that it is complete: the
// type is known, required fields are present, and the body named by the type
// is present (Type values equal the field numbers of their bodies). PING and
// PONG bodies are empty messages and are not required to be present.
func unmarshalCommand(b []byte) (*pb.BaseCommand, error) {
	cmd := &pb.BaseCommand{}
	if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(b, cmd); err != nil {
		return nil, fmt.Errorf("%w: command: %v", ErrMalformed, err)
	}
	if cmd.Type == nil {
		// proto2 enums are closed: an unknown type number lands in the
		// unknown fields instead of Type.
		if t, ok := unknownVarintField(cmd.ProtoReflect().GetUnknown(), 1); ok {
			return nil, fmt.Errorf("%w: type %d", ErrUnknownCommand, t)
		}
		return nil, fmt.Errorf("%w: command without type", ErrMalformed)
	}
	if err := proto.CheckInitialized(cmd); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, cmd.GetType(), err)
	}
	t := cmd.GetType()
	if t != pb.BaseCommand_PING && t != pb.BaseCommand_PONG {
		m := cmd.ProtoReflect()
		fd := m.Descriptor().Fields().ByNumber(protoreflect.FieldNumber(t))
		if fd == nil {
			return nil, fmt.Errorf("%w: type %d has no body field", ErrUnknownCommand, t)
		}
		if !m.Has(fd) {
			return nil, fmt.Errorf("%w: %s without its body", ErrMalformed, t)
		}
	}
	return cmd, nil
}

// unknownVarintField returns the last varint value of field num in raw
// unknown-field bytes.
func unknownVarintField(raw []byte, num protowire.Number) (uint64, bool) {
	var v uint64
	found := false
	for len(raw) > 0 {
		n, typ, l := protowire.ConsumeTag(raw)
		if l < 0 {
			return 0, false
		}
		raw = raw[l:]
		if n == num && typ == protowire.VarintType {
			x, l := protowire.ConsumeVarint(raw)
			if l < 0 {
				return 0, false
			}
			v, found = x, true
			raw = raw[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, raw)
		if l < 0 {
			return 0, false
		}
		raw = raw[l:]
	}
	return v, found
}

// AppendFrame appends the encoding of f to dst and returns the extended
// slice. The command is marshalled deterministically; required fields must be
// set. The CRC is always computed fresh over the entry.
//
// Errors: ErrMalformed (nil command, or it cannot be marshalled),
// ErrFrameTooLarge (a size does not fit a u32). On error dst is returned
// unchanged (same length).
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	return appendFrame(dst, f, true)
}

// AppendFrameHead appends the encoding of f up to its entry: everything
// AppendFrame would append except f.Entry's bytes, which the caller writes
// right after (unchanged: the sizes and the CRC cover them). It lets a
// stored entry go to the socket without being copied into the frame. f.Entry
// must be set; errors as AppendFrame's.
func AppendFrameHead(dst []byte, f Frame) ([]byte, error) {
	if f.Entry == nil {
		return dst, fmt.Errorf("%w: frame head without an entry", ErrMalformed)
	}
	return appendFrame(dst, f, false)
}

func appendFrame(dst []byte, f Frame, withEntry bool) ([]byte, error) {
	if f.Cmd == nil {
		return dst, fmt.Errorf("%w: nil command", ErrMalformed)
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // total, cmdSize: patched below
	var err error
	dst, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, f.Cmd)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: marshal %s: %v", ErrMalformed, f.Cmd.GetType(), err)
	}
	cmdSize := len(dst) - start - frameHeaderBytes - cmdSizeBytes

	if f.HasPayload() {
		if f.BrokerEntryMetadata != nil {
			if uint64(len(f.BrokerEntryMetadata)) > math.MaxUint32 {
				return dst[:start], fmt.Errorf("%w: broker entry metadata of %d bytes", ErrFrameTooLarge, len(f.BrokerEntryMetadata))
			}
			dst = binary.BigEndian.AppendUint16(dst, MagicBrokerEntryMetadata)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(f.BrokerEntryMetadata)))
			dst = append(dst, f.BrokerEntryMetadata...)
		}
		dst = binary.BigEndian.AppendUint16(dst, MagicChecksum)
		crcAt := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		entryAt := len(dst)
		switch {
		case !withEntry:
			binary.BigEndian.PutUint32(dst[crcAt:], Checksum(f.Entry))
		case f.Entry != nil:
			dst = append(dst, f.Entry...)
			binary.BigEndian.PutUint32(dst[crcAt:], Checksum(dst[entryAt:]))
		default:
			if dst, err = AppendEntry(dst, f.Metadata, f.Payload); err != nil {
				return dst[:start], err
			}
			binary.BigEndian.PutUint32(dst[crcAt:], Checksum(dst[entryAt:]))
		}
	}

	total := len(dst) - start - frameHeaderBytes
	if !withEntry {
		total += len(f.Entry)
	}
	if uint64(total) > math.MaxUint32 {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, total)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	binary.BigEndian.PutUint32(dst[start+frameHeaderBytes:], uint32(cmdSize))
	return dst, nil
}

// WriteFrame encodes f and writes it to w in one Write call.
// Errors: those of AppendFrame, and w's error wrapped.
func WriteFrame(w io.Writer, f Frame) error {
	b, err := AppendFrame(nil, f)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("protocol: writing %s frame: %w", f.Cmd.GetType(), err)
	}
	return nil
}

// AppendCommand appends a simple frame holding cmd. Shorthand for
// AppendFrame(dst, Frame{Cmd: cmd}).
func AppendCommand(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	return AppendFrame(dst, Frame{Cmd: cmd})
}

// metadataDeliverAtField is MessageMetadata.deliver_at_time's field number.
const metadataDeliverAtField = 19

// EntryDeliverAt returns the deliver_at_time (Unix ms) of a stored entry
// ([u32 metaSize][metadata][payload]) — the time before which a Shared or
// Key_Shared subscription must not deliver it — and whether it has one.
// It scans the metadata's fields without decoding the message; a
// malformed entry has none.
func EntryDeliverAt(entry []byte) (int64, bool) {
	meta, _, err := SplitEntry(entry)
	if err != nil {
		return 0, false
	}
	for len(meta) > 0 {
		num, typ, n := protowire.ConsumeTag(meta)
		if n < 0 {
			return 0, false
		}
		meta = meta[n:]
		if num == metadataDeliverAtField && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(meta)
			if n < 0 {
				return 0, false
			}
			return int64(v), true
		}
		n = protowire.ConsumeFieldValue(num, typ, meta)
		if n < 0 {
			return 0, false
		}
		meta = meta[n:]
	}
	return 0, false
}

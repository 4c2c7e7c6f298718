package kafka

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/lakegate/lakegate/protocol/pb"
)

// Kafka's batch codecs (the low three bits of a RecordBatch's attributes).
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// pulsarCodec is the Pulsar compression that keeps a Kafka codec's
// choice in storage: the same algorithm where Pulsar has it.
func pulsarCodec(codec int) pb.CompressionType {
	switch codec {
	case codecGzip:
		return pb.CompressionType_ZLIB
	case codecSnappy:
		return pb.CompressionType_SNAPPY
	case codecLZ4:
		return pb.CompressionType_LZ4
	case codecZstd:
		return pb.CompressionType_ZSTD
	}
	return pb.CompressionType_NONE
}

// xerialMagic starts the snappy framing the Java client writes: the magic,
// then a version and a compatible version (u32 each), then blocks of
// [u32 length][raw snappy block].
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns the records region of a batch compressed with codec,
// at most limit bytes: a larger result is ErrTooLarge, found before more
// than limit+1 bytes are allocated.
func decompress(codec int, src []byte, limit int) ([]byte, error) {
	switch codec {
	case codecNone:
		return src, nil
	case codecGzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
		return readBounded(r, limit, "gzip")
	case codecSnappy:
		if !bytes.HasPrefix(src, xerialMagic) {
			return snappyBlock(src, limit)
		}
		if len(src) < 16 {
			return nil, fmt.Errorf("%w: snappy: short xerial header", ErrMalformed)
		}
		var out []byte
		for rest := src[16:]; len(rest) > 0; {
			if len(rest) < 4 {
				return nil, fmt.Errorf("%w: snappy: truncated xerial block length", ErrMalformed)
			}
			n := binary.BigEndian.Uint32(rest)
			if uint64(n) > uint64(len(rest)-4) {
				return nil, fmt.Errorf("%w: snappy: xerial block of %d bytes, %d left", ErrMalformed, n, len(rest)-4)
			}
			b, err := snappyBlock(rest[4:4+n], limit-len(out))
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
			rest = rest[4+n:]
		}
		return out, nil
	case codecLZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(src)), limit, "lz4")
	case codecZstd:
		d, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(uint64(max(limit, 1<<20))))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrMalformed, err)
		}
		defer d.Close()
		return readBounded(d, limit, "zstd")
	}
	return nil, fmt.Errorf("%w: compression codec %d", ErrUnsupported, codec)
}

func snappyBlock(src []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
	}
	if n > limit {
		return nil, fmt.Errorf("%w: snappy block of %d bytes", ErrTooLarge, n)
	}
	out, err := snappy.Decode(make([]byte, n), src)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
	}
	return out, nil
}

func readBounded(r io.Reader, limit int, name string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, name, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: %s: more than %d bytes", ErrTooLarge, name, limit)
	}
	return out, nil
}

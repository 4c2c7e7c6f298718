package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/lakegate/lakegate/protocol/pb"
)

// Compression formats, as the Pulsar clients write them (whole batch payload
// compressed at once; MessageMetadata.uncompressed_size holds the exact
// decompressed length):
//
//	LZ4     raw LZ4 block (no frame header, no size prefix)
//	ZLIB    zlib stream (RFC 1950: 2-byte header, deflate, adler32)
//	ZSTD    zstd frame(s)
//	SNAPPY  raw snappy block (varint length prefix, no stream framing)

// DefaultMaxUncompressedSize bounds Decompress output when the caller passes
// a limit <= 0, in bytes (64 MiB). Every Decompress call is bounded.
const DefaultMaxUncompressedSize = 64 << 20

// Errors returned by Decompress and Compress, wrapped with detail.
var (
	// ErrCompressionUnsupported: the CompressionType is not one of NONE, LZ4,
	// ZLIB, ZSTD, SNAPPY.
	ErrCompressionUnsupported = errors.New("protocol: unsupported compression type")
	// ErrUncompressedTooLarge: uncompressed_size is negative or above the
	// caller's limit. Nothing was allocated.
	ErrUncompressedTooLarge = errors.New("protocol: uncompressed size over limit")
	// ErrCorruptCompressed: the compressed bytes are invalid or do not
	// decompress to exactly uncompressed_size bytes.
	ErrCorruptCompressed = errors.New("protocol: corrupt compressed payload")
)

// Decompress returns src decompressed with ct. uncompressedSize is the
// metadata's uncompressed_size; the output must be exactly that long.
// maxSize bounds it in bytes (<= 0 means DefaultMaxUncompressedSize) and is
// checked before anything is allocated.
//
// For NONE, src itself is returned (no copy) and the sizes are ignored, as
// clients leave uncompressed_size unset for uncompressed entries. Otherwise
// the result is a fresh buffer owned by the caller. Safe for concurrent use.
//
// Errors: ErrCompressionUnsupported, ErrUncompressedTooLarge,
// ErrCorruptCompressed.
func Decompress(ct pb.CompressionType, src []byte, uncompressedSize, maxSize int) ([]byte, error) {
	if ct == pb.CompressionType_NONE {
		return src, nil
	}
	if maxSize <= 0 {
		maxSize = DefaultMaxUncompressedSize
	}
	if uncompressedSize < 0 || uncompressedSize > maxSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrUncompressedTooLarge, uncompressedSize, maxSize)
	}
	var (
		out []byte
		err error
	)
	switch ct {
	case pb.CompressionType_LZ4:
		out, err = decompressLZ4(src, uncompressedSize)
	case pb.CompressionType_ZLIB:
		out, err = decompressZlib(src, uncompressedSize)
	case pb.CompressionType_ZSTD:
		out, err = decompressZstd(src, uncompressedSize)
	case pb.CompressionType_SNAPPY:
		out, err = decompressSnappy(src, uncompressedSize)
	default:
		return nil, fmt.Errorf("%w: %d", ErrCompressionUnsupported, int32(ct))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptCompressed, ct, err)
	}
	if len(out) != uncompressedSize {
		return nil, fmt.Errorf("%w: %s: got %d bytes, uncompressed_size says %d", ErrCorruptCompressed, ct, len(out), uncompressedSize)
	}
	return out, nil
}

func decompressLZ4(src []byte, size int) ([]byte, error) {
	dst := make([]byte, size)
	if size == 0 {
		// A block holding nothing is the single token byte 0x00.
		if len(src) == 1 && src[0] == 0 {
			return dst, nil
		}
		return nil, errors.New("non-empty block for empty output")
	}
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return nil, err
	}
	return dst[:n], nil
}

func decompressZlib(src []byte, size int) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	dst := make([]byte, size)
	if _, err := io.ReadFull(r, dst); err != nil {
		return nil, err
	}
	// The stream must end here; reading to EOF also verifies the adler32.
	var one [1]byte
	if n, err := r.Read(one[:]); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = errors.New("stream longer than uncompressed_size")
		}
		return nil, err
	}
	return dst, nil
}

// zstdDecoder is shared: DecodeAll is safe for concurrent use. With
// WithDecodeAllCapLimit the output is bounded by the capacity of the
// destination we pass, i.e. by uncompressed_size.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(DefaultMaxUncompressedSize),
		zstd.WithDecoderMaxWindow(DefaultMaxUncompressedSize),
		zstd.WithDecoderConcurrency(0),
	)
})

func decompressZstd(src []byte, size int) ([]byte, error) {
	d, err := zstdDecoder()
	if err != nil {
		return nil, err
	}
	return d.DecodeAll(src, make([]byte, 0, size))
}

func decompressSnappy(src []byte, size int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, fmt.Errorf("block holds %d bytes, uncompressed_size says %d", n, size)
	}
	return snappy.Decode(make([]byte, size), src)
}

// Compress appends src compressed with ct to dst (for NONE, src itself).
// The output is what a Pulsar client would send; set uncompressed_size to
// len(src). Safe for concurrent use.
// Errors: ErrCompressionUnsupported.
func Compress(dst []byte, ct pb.CompressionType, src []byte) ([]byte, error) {
	switch ct {
	case pb.CompressionType_NONE:
		return append(dst, src...), nil
	case pb.CompressionType_LZ4:
		return compressLZ4(dst, src)
	case pb.CompressionType_ZLIB:
		buf := bytes.NewBuffer(dst)
		w := zlib.NewWriter(buf)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("protocol: zlib: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("protocol: zlib: %w", err)
		}
		return buf.Bytes(), nil
	case pb.CompressionType_ZSTD:
		e, err := zstdEncoder()
		if err != nil {
			return dst, fmt.Errorf("protocol: zstd: %w", err)
		}
		return e.EncodeAll(src, dst), nil
	case pb.CompressionType_SNAPPY:
		n := snappy.MaxEncodedLen(len(src))
		if n < 0 {
			return dst, fmt.Errorf("%w: snappy input of %d bytes", ErrUncompressedTooLarge, len(src))
		}
		start := len(dst)
		dst = grow(dst, n)
		enc := snappy.Encode(dst[start:start+n], src)
		return dst[:start+len(enc)], nil
	default:
		return dst, fmt.Errorf("%w: %d", ErrCompressionUnsupported, int32(ct))
	}
}

var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})

var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

func compressLZ4(dst, src []byte) ([]byte, error) {
	start := len(dst)
	bound := lz4.CompressBlockBound(len(src))
	dst = grow(dst, bound)
	c := lz4Compressors.Get().(*lz4.Compressor)
	n, err := c.CompressBlock(src, dst[start:start+bound])
	lz4Compressors.Put(c)
	if err != nil {
		return dst[:start], fmt.Errorf("protocol: lz4: %w", err)
	}
	if n > 0 {
		return dst[:start+n], nil
	}
	// Incompressible (or empty): emit one literal-only sequence, which is a
	// valid block: token (literal length in the high nibble, 15 = extended),
	// length continuation bytes, then the literals.
	dst = dst[:start]
	l := len(src)
	if l < 15 {
		dst = append(dst, byte(l<<4))
	} else {
		dst = append(dst, 0xF0)
		for l -= 15; l >= 255; l -= 255 {
			dst = append(dst, 255)
		}
		dst = append(dst, byte(l))
	}
	return append(dst, src...), nil
}

// grow returns dst extended by n bytes, reusing capacity when possible.
func grow(dst []byte, n int) []byte {
	return slices.Grow(dst, n)[:len(dst)+n]
}

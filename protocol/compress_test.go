package protocol

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/lakegate/lakegate/protocol/pb"
)

var allCompressions = []pb.CompressionType{
	pb.CompressionType_NONE, pb.CompressionType_LZ4, pb.CompressionType_ZLIB,
	pb.CompressionType_ZSTD, pb.CompressionType_SNAPPY,
}

func compressInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 70000)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	return map[string][]byte{
		"empty":        {},
		"one":          {'x'},
		"14":           []byte("abcdefghijklmn"),
		"15":           []byte("abcdefghijklmno"),
		"270 random":   random[:270],
		"64K text":     bytes.Repeat([]byte("the stream is the table. "), 2700),
		"70000 random": random,
	}
}

func TestCompressRoundTrip(t *testing.T) {
	for _, ct := range allCompressions {
		for name, in := range compressInputs() {
			t.Run(ct.String()+"/"+name, func(t *testing.T) {
				prefix := []byte("pre")
				c, err := Compress(bytes.Clone(prefix), ct, in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(c, prefix) {
					t.Fatal("Compress clobbered dst")
				}
				out, err := Decompress(ct, c[len(prefix):], len(in), 0)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out, in) {
					t.Fatalf("round trip differs: %d bytes in, %d out", len(in), len(out))
				}
			})
		}
	}
}

func TestDecompressErrors(t *testing.T) {
	in := bytes.Repeat([]byte("abc"), 1000)
	for _, ct := range allCompressions[1:] {
		c, err := Compress(nil, ct, in)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(ct.String(), func(t *testing.T) {
			if _, err := Decompress(ct, c, len(in)-1, 0); !errors.Is(err, ErrCorruptCompressed) {
				t.Errorf("size too small: %v", err)
			}
			if _, err := Decompress(ct, c, len(in)+1, 0); !errors.Is(err, ErrCorruptCompressed) {
				t.Errorf("size too large: %v", err)
			}
			if _, err := Decompress(ct, c, len(in), len(in)-1); !errors.Is(err, ErrUncompressedTooLarge) {
				t.Errorf("over limit: %v", err)
			}
			if _, err := Decompress(ct, c, -1, 0); !errors.Is(err, ErrUncompressedTooLarge) {
				t.Errorf("negative size: %v", err)
			}
			if _, err := Decompress(ct, c[:len(c)/2], len(in), 0); !errors.Is(err, ErrCorruptCompressed) {
				t.Errorf("truncated: %v", err)
			}
			if _, err := Decompress(ct, []byte{0xff, 0xfe, 0xfd, 0xfc, 0xfb}, len(in), 0); !errors.Is(err, ErrCorruptCompressed) {
				t.Errorf("garbage: %v", err)
			}
		})
	}
	if _, err := Decompress(pb.CompressionType(9), []byte{1}, 1, 0); !errors.Is(err, ErrCompressionUnsupported) {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := Compress(nil, pb.CompressionType(9), []byte{1}); !errors.Is(err, ErrCompressionUnsupported) {
		t.Errorf("unknown type: %v", err)
	}
	// NONE returns the input itself, whatever the sizes say.
	src := []byte("as is")
	if out, err := Decompress(pb.CompressionType_NONE, src, 0, 1); err != nil || &out[0] != &src[0] {
		t.Errorf("NONE: %v", err)
	}
}

func TestDecompressZstdWithoutContentSize(t *testing.T) {
	// A frame whose header omits the content size (as a streaming encoder
	// writes) must still be bounded by uncompressed_size. Built by hand:
	// magic, frame header descriptor 0x00 (no FCS, window descriptor
	// follows), window descriptor, then one raw last block of 5 bytes.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'}
	out, err := Decompress(pb.CompressionType_ZSTD, frame, 5, 0)
	if err != nil || string(out) != "hello" {
		t.Fatalf("got %q, %v", out, err)
	}
	if _, err := Decompress(pb.CompressionType_ZSTD, frame, 4, 0); !errors.Is(err, ErrCorruptCompressed) {
		t.Fatalf("output over uncompressed_size: %v", err)
	}
}

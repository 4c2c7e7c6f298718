package cursor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// Format constants; the format is specified in docs/cursor-format.md.
const (
	formatVersion = 1
	headerBytes   = 3 // magic (2) + version (1)
	crcBytes      = 4
	// minEncodedBytes: header, markDelete+1, propCount, rangeCount, crc.
	minEncodedBytes = headerBytes + 3 + crcBytes

	// MaxEncodedSize is the largest encoding Encode can produce (and the
	// largest input Decode accepts), in bytes: 197 171. See
	// docs/cursor-format.md, "Worst-case size".
	MaxEncodedSize = headerBytes +
		binary.MaxVarintLen64 - 1 + // markDelete+1 ≤ 2^63-1: 9 bytes
		1 + // propCount ≤ 64
		MaxProperties*(2+MaxPropertyKeyBytes+binary.MaxVarintLen64) +
		2 + // rangeCount ≤ 10 000
		MaxAckedRanges*2*(binary.MaxVarintLen64-1) +
		crcBytes
)

var magic = [2]byte{'L', 'C'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned (wrapped, with the reason) by Decode for any input
// that is not a valid encoding. The engine surfaces it when loading a cursor
// from the metadata store.
var ErrCorrupt = errors.New("cursor: corrupt state encoding")

// Encode returns the canonical v1 encoding of s (docs/cursor-format.md).
// Equal states have identical encodings; the result is at most
// MaxEncodedSize bytes and owned by the caller.
func Encode(s *State) []byte {
	return AppendEncode(nil, s)
}

// AppendEncode appends the encoding of s to dst and returns the extended
// slice.
func AppendEncode(dst []byte, s *State) []byte {
	base := len(dst)
	dst = slices.Grow(dst, encodedSizeHint(s))
	dst = append(dst, magic[0], magic[1], formatVersion)
	dst = binary.AppendUvarint(dst, uint64(s.markDelete+1))

	keys := make([]string, 0, len(s.props))
	for k := range s.props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, k := range keys {
		dst = binary.AppendUvarint(dst, uint64(len(k)))
		dst = append(dst, k...)
		dst = binary.AppendVarint(dst, s.props[k])
	}

	dst = binary.AppendUvarint(dst, uint64(len(s.ranges)))
	prev := s.markDelete + 1 // last offset known to be unacknowledged
	for _, r := range s.ranges {
		dst = binary.AppendUvarint(dst, uint64(r[0]-prev-1))
		dst = binary.AppendUvarint(dst, uint64(r[1]-r[0]-1))
		prev = r[1]
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[base:], castagnoli))
}

func encodedSizeHint(s *State) int {
	n := headerBytes + 10 + 1 + 2 + crcBytes + 4*len(s.ranges)
	for k := range s.props {
		n += 2 + len(k) + 3
	}
	return n
}

// Decode parses an encoding made by Encode. It validates everything (see
// docs/cursor-format.md, "Validation") and returns an error wrapping
// ErrCorrupt on any violation; it never panics. The returned State has
// Version 0 and the options' range limit (a state already above a lowered
// limit is accepted). b is not retained.
func Decode(b []byte, opts ...Option) (*State, error) {
	if len(b) < minEncodedBytes || len(b) > MaxEncodedSize {
		return nil, corruptf("length %d outside [%d, %d]", len(b), minEncodedBytes, MaxEncodedSize)
	}
	if b[0] != magic[0] || b[1] != magic[1] {
		return nil, corruptf("bad magic %#x %#x", b[0], b[1])
	}
	if b[2] != formatVersion {
		return nil, corruptf("unsupported version %d", b[2])
	}
	body := b[:len(b)-crcBytes]
	if want, got := binary.LittleEndian.Uint32(b[len(b)-crcBytes:]), crc32.Checksum(body, castagnoli); want != got {
		return nil, corruptf("crc32c mismatch: stored %#08x, computed %#08x", want, got)
	}
	s, err := decodeBody(body[headerBytes:])
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// decodeBody parses everything between the header and the CRC.
func decodeBody(p []byte) (*State, error) {
	d := decoder{p: p}
	mdPlus1 := d.uvarint("markDelete")
	if d.err == nil && mdPlus1 > math.MaxInt64 {
		return nil, corruptf("markDelete+1 %d out of range", mdPlus1)
	}
	s := &State{markDelete: int64(mdPlus1) - 1, maxRanges: MaxAckedRanges}

	nProps := d.uvarint("property count")
	if d.err == nil && nProps > MaxProperties {
		return nil, corruptf("%d properties (max %d)", nProps, MaxProperties)
	}
	var prevKey string
	for i := 0; d.err == nil && i < int(nProps); i++ {
		kl := d.uvarint("property key length")
		if d.err == nil && kl > MaxPropertyKeyBytes {
			return nil, corruptf("property key of %d bytes (max %d)", kl, MaxPropertyKeyBytes)
		}
		key := d.bytes(int(kl), "property key")
		v := d.varint("property value")
		if d.err != nil {
			break
		}
		k := string(key)
		if i > 0 && k <= prevKey {
			return nil, corruptf("property keys not strictly ascending at %q", k)
		}
		if s.props == nil {
			s.props = make(map[string]int64, nProps)
		}
		s.props[k] = v
		prevKey = k
	}

	nRanges := d.uvarint("range count")
	if d.err == nil && nRanges > MaxAckedRanges {
		return nil, corruptf("%d ranges (max %d)", nRanges, MaxAckedRanges)
	}
	if d.err == nil && nRanges > 0 {
		// Each range takes at least 2 bytes: never allocate beyond the input.
		if nRanges > uint64(len(d.p)/2) {
			return nil, corruptf("%d ranges in %d bytes", nRanges, len(d.p))
		}
		s.ranges = make([][2]int64, 0, nRanges)
	}
	prev := s.markDelete + 1
	for i := 0; d.err == nil && i < int(nRanges); i++ {
		gap := d.uvarint("range gap")
		lenMinus1 := d.uvarint("range length")
		if d.err != nil {
			break
		}
		// start = prev+1+gap ≤ MaxOffset; end = start+1+lenMinus1 ≤ MaxInt64.
		if prev > MaxOffset-1 || gap > uint64(MaxOffset-1-prev) {
			return nil, corruptf("range %d starts beyond the largest offset", i)
		}
		start := prev + 1 + int64(gap)
		if lenMinus1 > uint64(math.MaxInt64-start-1) {
			return nil, corruptf("range %d ends beyond the largest offset", i)
		}
		end := start + 1 + int64(lenMinus1)
		s.ranges = append(s.ranges, [2]int64{start, end})
		s.acked += end - start
		prev = end
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.p) != 0 {
		return nil, corruptf("%d trailing bytes", len(d.p))
	}
	return s, nil
}

// decoder reads minimal varints; the first failure sticks in err.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	switch {
	case n == 0:
		d.err = corruptf("truncated %s", what)
		return 0
	case n < 0:
		d.err = corruptf("%s overflows 64 bits", what)
		return 0
	case n != uvarintLen(v):
		d.err = corruptf("non-minimal varint for %s", what)
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	u := d.uvarint(what)
	return int64(u>>1) ^ -int64(u&1) // zig-zag, as binary.Varint
}

func (d *decoder) bytes(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.p) {
		d.err = corruptf("truncated %s", what)
		return nil
	}
	b := d.p[:n]
	d.p = d.p[n:]
	return b
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

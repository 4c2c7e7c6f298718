package cursor

// Tests of the persisted encoding (docs/cursor-format.md).
//
//	go test ./engine/cursor/                                   # all tests
//	go test -run TestGolden ./engine/cursor/ -rewrite          # rewrite testdata/format-v1.golden
//	go test -fuzz=FuzzDecode -fuzztime=30s ./engine/cursor/    # fuzz the decoder
//
// testdata/format-v1.golden pins the v1 byte layout: a change to it is a
// format change and needs a new version byte, not a rewrite.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/format-v1.golden")

// roundTrip checks Decode(Encode(s)) == s and that the encoding is canonical.
func roundTrip(t testing.TB, s *State) []byte {
	t.Helper()
	b := Encode(s)
	if len(b) > MaxEncodedSize {
		t.Fatalf("encoding of %d bytes > MaxEncodedSize", len(b))
	}
	d, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(Encode(%v)): %v", s, err)
	}
	if !d.Equal(s) {
		t.Fatalf("round trip: %v → %v", s, d)
	}
	if d.Version() != 0 {
		t.Fatalf("decoded version %d", d.Version())
	}
	if b2 := Encode(d); !bytes.Equal(b, b2) {
		t.Fatalf("re-encoding differs:\n%x\n%x", b, b2)
	}
	return b
}

// randomState builds a state with up to maxRanges ranges at random scales.
func randomState(rng *rand.Rand, maxRanges int) *State {
	scale := []int64{4, 1 << 10, 1 << 30, 1 << 55}[rng.IntN(4)]
	s := New(rng.Int64N(scale) - 1)
	n := rng.IntN(maxRanges + 1)
	span := scale * int64(n+1)
	if scale > math.MaxInt64/4/int64(n+1) {
		span = math.MaxInt64 / 4
	}
	for range n {
		if s.RangeCount() >= s.MaxRanges() {
			break
		}
		off := s.MarkDeleteOffset() + 2 + rng.Int64N(span)
		recs := 1 + rng.Int64N(scale)
		if off > MaxOffset-recs {
			continue
		}
		_ = s.Ack(off, recs)
	}
	if rng.IntN(2) == 0 {
		props := map[string]int64{}
		for range rng.IntN(MaxProperties + 1) {
			k := make([]byte, rng.IntN(MaxPropertyKeyBytes+1))
			for i := range k {
				k[i] = byte(rng.Uint32())
			}
			props[string(k)] = int64(rng.Uint64())
		}
		s.MarkDelete(s.MarkDeleteOffset(), props)
	}
	return s
}

func TestRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 2000 {
		maxRanges := 50
		if i%100 == 0 {
			maxRanges = MaxAckedRanges
		}
		roundTrip(t, randomState(rng, maxRanges))
	}
}

// TestEncodedSizeWorstCase builds the largest states the bounds allow and
// checks them against MaxEncodedSize (and the 1 MiB etcd value budget).
func TestEncodedSizeWorstCase(t *testing.T) {
	if MaxEncodedSize != 197_171 {
		t.Fatalf("MaxEncodedSize = %d; update docs/cursor-format.md", MaxEncodedSize)
	}
	maxProps := map[string]int64{}
	for i := range MaxProperties {
		k := bytes.Repeat([]byte{byte('a' + i%26)}, MaxPropertyKeyBytes-2)
		maxProps[fmt.Sprintf("%s%02d", k, i)] = math.MinInt64 + int64(i) // 10-byte zig-zag varints
	}
	if err := CheckProperties(maxProps); err != nil {
		t.Fatal(err)
	}
	// Spread: 10 000 ranges over the whole offset space, deltas as large as
	// possible (the largest encoding). Dense: 10 000 one-record holes.
	step := int64(MaxOffset / (2 * MaxAckedRanges))
	spread, dense := New(0), New(-1)
	for i := range int64(MaxAckedRanges) {
		if err := spread.Ack(1+(2*i+1)*step, step); err != nil {
			t.Fatal(err)
		}
		if err := dense.Ack(2*i+1, 1); err != nil {
			t.Fatal(err)
		}
	}
	spread.MarkDelete(0, maxProps)
	dense.MarkDelete(-1, maxProps)
	for name, s := range map[string]*State{"spread": spread, "dense": dense} {
		if s.RangeCount() != MaxAckedRanges {
			t.Fatalf("%s: %d ranges", name, s.RangeCount())
		}
		n := len(roundTrip(t, s))
		if n > MaxEncodedSize || n >= 1<<20 {
			t.Fatalf("%s: %d bytes", name, n)
		}
		t.Logf("%s: 10 000 ranges + 64 maximal properties: %d bytes (bound %d)", name, n, MaxEncodedSize)
	}
	noProps := dense.Clone()
	noProps.MarkDelete(-1, nil)
	t.Logf("dense, no properties: %d bytes", len(Encode(noProps)))
}

// goldenStates are pinned in testdata/format-v1.golden.
func goldenStates() []struct {
	name string
	s    *State
} {
	mk := func(md int64, props map[string]int64, acks ...[2]int64) *State {
		s := New(md)
		for _, a := range acks {
			if err := s.Ack(a[0], a[1]); err != nil {
				panic(err)
			}
		}
		s.MarkDelete(md, props)
		return s
	}
	return []struct {
		name string
		s    *State
	}{
		{"empty", New(-1)},
		{"mark-delete-only", mk(1_000_000, nil)},
		{"properties", mk(41, map[string]int64{"b": -1, "a": 300, "": 0})},
		{"ranges", mk(9, nil, [2]int64{11, 1}, [2]int64{13, 2}, [2]int64{200, 1000})},
		{"batch-partial", mk(99, map[string]int64{"compactedLedger": 7}, [2]int64{101, 1}, [2]int64{103, 1})},
		{"largest-offsets", mk(MaxOffset-5, nil, [2]int64{MaxOffset - 3, 1}, [2]int64{MaxOffset - 1, 2})},
	}
}

func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "format-v1.golden")
	var out strings.Builder
	out.WriteString("# Cursor state format v1 (docs/cursor-format.md): name, state, hex encoding.\n")
	out.WriteString("# Generated by `go test -run TestGolden ./engine/cursor/ -rewrite`. Do not edit.\n")
	for _, g := range goldenStates() {
		fmt.Fprintf(&out, "\n%s %v\n%x\n", g.name, g.s, roundTrip(t, g.s))
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if string(want) != out.String() {
		t.Fatalf("encodings differ from %s (a format change needs a new version):\ngot:\n%s", path, out.String())
	}
}

// withCRC appends the CRC-32C of b: lets tests and the fuzzer reach the
// parser behind the checksum.
func withCRC(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(append([]byte(nil), b...), crc32.Checksum(b, castagnoli))
}

func TestDecodeRejects(t *testing.T) {
	valid := Encode(goldenStates()[3].s) // "ranges"
	body := valid[:len(valid)-crcBytes]
	uv := func(vs ...uint64) []byte {
		b := []byte{'L', 'C', 1}
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	cases := map[string][]byte{
		"nil":              nil,
		"short":            valid[:minEncodedBytes-1],
		"too long":         make([]byte, MaxEncodedSize+1),
		"bad magic":        withCRC(append([]byte{'L', 'D'}, body[2:]...)),
		"newer version":    withCRC(append([]byte{'L', 'C', 2}, body[3:]...)),
		"bad crc":          append(append([]byte(nil), body...), 0, 0, 0, 0),
		"flipped bit":      func() []byte { b := bytes.Clone(valid); b[5] ^= 1; return b }(),
		"truncated":        withCRC(body[:len(body)-1]),
		"trailing":         withCRC(append(bytes.Clone(body), 0)),
		"non-minimal":      withCRC([]byte{'L', 'C', 1, 0x80, 0x00, 0, 0}),
		"md overflow":      withCRC(uv(1<<63, 0, 0)),
		"varint overflow":  withCRC(append([]byte{'L', 'C', 1}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0)),
		"too many props":   withCRC(uv(0, MaxProperties+1)),
		"long key":         withCRC(uv(0, 1, MaxPropertyKeyBytes+1)),
		"keys unsorted":    withCRC(append(append(uv(0, 2, 1), 'b', 0, 1, 'a', 0), 0)),
		"keys duplicated":  withCRC(append(append(uv(0, 2, 1), 'a', 0, 1, 'a', 0), 0)),
		"too many ranges":  withCRC(uv(0, 0, MaxAckedRanges+1)),
		"ranges > input":   withCRC(uv(0, 0, 500, 0, 0)),
		"start overflow":   withCRC(uv(0, 0, 1, math.MaxInt64-1, 0)),
		"end overflow":     withCRC(uv(0, 0, 1, 0, math.MaxInt64-1)),
		"second overflows": withCRC(uv(0, 0, 2, 0, math.MaxInt64-3, 0, 0)),
		"md at max, range": withCRC(uv(math.MaxInt64, 0, 1, 0, 0)),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Decode(b)
			if !errors.Is(err, ErrCorrupt) || s != nil {
				t.Fatalf("Decode = %v, %v; want ErrCorrupt", s, err)
			}
		})
	}
	// The edges just inside the limits are accepted.
	for name, b := range map[string][]byte{
		"md max":        withCRC(uv(math.MaxInt64, 0, 0)),
		"range at end":  withCRC(uv(0, 0, 1, math.MaxInt64-3, 0)),
		"range to end":  withCRC(uv(0, 0, 1, 0, math.MaxInt64-2)),
		"empty key":     withCRC(append(uv(0, 1, 0), 0, 0)),
		"limit lowered": withCRC(uv(0, 0, 3, 0, 0, 0, 0, 0, 0)),
	} {
		s, err := Decode(b, WithMaxAckedRanges(2))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		checkInvariants(t, s)
		if !bytes.Equal(Encode(s), b) {
			t.Errorf("%s: re-encoding differs", name)
		}
	}
	// A decoded state above a lowered limit refuses new ranges only.
	s, _ := Decode(withCRC(uv(0, 0, 3, 0, 0, 0, 0, 0, 0)), WithMaxAckedRanges(2))
	if err := s.Ack(100, 1); !errors.Is(err, ErrStateTooLarge) {
		t.Errorf("new range above lowered limit: %v", err)
	}
	if err := s.Ack(0, 1); err != nil || s.MarkDeleteOffset() != 1 || s.RangeCount() != 2 {
		t.Errorf("ack absorbing at lowered limit: %v, %v", err, s)
	}
}

func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 5))
	var seeds [][]byte
	for _, g := range goldenStates() {
		seeds = append(seeds, Encode(g.s))
	}
	for range 8 {
		seeds = append(seeds, Encode(randomState(rng, 20)))
	}
	for _, b := range seeds {
		f.Add(b)
		for _, cut := range []int{1, 3, 4, len(b) / 2, len(b) - 5, len(b) - 4, len(b) - 1} {
			if cut > 0 && cut < len(b) {
				f.Add(b[:cut])                    // truncated
				f.Add(withCRC(b[:max(cut-4, 0)])) // truncated body, valid CRC
			}
		}
		f.Add(b[:len(b)-crcBytes]) // body only: the fuzz target adds a CRC
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(in []byte) {
			s, err := Decode(in)
			if err != nil {
				if s != nil || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Decode(%x) = %v, %v", in, s, err)
				}
				return
			}
			checkInvariants(t, s)
			if out := Encode(s); !bytes.Equal(out, in) {
				t.Fatalf("not canonical: Decode(%x) = %v, re-encoded %x", in, s, out)
			}
			// The decoded state is usable.
			c := s.Clone()
			_ = c.Ack(c.FirstUnacked(), 1)
			checkInvariants(t, c)
		}
		check(data)
		if len(data) <= MaxEncodedSize-crcBytes {
			check(withCRC(data)) // reach the parser behind the checksum
		}
	})
}

// TestGoldenFileReadable guards against a golden file whose hex lines do not
// decode (e.g. hand-edited).
func TestGoldenFileReadable(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "format-v1.golden"))
	if err != nil {
		t.Fatalf("%v (the golden file is committed; run TestGolden with -rewrite only for a new format version)", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var n int
	for sc.Scan() {
		line := sc.Text()
		b, err := hex.DecodeString(line)
		if line == "" || strings.HasPrefix(line, "#") || err != nil {
			continue
		}
		if _, err := Decode(b); err != nil {
			t.Errorf("%s: %v", line, err)
		}
		n++
	}
	if n != len(goldenStates()) {
		t.Errorf("%d encodings in the golden file, want %d", n, len(goldenStates()))
	}
}
